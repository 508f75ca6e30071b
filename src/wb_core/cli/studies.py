"""`wb pipeline` and `wb train-profile`: studies beyond the model call (thin; the work is in the API)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from wb_core.cli.app import app, echo, report_summary
from wb_core.cli.app import fail as _fail
from wb_core.cli.profiling import with_axis_options
from wb_core.faces import pipeline_axes

PIPELINE_TABLE = [("pre_workers", "pre"), ("pre_cores", "pre cores"), ("cores", "infer cores"), ("batch_size", "batch"),
                  ("threads", "threads"), ("streams", "streams"), ("concurrency", "infer thr"), ("frames", "frames"),
                  ("throughput", "frames/s"), ("latency_ms_p50", "p50 ms"), ("latency_ms_p99", "p99 ms"),
                  ("stage_ms_decode", "decode ms"), ("stage_ms_preprocess", "prep ms"), ("stage_ms_infer", "infer ms"),
                  ("queue_mean", "queue"), ("bottleneck", "bottleneck"), ("pre_cpu_util", "CPU pre"),
                  ("infer_cpu_util", "CPU infer"), ("status", "status")]
TRAINING_TABLE = [("batch_size", "batch"), ("threads", "intra"), ("inter_op_threads", "inter"), ("omp_threads", "omp"),
                  ("onednn", "onednn"), ("cores", "cores"), ("epoch_s", "s/epoch"), ("step_ms_p50", "step ms"),
                  ("throughput", "samples/s"), ("cpu_util_pct", "CPU %"), ("throughput_per_core", "samples/s/core"),
                  ("rss_mb", "peak MB"), ("status", "status")]



def _table(df, columns) -> str:
    if df.empty:
        return "(no runs)"
    cols = [(c, h) for c, h in columns if c in df.columns]
    view = df[[c for c, _ in cols]].copy()
    for c in view.columns:
        if view[c].dtype.kind == "f" or c in ("throughput", "epoch_s"):
            view[c] = view[c].astype(float).round(1 if c in ("throughput", "throughput_per_core", "rss_mb") else 3)
    view = view.astype(object)
    from wb_core.faces import sweep_axes

    # Left to the runtime: the settings whose unset value means auto (training's OMP threads too).
    auto = {a.name for a in sweep_axes() if a.text_default == "auto"} | {"omp_threads"}
    for c in view.columns:
        view[c] = view[c].where(view[c].notna(), "auto" if c in auto else "-")
    view.columns = [h for _, h in cols]
    return view.to_string(index=False)


def _write_figures(figs: dict, out: Path) -> None:
    html = "".join(f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figs.values()))
    out.write_text("<html><head><meta charset='utf-8'></head><body>" + html + "</body></html>", encoding="utf-8")


@app.command()
@with_axis_options(axes=pipeline_axes, spec_options=False)
def pipeline(
    model: str = typer.Argument(..., help="Model path (SavedModel dir, .keras, .onnx, .xml) or a demo name."),
    source: Path = typer.Option(..., "--source", help="A video file, or a folder of images and/or videos."),
    pre_workers: str = typer.Option("0,1", "--pre-workers", help="Decode/preprocess processes, e.g. 0,1,2 "
                                    "(0 = serial: decode, preprocess and infer in one loop)."),
    pre_cores: str = typer.Option("none", "--pre-cores", help="Cores of the preprocessing side: none, 0, 0-1, first2 "
                                  "(several: separate with ';')."),
    infer_cores: str = typer.Option("none", "--infer-cores", help="Cores of the inference side, as --pre-cores."),
    queue_depth: str = typer.Option("auto", "--queue-depth", help="Batches the queue holds (auto: 2 per pre-worker, "
                                    "at least 4)."),
    passes: int = typer.Option(1, "--passes", help="Times the source is read (for short sources)."),
    decode_threads: int = typer.Option(1, "--decode-threads", help="FFmpeg decoder threads per process (0: auto)."),
    image_size: Optional[str] = typer.Option(None, "--image-size", help="Resize frames to HxW (default: the model's "
                                             "input size)."),
    image_scale: str = typer.Option("unit", "--image-scale", help="Pixels: unit (0..1), raw (0..255), symmetric (-1..1)."),
    channels: Optional[int] = typer.Option(None, "--channels", help="1 (grey) or 3 (RGB); default: the model's."),
    layout: str = typer.Option("auto", "--layout", help="nhwc, nchw or auto (from the model input)."),
    data: Optional[str] = typer.Option(None, "--data", help="Calibration data for --precision int8."),
    study: Optional[str] = typer.Option(None, "--study", help="Study name (default: MODEL-pipeline)."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default: ./wb.db)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds a silent process is given before it is "
                                            "killed."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the study's figures to this HTML file."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or table."),
    **axes_given,
):
    """Profile the serving pipeline: decode/preprocess processes feeding inference through a bounded queue
    (the inference settings: every sweep setting of `wb profile` but the placement ones)."""
    from wb_core.api import pipeline_profile

    if timeout is not None and timeout <= 0:
        _fail(f"--timeout must be a positive number of seconds; got {timeout:g}.")
    summary = pipeline_profile(model, source, db=db, study=study, pre_workers=pre_workers, pre_cores=pre_cores,
                               infer_cores=infer_cores, queue_depth=queue_depth, passes=passes,
                               decode_threads=decode_threads, image_size=image_size, image_scale=image_scale,
                               channels=channels, layout=layout, data=data,
                               progress=not quiet, timeout_s=timeout, return_frame=False, **axes_given)
    from wb_core.api import results

    df = results(summary.study, summary.db, "stored")
    df = df[df.get("study_kind") == "pipeline"] if "study_kind" in df else df
    if not quiet:
        echo(_table(df, PIPELINE_TABLE))
        skipped = {s["path"]: s["reason"] for fs in df.get("files_skipped", []) if isinstance(fs, list) for s in fs}
        if skipped:
            echo(f"Skipped {len(skipped)} file(s): " + "; ".join(f"{p} ({r})" for p, r in list(skipped.items())[:5]))
    if plot:
        from wb_core.api import pipeline_plots

        pipeline_figures = pipeline_plots.pipeline_figures

        _write_figures(pipeline_figures(df), plot)
        echo(f"Wrote the figures to {plot}.")
    report_summary(summary)


@app.command("train-profile")
def train_profile(
    model: str = typer.Argument(..., help="A compiled Keras model file (.keras), or a demo name."),
    data: Optional[str] = typer.Option(None, "--data", help="Training data: .npz (x_train/y_train or x/y), a folder of "
                                       "class subfolders of images, demo:NAME; default: a synthetic set."),
    threads: str = typer.Option("auto", "--threads", help="Intra-op threads, e.g. auto,1,2."),
    inter_op_threads: str = typer.Option("auto", "--inter-op-threads", help="Inter-op threads, e.g. auto,1."),
    omp_threads: str = typer.Option("auto", "--omp-threads", help="OMP_NUM_THREADS values, e.g. auto,2."),
    onednn: str = typer.Option("auto", "--onednn", help="TF_ENABLE_ONEDNN_OPTS: on, off, auto."),
    cores: str = typer.Option("none", "--cores", help="Cores given (psutil affinity): none, first1, 0-1 ... "
                              "(several: separate with ';' when a value holds commas)."),
    batch: str = typer.Option("32", "--batch", help="Batch sizes, e.g. 32,128."),
    epochs: int = typer.Option(2, "--epochs", help="Epochs timed per point (after the warm-up steps)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="At most this many steps per epoch."),
    samples: Optional[int] = typer.Option(None, "--samples", help="Samples of the synthetic set (no --data)."),
    warmup_steps: int = typer.Option(5, "--warmup-steps", help="Training steps before the clock starts."),
    image_size: Optional[str] = typer.Option(None, "--image-size", help="Resize folder images to HxW."),
    image_scale: str = typer.Option("unit", "--image-scale", help="Folder image pixels: unit, raw, symmetric."),
    machine_cores: Optional[int] = typer.Option(None, "--machine-cores", help="Recommend for a machine of this many "
                                                "cores (default: this one)."),
    study: Optional[str] = typer.Option(None, "--study", help="Study name (default: MODEL-training)."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default: ./wb.db)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds a silent worker is given."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the study's figures to this HTML file."),
    as_json: bool = typer.Option(False, "--json", help="Print the recommendation as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or table."),
):
    """Profile training: epoch time, CPU use and samples/s per core against threads, cores and batch size."""
    from wb_core.api import recommend_training, results
    from wb_core.api import train_profile as api_train_profile

    if timeout is not None and timeout <= 0:
        _fail(f"--timeout must be a positive number of seconds; got {timeout:g}.")
    summary = api_train_profile(model, data=data, db=db, study=study, threads=threads,
                                inter_op_threads=inter_op_threads, omp_threads=omp_threads, onednn=onednn, cores=cores,
                                batch_sizes=batch, epochs=epochs, steps=steps, samples=samples,
                                warmup_steps=warmup_steps, image_size=image_size, image_scale=image_scale,
                                progress=not quiet, timeout_s=timeout, return_frame=False)
    df = results(summary.study, summary.db, "stored")
    rec = recommend_training(df, machine_cores)
    if as_json:
        echo(json.dumps({k: v for k, v in rec.items() if k != "per_cores"}, indent=2, default=str))
    elif not quiet:
        echo(_table(df, TRAINING_TABLE))
        echo(rec["text"])
    if plot:
        from wb_core.api import training_plots

        training_figures = training_plots.training_figures

        _write_figures(training_figures(df), plot)
        echo(f"Wrote the figures to {plot}.")
    report_summary(summary)
