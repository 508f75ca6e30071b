"""Configurations that cross a boundary: sweep specs, run configs and measurement settings.

Every value a user types (CLI flag, widget, YAML) is parsed here, so that a bad value gets one
plain sentence naming the field, and every other module can trust what it receives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from wb_core.backends.registry import names as backend_names
from wb_core.errors import ConfigError

PRECISIONS = ("fp32", "bf16", "int8")
OV_HINTS = ("none", "latency", "throughput")
MAX_BATCH = 65536
MAX_THREADS = 4096
MAX_POINTS = 20000  # configurations one sweep may plan
MAX_SPEC_BYTES = 1 << 20  # a sweep spec file larger than this is refused unread
MAX_YAML_ALIASES = 100  # YAML aliases (*name) one spec may use: an alias bomb stops here
MAX_TIMEOUT_S = 7 * 24 * 3600.0
INT64 = (-(2**63), 2**63 - 1)


def check_number(value, name: str, low: float, high: float, *, integer: bool = False,
                 low_open: bool = False) -> float | int:
    """`value` as a finite number in [low, high] (or (low, high] with `low_open`), else a ConfigError.

    Booleans, strings, NaN and infinities are refused: every numeric setting a user gives passes here.
    """
    import math

    def fmt(x) -> str:
        return str(x) if isinstance(x, int) else f"{x:g}"

    kind = "a whole number" if integer else "a number"
    bound = f"{'above' if low_open else 'at least'} {fmt(low)} and at most {fmt(high)}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be {kind} {bound}; got {value!r}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number {bound}; got {value!r}.")
    if integer and not isinstance(value, int):
        if not float(value).is_integer():
            raise ConfigError(f"{name} must be a whole number {bound}; got {value!r}.")
        value = int(value)
    if value < low or (low_open and value == low) or value > high:
        raise ConfigError(f"{name} must be {kind} {bound}; got {fmt(value)}.")
    return value


def check_timeout(timeout_s, name: str = "--timeout") -> float | None:
    """A worker inactivity timeout in seconds (None: the default); NaN and infinity are refused."""
    if timeout_s is None:
        return None
    return float(check_number(timeout_s, f"{name} (seconds a silent worker is given)", 0, MAX_TIMEOUT_S,
                              low_open=True))


def split_values(text: str | Iterable | None) -> list[str]:
    """Split a sweep flag into values: `a,b` or, when a value holds commas itself, `a;b`."""
    if text is None:
        return []
    if not isinstance(text, str):
        return [str(v).strip() for v in text if str(v).strip()]
    sep = ";" if ";" in text else ","
    return [v.strip() for v in text.split(sep) if v.strip()]


# Suffixes users type for large counts and rates: 1k, 2.5M, 1G (m is left out: milli or mega?).
NUMBER_SUFFIXES = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
NUMBER_FORMS = "a number such as 1000, 1e3, 1k or 2.5M"


def parse_number(text, name: str) -> float:
    """A number as users type it: `1000`, `1_000`, `1e3`, `1k`, `2.5M`; anything else is one sentence."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    t = str(text).strip().replace("_", "")
    scale = 1.0
    if t and t[-1] in NUMBER_SUFFIXES:
        t, scale = t[:-1], NUMBER_SUFFIXES[t[-1]]
    try:
        return float(t) * scale
    except ValueError:
        raise ConfigError(f"{name} must be {NUMBER_FORMS}; got '{text}'.") from None


def parse_choice(text, name: str, choices: Iterable[str]) -> list[str]:
    choices = tuple(choices)
    values = [v.lower() for v in split_values(text)]
    if not values:
        raise ConfigError(f"{name} needs at least one value; choose from {', '.join(choices)}.")
    for v in values:
        if v not in choices:
            raise ConfigError(f"Unknown {name} '{v}'; choose from {', '.join(choices)}.")
    return _unique(values)


