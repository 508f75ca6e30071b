"""The public Python API: what the workbench does, as verbs, and the types they take and return
(docs/api.md lists them; tests/test_api_surface.py keeps the two the same).

Verbs are defined here or re-exported from the module that owns them and load on first use, so
`import wb_core.api` stays cheap. The store, the sweep runners, the converter and the registries
stay inside. What the `wb` command and the dashboard share beyond the verbs (checks of typed input,
words, choices) is their own kit, `wb_core.faces`, not this API.

Measure:   inspect_model, hardware_info, describe_hardware, available_cpus, list_backends, default_configs,
           preview_sweep, profile, tune, confirm, compare_configs, find_max_rate, layer_profile, serve_check,
           pipeline_profile, train_profile, generate_profile, generation_quality
Read:      results (one reader; `view` chooses runs, stored, efficiency, probes, measurements, outputs),
           studies, study_info, run_config
Decide:    recommend, recommend_training, recommend_generation, capacity, plan_allocation, verify_allocation,
           compare_hosts
Compare:   compare_runs, layer_diff, precision_losses
Share:     export, render, deployment_for_study, export_generation, write_report; figures in plots,
           pipeline_plots, training_plots
Inputs:    resolve_model, ensure_demo, demo_sample_text, convert_to_ir, sample_video, frame_geometry,
           write_fashion_npz, write_lenet5
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from wb_core.config import InputOptions, MeasureSettings, SweepSpec, parse_seq_lens, parse_shape_axis
from wb_core.demo import resolve_model
from wb_core.demo_catalog import default_study_name
from wb_core.errors import (  # noqa: F401 - public
    ConfigError,
    ModelError,
    StoreError,
    WorkbenchError,
    WorkerError,
    printable,
)
from wb_core.paths import default_db, write_output_file
from wb_core.run_options import RunOptions
from wb_core.sweep.context import SweepSummary  # noqa: F401 - public

if TYPE_CHECKING:
    from wb_core.config import RunConfig
    from wb_core.variants.description import ModelDescription

# Re-exported names -> the module that owns them (loaded on first use).
_REEXPORTS = {
    # what the verbs take
    "RunConfig": "wb_core.config", "PrecisionOptions": "wb_core.variants.planner", "ImageOptions": "wb_core.data",
    "Constraints": "wb_core.analysis.recommend",
    # what they return or raise
    "ModelDescription": "wb_core.variants.description", "Recommendation": "wb_core.analysis.recommend",
    "NoRunMeetsConstraints": "wb_core.analysis.recommend", "Allocation": "wb_core.analysis.planning",
    "CapacityPlan": "wb_core.analysis.planning", "LayerProfile": "wb_core.analysis.layers",
    "LayerDiff": "wb_core.analysis.compare", "ServeCheckResult": "wb_core.export.servecheck",
    "SweepPreview": "wb_core.sweep.preview",
    # measure
    "available_cpus": "wb_core.config", "preview_sweep": "wb_core.sweep.preview",
    # decide and compare
    "recommend": "wb_core.analysis.recommend", "plan_allocation": "wb_core.analysis.planning",
    "verify_allocation": "wb_core.analysis.planning", "capacity": "wb_core.analysis.planning",
    "compare_runs": "wb_core.analysis.compare", "layer_diff": "wb_core.analysis.compare",
    "recommend_training": "wb_core.training",
    # share
    "write_report": "wb_core.report", "export": "wb_core.export", "render": "wb_core.export",
    "deployment_for_study": "wb_core.export", "FORMATS": "wb_core.export",
    # inputs and demos
    "ensure_demo": "wb_core.demo", "demo_sample_text": "wb_core.demo_catalog",
    "write_fashion_npz": "wb_core.training.examples", "write_lenet5": "wb_core.training.examples",
    "sample_video": "wb_core.pipeline.samples", "frame_geometry": "wb_core.pipeline.source", "SCALES": "wb_core.data",
}
_MODULES = {"plots": "wb_core.plots", "pipeline_plots": "wb_core.pipeline.plots",
            "training_plots": "wb_core.training.plots"}


def lazy_exports(module: str, namespace: dict, names: dict[str, str], modules: dict[str, str] | None = None):
    """A module's `__getattr__` that loads `names` (name -> owning module) and `modules` (name -> a
    whole module) on first use and keeps each in `namespace`: how this API and the faces' kit stay
    cheap to import."""
    modules = modules or {}

    def __getattr__(name: str):
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
        elif name in modules:
            value = importlib.import_module(modules[name])
        else:
            raise AttributeError(f"module '{module}' has no attribute '{name}'")
        namespace[name] = value
        return value

    return __getattr__


__getattr__ = lazy_exports(__name__, globals(), _REEXPORTS, _MODULES)


def __dir__():
    return sorted(__all__)


def profile(model: str | Path, spec: SweepSpec | None = None, *, settings: MeasureSettings | None = None,
            inputs: InputOptions | None = None, precision_options=None, run: RunOptions | None = None,
            db: str | Path | None = None, study: str | None = None, progress: bool = False,
            on_point: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
            return_frame: bool = True, **shorthand):
    """Sweep a model (a path or a demo name) and return its results as a DataFrame.

    What to sweep is a `SweepSpec` (`spec`; e.g. from `load_spec_file`); how each point is measured,
    `settings` (a `MeasureSettings`); what feeds the model, `inputs` (an `InputOptions`); the data,
    metric, accuracy guard and INT8 recipe of the precision variants, `precision_options` (a
    `PrecisionOptions`); how the study runs (grid or smart search, interval target, cluster, worker
    limits), `run` (a `RunOptions`). The model is read once (`inspect_model`) and that description
    is what every later step reads. Points already stored in the study are skipped.

    Any field of those five may also be given by name, which is shorter in a notebook:
    `profile("lenet-digits", batch_sizes="1,8", threads="1,2", max_time=2, data="demo:lenet-digits")`.
    A sweep axis takes a list or a comma-separated string (`cores="none,0,0-1"`); one given by name
    replaces that axis of `spec`. `max_time` is `MeasureSettings.max_time_s`; `text`/`tokenizer` are
    `InputOptions` fields; `calib_size` and `accuracy_guard` are `PrecisionOptions.subset_size` and
    `guard`. A backend's own settings go by their SweepSpec names (`sweep_axes()`), e.g.
    `execution_modes="sequential,parallel"`. `seq_lens="32,128,384"` sweeps the sequence length of a
    text model; `shapes` sweeps input shapes (["image=1x3x224x224", "image=1x3x320x320"]).

    The frame has the columns `wb results` shows (`vs_fp32`, `tied_with_best` included) and, in
    `df.attrs["notes"]`, the notes the CLI prints: the text summary, which output accuracy reads,
    points measured on a busy machine, precisions that ran slower than FP32.

    Precision variants and accuracy (see docs/precision-and-accuracy.md): `data` is a path (.npz,
    image folder, `demo:NAME`), a `wb_core.data.Dataset`, `(x, y)`, an array, a dict of arrays named
    after the model's inputs (plus optional `y`), an iterable of samples or of such dicts, or a
    callable returning any of these. Without labels, accuracy is each variant's metric against the
    FP32 variant's outputs (cosine by default). The accuracy guard ("auto": cosine to FP32 >= 0.99,
    top-1 within 1 point) marks INT8 and BF16 variants that miss it as "accuracy failed", never
    recommended.

    Real text: `text` (a file, one sample per line) and `tokenizer` (a local tokenizer.json) fill
    the model's token inputs by name, padded or truncated to each sequence length; the text is then
    the measured inputs, the INT8 calibration data and the accuracy data, in place of `data`.

    `repeats=N` measures every configuration in N interleaved rounds, each in a fresh worker; the
    results then carry the median, a 95% interval and the CV of throughput and p99 per config.
    Every point records what else ran on its cores while it was measured and is flagged `busy`
    beyond a threshold (see docs/noise.md).
    """
    from wb_core.variants.description import describe_model

    _check_callbacks("profile", on_point=on_point, cancel=cancel)
    spec, settings, inputs, precision, run = _profile_request(spec, settings, inputs, precision_options, run,
                                                              shorthand)
    path = resolve_model(model)
    from wb_core.generation.folder import looks_like_generation

    if looks_like_generation(path):
        raise ModelError(f"'{path}' is a text-generation model: its speed is time to first token and per output token, "
                         f"which generate_profile (wb generate) measures, not a model call.")
    if inputs.text is None and inputs.tokenizer is None:
        from wb_core.demo_catalog import demo_name_of, demo_sample_text

        own = demo_sample_text(demo_name_of(path))
        if own and precision.data in (None, f"demo:{demo_name_of(path)}"):  # a text demo's own data is its text
            inputs = dataclasses.replace(inputs, text=str(own[0]), tokenizer=str(own[1]))
            precision = dataclasses.replace(precision, data=None)
    if inputs.text:
        from wb_core.streams import stream_to_file

        # Standard input or a pipe is read once, here: every sweep context after reads the copy.
        inputs = dataclasses.replace(inputs, text=str(stream_to_file(inputs.text, "The text")))
    if run.cluster and spec.repeats > 1:
        raise ConfigError("Repeated rounds run on this machine; leave out the cluster, or measure once.")
    db = db or default_db()
    study = study or default_study_name(path)
    described = describe_model(path, run.timeout_s)  # read once: every step after reads this description
    common = dict(settings=settings, inputs=inputs, on_point=on_point, progress=progress, cancel=cancel,
                  precision=precision, timeout_s=run.timeout_s, memory_limit_mb=run.memory_limit_mb,
                  remeasure_busy=run.remeasure_busy, ci_target=run.ci_target, max_rounds=run.max_rounds)
    if not run.searches:
        from wb_core.fleet.cli_support import open_executor
        from wb_core.sweep.local import run_sweep

        with open_executor(run.cluster, run.hosts, run.ship_model) as executor:
            summary = run_sweep(described, spec, db, study, executor=executor, **common)
    else:
        from wb_core.sweep.search import run_search

        summary = run_search(described, spec, db, study, search=run.search, p99_ms=run.p99_ms, budget=run.budget,
                             **common)
    return _frame(db, study, summary) if return_frame else summary


# Shorthand names that differ from the field they set: name -> (which object, its field).
_SHORTHAND_ALIASES = {"max_time": ("settings", "max_time_s"), "calib_size": ("precision", "subset_size"),
                      "accuracy_guard": ("precision", "guard")}


def _profile_request(spec, settings, inputs, precision, run, shorthand: dict):
    """The five objects `profile` runs on, with every keyword given by name set on the one that declares it."""
    from wb_core.variants.planner import PrecisionOptions

    _check_kinds("profile", spec=spec, settings=settings, inputs=inputs, precision_options=precision, run=run)
    objects = {"spec": spec or SweepSpec(), "settings": settings or MeasureSettings(),
               "inputs": inputs or InputOptions(), "precision": precision or PrecisionOptions(),
               "run": run or RunOptions()}
    fields = {kind: {f.name for f in dataclasses.fields(obj)} for kind, obj in objects.items()}
    given: dict[str, dict] = {kind: {} for kind in objects}
    for name, value in shorthand.items():
        kind, field_name = _SHORTHAND_ALIASES.get(name, (None, name))
        kind = kind or next((k for k, names in fields.items() if name in names), None)
        if kind is None:
            import difflib

            known = sorted(set().union(*fields.values()) | set(_SHORTHAND_ALIASES))
            close = difflib.get_close_matches(name, known, n=1)
            raise TypeError(f"profile() got an unexpected keyword argument '{name}'"
                            + (f"; did you mean '{close[0]}'?" if close else "."))
        if value is None:
            continue  # None by name is the field's default (as `input_map=None` always was)
        if kind == "spec":
            value = parse_seq_lens(value) if name == "seq_lens" else _shape_axis(value) if name == "shapes" else value
        given[kind][field_name] = value
    return tuple(dataclasses.replace(obj, **given[kind]) if given[kind] else obj for kind, obj in objects.items())


def _option_kinds() -> dict[str, type]:
    """The options object each keyword of the verbs takes."""
    from wb_core.variants.planner import PrecisionOptions

    return {"spec": SweepSpec, "settings": MeasureSettings, "inputs": InputOptions,
            "precision_options": PrecisionOptions, "run": RunOptions}


def _check_kinds(verb: str, **given) -> None:
    """Each options object given to `verb` is of the kind its keyword takes (None: the defaults), so
    that one in the wrong place is one sentence naming where it goes, before any work."""
    kinds = _option_kinds()
    for name, value in given.items():
        kind = kinds[name]
        if value is None or isinstance(value, kind):
            continue
        home = next((k for k, t in kinds.items() if isinstance(value, t)), None)
        where = "its second argument" if (verb, name) == ("profile", "spec") else name
        raise ConfigError(f"{verb}() takes {_article(kind.__name__)} {kind.__name__} as {where}, not {_a(value)}"
                          + (f"; pass it as {home}={type(value).__name__}(...)." if home else "."))


def _check_callbacks(verb: str, cancel=None, **callbacks) -> None:
    """Callbacks given to `verb` can be called, and `cancel` is an event (has is_set()): checked before
    any work, not when the first point arrives (by then it is stored, and the study stops half-done)."""
    for name, fn in callbacks.items():
        if fn is not None and not callable(fn):
            raise ConfigError(f"{verb}() takes a function as {name} (called with each {_CALLED_WITH.get(name, 'event')}),"
                              f" not {_a(fn)}.")
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise ConfigError(f"{verb}() takes a threading.Event as cancel (set it to stop the study), not {_a(cancel)}.")


_CALLED_WITH = {"on_point": "point as it is stored", "on_progress": "sentence saying what is being done"}


def _a(value) -> str:
    """`a RunOptions`, `an int (42)`: what a wrong value is, for a sentence."""
    kind = type(value).__name__
    shown = f" ({value!r})" if isinstance(value, (int, float, str, bool)) and len(repr(value)) <= 40 else ""
    return f"{_article(kind)} {kind}{shown}"


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _frame(db, study: str, summary):
    """The study's results as the CLI shows them, with the sweep's notes in `df.attrs["notes"]`."""
    from wb_core.analysis.results_view import annotated_results

    return annotated_results(db, study, notes=getattr(summary, "notes", ()))


def _with_notes(df, summary):
    df.attrs["notes"] = list(getattr(summary, "notes", ()))
    return df


def _shape_axis(shapes) -> list:
    if isinstance(shapes, str):
        single, axis = parse_shape_axis([shapes])
        return axis if axis != [None] else single
    return list(shapes) if shapes else [None]


def find_max_rate(model: str | Path, config, p99_ms: float, *, db: str | Path | None = None,
                  study: str | None = None, settings: MeasureSettings | None = None,
                  inputs: InputOptions | None = None, steps: int = 7, precision_options=None,
                  on_point: Callable[[dict], None] | None = None, probe_of: str | None = None) -> dict:
    """Highest Poisson arrival rate (requests/s) of one configuration whose p99 stays under `p99_ms`.

    Every probed rate is stored as a probe of the run `probe_of` (default: the run with `config`'s
    settings), kept apart from the study's runs (`results(..., view="probes")` lists them), and, once
    stored, passed to `on_point` ({"key", "config", "status", "metrics", "error"}, as `profile`
    passes them). Returns {"best": {...} or None, "closed_loop_rate", ...}.
    """
    from wb_core.sweep.max_rate import find_max_rate as _find

    _check_kinds("find_max_rate", settings=settings, inputs=inputs, precision_options=precision_options)
    _check_callbacks("find_max_rate", on_point=on_point)
    path = resolve_model(model)
    return _find(path, config, p99_ms, db or default_db(), study or default_study_name(path), settings=settings,
                 inputs=inputs, steps=steps, precision=precision_options, on_point=on_point, probe_of=probe_of)


def default_configs(backends, batch_size: int = 1, seq_len: int | None = None, shape: str | None = None) -> dict:
    """What a user gets without tuning, by name: the defaults each backend declares in the registry
    (TensorFlow's default threads; OpenVINO untouched, which picks the precision: BF16 on BF16
    CPUs, and its LATENCY and THROUGHPUT hints with as many requests in flight as it asks for)."""
    from wb_core.analysis.confirm import default_configs as _defaults

    return _defaults(backends, batch_size, seq_len, shape)


def confirm(study: str, db: str | Path | None = None, *, rounds: int = 5, objective: str = "throughput",
            constraints=None, settings: MeasureSettings | None = None, allow_unmeasured_accuracy: bool = False,
            model: str | Path | None = None, progress: bool = False, precision_options=None,
            seq_len: int | None = None, max_configs: int | None = None, remeasure_busy: bool = True,
            design: str = "auto", max_s: float | None = None, margin: float | None = None) -> dict:
    """Measure the recommendation, its runner-up and the runtime's real defaults again (study
    `<study>-confirm`), and say what tuning is worth, with its interval.

    `design` "auto" (or "paired") measures the pick side by side in one worker with every
    configuration that differs from it only in what its compiled model is given, in alternating
    blocks, until each comparison's interval lies outside +-`margin` (a difference) or inside it
    (equivalent) or `max_s` seconds are spent (default: about what `rounds` fresh rounds would take,
    at most 30 s); the others (another runtime, other cores) keep `rounds` interleaved fresh rounds
    beside the pick (study `<study>-confirm-rounds`), and so does everything with "rounds". The
    verdict says which design measured what and why, and which of the three the rule concluded
    (`outcome`, `decisions`).

    Everything the study used is used again: the model file (which must be unchanged), data,
    calibration size, text and tokenizer, shapes and sequence length, measuring settings and the
    variant file itself (the INT8 IR it measured). The defaults are OpenVINO untouched (it picks
    the precision) and its LATENCY and THROUGHPUT hints with the requests it asks for, and
    TensorFlow's defaults for TensorFlow models, all at the pick's batch size and length; the pick's
    own variant under the THROUGHPUT hint is measured too. When no default is beaten beyond noise,
    the best default is recommended instead. `seq_len` confirms the pick for one sequence length.
    `max_configs` measures fewer configurations (the runner-up left out first, then the defaults the
    objective does not favour; the verdict names them). Rounds stored as measured on a busy machine
    are measured again once before the verdict (`remeasure_busy`); the verdict says when it still
    rests on busy rounds.

    Returns {"recommended", "tuned", "defaults", "gain", "precision_gain", "tuning_gain",
    "same_variant_hint", "tuned_is_better", "verdict", "study", "frame", "busy", "failed", "design",
    "design_sentence", "outcome", "decisions", "paired"}; the
    gains are wb_core.stats.Ratio: tuned over the best default; the pick's variant under the hint
    over the best default (what the precision buys); tuned over that (what tuning buys).
    """
    from wb_core.analysis.confirm import confirm_study

    _check_kinds("confirm", settings=settings, precision_options=precision_options)
    return confirm_study(study, db or default_db(), rounds=rounds, objective=objective, constraints=constraints,
                         settings=settings, allow_unmeasured_accuracy=allow_unmeasured_accuracy, model=model,
                         progress=progress, precision_options=precision_options, seq_len=seq_len,
                         max_configs=max_configs, remeasure_busy=remeasure_busy, design=design, max_s=max_s,
                         margin=margin)


def compare_configs(model: str | Path, a: RunConfig, b: RunConfig, *, db: str | Path | None = None,
                    study: str = "compare", objective: str = "throughput", max_s: float = 30.0,
                    margin: float | None = None, design: str = "auto", rounds: int = 5,
                    settings: MeasureSettings | None = None, inputs: InputOptions | None = None,
                    precision_options=None, progress: bool = False) -> dict:
    """How many times better configuration `b` is than `a` on the objective, measured now (study
    `study`), with its 95% interval and the stopping rule's answer.

    When the two differ only in what a compiled model or session is given, both are loaded side by
    side in one worker and run in alternating blocks (balanced random order, each block's start left
    out) until the ratio's interval lies outside +-`margin` (a difference), inside it (equivalent),
    or `max_s` seconds are spent (undecided); otherwise (other cores, another runtime, thread variables
    read at start), or with `design="rounds"`, in `rounds` interleaved fresh rounds. Returns {"design",
    "design_sentence", "ratio" (wb_core.stats.Ratio, B over A), "decision", "outcome", "sentence",
    "cycles", "elapsed_s", "study"}; every block or round is stored in the study as it is measured.
    """
    from wb_core.analysis.side_by_side import compare_configs as _compare

    _check_kinds("compare_configs", settings=settings, precision_options=precision_options)
    return _compare(resolve_model(model), a, b, db=db or default_db(), study=study, objective=objective, max_s=max_s,
                    margin=margin, design=design, rounds=rounds, settings=settings, inputs=inputs,
                    precision_options=precision_options, progress=progress)


def tune(model: str | Path, *, time_budget="3m", db: str | Path | None = None, study: str | None = None,
         settings: MeasureSettings | None = None, inputs: InputOptions | None = None, precision_options=None,
         batch_sizes=None, export_dir: str | Path | None = None, on_progress: Callable[[str], None] | None = None,
         progress: bool = False, cancel=None, data=None, text: str | Path | None = None,
         tokenizer: str | Path | None = None, dynamic_size: int | None = None, calib_size: int | None = None):
    """From a model file to a confirmed, exported recommendation within `time_budget` (seconds, or
    "90s", "3m"): the smart search with one round per configuration, extra rounds only for the
    leaders and the runtime's THROUGHPUT hint (until they separate or fall within +-3%), accuracy
    measured when data is at hand, confirmation against the runtime's real defaults (both ratios:
    what the variant buys, what tuning buys), and the YAML export. `on_progress(sentence)` hears
    each phase. Returns a TuneResult whose `answer` says it all in words. A budget too small for one
    round of one configuration is refused in one sentence, before anything is measured. `cancel`
    (a threading.Event) stops it at any time: what was measured is kept and the answer rests on it.

    Takes the option objects `profile` takes: `inputs` (its `text`, `tokenizer`, `dynamic_size`) and
    `precision_options` (its `data` and `subset_size`, the calibration samples); `data`, `text`,
    `tokenizer`, `dynamic_size` and `calib_size` are shorthands for those fields.
    """
    from wb_core.tune import tune as _tune

    _check_kinds("tune", settings=settings, inputs=inputs, precision_options=precision_options)
    _check_callbacks("tune", on_progress=on_progress, cancel=cancel)
    if inputs is not None:
        text, tokenizer = _one_of("text", text, inputs.text), _one_of("tokenizer", tokenizer, inputs.tokenizer)
        dynamic_size = _one_of("dynamic_size", dynamic_size, inputs.dynamic_size)
    if precision_options is not None:
        data = _one_of("data", data, precision_options.data)
        calib_size = precision_options.subset_size if calib_size is None else calib_size
    if calib_size is None:
        from wb_core.variants.planner import DEFAULT_SUBSET

        calib_size = DEFAULT_SUBSET
    return _tune(model, time_budget=time_budget, db=db, study=study, data=data, text=text, tokenizer=tokenizer,
                 dynamic_size=dynamic_size, batch_sizes=batch_sizes, settings=settings, export_dir=export_dir,
                 on_progress=on_progress, calib_size=calib_size, progress=progress, cancel=cancel)


def _one_of(name: str, shorthand, field):
    """A setting given once, as a shorthand keyword or in its option object; both is one sentence."""
    if shorthand is not None and field is not None and shorthand != field:
        raise ConfigError(f"tune got {name} twice, as a keyword and in its options; give it once.")
    return shorthand if shorthand is not None else field


def inspect_model(model: str | Path, timeout_s: float | None = None) -> ModelDescription:
    """A model (a path or a demo name) read once: format, fingerprint, inputs, outputs, family and
    text roles (a `ModelDescription`). `profile` reads the same description and hands it on.
    A text-generation folder (or the demo generator) gives its own description instead."""
    from wb_core.generation.folder import looks_like_generation
    from wb_core.variants.description import describe_model

    if model == "text-generator" or looks_like_generation(model):
        from wb_core.generation.study import describe_generator

        return describe_generator(model, timeout_s)

    return describe_model(resolve_model(model), timeout_s)


def hardware_info():
    """This machine's CPU: model, cores, caches, ISA flags, microarchitecture and peak FLOP/s."""
    from wb_core.hardware import detect

    return detect()


