"""The sweep axes as one table: the workbench's own, then each registered backend's.

Everything that lists sweep settings reads this table: the `SweepSpec` and `RunConfig` fields
(config.py), `SweepSpec.expand` and `size` (the product below), the JSON schema of a spec file
(`spec_schema`), the CLI's sweep options, the dashboard's controls and help lines, and the search's
axes. Adding a setting of one backend is an `Axis` in its `BackendInfo(axes=...)`; a setting every
backend reads is a line in `GENERIC` here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from wb_core import options, precisions
from wb_core.axis import ROLES, STAGES, Axis, one_of, one_of_or_none, whole_numbers
from wb_core.backends import registry
from wb_core.errors import ConfigError, worded
from wb_core.parsing import (
    MAX_BATCH,
    MAX_THREADS,
    PRECISIONS,
    format_cores,
    format_shape_map,
    parse_cores,
    parse_rates,
    parse_repeats,
    parse_shape_map,
    split_values,
    unique_values,
)


def _cores(value) -> list:
    items = split_values(value) if isinstance(value, str) else list(value)
    return unique_values([c if (c is None or isinstance(c, tuple)) else parse_cores(c) for c in items]) or [None]


def _shapes(value) -> list:
    items = [value] if isinstance(value, str) else list(value)
    return unique_values([None if v is None else format_shape_map(parse_shape_map(v)) for v in items]) or [None]


# The workbench's own axes (backends add theirs: registry.BackendInfo.axes). Stage order decides
# how `expand` nests them; inside a stage, the order here.
GENERIC: tuple[Axis, ...] = (
    Axis("backend", "backends", one_of("backend", registry.names), "Backends to measure with (comma-separated): "
         "{backends}.", "Backends", "--backend", default=dataclasses.MISSING, sweep_default=(registry.default_backend(),),
         text_default=registry.default_backend(), annotation="str", stage="backend", every_backend=True,
         in_name="{title}", name_rank=0, header="Runtime", column_rank=0, legacy_key=True,
         always_shown=True, place=""),
    Axis("precision", "precisions", one_of("precision", PRECISIONS), precisions.help_text() + ".", "Precisions",
         "--precision", default=precisions.baseline(), sweep_default=(precisions.baseline(),),
         text_default=precisions.baseline(), annotation="str", choices=PRECISIONS, stage="variant", every_backend=True,
         in_name="{VALUE}", unset_name=precisions.precision(precisions.baseline()).label, name_rank=1,
         header="Precision", column_rank=1, legacy_key=True, always_shown=True, place=""),
    Axis("cores", "cores", _cores, "Pinning: none, all, firstK, or CPU lists like 0, 0-1, 0+2 (values "
         "comma-separated).", "Cores", "--cores", text_default="none", annotation="tuple[int, ...] | None",
         becomes="the worker's CPU affinity", stage="placement", every_backend=True, unparse=format_cores,
         canonical=lambda v: [int(c) for c in v], in_name="cores {value}",
         unset_name="not pinned", name_rank=40, header="Cores pinned", column_rank=6, legacy_key=True,
         always_shown=True, place="main", guide="Which CPUs the worker is pinned to: none, all, first2, or lists like "
         "0-1; pinning keeps neighbours from sharing cores."),
    Axis("instances", "instances", whole_numbers("Instances", 4096, auto=False), "Instances started together, "
         "e.g. 1,2.", "Instances", "--instances", default=1, sweep_default=(1,), text_default="1", annotation="int",
         ordered=True, stage="placement", every_backend=True, in_name="{value} instances", name_over=1,
         name_rank=41, column_rank=7, legacy_key=True, place="scenario",
         guide="Copies of the model serving side by side, each in its own process, e.g. 1,2. Instances started "
         "together, e.g. 1,2."),
    Axis("cores_per_instance", "cores_per_instance", whole_numbers("Cores per instance", 4096), "Cores pinned to "
         "each instance (disjoint), e.g. 1,2.", "Cores per instance", "--cores-per-instance", ordered=True,
         stage="placement", every_backend=True, roles=("serving", "compare", "identity"), legacy_key=True,
         place="scenario", guide="CPUs pinned to each copy (they do not overlap), e.g. 1; auto: not pinned. Instances "
         "× cores per instance must fit this machine."),
    Axis("threads", "threads", whole_numbers("Threads", MAX_THREADS), "Intra-op / inference threads, e.g. 1,2 or "
         "auto.", "Threads", "--threads", ordered=True, becomes="the runtime's intra-op / inference threads",
         in_name="{value} thread{s}", unset_name="auto threads", name_rank=20, column_rank=3, legacy_key=True,
         always_shown=True, place="main", guide="Threads one inference may use, e.g. 1,2,4; auto: the runtime's "
         "default. More than the CPUs here gets a warning."),
    Axis("concurrency", "concurrency", whole_numbers("Concurrency", 4096), "Requests in flight, e.g. 1,4; auto: as "
         "many as the OpenVINO streams (1 without streams).", "Requests in flight", "--concurrency", default=1,
         annotation="int", ordered=True, stage="point", every_backend=True, in_name="{value} in flight",
         name_over=1, name_rank=42, column_rank=8, legacy_key=True, always_shown=True, place="scenario",
         guide="Requests each copy works on at once, e.g. 1,4; auto: one per OpenVINO stream."),
    Axis("rate", "rates", parse_rates, "Poisson arrival rates in requests/s (server scenario).", "Arrival rate (req/s)", "--rate",
         text_default="none", annotation="float | None", ordered=True, stage="point", every_backend=True,
         canonical=float, in_name="{value} req/s",
         roles=("serving", "compare", "name"), legacy_key=True,  # a Poisson point of a configuration, not another one
         place="scenario", guide="Requests arriving at random (Poisson) at this many per second, e.g. 50,200, as from "
         "real users; none: each request starts as soon as the last one ends."),
    Axis("seq_len", "seq_lens", whole_numbers("Sequence length", 10**7), "Sequence lengths: sizes of the dynamic "
         "non-batch dimensions, e.g. 32,128,384 (one sweep axis).", "Sequence lengths", "--dynamic-size",
         generated_option=False, text_default="", ordered=True, stage="point", every_backend=True, searched=False,
         in_name="length {value}", roles=("compare", "name"), header="Sequence length",
         name_rank=2,  # the workload first: what was measured, then how  # the workload, not the deployment
         place="main", guide="For text models: the token lengths to measure, e.g. 32,128,384 (each is a point of its "
         "own). Leave empty for image models."),
    Axis("shape", "shapes", _shapes, "Input shapes as a sweep axis, each NAME=1x3x224x224 (several inputs joined by "
         "';'), e.g. image=1x3x224x224 and image=1x3x320x320.", "Shape", "--shape", generated_option=False,
         text_default="", annotation="str | None", stage="point", every_backend=True, searched=False,
         roles=("compare",), header="Input shape", name_rank=3, place=""),
    Axis("batch_size", "batch_sizes", whole_numbers("Batch size", MAX_BATCH, auto=False), "Batch sizes, e.g. "
         "1,8,32.", "Batch sizes", "--batch", default=1, sweep_default=(1,), text_default="1", annotation="int",
         ordered=True, stage="point", every_backend=True, in_name="batch {value}", name_rank=10, header="Batch",
         column_rank=2, legacy_key=True, always_shown=True, place="main",
         guide="Requests grouped into one inference, e.g. 1,8,32; bigger batches raise throughput and latency together."),
)


@dataclasses.dataclass(frozen=True)
class SpecOption:
    """A SweepSpec field that is not an axis (it shapes the whole sweep): parsed and documented here too."""

    name: str
    parse: object
    help: str
    default: object
    annotation: str
    schema: dict


def _flag(value) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"allow_oversubscribe takes true or false; got {value!r}.")
    return value


SPEC_OPTIONS: tuple[SpecOption, ...] = (
    SpecOption("allow_oversubscribe", _flag, "Run instances x cores beyond this machine's cores.", False, "bool",
               {"type": "boolean"}),
    SpecOption("repeats", parse_repeats, "Rounds per configuration, each in a fresh worker, interleaved in a "
               "shuffled order; results give the median and a 95% interval.", 1, "int",
               {"type": ["integer", "string"]}),
)


def all_axes() -> tuple[Axis, ...]:
    """Every axis: the workbench's and each registered backend's (each once), in nesting order."""
    seen: dict[str, Axis] = {a.name: a for a in GENERIC}
    for name in registry.names():
        for a in registry.get(name).axes:
            if a.name in seen and seen[a.name] is not a:
                raise ConfigError(f"The {name} backend declares the axis {a.name}, which another already declares; "
                                  f"read it through `settings` instead.")
            seen[a.name] = a
    return tuple(sorted(seen.values(), key=lambda a: STAGES.index(a.stage)))


def axis(name: str) -> Axis:
    """An axis by its RunConfig field or its SweepSpec field."""
    for a in all_axes():
        if name in (a.name, a.spec):
            return a
    raise KeyError(name)


def sweep_axes() -> tuple[Axis, ...]:
    """Every sweep axis, in nesting order (what the faces list as options and controls)."""
    return all_axes()


def generic(name: str) -> bool:
    """Whether a setting is the workbench's own (GENERIC), not one a backend declares."""
    return any(a.name == name for a in GENERIC)


