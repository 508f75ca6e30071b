"""The worker side of a training study: `model.fit` under one thread and core setting per process.

As with inference, the order matters: pin the cores, set `TF_NUM_INTRAOP_THREADS`,
`TF_NUM_INTEROP_THREADS`, `OMP_NUM_THREADS` and `TF_ENABLE_ONEDNN_OPTS`, THEN import TensorFlow,
which sizes its pools once, from what it sees at import.
"""

from __future__ import annotations

import math
import os
import resource
import time

from wb_core.proc.channel import emit


def _apply(task: dict) -> None:
    from wb_core.proc.worker import apply_process_settings

    apply_process_settings({"cores": task.get("cores")}, task.get("memory_limit_mb"))
    env = {"TF_NUM_INTRAOP_THREADS": task.get("threads"), "TF_NUM_INTEROP_THREADS": task.get("inter_op_threads"),
           "OMP_NUM_THREADS": task.get("omp_threads")}
    for k, v in env.items():
        if v:
            os.environ[k] = str(int(v))
    if task.get("onednn") is not None:
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if task["onednn"] else "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _load_model(task: dict):
    import keras
    import tensorflow as tf

    from wb_core.errors import ModelError
    from wb_core.models import first_line

    # Pools are sized before the first op; the variables above say the same to TensorFlow's C++ side.
    if task.get("threads"):
        tf.config.threading.set_intra_op_parallelism_threads(int(task["threads"]))
    if task.get("inter_op_threads"):
        tf.config.threading.set_inter_op_parallelism_threads(int(task["inter_op_threads"]))
    path = task["model_path"]
    try:
        model = keras.models.load_model(path, compile=True, safe_mode=True)
    except Exception as e:
        raise ModelError(f"Keras cannot load '{path}' for training: {first_line(e)}") from None
    return model


def _loss_name(model) -> str:
    loss = getattr(model, "loss", None)
    if isinstance(loss, str):
        return loss
    return str(getattr(loss, "name", None) or getattr(loss, "__name__", None) or type(loss).__name__)


def _check_compiled(model, path: str) -> None:
    from wb_core.errors import ConfigError

    if not getattr(model, "compiled", False) or getattr(model, "optimizer", None) is None or model.loss is None:
        raise ConfigError(f"The model '{path}' is not compiled (no optimizer and loss saved with it); call "
                          f"model.compile(optimizer=..., loss=...) before model.save(), then profile its training.")


def _data(task: dict, model):
    """(x, y) from the task's .npz, or a synthetic set of the model's input shape, labels fit for its loss."""
    import numpy as np

    from wb_core.data import check_input
    from wb_core.models import InputSpec

    if len(model.inputs) != 1:
        from wb_core.errors import ConfigError

        raise ConfigError(f"Training studies take single-input models; '{task['model_path']}' has "
                          f"{len(model.inputs)} inputs.")
    t = model.inputs[0]
    spec = InputSpec(name=t.name, shape=tuple(-1 if d is None else int(d) for d in t.shape),
                     dtype=str(t.dtype).replace("<dtype: '", "").replace("'>", ""))
    if task.get("data"):
        with np.load(task["data"], allow_pickle=False) as f:
            x, y = f["x"], f["y"]
        return check_input(x, spec, "training data"), y, spec
    rng = np.random.default_rng(int(task.get("seed", 0)))
    n = int(task.get("samples") or 2048)
    shape = tuple(d if d > 0 else 32 for d in spec.shape[1:])
    x = rng.random((n,) + shape, dtype=np.float32)
    out = tuple(d if d is not None else 1 for d in model.outputs[0].shape[1:])
    loss = _loss_name(model).lower()
    classes = out[-1] if out else 1
    if "sparse" in loss:
        y = rng.integers(0, classes, size=(n,) + out[:-1]).astype(np.int64)
    elif "categorical" in loss:
        y = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, size=(n,) + out[:-1])]
    elif "binary" in loss:
        y = rng.integers(0, 2, size=(n,) + out).astype(np.float32)
    else:
        y = rng.standard_normal((n,) + out).astype(np.float32)
    return x, y, spec


def _check_labels(y, model, task: dict) -> None:
    """Labels fit the model's output and loss: class ids within its classes (sparse losses), one-hot
    rows as wide as its output (categorical), 0..1 targets (binary), finite numbers throughout."""
    import numpy as np

    from wb_core.errors import ConfigError

    where = f"The labels of the training data for '{task['model_path']}'"
    if y.dtype.kind not in "biuf":
        raise ConfigError(f"{where} are not numbers ({y.dtype}); give class ids or numeric targets.")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ConfigError(f"{where} hold NaN or infinite values; give finite numbers.")
    out = tuple(d if d is not None else 1 for d in model.outputs[0].shape[1:])
    classes = out[-1] if out else 1
    loss = _loss_name(model).lower()
    if "sparse" in loss and y.size:
        if y.dtype.kind == "f" and not np.all(y == np.round(y)):
            raise ConfigError(f"{where} are not whole class ids, which the loss {_loss_name(model)} needs.")
        lo, hi = int(y.min()), int(y.max())
        if lo < 0 or hi >= classes:
            raise ConfigError(f"{where} run from {lo} to {hi}, but the model's output has {classes} classes "
                              f"(0 to {classes - 1}); give labels in that range, or a model with more outputs.")
    elif "categorical" in loss and y.ndim >= 2 and y.shape[-1] != classes:
        raise ConfigError(f"{where} are one-hot rows of {y.shape[-1]}, but the model's output has {classes} "
                          f"classes; give rows of {classes}.")


