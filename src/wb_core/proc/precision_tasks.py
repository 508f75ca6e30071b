"""Child-process tasks for precision variants: quantize, evaluate, and the TensorFlow BF16 probe.

They run inside `python -m wb_core.proc.worker` (see worker.TASKS) because they import OpenVINO, NNCF
or TensorFlow; the parent side is `wb_core.variants.planner`. Each emits one `result` message.
"""

from __future__ import annotations

import os

import numpy as np

from wb_core.errors import ConfigError

EVAL_BATCH = 64


def _emit(msg: dict) -> None:
    from wb_core.proc.channel import emit

    emit(msg)


def _single_input(inputs, model_path: str):
    if len(inputs) != 1:
        names = ", ".join(s.describe() for s in inputs)
        raise ConfigError(f"Datasets work with single-input models; '{model_path}' has {len(inputs)} inputs ({names}).")
    return inputs[0]


def _load_arrays(path: str) -> dict:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def _first_output(res) -> np.ndarray:
    """The first output of an OpenVINO result (OVDict) or a TensorFlow signature (dict)."""
    if hasattr(res, "to_tuple"):
        return np.asarray(res.to_tuple()[0])
    if isinstance(res, dict):
        return np.asarray(res[sorted(res)[0]])
    return np.asarray(res)


def _chunks(x: np.ndarray, batch: int):
    """Batches of exactly `batch` samples; the last is padded with its final sample (cut off later)."""
    for i in range(0, len(x), batch):
        chunk = x[i:i + batch]
        n = len(chunk)
        if n < batch:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], batch - n, axis=0)])
        yield np.ascontiguousarray(chunk), n


def task_evaluate(task: dict) -> None:
    """Run the validation samples through each variant with its precision settings; save outputs.

    Task: backend, variants [{id, model_path, precision}], data (npz), out_dir. Outputs go to
    `out_dir/<id>.npy`; the parent computes the metric, so a user's metric callable works too.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from wb_core.backends.registry import open_session
    from wb_core.config import InputOptions, RunConfig
    from wb_core.data import check_input

    x_all = _load_arrays(task["data"])["x"]
    for v in task["variants"]:
        cfg = RunConfig(backend=task["backend"], precision=v["precision"])
        session = open_session(v["model_path"], cfg)
        spec = _single_input(session.inputs, v["model_path"])
        x = check_input(x_all, spec, "validation data")
        batch = spec.shape[0] if spec.shape and spec.shape[0] > 0 else min(EVAL_BATCH, len(x))
        session.prepare(batch, InputOptions(shapes={spec.name: (batch,) + tuple(x.shape[1:])}))
        infer = session.make_infer()
        outs = []
        for chunk, n in _chunks(x, batch):
            (converted,) = session.convert_batches([{spec.name: chunk}])
            outs.append(_first_output(infer(converted))[:n])
        out_path = os.path.join(task["out_dir"], f"{v['id']}.npy")
        np.save(out_path, np.concatenate(outs))
        _emit({"type": "variant", "id": v["id"], "executed_precision": session.info().get("executed_precision"),
               "samples": len(x)})
    _emit({"type": "result", "ok": True})


def task_quantize(task: dict) -> None:
    """Quantize an FP32 IR to INT8 with NNCF: plain PTQ, or accuracy-aware when max_drop is set.

    Task: ir, data (npz), out (xml path), subset_size, max_drop (None or float), metric (name).
    """
    import nncf
    import openvino as ov

    from wb_core.accuracy import resolve_metric
    from wb_core.data import check_input
    from wb_core.models import ov_inputs

    model = ov.Core().read_model(task["ir"])
    spec = _single_input(ov_inputs(model), task["ir"])
    arrays = _load_arrays(task["data"])
    calib = check_input(arrays.get("x_calib", arrays["x"]), spec, "calibration data")
    # Static batch dimensions take batches of that size; dynamic ones take single samples.
    step = spec.shape[0] if spec.shape and spec.shape[0] > 1 else 1
    items = [calib[i:i + step] for i in range(0, len(calib) - step + 1, step)]
    if not items:
        raise ConfigError(f"The calibration data has {len(calib)} samples, fewer than the model's fixed batch of {step}.")
    calibration = nncf.Dataset(items)
    subset = int(task["subset_size"])
    info = {"calibration_samples": min(subset, len(items)) * step}
    if task.get("max_drop") is None:
        quantized = nncf.quantize(model, calibration, subset_size=subset)
    else:
        if "y" not in arrays:
            raise ConfigError("Accuracy-aware quantization (--max-accuracy-drop) needs labels ('y') in the data.")
        x = check_input(arrays["x"], spec, "validation data")
        y = arrays["y"]
        metric = resolve_metric(task.get("metric") or "auto", y)
        sign = 1.0 if metric.higher_is_better else -1.0  # NNCF expects higher = better
        val_items = [(x[i:i + step], y[i:i + step]) for i in range(0, len(x) - step + 1, step)]

        def validate(compiled, data):
            outs, labels = [], []
            for xb, yb in data:
                outs.append(np.asarray(compiled(xb)[0]))
                labels.append(yb)
            scores = sign * metric.per_sample(np.concatenate(outs), np.concatenate(labels))
            per_item = scores.reshape(-1, step).mean(axis=1) if step > 1 else scores
            return float(scores.mean()), [float(s) for s in per_item]

        quantized = nncf.quantize_with_accuracy_control(
            model, calibration, nncf.Dataset(val_items, lambda item: item[0]), validate,
            max_drop=float(task["max_drop"]), drop_type=nncf.DropType.ABSOLUTE, subset_size=subset)
        info["metric"] = metric.name
    ov.save_model(quantized, task["out"], compress_to_fp16=False)
    _emit({"type": "result", "path": task["out"], **info})


def task_probe_tf_bf16(task: dict) -> None:
    """Does TensorFlow's oneDNN bfloat16 rewrite change anything on this CPU?

    Runs a small conv + matmul function with the rewrite off, then on; results that are bit for
    bit identical mean the rewrite did nothing here (no BF16 support detected by oneDNN).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = tf.constant(rng.random((4, 16, 16, 8), dtype=np.float32))
    k = tf.constant(rng.random((3, 3, 8, 16), dtype=np.float32))
    w = tf.constant(rng.random((16 * 16 * 16, 32), dtype=np.float32))

    @tf.function
    def fn(a):
        h = tf.nn.relu(tf.nn.conv2d(a, k, strides=1, padding="SAME"))
        return tf.matmul(tf.reshape(h, (4, -1)), w)

    plain = fn(x).numpy()
    tf.config.optimizer.set_experimental_options({"auto_mixed_precision_onednn_bfloat16": True})
    mixed = fn(x).numpy()
    diff = float(np.max(np.abs(plain - mixed)))
    _emit({"type": "result", "effective": diff > 0.0, "max_abs_diff": diff, "tf_version": tf.__version__})
