"""Configurations that cross a boundary: sweep specs, run configs and measurement settings.

Every value a user types (CLI flag, widget, YAML) is parsed here, so that a bad value gets one
plain sentence naming the field, and every other module can trust what it receives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from wb_core import axes
from wb_core.errors import ConfigError, setting

# The value parsers live in wb_core.parsing (the axes and the backends' settings use them); they are
# imported here too, the names other modules have always used.
from wb_core.parsing import (  # noqa: F401 - public
    INT64,
    MAX_BATCH,
    MAX_POINTS,
    MAX_SPEC_BYTES,
    MAX_THREADS,
    MAX_TIMEOUT_S,
    MAX_YAML_ALIASES,
    MIN_RATE,
    NUMBER_FORMS,
    NUMBER_SUFFIXES,
    PRECISIONS,
    available_cpus,
    check_number,
    check_timeout,
    fmt_cpus,
    format_cores,
    format_shape_map,
    ints_or_auto,
    parse_bool_list,
    parse_choice,
    parse_cores,
    parse_number,
    parse_positive_ints,
    parse_rates,
    parse_repeats,
    parse_seq_lens,
    parse_shape_map,
    split_values,
    unique_values,
)


@dataclass(frozen=True)
class MeasureSettings:
    """How one point is measured: warm-up, windows until stable, and a time limit."""

    warmup_s: float = 0.5  # time spent warming up (at least warmup_iters iterations)
    warmup_iters: int = 3
    window_s: float = 0.5  # length of one measuring window
    min_windows: int = 3  # stability is judged on the last this-many windows
    tolerance: float = 0.05  # windows agree when (max-min)/mean of throughput is under this
    max_time_s: float = 10.0  # measuring time limit of one point
    pool_size: int = 32  # distinct random samples the batches are drawn from
    seed: int = 0
    # Stable needs this many completed requests too: a p99 from fewer is one of a handful of values.
    min_requests: int = 100

    # name -> (low, high, whole number, low bound excluded): the documented range of each setting.
    RANGES = {
        "warmup_s": (0.0, 3600.0, False, True),
        "warmup_iters": (1, 100_000, True, False),
        "window_s": (0.001, 3600.0, False, False),
        "min_windows": (1, 1000, True, False),
        "tolerance": (0.0, 10.0, False, True),
        "max_time_s": (0.0, 24 * 3600.0, False, True),
        "pool_size": (1, 4096, True, False),
        "seed": (0, 2**32 - 1, True, False),
        "min_requests": (1, 10**9, True, False),
    }

    def __post_init__(self):
        for name, (low, high, integer, low_open) in self.RANGES.items():
            v = getattr(self, name)
            if name in ("warmup_s", "window_s", "tolerance", "max_time_s") and not isinstance(v, bool) \
                    and isinstance(v, (int, float)) and v <= 0:
                raise ConfigError(f"Measurement setting {name} must be a positive number; got {v!r}.")
            v = check_number(v, f"Measurement setting {name}", low, high, integer=integer, low_open=low_open)
            object.__setattr__(self, name, v)

    @classmethod
    def from_dict(cls, d, where: str = "settings") -> MeasureSettings:
        """From a mapping (a spec file's `settings`); unknown names are refused with the known ones."""
        if not isinstance(d, dict):
            raise ConfigError(f"The {where} section must be a mapping of measurement settings, like "
                              f"'max_time_s: 5'; got {type(d).__name__}.")
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(map(str, d)) - set(names))
        if unknown:
            raise ConfigError(f"Unknown measurement setting(s) {', '.join(unknown)} in {where}; "
                              f"known: {', '.join(names)}.")
        return cls(**d)


DEFAULT_INT_RANGE = (0, 100)


def default_int_range(name: str, vocab: int | None = None) -> tuple[tuple[int, int], str]:
    """The range an integer input gets when the user gives none, chosen by its name, and why.

    Masks are all ones and token type (segment) ids all zeros, as a tokenizer makes them for one
    sentence; token ids span the model's vocabulary when it can be read from the embedding table.
    """
    n = name.split(":")[0].lower()
    if "mask" in n:
        return (1, 2), "all ones (a mask with every token attended)"
    if "token_type" in n or "segment" in n:
        return (0, 1), "all zeros (one segment)"
    if vocab:
        return (0, vocab), f"0:{vocab}, the model's vocabulary (rows of its embedding table)"
    return DEFAULT_INT_RANGE, f"{DEFAULT_INT_RANGE[0]}:{DEFAULT_INT_RANGE[1]}, the default range"