def with_role(role: str) -> tuple[str, ...]:
    """The RunConfig fields of every axis with `role` (axis.ROLES), in the order a run's name and a
    table show them (`Axis.name_rank`, then the table's order)."""
    if role not in ROLES:
        raise KeyError(role)
    return tuple(a.name for a in sorted(all_axes(), key=lambda a: a.name_rank) if role in a.roles)


def result_columns() -> tuple[str, ...]:
    """The settings every results frame starts with, in their public order (`Axis.column_rank`)."""
    ranked = sorted((a for a in all_axes() if a.column_rank is not None), key=lambda a: a.column_rank)
    return tuple(a.name for a in ranked)


def legacy_fields() -> tuple[str, ...]:
    """The settings databases written before stable keys hashed (`Axis.legacy_key`)."""
    return tuple(a.name for a in all_axes() if a.legacy_key)


def run_settings() -> tuple[str, ...]:
    """Every setting of a point (each is part of its key), in the table's order."""
    return tuple(a.name for a in all_axes())


def backend_settings(backend: str) -> tuple[str, ...]:
    """The settings a deployment of `backend` carries beyond the workbench's own: those of its
    `settings` (its own axes among them) that no GENERIC axis declares, in the table's order."""
    reads = set(registry.get(backend).settings)
    return tuple(n for n in with_role("serving") if n in reads and not generic(n))