def parse_positive_ints(text, name: str, upper: int, allow_auto: bool = False) -> list[int | None]:
    """Parse `1,2,4` (or `auto` for the runtime's default when allowed) into a list."""
    out: list[int | None] = []
    values = split_values(text)
    if not values:
        raise ConfigError(f"{name} needs at least one value.")
    for v in values:
        if allow_auto and v.lower() in ("auto", "default", "none"):
            out.append(None)
            continue
        try:
            n = int(v)
        except ValueError:
            hint = " or 'auto'" if allow_auto else ""
            raise ConfigError(f"{name} must be whole numbers{hint}; got '{v}'.") from None
        if n < 1:
            raise ConfigError(f"{name} must be at least 1; got {n}.")
        if n > upper:
            raise ConfigError(f"{name} of {n} is beyond the supported maximum of {upper}.")
        out.append(n)
    return _unique(out)


def parse_bool_list(text, name: str) -> list[bool | None]:
    table = {"on": True, "true": True, "yes": True, "1": True,
             "off": False, "false": False, "no": False, "0": False,
             "auto": None, "default": None}
    out = []
    for v in split_values(text):
        if v.lower() not in table:
            raise ConfigError(f"{name} takes on, off or auto; got '{v}'.")
        out.append(table[v.lower()])
    return _unique(out) or [None]


def available_cpus() -> list[int]:
    """CPUs this process may run on (respects an affinity set by a container or taskset)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def parse_cores(text: str, cpus: list[int] | None = None) -> tuple[int, ...] | None:
    """Parse one pinning value: `none`, `all`, `firstK`, or a list like `0`, `0-3`, `0+2`, `0-1+4`.

    Returns None for no pinning, else the sorted CPU ids. Raises ConfigError for CPUs that the
    machine does not have.
    """
    cpus = available_cpus() if cpus is None else cpus
    t = str(text).strip().lower().replace(" ", "")
    if t in ("none", "", "no", "off"):
        return None
    if t == "all":
        return tuple(cpus)
    m = re.fullmatch(r"first:?(\d+)", t)
    if m:
        k = int(m.group(1))
        if k < 1:
            raise ConfigError(f"Cores '{text}': the number of cores must be at least 1.")
        if k > len(cpus):
            raise ConfigError(
                f"Cores '{text}' asks for {k} cores but this machine offers {len(cpus)} "
                f"(CPUs {_fmt_cpus(cpus)})."
            )
        return tuple(cpus[:k])
    ids: set[int] = set()
    for part in re.split(r"[+,]", t):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ConfigError(
                f"Cores '{text}' is not a core list; use none, all, firstK, or ids like 0, 0-3, 0+2."
            )
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ConfigError(f"Cores '{text}': the range {lo}-{hi} runs backwards.")
        if hi - lo > 100000:
            raise ConfigError(f"Cores '{text}': the range {lo}-{hi} is absurdly large.")
        ids.update(range(lo, hi + 1))
    missing = sorted(ids - set(cpus))
    if missing:
        raise ConfigError(
            f"Cores '{text}' names CPU {_fmt_cpus(missing)}, which this machine does not offer "
            f"(available: {_fmt_cpus(cpus)})."
        )
    return tuple(sorted(ids))


def format_cores(cores: tuple[int, ...] | None) -> str:
    """Inverse of parse_cores for display and storage: `none`, `0`, `0-3`, `0+2`."""
    if not cores:
        return "none"
    return _fmt_cpus(list(cores), sep="+")


def _fmt_cpus(ids: list[int], sep: str = ",") -> str:
    ids = sorted(ids)
    parts, start = [], None
    for i, c in enumerate(ids):
        if start is None:
            start = c
        if i + 1 == len(ids) or ids[i + 1] != c + 1:
            parts.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return sep.join(parts)


def _unique(values: list) -> list:
    seen, out = set(), []
    for v in values:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


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

    MAX_DIM = 10**7

    def __post_init__(self):
        if (self.text is None) != (self.tokenizer is None):
            raise ConfigError("Text and a tokenizer go together: give both --text FILE and --tokenizer "
                              "tokenizer.json.")
        if self.dynamic_size is not None:
            object.__setattr__(self, "dynamic_size", check_number(
                self.dynamic_size, "The size for dynamic dimensions (--dynamic-size)", 1, self.MAX_DIM, integer=True))
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
        out.update({k: getattr(self, k) for k in ("text", "tokenizer", "samples") if getattr(self, k)})
        return out

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "inputs") -> InputOptions:
        """From a mapping (a spec file's `inputs`, a worker task); every part is type-checked."""
        d = d or {}
        if not isinstance(d, dict):
            raise ConfigError(f"The {where} section must be a mapping with dynamic_size, shapes, int_range and "
                              f"int_ranges; got {type(d).__name__}.")
        known = ("dynamic_size", "shapes", "int_range", "int_ranges", "text", "tokenizer", "samples")
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
                   **{k: str(d[k]) for k in ("text", "tokenizer", "samples") if d.get(k)})

    @classmethod
    def parse(cls, dynamic_size=None, shapes: list[str] | None = None,
              int_range: str | list[str] | None = None) -> InputOptions:
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
        return cls(dynamic_size=dynamic_size, shapes=shape_map, int_range=default, int_ranges=per)

    def check_names(self, specs) -> None:
        """Shapes and ranges must name inputs the model has."""
        names = {s.name for s in specs} | {s.name.split(":")[0] for s in specs}
        have = ", ".join(s.name for s in specs)
        for what, given in (("--shape", self.shapes), ("--int-range", self.int_ranges)):
            for name in given:
                if name not in names:
                    raise ConfigError(f"{what} names input '{name}', which the model does not have "
                                      f"(its inputs: {have}).")