def describe_hardware(hw=None) -> str:
    """`hardware_info()` as the text `wb hw` prints."""
    from wb_core.hardware import describe

    return describe(hw)


def list_backends() -> dict[str, str]:
    """The backends this workbench can measure with: name -> one-line description."""
    from wb_core.backends.registry import get, names

    return {n: get(n).description for n in names()}


# What `results` can give of a study, by `view` (one reader, one declaration of what it reads).
RESULT_VIEWS = {
    "runs": "its runs with the columns `wb results` shows (`vs_fp32`, `tied_with_best`) and its notes in "
            "`df.attrs['notes']`",
    "stored": "its runs as stored, public result columns first",
    "efficiency": "its runs as stored with per-core and %-of-peak columns",
    "probes": "the arrival rates max-rate searches tried, each naming the run it probed in `probe_of` (they are "
              "never among the runs)",
    "measurements": "its runs and its probes together (what a capacity plan rests on)",
    "outputs": "the accuracy guard's figures per output of each judged run, as the report shows them",
}


def results(study: str, db: str | Path | None = None, view: str = "runs"):
    """A study's results as a DataFrame; `view` chooses what (see RESULT_VIEWS): "runs" (default),
    "stored", "efficiency", "probes", "measurements" or "outputs"."""
    from wb_core import store

    if view not in RESULT_VIEWS:
        raise ConfigError(f"Unknown results view '{printable(view)}'; choose from {', '.join(RESULT_VIEWS)}.")
    db = db or default_db()
    if view == "runs":
        from wb_core.analysis.results_view import annotated_results

        return annotated_results(db, study)
    if view in ("stored", "probes"):
        return store.load_results(db, study, probes=view == "probes")
    if view == "measurements":
        return store.load_measurements(db, study)
    if view == "outputs":
        from wb_core.analysis.results_view import output_figures

        return output_figures(store.load_results(db, study))
    from wb_core.analysis.recommend import with_efficiency
    from wb_core.analysis.study_model import study_flops

    with store.Store(db, readonly=True) as s:
        info = s.get_study(study)
        df = s.to_frame(study)
    if info is None:
        raise StoreError(f"No study named '{study}' in '{db}'.")
    return with_efficiency(df, info.get("hardware"), study_flops(info) if not df.empty else None)


