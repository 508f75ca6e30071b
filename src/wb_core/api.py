"""The public Python API in a few calls: `profile`, `pipeline_profile`, `train_profile`, `load_results`,
`inspect_model`, `hardware_info`."""

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


def pipeline_profile(model: str | Path, source: str | Path, *, db: str | Path | None = None, study: str | None = None,
                     pre_workers="0,1", pre_cores="none", infer_cores="none", queue_depth="auto", backends="openvino",
                     precisions="fp32", batch_sizes="1", threads="auto", inter_op_threads="auto", streams="auto",
                     concurrency="1", hints="none", onednn="auto", passes: int = 1, decode_threads: int = 1,
                     image_size=None, image_scale: str = "unit", channels: int | None = None, layout: str = "auto",
                     data=None, inputs: InputOptions | None = None, progress: bool = False,
                     on_point: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
                     timeout_s: float | None = None, return_frame: bool = True):
    """Profile the whole serving pipeline: decode and preprocess in N processes feeding inference.

    `source` is a video file or a folder of images and/or videos. `pre_workers` counts the
    preprocessing processes (0 = the serial loop); `pre_cores` / `infer_cores` pin each side;
    the inference settings are those of `profile`. Preprocessing resizes to `image_size` (default:
    the model input's size), scales (`unit`, `raw`, `symmetric`) and lays frames out as the model
    wants. Rows (one per arrangement) carry frames/s, per-frame latency, time per stage, queue
    occupancy, the bottleneck side and CPU use per side (see docs/pipeline-and-training.md).
    """
    from wb_core.data import ImageOptions
    from wb_core.pipeline import PipelineSpec, run_pipeline

    path = resolve_model(model)
    spec = PipelineSpec(pre_workers=pre_workers, pre_cores=pre_cores, infer_cores=infer_cores, queue_depth=queue_depth,
                        backends=backends, precisions=precisions, batch_sizes=batch_sizes, threads=threads,
                        inter_op_threads=inter_op_threads, streams=streams, concurrency=concurrency, hints=hints,
                        onednn=onednn, passes=passes, decode_threads=decode_threads)
    size = ImageOptions.parse_size(str(image_size)) if image_size is not None else None
    image = ImageOptions(size=size, scale=image_scale, channels=channels, layout=layout)
    db = db or default_db()
    study = study or f"{default_study_name(path)}-pipeline"
    summary = run_pipeline(path, source, spec, db, study, image=image, inputs=inputs, data=data, on_point=on_point,
                           progress=progress, cancel=cancel, timeout_s=timeout_s)
    return load_results(db, study) if return_frame else summary


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
    from wb_core.demo import DEMOS, ensure_demo
    from wb_core.training import TrainSpec, run_training

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
    return load_results(db, study) if return_frame else summary


def hardware_info():
    from wb_core.hardware import detect

    return detect()


__all__ = ["profile", "load_results", "inspect_model", "hardware_info", "compare_hosts", "pipeline_profile",
           "train_profile", "SweepSummary"]