def parse_shape_map(text) -> dict[str, tuple[int, ...]]:
    """`image=1x3x224x224` (several inputs joined by ';') as {name: shape}; a mapping passes through, checked."""
    if isinstance(text, dict):
        items = [(str(k), v) for k, v in text.items()]
    else:
        items = []
        for part in str(text).split(";"):
            if not part.strip():
                continue
            name, eq, dims = part.strip().partition("=")
            if not eq or not name.strip():
                raise ConfigError(f"Shape '{part.strip()}' must look like NAME=1x3x224x224.")
            try:
                items.append((name.strip(), tuple(int(d) for d in dims.lower().split("x") if d.strip())))
            except ValueError:
                raise ConfigError(f"Shape '{part.strip()}' must list whole numbers, like NAME=1x3x224x224.") from None
    if not items:
        raise ConfigError("A shape of the shape axis names no input; give NAME=1x3x224x224.")
    out = {}
    for name, dims in items:
        dims = tuple(dims)
        if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d == 0 or d < -1 or d > 10**7
                           for d in dims):
            raise ConfigError(f"Shape {name}={'x'.join(map(str, dims))} has a dimension that is zero, negative or "
                              f"absurd.")
        out[name] = dims
    return out


def format_shape_map(shapes: dict[str, tuple[int, ...]]) -> str:
    return ";".join(f"{k}={'x'.join(map(str, v))}" for k, v in sorted(shapes.items()))


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


def with_point_shapes(opts: InputOptions, cfg: RunConfig) -> InputOptions:
    """The input options of one point: its sequence length sizes every dynamic non-batch
    dimension, and its shapes (a shape sweep) replace those given for the same inputs."""
    if cfg.seq_len:
        opts = dataclasses.replace(opts, dynamic_size=cfg.seq_len)
    if cfg.shape:
        opts = dataclasses.replace(opts, shapes={**opts.shapes, **parse_shape_map(cfg.shape)})
    return opts


