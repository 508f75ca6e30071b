"""The public Python API: every capability of the workbench, in one place.

The `wb` command, the dashboard and the notebooks use only this module. Functions that run
something are defined here; types, plots and helpers are re-exported from the module that owns
them and load on first use, so `import wb_core.api` stays cheap.

Measure:   profile, find_max_rate, inspect_model, hardware_info, describe_hardware, list_backends
Read:      results, studies, study_info, run_config, with_efficiency, successful, pareto_front, run_label
Decide:    recommend, Constraints, plan_allocation, verify_allocation, capacity, layer_profile
Share:     write_report, export, render, deployment_for_study, FORMATS, compare_hosts, plots
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from pathlib import Path

from wb_core.config import InputOptions, MeasureSettings, SweepSpec, check_number, check_timeout  # noqa: F401
from wb_core.demo import default_study_name, resolve_model
from wb_core.errors import (  # noqa: F401 - public
    ConfigError,
    ModelError,
    StoreError,
    WorkbenchError,
    WorkerError,
    printable,
)
from wb_core.paths import cache_dir, default_db  # noqa: F401 - public
from wb_core.store import load_results
from wb_core.sweep.context import SweepSummary  # noqa: F401 - public

# Re-exported names -> the module that owns them (loaded on first use).
_REEXPORTS = {
    # configuration
    "RunConfig": "wb_core.config", "load_spec_file": "wb_core.config", "available_cpus": "wb_core.config",
    "field_help": "wb_core.config", "PrecisionOptions": "wb_core.variants.planner", "ImageOptions": "wb_core.data",
    # demos
    "DEMOS": "wb_core.demo", "write_demo": "wb_core.demo", "ensure_demo": "wb_core.demo",
    # analysis
    "Constraints": "wb_core.analysis.recommend", "NoRunMeetsConstraints": "wb_core.analysis.recommend",
    "Recommendation": "wb_core.analysis.recommend", "OBJECTIVES": "wb_core.analysis.recommend",
    "recommend": "wb_core.analysis.recommend", "with_efficiency": "wb_core.analysis.recommend",
    "successful": "wb_core.analysis.recommend", "pareto_front": "wb_core.analysis.recommend",
    "pareto_mask": "wb_core.analysis.recommend", "run_label": "wb_core.analysis.recommend",
    "find_run": "wb_core.analysis.recommend", "check_objective": "wb_core.analysis.recommend",
    "study_flops": "wb_core.analysis.study_model",
    "Allocation": "wb_core.analysis.planning", "plan_allocation": "wb_core.analysis.planning",
    "verify_allocation": "wb_core.analysis.planning", "capacity": "wb_core.analysis.planning",
    "CapacityPlan": "wb_core.analysis.planning", "check_capacity_inputs": "wb_core.analysis.planning",
    "LayerProfile": "wb_core.analysis.layers", "profile_layers": "wb_core.analysis.layers",
    # sharing
    "write_report": "wb_core.report", "build_report": "wb_core.report",
    "export": "wb_core.export", "render": "wb_core.export", "deployment_for_study": "wb_core.export",
    "parse_formats": "wb_core.export", "EXPORTERS": "wb_core.export", "FORMATS": "wb_core.export",
    "with_capacity": "wb_core.export", "model_files": "wb_core.export.bundle", "zip_bundle": "wb_core.export.bundle",
    "load_serve_checks": "wb_core.export.servecheck", "ServeCheckResult": "wb_core.export.servecheck",
    # fleets
    "open_executor": "wb_core.fleet.cli_support", "load_comparison": "wb_core.fleet.compare",
    "config_by_host_type": "wb_core.fleet.compare", "parse_prices": "wb_core.fleet.compare",
    "select_host_type": "wb_core.fleet.compare", "by_type": "wb_core.fleet.hosts",
    "host_type_bars": "wb_core.fleet.plots", "host_type_scatter": "wb_core.fleet.plots",
    # the store, for tools that need more than results()
    "Store": "wb_core.store", "point_record": "wb_core.store", "results_frame": "wb_core.store",
}
_MODULES = {"plots": "wb_core.plots"}


def __getattr__(name: str):
    if name in _REEXPORTS:
        value = getattr(importlib.import_module(_REEXPORTS[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    else:
        raise AttributeError(f"module 'wb_core.api' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)


def profile(model: str | Path, *, db: str | Path | None = None, study: str | None = None,
            backends="openvino", precisions="fp32", batch_sizes="1", threads="auto",
            inter_op_threads="auto", streams="auto", cores="none", concurrency="1", hints="none",
            onednn="auto", cpu_pinning="auto", instances="1", cores_per_instance="auto", rates="none",
            allow_oversubscribe: bool = False, spec: SweepSpec | None = None,
            max_time: float = 10.0, settings: MeasureSettings | None = None,
            inputs: InputOptions | None = None, progress: bool = False,
            on_point: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
            return_frame: bool = True, data=None, preprocess: Callable | None = None, metric="auto",
            calib_size: int = 300, max_accuracy_drop: float | None = None, accuracy: bool = True,
            precision_options=None, search: str = "grid", p99_ms: float | None = None,
            budget: int | None = None, cluster: str | None = None, hosts=None, ship_model: bool = False,
            timeout_s: float | None = None, memory_limit_mb: int | None = None):
    """Sweep a model (a path or a demo name) and return its results as a DataFrame.

    Every sweep argument takes a list or a comma-separated string, e.g. `threads="1,2"`,
    `cores="none,0,0-1"`, `batch_sizes=[1, 8]`; `instances`/`cores_per_instance` start N pinned
    copies together, `rates` drives Poisson arrivals (server scenario). A ready `spec` (a
    SweepSpec, e.g. from `load_spec_file`) replaces the sweep arguments. Points already stored in
    the study are skipped. `timeout_s`: seconds a silent worker is given before it is killed.

    Precision variants and accuracy (see docs/precision-and-accuracy.md): `data` is a path (.npz,
    image folder, `demo:NAME`), a `wb_core.data.Dataset`, `(x, y)`, an array or an iterable;
    `preprocess` runs on every sample; `metric` is top1, top5, mse, cosine, auto or a callable
    `(outputs, labels) -> float` (higher is better); `max_accuracy_drop` switches INT8 to
    accuracy-aware quantization. `precision_options` (a PrecisionOptions) overrides them all.
    `cluster` (a Dask scheduler address) runs the study on that cluster's hosts (or only `hosts`),
    once per hardware type; `ship_model` sends the model to hosts that do not share its path.

    `search="smart"` measures only part of the grid, climbing towards the highest throughput whose
    p99 stays under `p99_ms`, in at most `budget` configurations (see `wb_core.sweep.search`).
    """
    from wb_core.variants.planner import PrecisionOptions

    path = resolve_model(model)
    check_timeout(timeout_s, "The worker timeout")
    if (hosts or ship_model) and not cluster:
        raise ConfigError("Choosing hosts or shipping the model needs a cluster address.")
    spec = spec or SweepSpec(backends=backends, precisions=precisions, batch_sizes=batch_sizes, threads=threads,
                             inter_op_threads=inter_op_threads, streams=streams, cores=cores, concurrency=concurrency,
                             hints=hints, onednn=onednn, cpu_pinning=cpu_pinning, instances=instances,
                             cores_per_instance=cores_per_instance, rates=rates,
                             allow_oversubscribe=allow_oversubscribe)
    settings = settings or MeasureSettings(max_time_s=max_time)
    db = db or default_db()
    study = study or default_study_name(path)
    prec = precision_options or PrecisionOptions(data=data, preprocess=preprocess, metric=metric,
                                                 subset_size=calib_size, max_accuracy_drop=max_accuracy_drop,
                                                 accuracy=accuracy)
    if search == "grid" and p99_ms is None and budget is None:
        from wb_core.fleet.cli_support import open_executor
        from wb_core.sweep.local import run_sweep

        with open_executor(cluster, hosts, ship_model) as executor:
            summary = run_sweep(path, spec, db, study, settings=settings, inputs=inputs, on_point=on_point,
                                progress=progress, cancel=cancel, precision=prec, executor=executor,
                                timeout_s=timeout_s, memory_limit_mb=memory_limit_mb)
    else:
        from wb_core.sweep.search import run_search

        if cluster:
            raise ConfigError("The smart search runs on this machine; leave out the cluster, or search with a grid.")
        summary = run_search(path, spec, db, study, search=search, p99_ms=p99_ms, budget=budget, settings=settings,
                             inputs=inputs, on_point=on_point, progress=progress, cancel=cancel, precision=prec,
                             timeout_s=timeout_s, memory_limit_mb=memory_limit_mb)
    return load_results(db, study) if return_frame else summary


def find_max_rate(model: str | Path, config, p99_ms: float, *, db: str | Path | None = None,
                  study: str | None = None, settings: MeasureSettings | None = None,
                  inputs: InputOptions | None = None, steps: int = 7, precision_options=None) -> dict:
    """Highest Poisson arrival rate (requests/s) of one configuration whose p99 stays under `p99_ms`.

    Every probed rate is stored as a point of the study. Returns {"best": {...} or None, ...}.
    """
    from wb_core.sweep.max_rate import find_max_rate as _find

    path = resolve_model(model)
    return _find(path, config, p99_ms, db or default_db(), study or default_study_name(path), settings=settings,
                 inputs=inputs, steps=steps, precision=precision_options)


def inspect_model(model: str | Path):
    """Format and inputs of a model (a path or a demo name)."""
    from wb_core.models import detect_format
    from wb_core.variants.convert import inspect_inputs

    path = resolve_model(model)
    return {"path": str(path), "format": detect_format(path), "inputs": inspect_inputs(path)}


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


def results(study: str, db: str | Path | None = None, efficiency: bool = False):
    """A study's runs as a DataFrame (public columns first); `efficiency` adds per-core and %-of-peak columns."""
    if not efficiency:
        return load_results(db or default_db(), study)
    from wb_core.analysis.recommend import with_efficiency
    from wb_core.analysis.study_model import study_flops
    from wb_core.store import Store

    with Store(db or default_db(), readonly=True) as s:
        info = s.get_study(study)
        df = s.to_frame(study)
    return with_efficiency(df, info.get("hardware"), study_flops(info))


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


