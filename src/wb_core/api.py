"""The public Python API in a few calls: `profile`, `load_results`, `inspect_model`, `hardware_info`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from wb_core.config import InputOptions, MeasureSettings, SweepSpec
from wb_core.demo import demo_name_of, resolve_model
from wb_core.errors import ConfigError
from wb_core.paths import default_db
from wb_core.runner import SweepSummary, run_sweep
from wb_core.store import load_results


def default_study_name(model: str | Path) -> str:
    """`lenet-digits` for a demo, else the model's file or folder name."""
    p = Path(model)
    demo = demo_name_of(p)
    if demo:
        return demo
    return p.stem if p.is_file() else p.name


def profile(model: str | Path, *, db: str | Path | None = None, study: str | None = None,
            backends="openvino", precisions="fp32", batch_sizes="1", threads="auto",
            inter_op_threads="auto", streams="auto", cores="none", concurrency="1", hints="none",
            onednn="auto", cpu_pinning="auto", max_time: float = 10.0, settings: MeasureSettings | None = None,
            inputs: InputOptions | None = None, progress: bool = False,
            on_point: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
            return_frame: bool = True, data=None, preprocess: Callable | None = None, metric="auto",
            calib_size: int = 300, max_accuracy_drop: float | None = None, accuracy: bool = True,
            precision_options=None, search: str = "grid", p99_ms: float | None = None,
            budget: int | None = None, cluster: str | None = None, hosts=None, ship_model: bool = False):
    """Sweep a model (a path or a demo name) and return its results as a DataFrame.

    Every sweep argument takes a list or a comma-separated string, e.g. `threads="1,2"`,
    `cores="none,0,0-1"`, `batch_sizes=[1, 8]`. Points already stored in the study are skipped.

    Precision variants and accuracy (see docs/precision-and-accuracy.md): `data` is a path (.npz,
    image folder, `demo:NAME`), a `wb_core.data.Dataset`, `(x, y)`, an array or an iterable;
    `preprocess` runs on every sample; `metric` is top1, top5, mse, cosine, auto or a callable
    `(outputs, labels) -> float` (higher is better); `max_accuracy_drop` switches INT8 to
    accuracy-aware quantization. `precision_options` (a PrecisionOptions) overrides them all.
    `cluster` (a Dask scheduler address) runs the study on that cluster's hosts (or only `hosts`),
    once per hardware type; `ship_model` sends the model to hosts that do not share its path.

    `search="smart"` measures only part of the grid, climbing towards the highest throughput whose
    p99 stays under `p99_ms`, in at most `budget` configurations (see `wb_core.search`).
    """
    from wb_core.precision import PrecisionOptions

    path = resolve_model(model)
    spec = SweepSpec(backends=backends, precisions=precisions, batch_sizes=batch_sizes, threads=threads,
                     inter_op_threads=inter_op_threads, streams=streams, cores=cores, concurrency=concurrency,
                     hints=hints, onednn=onednn, cpu_pinning=cpu_pinning)
    settings = settings or MeasureSettings(max_time_s=max_time)
    db = db or default_db()
    study = study or default_study_name(path)
    prec = precision_options or PrecisionOptions(data=data, preprocess=preprocess, metric=metric,
                                                 subset_size=calib_size, max_accuracy_drop=max_accuracy_drop,
                                                 accuracy=accuracy)
    if search == "grid" and p99_ms is None and budget is None:
        from wb_core.fleet.cli_support import open_executor

        with open_executor(cluster, hosts, ship_model) as executor:
            summary = run_sweep(path, spec, db, study, settings=settings, inputs=inputs, on_point=on_point,
                                progress=progress, cancel=cancel, precision=prec, executor=executor)
    else:
        from wb_core.search import run_search

        if cluster:
            raise ConfigError("The smart search runs on this machine; leave out the cluster, or search with a grid.")
        summary = run_search(path, spec, db, study, search=search, p99_ms=p99_ms, budget=budget, settings=settings,
                             inputs=inputs, on_point=on_point, progress=progress, cancel=cancel, precision=prec)
    return load_results(db, study) if return_frame else summary


def inspect_model(model: str | Path):
    """Format and inputs of a model (a path or a demo name)."""
    from wb_core.models import detect_format
    from wb_core.variants import inspect_inputs

    path = resolve_model(model)
    return {"path": str(path), "format": detect_format(path), "inputs": inspect_inputs(path)}


def compare_hosts(study: str, db: str | Path | None = None, prices: dict | None = None, objective: str = "throughput",
                  constraints=None):
    """A fleet study's hardware types side by side (best run, throughput per core, cost per million)."""
    from wb_core.fleet.compare import load_comparison, parse_prices

    return load_comparison(db or default_db(), study, constraints, objective, parse_prices(prices))[0]


def hardware_info():
    from wb_core.hardware import detect

    return detect()


def serve_check(study: str, run: str, db: str | Path | None = None, **options):
    """Serve a run with a real tritonserver and measure it: a ServeCheckResult (served vs predicted).

    Options: max_time, port, tritonserver, out (see `wb serve-check`); the result is also stored.
    """
    from wb_core.export.servecheck import serve_check as _serve_check

    return _serve_check(db or default_db(), study, run, **options)


__all__ = ["profile", "load_results", "inspect_model", "hardware_info", "compare_hosts", "serve_check",
           "SweepSummary"]