def is_special_int_input(name: str) -> bool:
    """Masks and token type ids keep their valid values even when a range for all inputs is given."""
    n = name.split(":")[0].lower()
    return "mask" in n or "token_type" in n or "segment" in n


@dataclass(frozen=True)
class InputOptions:
    """How random inputs are made: sizes for dynamic dimensions and ranges for integer inputs.

    An integer input takes its range from `int_ranges` (by name), else from `int_range` (a range for
    every integer input except masks and token type ids), else a default chosen by its name
    (`default_int_range`).
    """

    dynamic_size: int | None = None  # size for every non-batch dynamic dimension
    shapes: dict = field(default_factory=dict)  # input name -> full shape (batch dim may be -1)
    int_range: tuple[int, int] | None = None  # [low, high) for integer inputs such as token ids
    int_ranges: dict = field(default_factory=dict)  # input name -> (low, high)
    text: str | None = None  # a text file, one sample per line, tokenized into the model's inputs
    tokenizer: str | None = None  # the local tokenizer.json that tokenizes `text`
    samples: str | None = None  # set by the sweep: the tokenized text (.npz, arrays LENGTH.INPUT) workers feed
    # input name -> the dimension holding its batch, where it is not 0 (a recurrent state [layers, batch,
    # hidden]); the sweep adds the axes the model's layout names, so that every worker reads the same.
    batch_axes: dict = field(default_factory=dict)

    MAX_DIM = 10**7

    def __post_init__(self):
        for name in ("text", "tokenizer", "samples"):  # a Path is kept as its text: the options are stored as JSON
            if isinstance(getattr(self, name), os.PathLike):
                object.__setattr__(self, name, os.fspath(getattr(self, name)))  # frozen
        if (self.text is None) != (self.tokenizer is None):
            raise ConfigError(f"Text and a tokenizer go together: give both the text ({setting('text', 'Text file')}) "
                              f"and its tokenizer.json ({setting('tokenizer', 'Tokenizer')}).")
        if self.dynamic_size is not None:
            object.__setattr__(self, "dynamic_size", check_number(
                self.dynamic_size, f"The size for dynamic dimensions ({setting('seq_lens', 'the sequence length')})", 1,
                self.MAX_DIM, integer=True))
        if not isinstance(self.shapes, dict) or not isinstance(self.int_ranges, dict):
            raise ConfigError("Input shapes and integer ranges must be mappings of input name to value.")
        for name, shape in self.shapes.items():
            if not isinstance(shape, (tuple, list)) or not shape:
                raise ConfigError(f"Shape for input '{name}' must be a list of whole numbers, like [1, 128].")
            dims = tuple(shape)
            for d in dims:
                if isinstance(d, bool) or not isinstance(d, int) or d == 0 or d < -1 or d > self.MAX_DIM:
                    raise ConfigError(f"Shape {list(dims)} for input '{name}' has a dimension that is zero, "
                                      f"negative, absurd or not a whole number.")
        if not isinstance(self.batch_axes, dict):
            raise ConfigError("Batch axes must be a mapping of input name to the dimension holding its batch.")
        axes_given = {}
        for name, axis in self.batch_axes.items():
            if isinstance(axis, str):
                axis = parse_batch_axis(str(name), axis)
            if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < 32:
                raise ConfigError(f"The batch axis for input '{name}' must be a dimension number (0, 1, ...) or a "
                                  f"layout with N for the batch (NCH, CNH); got {axis!r}.")
            axes_given[str(name)] = axis
        object.__setattr__(self, "batch_axes", axes_given)
        # No default range: integer inputs then get one by their name (see models.resolve_int_ranges).
        if self.int_range is not None:
            object.__setattr__(self, "int_range", self._range(self.int_range, "default"))
        object.__setattr__(self, "int_ranges", {k: self._range(v, k) for k, v in self.int_ranges.items()})

    @staticmethod
    def _range(rng, name: str) -> tuple[int, int]:
        if not isinstance(rng, (tuple, list)) or len(rng) != 2:
            raise ConfigError(f"Integer range for input '{name}' must be two whole numbers [low, high]; got {rng!r}.")
        lo, hi = (check_number(v, f"Integer range for input '{name}'", INT64[0], INT64[1], integer=True)
                  for v in rng)
        if hi <= lo:
            raise ConfigError(f"Integer range for input '{name}' must have low < high; got {lo}:{hi}.")
        return (lo, hi)

    def range_for(self, name: str) -> tuple[int, int] | None:
        """The range the user gave for this input (by name, or for all), or None."""
        given = self.int_ranges.get(name) or self.int_ranges.get(name.split(":")[0])
        if given:
            return tuple(given)
        if self.int_range is not None and not is_special_int_input(name):
            return tuple(self.int_range)
        return None

    def to_dict(self) -> dict:
        out = {"dynamic_size": self.dynamic_size, "shapes": {k: list(v) for k, v in self.shapes.items()},
               "int_range": list(self.int_range) if self.int_range is not None else None,
               "int_ranges": {k: list(v) for k, v in self.int_ranges.items()}}
        if self.batch_axes:
            out["batch_axes"] = dict(self.batch_axes)
        out.update({k: getattr(self, k) for k in ("text", "tokenizer", "samples") if getattr(self, k)})
        return out

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "inputs") -> InputOptions:
        """From a mapping (a spec file's `inputs`, a worker task); every part is type-checked."""
        d = d or {}
        if not isinstance(d, dict):
            raise ConfigError(f"The {where} section must be a mapping with dynamic_size, shapes, int_range and "
                              f"int_ranges; got {type(d).__name__}.")
        known = ("dynamic_size", "shapes", "int_range", "int_ranges", "text", "tokenizer", "samples", "batch_axes")
        unknown = sorted(set(map(str, d)) - set(known))
        if unknown:
            raise ConfigError(f"Unknown field(s) {', '.join(unknown)} in {where}; known: {', '.join(known)}.")
        shapes, ranges = d.get("shapes") or {}, d.get("int_ranges") or {}
        for what, m in (("shapes", shapes), ("int_ranges", ranges)):
            if not isinstance(m, dict):
                raise ConfigError(f"{where}.{what} must be a mapping of input name to value, like "
                                  f"{{input_ids: [1, 128]}}; got {type(m).__name__}.")
        return cls(dynamic_size=d.get("dynamic_size"),
                   shapes={str(k): (tuple(v) if isinstance(v, list) else v) for k, v in shapes.items()},
                   int_range=_text_range(d.get("int_range")) if d.get("int_range") else None,
                   int_ranges={str(k): _text_range(v) for k, v in ranges.items()},
                   batch_axes=d.get("batch_axes") or {},
                   **{k: str(d[k]) for k in ("text", "tokenizer", "samples") if d.get(k)})

    @classmethod
    def parse(cls, dynamic_size=None, shapes: list[str] | None = None,
              int_range: str | list[str] | None = None, batch_axes: list[str] | None = None) -> InputOptions:
        """From CLI text: shapes like `input_ids=1x128`, ranges like `0:30522` or `input_ids=0:30522`.

        `int_range` may be one string (values comma-separated) or the list of a repeated flag; all
        are merged. `dynamic_size` is one size (a list of sizes is a sweep axis: `parse_seq_lens`).
        """
        shape_map = {}
        for item in shapes or []:
            name, _, dims = item.partition("=")
            if not _ or not name:
                raise ConfigError(f"Shape '{item}' must look like NAME=1x128.")
            try:
                shape_map[name] = tuple(int(d) for d in re.split(r"[x,]", dims) if d)
            except ValueError:
                raise ConfigError(f"Shape '{item}' must list whole numbers, like NAME=1x128.") from None
            if any(d == 0 or d < -1 or d > 10**7 for d in shape_map[name]):
                raise ConfigError(f"Shape '{item}' has a dimension that is zero, negative or absurd.")
        default, per = None, {}
        flags = [int_range] if isinstance(int_range, str) or int_range is None else list(int_range)
        for flag in flags:
            for item in split_values(flag):
                name, eq, rng = item.rpartition("=")
                lo, colon, hi = rng.partition(":")
                try:
                    pair = (int(lo), int(hi))
                except ValueError:
                    raise ConfigError(f"Integer range '{item}' must look like 0:30522 or NAME=0:30522.") from None
                if eq:
                    per[name] = pair
                else:
                    default = pair
        axes_map = {}
        for item in batch_axes or []:
            for part in split_values(item):
                name, eq, value = part.partition("=")
                if not eq or not name.strip() or not value.strip():
                    raise ConfigError(f"Batch axis '{part}' must look like NAME=1 or NAME=CNH (N marks the batch).")
                axes_map[name.strip()] = parse_batch_axis(name.strip(), value.strip())
        return cls(dynamic_size=dynamic_size, shapes=shape_map, int_range=default, int_ranges=per, batch_axes=axes_map)

    def check_names(self, specs) -> None:
        """Shapes and ranges must name inputs the model has."""
        names = {s.name for s in specs} | {s.name.split(":")[0] for s in specs}
        have = ", ".join(s.name for s in specs)
        for what, given in ((setting("shapes", "A shape"), self.shapes),
                            (setting("int_ranges", "An integer range"), self.int_ranges),
                            (setting("batch_axes", "A batch axis"), self.batch_axes)):
            for name in given:
                if name not in names:
                    raise ConfigError(f"{what} names input '{name}', which the model does not have "
                                      f"(its inputs: {have}).")