def studies(db: str | Path | None = None) -> list[dict]:
    """The studies in a database: name, model, when, how many runs ok and failed."""
    from wb_core.store import Store

    with Store(db or default_db(), readonly=True) as s:
        return s.list_studies()


def study_info(study: str, db: str | Path | None = None) -> dict:
    """What a study recorded about itself: model, format, hardware, versions, spec, inputs."""
    from wb_core.store import Store

    with Store(db or default_db(), readonly=True) as s:
        info = s.get_study(study)
    if info is None:
        raise StoreError(f"No study named '{study}' in '{db or default_db()}'.")
    return info


def run_config(study: str, key: str, db: str | Path | None = None):
    """The RunConfig a stored run measured."""
    from wb_core.store import Store

    with Store(db or default_db(), readonly=True) as s:
        return s.run_config(study, key)


def layer_profile(study: str, run_key: str, db: str | Path | None = None, iterations: int = 100,
                  reuse: bool = False):
    """Per-layer profile (OpenVINO performance counters) of one stored run, with that run's settings.

    `reuse`: return the profile stored for the run when there is one, and store the one measured.
    """
    from wb_core.analysis.layers import study_layer_profile

    return study_layer_profile(db or default_db(), study, run_key, iterations=iterations, reuse=reuse)


def precision_losses(study: str, db: str | Path | None = None, measure: bool = False,
                     iterations: int = 100) -> list[str]:
    """Why each reduced precision (INT8, BF16) that ran slower than FP32 did, in one sentence each:
    the layer types that took longer and what ran in which precision, from the layer profiles of the
    slowest such run and its FP32 twin. `measure` profiles (and stores) those the study lacks."""
    from wb_core.analysis.layers import check_iterations
    from wb_core.analysis.precision_loss import study_loss_notes

    return study_loss_notes(db or default_db(), study, measure=measure, iterations=check_iterations(iterations))