def parse_seq_lens(text) -> list[int | None]:
    """`--dynamic-size 32,128,384`: sizes of the dynamic (sequence) dimensions, one sweep axis."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return [None]
    if isinstance(text, int):
        text = str(text)
    return parse_positive_ints(text, "Sequence length (--dynamic-size)", 10**7)


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
CONFIG_COLUMNS = ("backend", "precision", "batch_size", "threads", "inter_op_threads", "streams",
                  "cores", "instances", "concurrency")


@dataclass(frozen=True)
class RunConfig:
    """One point of a sweep. `key` is a stable hash of the fields, used to resume."""

    backend: str
    precision: str = "fp32"
    batch_size: int = 1
    threads: int | None = None  # intra-op threads (TensorFlow) / INFERENCE_NUM_THREADS (OpenVINO)
    inter_op_threads: int | None = None  # TensorFlow only
    streams: int | None = None  # OpenVINO NUM_STREAMS
    cores: tuple[int, ...] | None = None  # CPU affinity of the worker; None = not pinned
    instances: int = 1
    concurrency: int = 1  # requests in flight
    hint: str | None = None  # OpenVINO PERFORMANCE_HINT: latency / throughput / None
    onednn: bool | None = None  # TensorFlow TF_ENABLE_ONEDNN_OPTS; None = runtime default
    cpu_pinning: bool | None = None  # OpenVINO ENABLE_CPU_PINNING; None = runtime default
    cores_per_instance: int | None = None  # with instances > 1: each instance's own disjoint cores
    rate: float | None = None  # open-loop Poisson arrivals (requests/s); None = closed loop
    seq_len: int | None = None  # size of the dynamic non-batch dimensions; None: from the input options
    shape: str | None = None  # input shapes of a shape sweep, "NAME=1x3x224x224" (";" between inputs)
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
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "backend" and value == f.default:
                continue
            if f.name == "cores":
                value = [int(c) for c in value]
            elif f.name == "rate":
                value = float(value)
            out[f.name] = value
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
        for late in ("seq_len", "shape", "untouched"):  # added after stable keys: legacy databases never had them
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
        parts = [self.backend, self.precision, f"b{self.batch_size}",
                 f"t{self.threads or 'auto'}", f"cores={format_cores(self.cores)}"]
        if self.inter_op_threads:
            parts.append(f"inter{self.inter_op_threads}")
        if self.streams:
            parts.append(f"s{self.streams}")
        if self.hint:
            parts.append(self.hint)
        if self.concurrency > 1:
            parts.append(f"c{self.concurrency}")
        if self.instances > 1:
            parts.append(f"x{self.instances}" + (f"@{self.cores_per_instance}c" if self.cores_per_instance else ""))
        if self.rate:
            parts.append(f"rate={self.rate:g}/s")
        if self.seq_len:
            parts.append(f"seq{self.seq_len}")
        if self.shape:
            parts.append(f"shape {self.shape}")
        if self.onednn is False:
            parts.append("onednn=off")
        if self.untouched:
            parts.append("untouched")
        return " ".join(parts)


def _axis(default: list, help_text: str):
    """A sweep axis: its default values and the help text the CLI options and widget tooltips show."""
    return field(default_factory=lambda: list(default), metadata={"help": help_text})


def field_help(name: str, cls=None) -> str:
    """The help text of a SweepSpec (or `cls`) field, shared by the CLI, the dashboard and the docs."""
    for f in dataclasses.fields(cls or SweepSpec):
        if f.name == name:
            return f.metadata.get("help", "").format(backends=", ".join(backend_names()))
    raise KeyError(name)


@dataclass
class SweepSpec:
    """The grid a user asks for. `expand()` turns it into RunConfigs (invalid combinations dropped)."""

    backends: list[str] = _axis([backend_names()[0]], "Backends to measure with (comma-separated): {backends}.")
    precisions: list[str] = _axis(["fp32"], "fp32, bf16, int8 (int8: OpenVINO INT8 variant by NNCF).")
    batch_sizes: list[int] = _axis([1], "Batch sizes, e.g. 1,8,32.")
    threads: list[int | None] = _axis([None], "Intra-op / inference threads, e.g. 1,2 or auto.")
    inter_op_threads: list[int | None] = _axis([None], "TensorFlow inter-op threads.")
    streams: list[int | None] = _axis([None], "OpenVINO NUM_STREAMS values.")
    cores: list[tuple[int, ...] | None] = _axis(
        [None], "Pinning: none, all, firstK, or CPU lists like 0, 0-1, 0+2 (values comma-separated).")
    concurrency: list[int | None] = _axis(
        [None], "Requests in flight, e.g. 1,4; auto: as many as the OpenVINO streams (1 without streams).")
    hints: list[str | None] = _axis([None], "OpenVINO PERFORMANCE_HINT: none, latency, throughput.")
    onednn: list[bool | None] = _axis([None], "TensorFlow oneDNN: on, off, auto.")
    cpu_pinning: list[bool | None] = _axis([None], "OpenVINO ENABLE_CPU_PINNING: on, off, auto.")
    instances: list[int] = _axis([1], "Instances started together, e.g. 1,2.")
    cores_per_instance: list[int | None] = _axis([None], "Cores pinned to each instance (disjoint), e.g. 1,2.")
    rates: list[float | None] = _axis([None], "Poisson arrival rates in requests/s (server scenario).")
    seq_lens: list[int | None] = _axis([None], "Sequence lengths: sizes of the dynamic non-batch dimensions, "
                                               "e.g. 32,128,384 (one sweep axis).")
    shapes: list[str | None] = _axis([None], "Input shapes as a sweep axis, each NAME=1x3x224x224 (several inputs "
                                             "joined by ';'), e.g. image=1x3x224x224 and image=1x3x320x320.")
    allow_oversubscribe: bool = field(default=False, metadata={"help": "Run instances x cores beyond this "
                                                                       "machine's cores."})
    repeats: int = field(default=1, metadata={"help": "Rounds per configuration, each in a fresh worker, "
                                                      "interleaved in a shuffled order; results give the median "
                                                      "and a 95% interval."})

    def __post_init__(self):
        self.backends = parse_choice(self.backends, "backend", backend_names())
        self.precisions = parse_choice(self.precisions, "precision", PRECISIONS)
        self.batch_sizes = parse_positive_ints(self.batch_sizes, "Batch size", MAX_BATCH)
        self.threads = _ints_or_none(self.threads, "Threads", MAX_THREADS)
        self.inter_op_threads = _ints_or_none(self.inter_op_threads, "Inter-op threads", MAX_THREADS)
        self.streams = _ints_or_none(self.streams, "Streams", MAX_THREADS)
        self.concurrency = _ints_or_none(self.concurrency if not isinstance(self.concurrency, int)
                                         else str(self.concurrency), "Concurrency", 4096)
        self.cores = _unique([c if (c is None or isinstance(c, tuple)) else parse_cores(c)
                              for c in (split_values(self.cores) if isinstance(self.cores, str) else self.cores)]) or [None]
        hints = [h for h in (split_values(self.hints) if isinstance(self.hints, str) else self.hints)]
        hints = [("none" if h is None else str(h).lower()) for h in hints] or ["none"]
        for h in hints:
            if h not in OV_HINTS:
                raise ConfigError(f"Unknown performance hint '{h}'; choose from {', '.join(OV_HINTS)}.")
        self.hints = _unique([None if h == "none" else h for h in hints])
        if isinstance(self.onednn, str):
            self.onednn = parse_bool_list(self.onednn, "oneDNN")
        if isinstance(self.cpu_pinning, str):
            self.cpu_pinning = parse_bool_list(self.cpu_pinning, "CPU pinning")
        self.instances = parse_positive_ints(self.instances if not isinstance(self.instances, int)
                                             else str(self.instances), "Instances", 4096)
        self.cores_per_instance = _ints_or_none(self.cores_per_instance if not isinstance(self.cores_per_instance, int)
                                                else str(self.cores_per_instance), "Cores per instance", 4096)
        self.rates = parse_rates(self.rates)
        self.repeats = parse_repeats(self.repeats)
        self.seq_lens = _ints_or_none(self.seq_lens if not isinstance(self.seq_lens, int) else str(self.seq_lens),
                                      "Sequence length", 10**7)
        self.shapes = _unique([None if v is None else format_shape_map(parse_shape_map(v))
                               for v in ([self.shapes] if isinstance(self.shapes, str) else self.shapes)]) or [None]
        if not isinstance(self.allow_oversubscribe, bool):
            raise ConfigError(f"allow_oversubscribe takes true or false; got {self.allow_oversubscribe!r}.")
        self.check_size()

    def size(self) -> int:
        """How many configurations `expand` plans at most (counted without building them)."""
        from wb_core.backends.registry import get

        placements = sum(1 for _ in self._placements())
        total = 0
        for backend in self.backends:
            reads = set(get(backend).settings)
            n = (len(self.precisions) * placements * len(self.concurrency) * len(self.rates) * len(self.batch_sizes)
                 * len(self.seq_lens) * len(self.shapes))
            for name, values in (("threads", self.threads), ("inter_op_threads", self.inter_op_threads),
                                 ("onednn", self.onednn), ("cpu_pinning", self.cpu_pinning)):
                if name in reads:
                    n *= len(values)
            hints = self.hints if "hint" in reads else [None]
            streams = len(self.streams) if "streams" in reads else 1
            n *= sum(1 if h else streams for h in hints)
            total += n
        return total

    def check_size(self) -> None:
        """Refuse a grid larger than MAX_POINTS before anything is built, giving its size."""
        n = self.size()
        if n > MAX_POINTS:
            axes = [f"{len(v)} {k}" for k, v in self.axis_lengths().items() if len(v) > 1]
            raise ConfigError(f"The sweep asks for {n:,} configurations ({' x '.join(axes)}); the limit is "
                              f"{MAX_POINTS:,}: narrow the axes, or use --search smart with a --budget.")

    def axis_lengths(self) -> dict[str, list]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if isinstance(getattr(self, f.name), list)}

    def expand(self) -> list[RunConfig]:
        """All run configurations, in a stable order, with settings that a backend lacks dropped.

        Combinations that would run as another configuration are dropped, with a sentence in
        `self.notes`: OpenVINO streams above the inference threads (each stream needs a thread of
        its own, so the runtime runs fewer streams than asked). Concurrency `auto` (None) gives
        each point as many requests in flight as it has streams, since streams without requests
        to run stay idle.

        Multi-instance points (instances > 1 with cores per instance) take the first
        instances x cores_per_instance CPUs, one disjoint slice each; the `cores` dimension does
        not apply to them. Asking for more cores than the machine has is refused unless
        `allow_oversubscribe`.
        """
        out: dict[str, RunConfig] = {}
        self.notes: list[str] = []
        dropped: set[tuple] = set()
        from wb_core.backends.registry import get

        for backend in self.backends:
            reads = set(get(backend).settings)  # settings a backend does not read are left at their default

            def axis(name: str, values: list, _reads=reads) -> list:
                return values if name in _reads else [None]

            for prec in self.precisions:
                for n, k, cores in self._placements():
                    for thr in axis("threads", self.threads):
                        for inter in axis("inter_op_threads", self.inter_op_threads):
                            for hint in axis("hint", self.hints):
                                # NUM_STREAMS and PERFORMANCE_HINT are exclusive in OpenVINO.
                                for st in ([None] if hint else axis("streams", self.streams)):
                                    if st and thr and st > thr:
                                        dropped.add((st, thr))
                                        continue
                                    for dnn in axis("onednn", self.onednn):
                                        for pin in axis("cpu_pinning", self.cpu_pinning):
                                            for conc_asked in self.concurrency:
                                                conc = conc_asked or st or 1
                                                for rate in self.rates:
                                                    for seq, shape in itertools.product(self.seq_lens,
                                                                                        self.shapes):
                                                        for b in self.batch_sizes:
                                                            rc = RunConfig(shape=shape,
                                                                backend=backend, precision=prec, batch_size=b,
                                                                threads=thr, inter_op_threads=inter, streams=st,
                                                                cores=cores, instances=n, concurrency=conc,
                                                                hint=hint, onednn=dnn, cpu_pinning=pin,
                                                                cores_per_instance=k, rate=rate, seq_len=seq)
                                                            out.setdefault(rc.key, rc)
        for st, thr in sorted(dropped):
            self.notes.append(f"{st} streams with {thr} thread{'s' if thr > 1 else ''} left out: OpenVINO gives "
                              f"each stream a thread of its own, so it would run as fewer streams.")
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
                        f"(CPUs {_fmt_cpus(cpus)}); use fewer, or allow oversubscription."
                    )
                yield n, k, tuple(cpus[: min(n * k, len(cpus))])

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cores"] = [format_cores(c) for c in self.cores]
        d["hints"] = [h or "none" for h in self.hints]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SweepSpec:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"Unknown sweep field(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}.")
        return cls(**d)


def parse_repeats(value) -> int:
    """Rounds per configuration: a whole number of at least 1."""
    try:
        n = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        n = None
    if n is None or n < 1 or str(value).strip() not in (str(n), f"+{n}"):
        raise ConfigError(f"Repeats must be a whole number of at least 1 (rounds per configuration); got {value!r}.")
    if n > 1000:
        raise ConfigError(f"Repeats of {n} is beyond the supported maximum of 1000.")
    return n


MAX_EXTRA_ROUNDS = 1000


def check_ci_target(value) -> float | None:
    """An interval target as a fraction of the median (0.03: the 95% interval within +-3%); None: no target."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ConfigError(f"The interval target must be a number such as 0.03 (3%); got {value!r}.")
    if value <= 0:
        raise ConfigError(f"The interval target must be above 0% (an interval of zero width is never reached); "
                          f"got {100 * value:g}%.")
    if value > 1:
        raise ConfigError(f"The interval target must be at most 100% of the median; got {100 * value:g}%.")
    return float(value)