def parse_shape_axis(items: list[str] | None) -> tuple[list[str], list[str | None]]:
    """`--shape` flags: those with one shape stay input options; those listing several
    (`image=1x3x224x224,1x3x320x320`) become the shape axis, paired by position across inputs.
    Returns (single shapes as NAME=DIMS, the axis values or [None])."""
    single, listed = [], {}
    for item in items or []:
        name, eq, dims = item.partition("=")
        values = [v.strip() for v in dims.split(",") if v.strip()]
        if eq and len(values) > 1:
            listed[name.strip()] = values
        else:
            single.append(item)
    if not listed:
        return single, [None]
    counts = {len(v) for v in listed.values()}
    if len(counts) > 1:
        detail = ", ".join(f"{k}: {len(v)}" for k, v in listed.items())
        raise ConfigError(f"Inputs swept over shapes must list as many shapes each, paired by position; got {detail}.")
    axis = [";".join(f"{k}={v[i]}" for k, v in listed.items()) for i in range(counts.pop())]
    return single, axis


def parse_batch_axis(name: str, text: str) -> int:
    """A batch axis as a dimension number (`1`) or as a layout whose N marks the batch (`CNH`, `?N?`)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    letters = text.strip("[]").replace(",", "").upper()
    if letters.count("N") == 1 and re.fullmatch(r"[A-Z?.]+", letters):
        return letters.index("N")
    raise ConfigError(f"The batch axis '{text}' for input '{name}' must be a dimension number (0, 1, ...) or a layout "
                      f"with one N for the batch (NCH, CNH).")


def with_point_shapes(opts: InputOptions, cfg: RunConfig) -> InputOptions:
    """The input options of one point: its sequence length sizes every dynamic non-batch
    dimension, and its shapes (a shape sweep) replace those given for the same inputs."""
    if cfg.seq_len:
        opts = dataclasses.replace(opts, dynamic_size=cfg.seq_len)
    if cfg.shape:
        opts = dataclasses.replace(opts, shapes={**opts.shapes, **parse_shape_map(cfg.shape)})
    return opts



def _text_range(value):
    """`"0:100"` as (0, 100); anything else as it is (checked by InputOptions)."""
    if isinstance(value, str):
        lo, colon, hi = value.partition(":")
        try:
            return (int(lo), int(hi))
        except ValueError:
            raise ConfigError(f"Integer range '{value}' must look like 0:30522.") from None
    return value


# Fields of RunConfig that identify a point; their order is the public column order.
CONFIG_COLUMNS = axes.result_columns()
# The fields databases written before stable keys hashed (every field then); later ones are left
# out of the legacy key while they hold their default.
LEGACY_FIELDS = axes.legacy_fields()


def _axis_fields(kind: str):
    """A class decorator giving RunConfig (kind "run") or SweepSpec (kind "spec") one field per axis of
    the table (wb_core.axes), before the class's own fields, in the table's order."""

    def decorate(cls):
        own = dict(cls.__dict__.get("__annotations__", {}))
        annotations: dict = {}
        for a in axes.all_axes():
            if kind == "run":
                annotations[a.name] = a.annotation
                if a.default is not dataclasses.MISSING:
                    setattr(cls, a.name, a.default)
            else:
                annotations[a.spec] = f"list[{a.annotation}]"
                setattr(cls, a.spec, field(default_factory=lambda a=a: list(a.sweep_default),
                                           metadata={"help": a.help, "axis": a.name}))
        if kind == "spec":
            for o in axes.SPEC_OPTIONS:
                annotations[o.name] = o.annotation
                setattr(cls, o.name, field(default=o.default, metadata={"help": o.help}))
        cls.__annotations__ = {**annotations, **own}
        return cls

    return decorate


@dataclass(frozen=True)
@_axis_fields("run")
class RunConfig:
    """One point of a sweep: one value of every axis (wb_core.axes: the workbench's own, then each
    backend's). `key` is a stable hash of the settings that differ from the defaults, used to resume."""

    # The runtime's own choices, as a user gets them untouched: OpenVINO picks the inference
    # precision (BF16 on BF16 CPUs, even for the FP32 model) and, under a hint, the number of
    # requests in flight (OPTIMAL_NUMBER_OF_INFER_REQUESTS); the config picks only the model file
    # (its precision's variant), the batch size and the hint.
    untouched: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cores"] = list(self.cores) if self.cores else None
        return d

    def instance_cores(self) -> list[tuple[int, ...] | None]:
        """The cores each instance is pinned to (None: not pinned)."""
        if not self.cores_per_instance or not self.cores:
            return [None] * self.instances
        k = self.cores_per_instance
        cpus = list(self.cores)
        # Oversubscribed plans wrap around the cores they were given.
        return [tuple(cpus[(i * k + j) % len(cpus)] for j in range(k)) for i in range(self.instances)]

    @property
    def oversubscribed(self) -> bool:
        """More threads (x instances) than the cores given to them."""
        given = len(self.cores) if self.cores else len(available_cpus())
        per_instance = self.threads or (self.cores_per_instance or given)
        return per_instance * self.instances > given

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        if kw.get("cores"):
            kw["cores"] = tuple(kw["cores"])
        else:
            kw["cores"] = None
        return cls(**kw)

    def canonical(self) -> dict:
        """The settings that differ from the defaults, in one canonical form (what `key` hashes).

        Leaving defaults out keeps keys stable when a new setting is added with a default that
        means "as before": databases written earlier still resume without remeasuring.
        """
        forms = {a.name: a.canonical for a in axes.all_axes() if a.canonical}
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "backend" and value == f.default:
                continue
            out[f.name] = forms[f.name](value) if f.name in forms else value
        return out

    @property
    def key(self) -> str:
        """A stable id of this point: a hash of its canonical, non-default settings."""
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def key_on(self, hardware_fingerprint: str) -> str:
        """The key of this point measured on one hardware type (fleet studies hold one per type)."""
        return hashlib.sha256(f"{self.key}@{hardware_fingerprint}".encode()).hexdigest()[:16]

    def legacy_key(self) -> str:
        """The key databases written before stable keys used (every field hashed); for migration."""
        d = self.to_dict()
        for late in set(d) - set(LEGACY_FIELDS):  # added after stable keys: legacy databases never had them
            if d.get(late) in (None, False):
                d.pop(late, None)
        blob = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def key_on_legacy(self, hardware_fingerprint: str) -> str:
        """`key_on` as databases written before stable keys computed it; for migration."""
        return hashlib.sha256(f"{self.legacy_key()}@{hardware_fingerprint}".encode()).hexdigest()[:16]

    @property
    def group(self) -> tuple:
        """Settings that need their own process: everything except batch size and concurrency, which
        change only what one process runs (a reshape, a queue of requests), not how it started."""
        d = self.to_dict()
        d.pop("batch_size")
        d.pop("concurrency")
        return tuple(sorted((k, json.dumps(v)) for k, v in d.items()))

    def label(self) -> str:
        """The run's name in words, as every face names it (`wb_core.analysis.words.run_name`)."""
        from wb_core.naming import run_name

        return run_name(self.to_dict() | {"cores": format_cores(self.cores)})



def field_help(name: str, cls=None) -> str:
    """The help text of a SweepSpec (or `cls`) field, shared by the CLI, the dashboard and the docs."""
    if cls is None or cls is SweepSpec:
        return axes.field_help(name)
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f.metadata.get("help", "")
    raise KeyError(name)


@dataclass
@_axis_fields("spec")
class SweepSpec:
    """The grid a user asks for: a list of values per axis (wb_core.axes) and the spec options.
    `expand()` turns it into RunConfigs (invalid combinations dropped)."""

    def __post_init__(self):
        for a in axes.all_axes():
            setattr(self, a.spec, a.values(getattr(self, a.spec)))
        for o in axes.SPEC_OPTIONS:
            setattr(self, o.name, o.parse(getattr(self, o.name)))
        self.check_size()

    def size(self) -> int:
        """How many configurations `expand` plans at most (counted without building them)."""
        placements = sum(1 for _ in self._placements())
        return sum(axes.count(self, backend, placements) for backend in self.backends)

    def check_size(self) -> None:
        """Refuse a grid larger than MAX_POINTS before anything is built, giving its size."""
        n = self.size()
        if n > MAX_POINTS:
            lengths = [f"{len(v)} {k}" for k, v in self.axis_lengths().items() if len(v) > 1]
            # The smart search climbs over the same grid (it plans every configuration before it picks),
            # so it is no way around the limit: the advice that fits every caller is to narrow the longest axes.
            longest = sorted(((len(getattr(self, a.spec)), a) for a in axes.all_axes()
                              if len(getattr(self, a.spec)) > 1), key=lambda t: -t[0])[:2]
            narrow = " or ".join(f"{setting(a.spec, a.label)} ({count} values)" for count, a in longest)
            raise ConfigError(f"The sweep asks for {n:,} configurations ({' x '.join(lengths)}); the limit is "
                              f"{MAX_POINTS:,}, for a grid and for the smart search alike (it searches the same "
                              f"grid): narrow {narrow or 'the axes'}.")

    def axis_lengths(self) -> dict[str, list]:
        return {a.spec: getattr(self, a.spec) for a in axes.all_axes()}

    def expand(self) -> list[RunConfig]:
        """All run configurations, in a stable order, with settings that a backend lacks dropped.

        The axes nest in the table's order (wb_core.axes), the batch size innermost. Combinations
        that would run as another configuration are dropped, with a sentence in `self.notes`
        (OpenVINO streams above the inference threads: each stream needs a thread of its own, so the
        runtime runs fewer streams than asked), as are settings no backend of the sweep reads.
        Concurrency `auto` (None) gives each point as many requests in flight as it has streams,
        since streams without requests to run stay idle.

        Multi-instance points (instances > 1 with cores per instance) take the first
        instances x cores_per_instance CPUs, one disjoint slice each; the `cores` dimension does
        not apply to them. Asking for more cores than the machine has is refused unless
        `allow_oversubscribe`.
        """
        out: dict[str, RunConfig] = {}
        dropped: set[tuple] = set()
        placements = list(self._placements())
        for backend in self.backends:
            for kw in axes.combinations(self, backend, placements, dropped):
                rc = RunConfig(**kw)
                out.setdefault(rc.key, rc)
        self.notes: list[str] = axes.drop_notes(dropped) + axes.unread_notes(self)
        return list(out.values())

    def _placements(self):
        """(instances, cores_per_instance, cores) triples."""
        cpus = available_cpus()
        for n in self.instances:
            if n == 1:
                for cores in self.cores:
                    yield 1, None, cores
                continue
            for k in self.cores_per_instance:
                if k is None:
                    yield n, None, None
                    continue
                if n * k > len(cpus) and not self.allow_oversubscribe:
                    raise ConfigError(
                        f"{n} instances x {k} cores = {n * k} cores, but this machine offers {len(cpus)} "
                        f"(CPUs {fmt_cpus(cpus)}); use fewer, or allow oversubscription."
                    )
                yield n, k, tuple(cpus[: min(n * k, len(cpus))])

    def to_dict(self) -> dict:
        d = asdict(self)
        for a in axes.all_axes():
            if a.unparse:
                d[a.spec] = [a.unparse(v) for v in getattr(self, a.spec)]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SweepSpec:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"Unknown sweep field(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}.")
        return cls(**d)