def compare_hosts(study: str, db: str | Path | None = None, prices: dict | None = None, objective: str = "throughput",
                  constraints=None):
    """A fleet study's hardware types side by side (best run, throughput per core, cost per million)."""
    from wb_core.fleet.compare import load_comparison, parse_prices

    return load_comparison(db or default_db(), study, constraints, objective, parse_prices(prices))[0]


def pipeline_profile(model: str | Path, source: str | Path, *, db: str | Path | None = None, study: str | None = None,
                     pre_workers="0,1", pre_cores="none", infer_cores="none", queue_depth="auto", passes: int = 1,
                     decode_threads: int = 1, image_size=None, image_scale: str = "unit", channels: int | None = None,
                     layout: str = "auto", data=None, inputs: InputOptions | None = None, progress: bool = False,
                     on_point: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
                     timeout_s: float | None = None, return_frame: bool = True, **inference):
    """Profile the whole serving pipeline: decode and preprocess in N processes feeding inference.

    `source` is a video file or a folder of images and/or videos. `pre_workers` counts the
    preprocessing processes (0 = the serial loop); `pre_cores` / `infer_cores` pin each side;
    the inference settings are those of `profile`, by SweepSpec field name in `inference` (`backends`,
    `batch_sizes`, `hints`, ...: every axis `pipeline_axes` lists). Preprocessing resizes to `image_size` (default:
    the model input's size), scales (`unit`, `raw`, `symmetric`) and lays frames out as the model
    wants. Rows (one per arrangement) carry frames/s, per-frame latency, time per stage, queue
    occupancy, the bottleneck side and CPU use per side (see docs/pipeline-and-training.md).
    """
    from wb_core.data import ImageOptions
    from wb_core.pipeline import PipelineSpec, run_pipeline

    _check_kinds("pipeline_profile", inputs=inputs)
    _check_callbacks("pipeline_profile", on_point=on_point, cancel=cancel)
    path = resolve_model(model)
    from wb_core.pipeline.study import inference_axes

    known = [a.spec for a in inference_axes()]
    for name in inference:
        if name not in known:
            import difflib

            close = difflib.get_close_matches(name, known, n=1)
            raise TypeError(f"pipeline_profile() got an unexpected keyword argument '{name}'"
                            + (f"; did you mean '{close[0]}'?" if close else "."))
    spec = PipelineSpec(pre_workers=pre_workers, pre_cores=pre_cores, infer_cores=infer_cores, queue_depth=queue_depth,
                        passes=passes, decode_threads=decode_threads, **inference)
    size = ImageOptions.parse_size(str(image_size)) if image_size is not None else None
    image = ImageOptions(size=size, scale=image_scale, channels=channels, layout=layout)
    db = db or default_db()
    study = study or f"{default_study_name(path)}-pipeline"
    summary = run_pipeline(path, source, spec, db, study, image=image, inputs=inputs, data=data, on_point=on_point,
                           progress=progress, cancel=cancel, timeout_s=timeout_s)
    return _with_notes(results(study, db, "stored"), summary) if return_frame else summary


