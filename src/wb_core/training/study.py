"""Training studies: epoch time, samples/s and CPU use of `model.fit` against threads and cores.

Each point is a fresh worker process (TensorFlow fixes its thread pools at import) that pins the
cores given, sets intra-op, inter-op and OpenMP threads and oneDNN, loads the compiled Keras
model, warms up, and times `epochs` epochs of `model.fit` on the user's data (or a synthetic set
of the input's shape). Rows go to the same store and schema as `wb profile`: `throughput` is
samples/s, `latency_ms_*` the time of one training step, `cpu_util` the cores kept busy; the
training columns follow (TRAINING_COLUMNS). `recommend_training` reads a study and says how many
cores, and which threads, to give each training job on a shared machine.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wb_core.axes import all_axes
from wb_core.axis import Axis
from wb_core.backends import registry
from wb_core.config import available_cpus, format_cores, parse_positive_ints
from wb_core.data import ImageOptions
from wb_core.errors import ConfigError
from wb_core.precisions import baseline
from wb_core.sweep.context import LOAD_ALLOWANCE_S, SweepContext, SweepSummary

TRAINING_COLUMNS = ("study_kind", "omp_threads", "onednn", "epochs", "epoch_s", "epoch_s_min", "epoch_s_max",
                    "steps_per_epoch", "samples_per_epoch", "cores_given", "cpu_util_pct", "throughput_per_core",
                    "step_ms_p50")
TRAINING_BACKEND = "tensorflow"  # the runtime a training study measures (Keras `model.fit`)
EFFICIENCY_TOLERANCE = 0.10  # cores counts whose per-core throughput is this close to the best count as efficient


@dataclass(frozen=True)
class TrainPoint:
    batch_size: int
    threads: int | None = None
    inter_op_threads: int | None = None
    omp_threads: int | None = None
    onednn: bool | None = None
    cores: tuple[int, ...] | None = None
    epochs: int = 2
    steps: int | None = None
    samples: int | None = None

    def to_dict(self) -> dict:
        return {"backend": TRAINING_BACKEND, "precision": baseline(), "batch_size": self.batch_size, "threads": self.threads,
                "inter_op_threads": self.inter_op_threads, "streams": None,
                "cores": list(self.cores) if self.cores else None, "instances": 1, "concurrency": 1,
                "omp_threads": self.omp_threads, "onednn": self.onednn, "epochs": self.epochs, "steps": self.steps,
                "samples": self.samples, "study_kind": "training"}

    def key_for(self, data_fp: str) -> str:
        blob = json.dumps({**self.to_dict(), "data": data_fp}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def is_default(self) -> bool:
        return not (self.threads or self.inter_op_threads or self.omp_threads or self.cores) and self.onednn is None

    def label(self) -> str:
        def v(x):
            return "auto" if x is None else x

        parts = [f"b{self.batch_size}", f"intra {v(self.threads)}", f"inter {v(self.inter_op_threads)}",
                 f"omp {v(self.omp_threads)}", f"cores={format_cores(self.cores)}"]
        if self.onednn is not None:
            parts.append("onednn " + ("on" if self.onednn else "off"))
        return " ".join(parts)


def training_axes() -> tuple[Axis, ...]:
    """The sweep axes a training study takes, as the axes table declares them: the settings its backend
    (TensorFlow, which runs `model.fit`) reads, the cores it is pinned to and the batch size."""
    reads = set(registry.get(TRAINING_BACKEND).settings)
    return tuple(a for a in all_axes() if a.name in reads or a.name in ("cores", "batch_size"))


@dataclass
class TrainSpec:
    """The grid of a training study (`auto`: leave the setting to TensorFlow)."""

    threads: object = "auto"
    inter_op_threads: object = "auto"
    omp_threads: object = "auto"
    onednn: object = "auto"
    cores: object = "none"
    batch_sizes: object = "32"
    epochs: int = 2
    steps: int | None = None  # at most this many steps per epoch
    samples: int | None = None  # size of the synthetic set when no data is given
    warmup_steps: int = 5

    def __post_init__(self):
        for a in training_axes():  # parsed as `wb profile` parses them: the axes table's parsers
            setattr(self, a.spec, a.values(getattr(self, a.spec)))
        self.omp_threads = _ints(self.omp_threads, "OMP threads")  # training's own: OMP_NUM_THREADS
        for name, low in (("epochs", 1), ("warmup_steps", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or v < low or v > 100_000:
                raise ConfigError(f"{name.replace('_', ' ').capitalize()} must be a whole number of at least {low}; "
                                  f"got {v!r}.")
        for name in ("steps", "samples"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ConfigError(f"{name.capitalize()} must be a whole number of at least 1; got {v!r}.")

    def expand(self) -> list[TrainPoint]:
        out = []
        for cores in self.cores:
            for t in self.threads:
                for i in self.inter_op_threads:
                    for o in self.omp_threads:
                        for d in self.onednn:
                            for b in self.batch_sizes:
                                p = TrainPoint(batch_size=b, threads=t, inter_op_threads=i, omp_threads=o, onednn=d,
                                               cores=cores, epochs=self.epochs, steps=self.steps, samples=self.samples)
                                if p not in out:
                                    out.append(p)
        return out

    def to_dict(self) -> dict:
        return {"threads": self.threads, "inter_op_threads": self.inter_op_threads, "omp_threads": self.omp_threads,
                "onednn": self.onednn, "cores": [format_cores(c) for c in self.cores],
                "batch_sizes": self.batch_sizes, "epochs": self.epochs, "steps": self.steps,
                "samples": self.samples, "warmup_steps": self.warmup_steps}


def _ints(values, name) -> list[int | None]:
    if isinstance(values, int):
        values = str(values)
    if not isinstance(values, str):
        values = ",".join("auto" if v is None else str(v) for v in values)
    return parse_positive_ints(values, name, 4096, allow_auto=True)


# ---- data ----

def training_data(source, image: ImageOptions | None = None, input_shape=None) -> tuple[Path | None, str]:
    """Materialise the user's training data as an .npz of `x` and `y` in the cache: (path, fingerprint).

    Sources: an .npz (`x_train`/`y_train` if present, else `x`/`y`), a folder of class subfolders
    of images, `demo:NAME`, an `(x, y)` pair or a dict. None: a synthetic set made in the worker.
    """
    import numpy as np

    from wb_core.data import Dataset, load_dataset

    if source is None:
        return None, "synthetic"
    if isinstance(source, (str, Path)) and str(source).lower().endswith(".npz") and Path(source).is_file():
        try:
            with np.load(source, allow_pickle=False) as f:
                arrays = {k: f[k] for k in f.files}
        except Exception as e:
            raise ConfigError(f"Training data '{source}' is not a readable .npz archive ({type(e).__name__}).") from None
        x = arrays.get("x_train", arrays.get("x"))
        y = arrays.get("y_train", arrays.get("y"))
        if x is None:
            raise ConfigError(f"Training data '{source}' has no array named 'x' or 'x_train'.")
        ds = Dataset(x=x, y=y, source=f"'{source}'")
    elif isinstance(source, str) and source.startswith("demo:"):
        from wb_core.demo import ensure_demo

        return training_data(str(ensure_demo(source[5:]) / "data.npz"))
    else:
        ds = load_dataset(source, image=image, input_shape=input_shape)
    if ds.y is None:
        raise ConfigError(f"The training data from {ds.source} has no labels ('y'); training needs them.")
    path, fp = Dataset(x=ds.x, y=ds.y, source=ds.source).save()
    return path, fp


# ---- running ----

def run_training(model: str | Path, spec: TrainSpec, db: str | Path, study: str, data=None,
                 image: ImageOptions | None = None, on_point: Callable[[dict], None] | None = None,
                 progress: bool = False, cancel: threading.Event | None = None, timeout_s: float | None = None,
                 memory_limit_mb: int | None = None) -> SweepSummary:
    """Measure every point of `spec` not yet stored in `study` (one fresh process each)."""
    from wb_core import hardware
    from wb_core.models import detect_format, fingerprint
    from wb_core.proc.parent import run_child, run_task

    model = Path(model)
    fmt = detect_format(model)
    if fmt != "keras":
        raise ConfigError(f"Training studies need a compiled Keras model file (.keras); '{model}' is a {fmt} model.")
    hw = hardware.detect()
    for c in spec.cores:
        if c and not set(c) <= set(hw.available_cpus):
            raise ConfigError(f"Cores {format_cores(c)} are not available to this process.")
    input_shape = None
    if isinstance(data, (str, Path)) and Path(str(data)).is_dir() and not (image and image.size):
        from wb_core.variants.description import describe_model

        input_shape = tuple(describe_model(model, timeout_s).inputs[0].shape)  # folder images take the model's size
    data_path, data_fp = training_data(data, image, input_shape)
    base = {"model_path": str(model), "data": str(data_path) if data_path else None}
    points = spec.expand()
    fp = fingerprint(model)
    if _all_done(db, study, fp, [p.key_for(data_fp) for p in points]):
        return SweepSummary(study=study, db=str(db), planned=len(points), skipped_done=len(points))
    info = run_task({"task": "wb_core.training.tasks:task_train_check", **base}, timeout=timeout_s or LOAD_ALLOWANCE_S,
                    what=f"checking that '{model}' can be trained")
    from wb_core.models import InputSpec

    ctx = SweepContext(model, db, study, [], on_point=_with_point(on_point), progress=progress,
                       progress_label="training", cancel=cancel, memory_limit_mb=memory_limit_mb,
                       timeout_s=timeout_s, input_specs=[InputSpec.from_dict(info["input"])], random_inputs=False)

    def key(p: TrainPoint) -> str:
        return p.key_for(data_fp)

    record = {"kind": "training", "training": spec.to_dict(),
              "data": str(data) if isinstance(data, (str, Path)) else data_fp,
              "loss": info.get("loss"), "optimizer": info.get("optimizer"), "params": info.get("params")}
    with ctx.open(record):
        for p in ctx.points_to_measure(points, key=key):
            task = {"task": "wb_core.training.tasks:task_train", "key": key(p), **base, **p.to_dict(),
                    "warmup_steps": spec.warmup_steps,
                    "cores": list(p.cores) if p.cores else None}
            outcome = run_child(task, timeout=timeout_s or LOAD_ALLOWANCE_S, cancel=cancel,
                                memory_limit_mb=memory_limit_mb)
            if outcome.cancelled:
                ctx.summary.cancelled = True  # the point stays unstored: a rerun measures it
                break
            points_msg = [m for m in outcome.messages if m.get("type") == "point"]
            if points_msg:
                status, metrics, error = "ok", points_msg[-1]["metrics"], None
            else:
                status, metrics = "failed", {"stderr_tail": outcome.stderr_tail[-2000:]}
                error = outcome.sentence()
            metrics = {**metrics, "study_kind": "training", "loss_name": info.get("loss"),
                       "data_source": "synthetic" if data_path is None else data_fp}
            ctx.record(p, status, metrics, error, key=key(p))
    return ctx.summary


def _with_point(on_point: Callable[[dict], None] | None) -> Callable[[dict], None] | None:
    """The caller's `on_point`, given the study's point under `point` as well as `config`."""
    if on_point is None:
        return None
    return lambda rec: on_point({**rec, "point": rec["config"]})


def _all_done(db, study: str, model_fp: str, keys: list[str]) -> bool:
    """Whether a rerun has nothing left to measure (then the preflight worker is not needed)."""
    from wb_core.store import Store

    if not Path(str(db)).exists() and "://" not in str(db):
        return False
    with Store(db) as store:
        existing = store.get_study(study)
        return bool(existing) and existing["model_fingerprint"] == model_fp and set(keys) <= store.done_keys(study)


# ---- reading a study ----

def thread_label(r) -> str:
    def v(name):
        x = r.get(name)
        try:
            return "auto" if x is None or (isinstance(x, float) and math.isnan(x)) else str(int(x))
        except (TypeError, ValueError):
            return "auto"

    lab = f"intra {v('threads')} / inter {v('inter_op_threads')} / omp {v('omp_threads')}"
    dnn = r.get("onednn")
    if dnn is True or dnn is False:
        lab += " / onednn " + ("on" if dnn else "off")
    return lab


def is_default_row(r) -> bool:
    def unset(name):
        x = r.get(name)
        return x is None or (isinstance(x, float) and math.isnan(x))

    return all(unset(c) for c in ("threads", "inter_op_threads", "omp_threads", "onednn")) and \
        str(r.get("cores") or "none") == "none"


def recommend_training(df, machine_cores: int | None = None) -> dict:
    """Cores and threads to give each training job, from a training study's rows.

    For each number of cores given, the fastest setting; then the number of cores whose samples/s
    per core is within 10% of the best per-core figure, taking the largest such (the fastest job
    among the efficient ones). On a shared machine of M cores that fits M // cores jobs, and the
    machine's total samples/s is highest when each core does the most work.
    """
    import pandas as pd

    ok = df[(df["status"] == "ok") & df["epoch_s"].notna()].copy() if "epoch_s" in df else pd.DataFrame()
    if ok.empty:
        return {"text": "No successful training runs to recommend from.", "best": None}
    ok["cores_given"] = ok["cores_given"].astype(int)
    best_per = ok.sort_values("epoch_s").groupby("cores_given", as_index=False).head(1).sort_values("cores_given")
    top_eff = best_per["throughput_per_core"].max()
    efficient = best_per[best_per["throughput_per_core"] >= (1 - EFFICIENCY_TOLERANCE) * top_eff]
    pick = efficient.sort_values("cores_given").iloc[-1]
    fastest = ok.sort_values("epoch_s").iloc[0]
    machine = machine_cores or len(available_cpus())
    jobs = max(1, machine // int(pick["cores_given"]))
    text = (f"Give each training job {int(pick['cores_given'])} core(s) with {thread_label(pick)}: "
            f"{pick['epoch_s']:.2f} s per epoch, {pick['throughput']:,.0f} samples/s, "
            f"{pick['throughput_per_core']:,.0f} samples/s per core, CPU use {pick['cpu_util_pct']:.0f}% of its cores. "
            f"On {machine} cores that is {jobs} job(s) at once.")
    if int(fastest["cores_given"]) != int(pick["cores_given"]):
        text += (f" The fastest single job used {int(fastest['cores_given'])} cores ({fastest['epoch_s']:.2f} s per "
                 f"epoch) but did only {fastest['throughput_per_core']:,.0f} samples/s per core.")
    default = ok[ok.apply(is_default_row, axis=1)]
    out = {"text": text, "best": pick.to_dict(), "fastest": fastest.to_dict(), "per_cores": best_per.to_dict("records"),
           "jobs_per_machine": jobs, "machine_cores": machine}
    if not default.empty:
        d = default.sort_values("epoch_s").iloc[0]
        out["default_epoch_s"] = float(d["epoch_s"])
        out["speedup_over_default"] = float(d["epoch_s"] / fastest["epoch_s"])
        text += (f" TensorFlow's default threading took {d['epoch_s']:.2f} s per epoch: the fastest setting is "
                 f"{out['speedup_over_default']:.2f}x faster.")
        out["text"] = text
    return out


__all__ = ["TrainSpec", "TrainPoint", "run_training", "recommend_training", "training_data", "TRAINING_COLUMNS"]