MAX_EXTRA_ROUNDS = 1000


def check_ci_target(value) -> float | None:
    """An interval target as a fraction of the median (0.03: the 95% interval within +-3%); None: no target."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ConfigError(f"The interval target must be a number such as 0.03 (3%); got {value!r}.", field="ci")
    if value <= 0:
        raise ConfigError(f"The interval target must be above 0% (an interval of zero width is never reached); "
                          f"got {100 * value:g}%.", field="ci")
    if value > 1:
        raise ConfigError(f"The interval target must be at most 100% of the median; got {100 * value:g}%.",
                          field="ci")
    return float(value)


def parse_ci_target(text) -> float | None:
    """`--ci 3%` (or `3`) as the fraction 0.03; empty or None: no target."""
    if text is None or str(text).strip() == "":
        return None
    t = str(text).strip().removesuffix("%").strip()
    try:
        pct = float(t)
    except ValueError:
        raise ConfigError(f"{setting('ci', 'The interval target')} must be a percentage such as 3%; "
                          f"got {str(text)!r}.") from None
    return check_ci_target(pct / 100)


MIN_P99_MS = 0.001  # 1 microsecond: no inference call on a CPU answers faster, so a lower target meets nothing


def check_p99_target(value) -> float:
    """A p99 target in milliseconds a search can try to meet: finite, at least MIN_P99_MS."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{setting('p99_ms', 'The p99 target')} must be a positive number of milliseconds; got "
                          f"{value!r}.")
    if value < MIN_P99_MS:
        raise ConfigError(f"{setting('p99_ms', 'The p99 target')} of {value:g} ms is below {MIN_P99_MS:g} ms "
                          f"(1 microsecond), faster than any inference call answers: nothing could meet it; give a "
                          f"target of at least {MIN_P99_MS:g} ms.")
    return float(value)