def train_profile(model: str | Path, *, data=None, db: str | Path | None = None, study: str | None = None,
                  threads="auto", inter_op_threads="auto", omp_threads="auto", onednn="auto", cores="none",
                  batch_sizes="32", epochs: int = 2, steps: int | None = None, samples: int | None = None,
                  warmup_steps: int = 5, image_size=None, image_scale: str = "unit", progress: bool = False,
                  on_point: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
                  timeout_s: float | None = None, return_frame: bool = True):
    """Profile training: `model.fit` of a compiled Keras model against threads, cores and batch size.

    `data`: an .npz (`x_train`/`y_train` or `x`/`y`), an image folder of class subfolders,
    `demo:NAME`, or `(x, y)`; None trains on a synthetic set of the input's shape (`samples`
    samples). Each point runs `epochs` epochs after `warmup_steps` steps, in a fresh process.
    A demo name trains the demo's Keras file. Rows carry seconds per epoch, samples/s, step
    time, CPU use and samples/s per core;
    `wb_core.training.recommend_training(df)` says how many cores and threads to give each job.
    """
    from wb_core.data import ImageOptions
    from wb_core.demo import ensure_demo
    from wb_core.demo_catalog import DEMOS
    from wb_core.training import TrainSpec, run_training

    _check_callbacks("train_profile", on_point=on_point, cancel=cancel)
    # A demo trains from its compiled Keras file (what `profile` runs is its SavedModel).
    path = ensure_demo(model) / "model.keras" if isinstance(model, str) and model in DEMOS and not Path(model).exists() \
        else Path(model)
    spec = TrainSpec(threads=threads, inter_op_threads=inter_op_threads, omp_threads=omp_threads, onednn=onednn,
                     cores=cores, batch_sizes=batch_sizes, epochs=epochs, steps=steps, samples=samples,
                     warmup_steps=warmup_steps)
    size = ImageOptions.parse_size(str(image_size)) if image_size is not None else None
    db = db or default_db()
    study = study or f"{model if isinstance(model, str) and model in DEMOS else default_study_name(path)}-training"
    summary = run_training(path, spec, db, study, data=data, image=ImageOptions(size=size, scale=image_scale),
                           on_point=on_point, progress=progress, cancel=cancel, timeout_s=timeout_s)
    return _with_notes(results(study, db, "stored"), summary) if return_frame else summary