def parse_ci_target(text) -> float | None:
    """`--ci 3%` (or `3`) as the fraction 0.03; empty or None: no target."""
    if text is None or str(text).strip() == "":
        return None
    t = str(text).strip().removesuffix("%").strip()
    try:
        pct = float(t)
    except ValueError:
        raise ConfigError(f"--ci must be a percentage such as 3%; got {str(text)!r}.") from None
    return check_ci_target(pct / 100)


def check_max_rounds(value) -> int:
    """The budget of extra rounds a `--ci` target may add: a whole number of at least one round."""
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        raise ConfigError(f"The extra-round budget (--max-rounds) must be a whole number of rounds; got {value!r}.")
    if value < 1:
        raise ConfigError(f"The extra-round budget (--max-rounds) must allow at least one round; got {int(value)}.")
    if value > MAX_EXTRA_ROUNDS:
        raise ConfigError(f"The extra-round budget of {int(value)} is beyond the supported maximum of "
                          f"{MAX_EXTRA_ROUNDS}.")
    return int(value)


MIN_RATE = 0.01  # requests/s: slower arrivals send too few requests to measure within any time limit


def parse_rates(values) -> list[float | None]:
    """Arrival rates in requests/s for the server scenario; `none` is the closed loop."""
    out: list[float | None] = []
    for v in (split_values(values) if isinstance(values, str) else (values or [None])):
        if v is None or str(v).lower() in ("none", "closed", ""):
            out.append(None)
            continue
        r = parse_number(v, "Rate (requests per second)")
        if not (MIN_RATE <= r < 1e7):
            raise ConfigError(f"Rate must be at least {MIN_RATE:g} and below 10 million requests/s; got {v}.")
        out.append(r)
    return _unique(out) or [None]


def _ints_or_none(values, name, upper) -> list[int | None]:
    if isinstance(values, str):
        return parse_positive_ints(values, name, upper, allow_auto=True)
    out = []
    for v in values:
        if v is None:
            out.append(None)
        else:
            out.extend(parse_positive_ints(str(v), name, upper, allow_auto=True))
    return _unique(out) or [None]


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
    """The JSON Schema of a sweep spec file (the copy shipped in the package)."""
    from importlib import resources

    return json.loads(resources.files("wb_core").joinpath("schemas/sweep_spec.schema.json").read_text())


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
    spec_fields = {k: (v if k == "allow_oversubscribe" else
                       ",".join("none" if x is None else str(x) for x in (v if isinstance(v, list) else [v])))
                   for k, v in data.items()}
    try:
        spec = SweepSpec.from_dict(spec_fields)
        ms = MeasureSettings.from_dict(settings, "settings section") if settings is not None else None
        io = InputOptions.from_dict(inputs) if inputs is not None else None
    except TypeError as e:
        raise ConfigError(f"Sweep spec '{p}': {e}.") from None
    except ConfigError as e:
        raise ConfigError(f"Sweep spec '{p}': {e}") from None
    return spec, ms, io