def readers(a: Axis) -> tuple[str, ...]:
    """The backends that read an axis."""
    return tuple(b for b in registry.names() if a.every_backend or a.name in registry.get(b).settings)


axis_readers = readers


def setting_flag(field: str) -> str | None:
    """The CLI option of a setting (a SweepSpec or RunConfig field, or an entry of options.OPTIONS), or
    None: how the CLI words errors and notes."""
    try:
        return axis(field).flag or None
    except KeyError:
        o = options.option(field)
        return o.flag if o else None


def setting_label(field: str) -> str | None:
    """The dashboard's label of a setting (the axes table, then options.OPTIONS), or None: how the
    dashboard words errors and notes."""
    try:
        return axis(field).label
    except KeyError:
        o = options.option(field)
        return o.label if o else None


def word_for_cli(text) -> str:
    """A message or note as the CLI says it: each setting it names as its flag."""
    return worded(text, setting_flag)


def word_for_dashboard(text) -> str:
    """A message or note as the dashboard says it: each setting it names as its label."""
    return worded(text, setting_label)


def field_help(name: str) -> str:
    """The help text of a SweepSpec field (an axis or a spec option), shared by the CLI, dashboard and docs."""
    for o in SPEC_OPTIONS:
        if o.name == name:
            return o.help
    try:
        a = axis(name)
    except KeyError:
        raise KeyError(name) from None
    return a.help.format(backends=", ".join(registry.names()))