def check_max_rounds(value) -> int:
    """The budget of extra rounds a `--ci` target may add: a whole number of at least one round."""
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        raise ConfigError(f"{setting('max_rounds', 'The extra-round budget')} must be a whole number of rounds; "
                          f"got {value!r}.")
    if value < 1:
        raise ConfigError(f"{setting('max_rounds', 'The extra-round budget')} must allow at least one round; "
                          f"got {int(value)}.")
    if value > MAX_EXTRA_ROUNDS:
        raise ConfigError(f"The extra-round budget of {int(value)} is beyond the supported maximum of "
                          f"{MAX_EXTRA_ROUNDS}.")
    return int(value)



def config_from_any(value: Any) -> dict:
    """Accept a dict or a JSON string (used by the worker protocol)."""
    return json.loads(value) if isinstance(value, str) else dict(value)


def _bounded_yaml(text: str):
    """`yaml.safe_load` with at most MAX_YAML_ALIASES aliases (an alias bomb is refused, not expanded)."""
    import yaml

    class Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.events.AliasEvent):
                Loader.aliases += 1
                if Loader.aliases > MAX_YAML_ALIASES:
                    raise ConfigError(f"uses more than {MAX_YAML_ALIASES} YAML aliases (*name); write the values "
                                      f"out")
            return super().compose_node(parent, index)

    return yaml.load(text, Loader=Loader)  # a SafeLoader subclass