def serve_check(study: str, run: str, db: str | Path | None = None, **options):
    """Serve a run with a real tritonserver and measure it: a ServeCheckResult (served vs predicted).

    Options: max_time, port, tritonserver, out (see `wb serve-check`); the result is also stored.
    """
    from wb_core.export.servecheck import serve_check as _serve_check

    return _serve_check(db or default_db(), study, run, **options)


def convert_to_ir(model: str | Path) -> Path:
    """The model (a path or a demo name) as an OpenVINO IR `.xml`: converted once in a worker, then cached."""
    from wb_core.variants.convert import ensure_ir

    return ensure_ir(resolve_model(model))


def generate_profile(model: str | Path, *, db: str | Path | None = None, study: str | None = None, text=None,
                     requests: int = 8, warmup: int = 1, quality_guard: bool = True, min_top1: float | None = None,
                     on_point: Callable[[dict], None] | None = None, progress: bool = False,
                     cancel: threading.Event | None = None, timeout_s: float | None = None, return_frame: bool = True,
                     **axes):
    """Sweep a text-generation model (a GenAI folder, a Hugging Face folder, or "text-generator"):
    TTFT, TPOT, latency and tokens/s per configuration, one fresh pinned worker each, every point
    stored. `axes` are the `axes.GENERATION` spec fields (`threads="1,2"`, `weight_formats="none,int4_sym"`,
    ...). Returns the study's rows as a DataFrame."""
    from wb_core.generation.quality import DEFAULT_MIN_TOP1
    from wb_core.generation.spec import GenerationSpec
    from wb_core.generation.study import run_generation

    db = db or default_db()
    study = study or (model if model == "text-generator" else f"{default_study_name(model)}-generation")
    summary = run_generation(model, GenerationSpec(axes), db, study, text=text, requests=requests, warmup=warmup,
                             quality_guard=quality_guard, min_top1=DEFAULT_MIN_TOP1 if min_top1 is None else min_top1,
                             on_point=on_point, progress=progress, cancel=cancel, timeout_s=timeout_s)
    return _frame(db, study, summary) if return_frame else summary