# ---- the product of the axes: what SweepSpec.expand and size build ----

def _read_by(a: Axis, reads: set[str]) -> bool:
    return a.every_backend or a.name in reads


def combinations(spec, backend: str, placements: list[tuple], notes: set) -> Iterator[dict]:
    """The settings of every point `spec` asks of one backend, as RunConfig keyword arguments.

    Axes the backend does not read stay at their default. An axis with `unless` stays at its
    default while that other axis holds a value; a value above its `at_most` axis is dropped with
    its note added to `notes`; an auto value of an axis named by another's `fills_auto` takes that
    axis's value (else its own default).
    """
    reads = set(registry.get(backend).settings)
    inner = [a for a in all_axes() if a.stage in ("process", "point")]
    fillers = {a.fills_auto: a.name for a in all_axes() if a.fills_auto}
    defaults = {a.name: a.default for a in all_axes()}

    def walk(i: int, point: dict) -> Iterator[dict]:
        if i == len(inner):
            out = dict(point)
            for name, value in point.items():
                if value is None and defaults[name] is not None:  # auto where the field needs a value
                    out[name] = point.get(fillers.get(name, "")) or defaults[name]
            yield out
            return
        a = inner[i]
        values = getattr(spec, a.spec) if _read_by(a, reads) else [a.default]
        if a.unless and point.get(a.unless) is not None:
            values = [a.default]
        for v in values:
            limit = point.get(a.at_most) if a.at_most else None
            if v and limit and v > limit:
                notes.add((a.name, v, limit))
                continue
            yield from walk(i + 1, {**point, a.name: v})

    for prec in spec.precisions:
        for n, k, cores in placements:
            yield from walk(0, {"backend": backend, "precision": prec, "instances": n, "cores_per_instance": k,
                                "cores": cores})


def count(spec, backend: str, placements: int) -> int:
    """How many points `combinations` yields at most (drops by `at_most` not counted), without building them."""
    reads = set(registry.get(backend).settings)
    inner = [a for a in all_axes() if a.stage in ("process", "point")]
    gated = {a.unless for a in inner if a.unless}

    def walk(i: int, held: frozenset) -> int:
        if i == len(inner):
            return 1
        a = inner[i]
        values = getattr(spec, a.spec) if _read_by(a, reads) else [a.default]
        if a.unless in held:
            return walk(i + 1, held)
        if a.name in gated:
            unset = sum(1 for v in values if v is None)
            return unset * walk(i + 1, held) + (len(values) - unset) * walk(i + 1, held | {a.name})
        return len(values) * walk(i + 1, held)

    return len(spec.precisions) * placements * walk(0, frozenset())


def drop_notes(dropped: set) -> list[str]:
    """The sentences for values `combinations` dropped (their axis's `at_most_note`)."""
    out = []
    for name, value, limit in sorted(dropped):
        out.append(axis(name).at_most_note.format(value=value, limit=limit, s="s" if limit > 1 else ""))
    return out


def unread_notes(spec) -> list[str]:
    """A sentence for each backend setting asked for that no backend of the sweep reads (it is dropped)."""
    out = []
    for a in all_axes():
        if a.every_backend or getattr(spec, a.spec) == [a.default]:
            continue
        if not any(a.name in registry.get(b).settings for b in spec.backends):
            given = ", ".join("auto" if v is None else str(v) for v in getattr(spec, a.spec))
            who = ", ".join(readers(a)) or "no registered backend"
            out.append(f"{a.label} {given} left out: only {who} read{'s' if len(readers(a)) == 1 else ''} it, and "
                       f"this sweep measures {', '.join(spec.backends)}.")
    return out