def load_spec_schema() -> dict:
    """The JSON Schema of a sweep spec file, generated from the axes table (wb_core.axes), so that it
    names every SweepSpec field and measurement setting. `schemas/sweep_spec.schema.json` is the same
    schema written out for editors and other tools (`python -m wb_core.config` rewrites it)."""
    return axes.spec_schema(MeasureSettings.RANGES)


def write_spec_schema(path=None) -> str:
    """Write the generated spec schema to the package's `schemas/sweep_spec.schema.json` (or `path`)."""
    from pathlib import Path

    path = Path(path) if path else Path(__file__).parent / "schemas" / "sweep_spec.schema.json"
    path.write_text(json.dumps(load_spec_schema(), indent=2) + "\n")
    return str(path)


def validate_spec_data(data: Any, where: str = "Sweep spec") -> None:
    """Check a spec mapping's fields and types (JSON Schema); a ConfigError names the first problem."""
    import jsonschema

    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping of sweep fields, like 'threads: [1, 2]'.")
    names = {f.name for f in dataclasses.fields(SweepSpec)} | {"settings", "inputs"}
    unknown = sorted(set(map(str, data)) - names)
    if unknown:
        raise ConfigError(f"Unknown sweep field(s) {', '.join(unknown)} in {where}; known: {', '.join(sorted(names))}.")
    try:
        jsonschema.validate(data, load_spec_schema())
    except jsonschema.ValidationError as e:
        at = ".".join(str(p) for p in e.absolute_path) or "the top level"
        raise ConfigError(f"{where} is invalid at {at}: {_short(e.message)}.") from None


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def load_spec_file(path) -> tuple[SweepSpec, MeasureSettings | None, InputOptions | None]:
    """Read a sweep spec from YAML (safe loading only: no Python object tags, few aliases, 1 MiB at most).

    Top-level keys are SweepSpec fields, plus optional `settings` (MeasureSettings fields) and
    `inputs` (InputOptions fields); `schemas/sweep_spec.schema.json` describes them. Example::

        backends: [openvino]
        threads: [1, 2]
        batch_sizes: [1, 8]
        cores: [none, first1]
        settings: {max_time_s: 5}
    """
    from pathlib import Path

    import yaml

    from wb_core.streams import refuse_special

    p = Path(path)
    refuse_special(p, "Sweep spec")
    if p.is_dir():
        raise ConfigError(f"Sweep spec '{p}' is a folder; give a YAML file, such as sweep.yaml.")
    if not p.is_file():
        raise ConfigError(f"Sweep spec '{p}' does not exist.")
    if p.stat().st_size > MAX_SPEC_BYTES:
        raise ConfigError(f"Sweep spec '{p}' is {p.stat().st_size:,} bytes; a spec is at most {MAX_SPEC_BYTES:,}.")
    try:
        data = _bounded_yaml(p.read_text(encoding="utf-8"))
    except ConfigError as e:
        raise ConfigError(f"Sweep spec '{p}' {e}.") from None
    except yaml.constructor.ConstructorError as e:
        raise ConfigError(f"Sweep spec '{p}' uses a YAML tag that is not allowed ({e.problem}); only plain "
                          f"values, lists and mappings are read.") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"Sweep spec '{p}' is not valid YAML{where}.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"Sweep spec '{p}' is not UTF-8 text.") from None
    except RecursionError:
        raise ConfigError(f"Sweep spec '{p}' nests too deeply.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Sweep spec '{p}' must be a mapping of sweep fields, like 'threads: [1, 2]'.")
    validate_spec_data(data, f"Sweep spec '{p}'")
    settings = data.pop("settings", None)
    inputs = data.pop("inputs", None)
    # Options as they are; an axis takes a list, or one value (text such as "1,2" is split by its parser).
    options = {o.name for o in axes.SPEC_OPTIONS}
    spec_fields = {k: (v if k in options or isinstance(v, (list, str)) else [v]) for k, v in data.items()}
    try:
        spec = SweepSpec.from_dict(spec_fields)
        ms = MeasureSettings.from_dict(settings, "settings section") if settings is not None else None
        io = InputOptions.from_dict(inputs) if inputs is not None else None
    except TypeError as e:
        raise ConfigError(f"Sweep spec '{p}': {e}.") from None
    except ConfigError as e:  # said with the file's own field names, not as flags or labels
        where = f" field {e.field}" if e.field else ""
        raise ConfigError(f"Sweep spec '{p}'{where}: {e.worded(lambda field: field)}") from None
    return spec, ms, io


if __name__ == "__main__":  # python -m wb_core.config: rewrite the shipped schema after changing an axis
    print(write_spec_schema())