def task_train_check(task: dict) -> None:
    """Preflight: the model loads, is compiled, the data fits its input, and one training step runs."""
    _apply({**task, "threads": None, "inter_op_threads": None})
    from wb_core.errors import ConfigError
    from wb_core.models import first_line

    model = _load_model(task)
    _check_compiled(model, task["model_path"])
    if not model.trainable_weights:
        raise ConfigError(f"The model '{task['model_path']}' has nothing to train: every layer is frozen "
                          f"(trainable=False); unfreeze the layers to train before model.save().")
    x, y, spec = _data({**task, "samples": 4}, model)
    _check_labels(y, model, task)
    try:
        model.train_on_batch(x[:2], y[:2])
    except Exception as e:
        raise ConfigError(f"One training step of '{task['model_path']}' on the data failed "
                          f"(input {spec.describe()}, data {tuple(x.shape[1:])}, labels {tuple(y.shape[1:])}): "
                          f"{first_line(e)}") from None
    emit({"type": "result", "input": spec.to_dict(), "loss": _loss_name(model),
          "optimizer": type(model.optimizer).__name__, "params": int(model.count_params()),
          "output_shape": [d if d is not None else -1 for d in model.outputs[0].shape]})


def task_train(task: dict) -> None:
    """Fit for a few warm-up steps, then time `epochs` epochs of `model.fit`; one `point` message."""
    _apply(task)
    import keras
    import numpy as np
    import tensorflow as tf

    from wb_core.measure import Latency
    from wb_core.pipeline.tasks import _placement

    t0 = time.perf_counter()
    model = _load_model(task)
    _check_compiled(model, task["model_path"])
    load_s = time.perf_counter() - t0
    x, y, spec = _data(task, model)
    b = int(task["batch_size"])
    steps = len(x) // b
    if task.get("steps"):
        steps = min(steps, int(task["steps"]))
    if steps < 1:
        from wb_core.errors import ConfigError

        raise ConfigError(f"The data holds {len(x)} samples, fewer than one batch of {b}.")
    n = steps * b  # whole batches only: a smaller last batch would be traced again and timed with it
    x, y = x[:n], y[:n]
    warm = max(1, min(steps, int(task.get("warmup_steps", 5))))
    t0 = time.perf_counter()
    model.fit(x[: warm * b], y[: warm * b], batch_size=b, epochs=1, verbose=0, shuffle=False)
    warmup_s = time.perf_counter() - t0

    class Timer(keras.callbacks.Callback):
        """Epoch and step times from the epoch hooks and the step-start hook only.

        A callback with a batch-end hook makes Keras turn every step's logs into Python numbers
        before the next step (no asynchronous dispatch), which slows a small model's training by
        tens of percent: so a step is timed from its start to the next step's start (the last one
        to the epoch's end), and `model.fit` runs as it would without us.
        """

        def __init__(self):
            super().__init__()
            self.epochs, self.steps, self.losses = [], [], []
            self.starts: list[float] = []

        def on_epoch_begin(self, epoch, logs=None):
            self.starts = []
            self.e0 = time.perf_counter()

        def on_train_batch_begin(self, batch, logs=None):
            self.starts.append(time.perf_counter())

        def on_epoch_end(self, epoch, logs=None):
            end = time.perf_counter()
            self.epochs.append(end - self.e0)
            marks = self.starts + [end]
            self.steps.extend((b - a) * 1e3 for a, b in zip(marks[:-1], marks[1:]))
            self.losses.append(float((logs or {}).get("loss", math.nan)))
            emit({"type": "heartbeat"})

    timer = Timer()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.perf_counter()
    model.fit(x, y, batch_size=b, epochs=int(task.get("epochs", 2)), verbose=0, shuffle=True, callbacks=[timer])
    wall = time.perf_counter() - w0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    cores_given = len(task["cores"]) if task.get("cores") else len(os.sched_getaffinity(0))
    epoch_s = float(np.median(timer.epochs))
    throughput = n / epoch_s
    place = _placement()
    emit({"type": "point", "key": task["key"], "status": "ok", "metrics": {
        **Latency.from_values(timer.steps).as_columns(),
        "throughput": throughput, "cpu_util": cpu / wall, "rss_mb": ru1.ru_maxrss / 1024.0,
        "epoch_s": epoch_s, "epoch_s_all": timer.epochs, "epoch_s_min": min(timer.epochs),
        "epoch_s_max": max(timer.epochs), "step_ms_p50": float(np.median(timer.steps)),
        "steps_per_epoch": steps, "samples_per_epoch": n, "epochs_measured": len(timer.epochs),
        "cores_given": cores_given, "cpu_util_pct": 100.0 * cpu / wall / cores_given,
        "throughput_per_core": throughput / cores_given, "warmup_s": warmup_s, "load_s": load_s,
        "fit_wall_s": wall, "cpu_s": cpu, "loss_first": timer.losses[0], "loss_last": timer.losses[-1],
        "synthetic_data": not task.get("data"), "tf_version": tf.__version__,
        "thread_cpus": place["cpus"], "process_threads": place["threads"],
        "env_threads": {k: os.environ.get(k) for k in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS",
                                                       "OMP_NUM_THREADS", "TF_ENABLE_ONEDNN_OPTS")},
    }})