# ---- the JSON schema of a spec file, generated from the table ----

SCALAR = {"type": ["string", "number", "boolean", "null"]}
MAX_LIST = 10000

_INT_RANGE = {"oneOf": [{"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
                        {"type": "string", "pattern": "^-?[0-9]+:-?[0-9]+$"}]}
INPUTS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "dynamic_size": {"type": ["integer", "null"]},
        "shapes": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"},
                                                             "minItems": 1, "maxItems": 32}},
        "int_range": _INT_RANGE,
        "int_ranges": {"type": "object", "additionalProperties": _INT_RANGE},
        "text": {"type": "string", "description": "A text file, one sample per line, tokenized into the model's "
                                                  "inputs (with tokenizer)."},
        "tokenizer": {"type": "string", "description": "The local tokenizer.json that tokenizes the text."},
    },
}


def spec_schema(measure_ranges: dict) -> dict:
    """The JSON Schema of a sweep spec file: every axis, every spec option, the measurement settings
    (`measure_ranges`: name -> (low, high, whole number, low excluded), MeasureSettings.RANGES) and
    the input options. Value ranges are checked by the parsers after it."""
    props: dict = {}
    for a in all_axes():
        props[a.spec] = {"description": field_help(a.spec),
                         "oneOf": [SCALAR, {"type": "array", "items": SCALAR, "maxItems": MAX_LIST}]}
    for o in SPEC_OPTIONS:
        props[o.name] = {"description": o.help, **o.schema}
    props["settings"] = {"type": "object", "additionalProperties": False,
                         "properties": {name: {"type": "integer" if whole else "number"}
                                        for name, (_, _, whole, _) in measure_ranges.items()}}
    props["inputs"] = INPUTS_SCHEMA
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://cpu-inference-workbench.invalid/schemas/sweep_spec.schema.json",
        "title": "Sweep spec",
        "description": "A sweep spec file (wb profile --spec): the sweep axes, plus optional measurement settings and "
                       "input options. Generated from the axes table (wb_core.axes); value ranges are checked by the "
                       "parsers after this schema.",
        "type": "object",
        "additionalProperties": False,
        "properties": props,
    }



# ---- text generation: the axes of a generation study (`wb generate`, `api.generate_profile`) ----

# Each weight format and its words in a run's name ("none": the model's own weights).
WEIGHT_FORMAT_WORDS = (("none", "the model's own"), ("int8_asym", "INT8"), ("int4_sym", "INT4 symmetric"),
                       ("int4_asym", "INT4 asymmetric"))
WEIGHT_FORMATS = tuple(f for f, _ in WEIGHT_FORMAT_WORDS)
GENERATION_RUNTIME = "OpenVINO GenAI"  # what measures a generation study, first in its runs' names
KV_CACHE_PRECISIONS = ("u8", "f16", "f32")
GENERATION_PRECISIONS = tuple(p for p in PRECISIONS if p not in precisions.from_data())  # INT8 weights: a weight format here


def _ratios(value) -> list:
    items = split_values(value) if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else [value]
    out = []
    for v in items:
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ConfigError(f"The INT4 ratio takes numbers from 0 to 1 (the share of layers in INT4); got '{v}'.") from None
        if not 0 < f <= 1:
            raise ConfigError(f"The INT4 ratio takes numbers above 0 and at most 1 (the share of layers in INT4); got {f}.")
        out.append(f)
    return unique_values(out) or [1.0]


def _generic(name: str) -> Axis:
    return next(a for a in GENERIC if a.name == name)