def layer_profile(study: str, run_key: str, db: str | Path | None = None, iterations: int = 100):
    """Per-layer profile (OpenVINO performance counters) of one stored run, with that run's settings."""
    from wb_core.analysis.layers import study_layer_profile

    return study_layer_profile(db or default_db(), study, run_key, iterations=iterations)


def compare_hosts(study: str, db: str | Path | None = None, prices: dict | None = None, objective: str = "throughput",
                  constraints=None):
    """A fleet study's hardware types side by side (best run, throughput per core, cost per million)."""
    from wb_core.fleet.compare import load_comparison, parse_prices

    return load_comparison(db or default_db(), study, constraints, objective, parse_prices(prices))[0]


def serve_check(study: str, run: str, db: str | Path | None = None, **options):
    """Serve a run with a real tritonserver and measure it: a ServeCheckResult (served vs predicted).

    Options: max_time, port, tritonserver, out (see `wb serve-check`); the result is also stored.
    """
    from wb_core.export.servecheck import serve_check as _serve_check

    return _serve_check(db or default_db(), study, run, **options)


__all__ = sorted([
    "profile", "find_max_rate", "serve_check", "inspect_model", "hardware_info", "describe_hardware", "list_backends",
    "results", "studies", "study_info", "run_config", "layer_profile", "compare_hosts", "default_study_name",
    "load_results", "SweepSummary", "SweepSpec", "MeasureSettings", "InputOptions", "resolve_model",
    "default_db", "cache_dir", "ConfigError", "ModelError", "StoreError", "WorkbenchError", "WorkerError",
    "check_number", "check_timeout", "printable",
    *_REEXPORTS, *_MODULES,
])