def recommend_generation(study: str, db: str | Path | None = None, *, max_ttft_ms: float | None = None,
                         max_tpot_ms: float | None = None, max_latency_ms: float | None = None) -> dict:
    """A generation study's run with the most output tokens/s within p99 TTFT, TPOT and latency limits;
    quality-failed runs are never picked."""
    from wb_core.analysis.generation import recommend_generation as pick
    return pick(results(study, db, "stored"), max_ttft_ms=max_ttft_ms, max_tpot_ms=max_tpot_ms,
                max_latency_ms=max_latency_ms)


def generation_quality(reference: str | Path, candidate: str | Path, text=None, prompt_len: int = 32,
                       output_len: int = 16, prompts: int = 4) -> dict:
    """A candidate GenAI folder against a reference one on the prompts: greedy agreement, first
    divergence, teacher-forced top-1 agreement and mean KL (see `generation.quality`)."""
    from wb_core.generation.study import check_quality, prompt_lines, resolve_generator

    ref = resolve_generator(reference)
    return check_quality(ref, {"candidate": resolve_generator(candidate)}, prompt_lines(text, ref), prompt_len,
                         output_len, prompts)["candidate"]


def export_generation(run: dict, out: str | Path | None = None, name: str = "model", fmt: str = "ovms-llm") -> dict[str, str]:
    """OpenVINO Model Server's LLM graph (graph.pbtxt, config.json) and the deployment YAML for a
    generation run (a results row); written under `out` when given. Returns path -> text."""
    import shutil

    from wb_core.export.formats import GENERATION_EXPORTERS

    if fmt not in GENERATION_EXPORTERS:
        raise ConfigError(f"Unknown text-generation export format '{fmt}'; choose from {', '.join(GENERATION_EXPORTERS)}.")
    result = GENERATION_EXPORTERS[fmt].render_generation(dict(run), name)
    if out is not None:
        for rel, text in result.files.items():
            write_output_file(Path(out) / rel, text)
        for f in result.model_files:  # the GenAI folder the graph's models_path ("./") names
            shutil.copy2(f, Path(out) / name / Path(f).name)
    return result.files


__all__ = sorted([
    "inspect_model", "hardware_info", "describe_hardware", "list_backends", "default_configs",
    "profile", "tune", "confirm", "compare_configs", "find_max_rate", "layer_profile", "serve_check",
    "pipeline_profile", "train_profile", "generate_profile", "generation_quality",
    "results", "studies", "study_info", "run_config",
    "recommend_generation", "compare_hosts", "precision_losses", "export_generation", "convert_to_ir",
    "resolve_model", "SweepSpec", "MeasureSettings", "InputOptions", "RunOptions", "SweepSummary",
    "WorkbenchError", "ConfigError", "ModelError", "StoreError", "WorkerError",
    *_REEXPORTS, *_MODULES,
])