# Threads, cores and requests in flight are the workbench's own axes, read as they are declared above.
GENERATION: tuple[Axis, ...] = (
    Axis("weight_format", "weight_formats", one_of("weight format", WEIGHT_FORMATS), "Weight compression by NNCF: "
         "none (the model's own), int8_asym, int4_sym, int4_asym.", "Weight formats", "--weight-format",
         default="none", sweep_default=("none",), text_default="none", annotation="str", choices=WEIGHT_FORMATS,
         stage="variant", in_name="{value} weights", words=WEIGHT_FORMAT_WORDS, unset_name="the model's own weights",
         name_rank=1),
    Axis("group_size", "group_sizes", whole_numbers("INT4 group size", 1 << 16, auto=False), "Weights per INT4 "
         "scale (must divide the hidden size), e.g. 32,64.", "INT4 group sizes", "--group-size", default=32,
         sweep_default=(32,), text_default="32", annotation="int", ordered=True, stage="variant",
         in_name="groups of {value}", applies_when=("weight_format", "int4"), name_rank=2),
    Axis("ratio", "ratios", _ratios, "Share of the layers compressed to INT4 (the rest INT8), e.g. 0.8,1.",
         "INT4 ratios", "--ratio", default=1.0, sweep_default=(1.0,), text_default="1", annotation="float",
         ordered=True, stage="variant", canonical=float, in_name="INT4 share {value}", name_under=1,
         applies_when=("weight_format", "int4"), name_rank=3),
    Axis("inference_precision", "inference_precisions", one_of("inference precision", GENERATION_PRECISIONS),
         "Activations: fp32, or bf16 where the CPU has it.", "Inference precisions", "--inference-precision",
         default="fp32", sweep_default=("fp32",), text_default="fp32", annotation="str", choices=GENERATION_PRECISIONS,
         becomes="OpenVINO's INFERENCE_PRECISION_HINT", in_name="{VALUE} activations", name_rank=4),
    Axis("kv_cache_precision", "kv_cache_precisions", one_of_or_none("KV-cache precision", KV_CACHE_PRECISIONS),
         "KV-cache precision: u8, f16, f32, or none for the plugin's default.", "KV-cache precisions",
         "--kv-cache-precision", text_default="none", annotation="str | None", choices=KV_CACHE_PRECISIONS,
         becomes="OpenVINO's KV_CACHE_PRECISION", in_name="KV cache {VALUE}", name_rank=5),
    _generic("cores"),
    _generic("threads"),
    Axis("cache_size_gb", "cache_sizes_gb", whole_numbers("Scheduler cache size (GB)", 1024), "KV-cache pool of the "
         "continuous-batching scheduler in GB (requests in flight above 1), e.g. 1,2; auto: the pipeline's.",
         "Scheduler cache (GB)", "--cache-size", ordered=True, becomes="SchedulerConfig.cache_size",
         in_name="{value} GB KV pool", name_rank=30),
    Axis("prompt_len", "prompt_lens", whole_numbers("Prompt length", 1 << 20, auto=False), "Prompt tokens per "
         "request, e.g. 32,128.", "Prompt lengths", "--prompt-len", default=32, sweep_default=(32,), text_default="32",
         annotation="int", ordered=True, stage="point", searched=False, in_name="{value}-token prompts", name_rank=6),
    Axis("output_len", "output_lens", whole_numbers("Output length", 1 << 20, auto=False), "Tokens generated per "
         "request (greedy), e.g. 16,64.", "Output lengths", "--output-len", default=32, sweep_default=(32,),
         text_default="32", annotation="int", ordered=True, stage="point", searched=False, in_name="{value} tokens out",
         name_rank=7),
    _generic("concurrency"),
    _generic("rate"),  # requests arriving at random (Poisson), at most `concurrency` of them in flight
)


def generation_axes() -> tuple[Axis, ...]:
    """The axes of a generation study, in the order a command lists them."""
    return GENERATION
