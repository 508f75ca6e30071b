"""Child-process tasks for precision variants: quantize, evaluate, and the TensorFlow BF16 probe.

They run inside `python -m wb_core.proc.worker`, named by the task the parent side sends
(`wb_core.variants.quantize`, `wb_core.variants.planner`), because they import OpenVINO, NNCF or
TensorFlow. Each emits one `result` message.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from wb_core.errors import ConfigError

EVAL_BATCH = 64


def _emit(msg: dict) -> None:
    from wb_core.proc.channel import emit

    emit(msg)


def _load(path: str):
    from wb_core.data import load_npz

    return load_npz(Path(path))


def _output_entries(res) -> list[tuple[list[str], np.ndarray]]:
    """(names, array) of each output of an OpenVINO result (OVDict) or a TensorFlow signature (dict)."""
    if hasattr(res, "to_dict"):
        return [(sorted(port.get_names()) or [f"output_{i}"], np.asarray(arr))
                for i, (port, arr) in enumerate(res.to_dict().items())]
    if isinstance(res, dict):
        return [([k], np.asarray(res[k])) for k in sorted(res)]
    return [(["output_0"], np.asarray(res))]


def pick_output(res, name: str | None) -> np.ndarray:
    """The output called `name` (the first output when None); a ConfigError names the outputs otherwise."""
    entries = _output_entries(res)
    if name is None:
        return entries[0][1]
    for names, arr in entries:
        if name in names or name in {n.split(":")[0] for n in names}:
            return arr
    have = ", ".join(names[0] for names, _ in entries)
    raise ConfigError(f"The model has no output '{name}' (its outputs: {have}).")


def output_names(res) -> list[str]:
    return [names[0] for names, _ in _output_entries(res)]


def _batch_for(specs, n: int) -> int:
    """A fixed batch dimension is kept; a dynamic one takes up to EVAL_BATCH samples at a time."""
    fixed = {s.shape[s.batch_axis] for s in specs if s.shape and s.shape[s.batch_axis] > 0}
    return fixed.pop() if len(fixed) == 1 else min(EVAL_BATCH, n)


def _as_batch(x: np.ndarray, spec) -> np.ndarray:
    """Samples (on the data's first axis) as the input takes a batch of them: on its batch axis, or
    one value for an input without a batch (a sample rate: every sample holds the same)."""
    if spec is None:
        return np.ascontiguousarray(x)
    if not spec.batched:
        return np.array(x[0])  # 0-d (ascontiguousarray would make it 1-d)
    return np.ascontiguousarray(np.moveaxis(x, 0, spec.batch_axis) if spec.batch_axis else x)


def _chunks(feeds: dict[str, np.ndarray], batch: int, specs=()):
    """Batches of exactly `batch` samples; the last is padded with its final sample (cut off later)."""
    by_name = {s.name: s for s in specs}
    n = len(next(iter(feeds.values())))
    for i in range(0, n, batch):
        out = {}
        for name, x in feeds.items():
            chunk = x[i:i + batch]
            if len(chunk) < batch:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], batch - len(chunk), axis=0)])
            out[name] = _as_batch(chunk, by_name.get(name))
        yield out, min(batch, n - i)


def _items(feeds: dict[str, np.ndarray], step: int, single: bool, specs=()) -> list:
    """Calibration / validation items for NNCF: an array for one input, a dict for several."""
    by_name = {s.name: s for s in specs}
    n = len(next(iter(feeds.values())))
    items = [{k: _as_batch(v[i:i + step], by_name.get(k)) for k, v in feeds.items()}
             for i in range(0, n - step + 1, step)]
    return [next(iter(it.values())) for it in items] if single else items


def _model_shape(spec, batch: int, samples: np.ndarray) -> tuple[int, ...]:
    """The input's shape for a batch of these samples: the batch on its batch axis."""
    if not spec.batched:
        return ()
    dims = list(samples.shape[1:])
    dims.insert(spec.batch_axis, batch)
    return tuple(dims)


def task_evaluate(task: dict) -> None:
    """Run the validation samples through each variant with its precision settings; save outputs.

    Task: backend, variants [{id, model_path, precision}], data (npz), out_dir, output (a name or
    None for the first). Outputs go to `out_dir/<id>.npy`; the parent computes the metric, so a
    user's metric callable works too.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from wb_core.backends.registry import open_session
    from wb_core.config import InputOptions, RunConfig
    from wb_core.data import check_inputs
    from wb_core.model_inputs import with_batch_axes

    ds = _load(task["data"])
    axes = dict(task.get("batch_axes") or {})  # the sweep's: the model's layout, or the user's
    for v in task["variants"]:
        cfg = RunConfig(backend=task["backend"], precision=v["precision"], untouched=bool(v.get("untouched")))
        session = open_session(v["model_path"], cfg)
        specs = with_batch_axes(session.inputs, axes)
        feeds = check_inputs(ds.x, specs, "validation data")
        n = ds.size
        batch = _batch_for(specs, n)
        by_name = {s.name: s for s in specs}
        session.prepare(batch, InputOptions(shapes={k: _model_shape(by_name[k], batch, a) for k, a in feeds.items()
                                                    if by_name[k].batched},
                                            batch_axes={s.name: s.batch_axis for s in specs if s.batch_axis}))
        infer = session.make_infer()
        outs, names = [], []
        started = time.perf_counter()
        for chunk, k in _chunks(feeds, batch, specs):
            (converted,) = session.convert_batches([chunk])
            res = infer(converted)
            names = names or output_names(res)
            outs.append(pick_output(res, task.get("output"))[:k])
        seconds = time.perf_counter() - started  # the validation pass, compile excluded: a rough speed
        out_path = os.path.join(task["out_dir"], f"{v['id']}.npy")
        np.save(out_path, np.concatenate(outs))
        _emit({"type": "variant", "id": v["id"], "executed_precision": session.info().get("executed_precision"),
               "samples": n, "outputs": names})
    _emit({"type": "result", "ok": True, "outputs": names,
           "samples_per_s": round(n / seconds, 1) if seconds > 0 else None})


def task_quantize(task: dict) -> None:
    """Quantize an FP32 IR to INT8 with NNCF, by a recipe chosen for the model's family.

    Task: ir, data (npz), out (xml path), family and family_reason (as the model's description read
    them), subset_size, recipe ("auto": the family's first; see
    wb_core.variants.recipes), base (the recipe accuracy control and mixed precision build on),
    max_drop (accuracy control's bound), limit (mixed precision's bound), metric (name), output
    (name or None), budget_s. Without labels, accuracy control and mixed precision keep the chosen
    output close to the FP32 model's outputs (cosine similarity by default).
    """
    import nncf
    import openvino as ov

    from wb_core.data import check_inputs
    from wb_core.model_inputs import with_batch_axes
    from wb_core.models import ov_inputs
    from wb_core.variants.family import OTHER
    from wb_core.variants.recipes import base_recipe, nncf_arguments

    started = time.monotonic()
    model = ov.Core().read_model(task["ir"])
    family = task.get("family") or OTHER  # read once, by the description
    recipe = task.get("recipe") or "auto"
    if recipe == "auto":
        recipe = "accuracy-control" if task.get("max_drop") is not None else base_recipe(family)
    base = task.get("base") or base_recipe(family)
    specs = with_batch_axes(ov_inputs(model), task.get("batch_axes"))
    single = len(specs) == 1
    ds = _load(task["data"])
    calib = check_inputs(ds.calibration, specs, "calibration data")
    # Static batch dimensions take batches of that size; dynamic ones take single samples.
    fixed = [s.shape[s.batch_axis] for s in specs if s.shape and s.shape[s.batch_axis] > 1]
    step = fixed[0] if fixed else 1
    items = _items(calib, step, single, specs)
    if not items:
        raise ConfigError(f"The calibration data has {len(next(iter(calib.values())))} samples, fewer than the "
                          f"model's fixed batch of {step}.")
    calibration = nncf.Dataset(items)
    subset = int(task["subset_size"])
    info = {"calibration_samples": min(subset, len(items)) * step, "family": family,
            "family_reason": task.get("family_reason"), "recipe": recipe}
    output = task.get("output")
    if recipe in ("accuracy-control", "mixed-precision"):
        val_items = _items(check_inputs(ds.x, specs, "validation data"), step, single, specs)
        metric, targets, reference = _validation_targets(task, ds, model, val_items, step, output)
        info["metric"] = metric.name
        if reference:
            info["reference"] = reference
    if recipe == "accuracy-control":
        sign = 1.0 if metric.higher_is_better else -1.0  # NNCF expects higher = better
        labelled = [(it, targets[i * step:(i + 1) * step]) for i, it in enumerate(val_items)]

        validations = []

        def validate(compiled, data):
            validations.append(time.monotonic())  # progress: NNCF validates once per step of its search
            _emit({"type": "progress", "stage": "accuracy-control", "validations": len(validations),
                   "elapsed_s": round(validations[-1] - started, 1)})
            outs, labels = [], []
            for xb, yb in data:
                outs.append(pick_output(compiled(xb), output))
                labels.append(yb)
            scores = sign * metric.per_sample(np.concatenate(outs), np.concatenate(labels))
            per_item = scores.reshape(-1, step).mean(axis=1) if step > 1 else scores
            return float(scores.mean()), [float(s) for s in per_item]

        bound = task.get("max_drop") if task.get("max_drop") is not None else task.get("limit")
        quantized = nncf.quantize_with_accuracy_control(
            model, calibration, nncf.Dataset(labelled, lambda item: item[0]), validate,
            max_drop=float(bound), drop_type=nncf.DropType.ABSOLUTE, subset_size=subset, **nncf_arguments(base))
        info.update(base=base, validations=len(validations))
    elif recipe == "mixed-precision":
        quantized = nncf.quantize(model, calibration, subset_size=subset, **nncf_arguments(base))
        deadline = started + float(task.get("budget_s") or 600)
        quantized, kept = _mixed_precision(model, quantized, val_items, targets, metric, output,
                                           float(task.get("limit") or 0.01), deadline)
        info.update(base=base, fp32_layers=kept)
    else:
        quantized = nncf.quantize(model, calibration, subset_size=subset, **nncf_arguments(recipe))
    ov.save_model(quantized, task["out"], compress_to_fp16=False)
    _emit({"type": "result", "path": task["out"], "seconds": round(time.monotonic() - started, 2), **info})


def _validation_targets(task: dict, ds, model, val_items: list, step: int, output):
    """(metric, targets, reference) for validation: the labels, else the FP32 model's own outputs."""
    import openvino as ov

    from wb_core.accuracy import reference_targets, resolve_metric

    if ds.y is not None:
        targets = ds.y[:len(val_items) * step]
        return resolve_metric(task.get("metric") or "auto", targets), targets, None
    fp32 = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    reference = np.concatenate([pick_output(fp32(it), output) for it in val_items])
    metric, targets = reference_targets(task.get("metric") or "auto", reference)
    return metric, targets, "fp32 outputs"


WEIGHTED = ("MatMul", "Convolution", "GroupConvolution", "ConvolutionBackpropData")


def _dequantize_layers(model, names: set[str]) -> None:
    """Feed the named layers their floating-point inputs: their FakeQuantize inputs are bypassed."""
    for op in model.get_ops():
        if op.get_friendly_name() in names:
            for port in op.inputs():
                src = port.get_source_output().get_node()
                if src.get_type_name() == "FakeQuantize":
                    port.replace_source_output(src.input_value(0))


def _mixed_precision(model, quantized, val_items, targets, metric, output, limit: float, deadline: float):
    """Keep the most sensitive layers in FP32 until the drop against FP32 is within `limit`.

    A layer's sensitivity is the metric gained when it alone runs in floating point; layers are
    then returned to FP32 most sensitive first. Stops at the deadline with the best model so far.
    """
    import openvino as ov

    core = ov.Core()

    def score(m) -> float:
        compiled = core.compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        return metric(np.concatenate([pick_output(compiled(it), output) for it in val_items]), targets)

    reference, current = score(model), score(quantized)
    layers = [op.get_friendly_name() for op in quantized.get_ordered_ops() if op.get_type_name() in WEIGHTED and
              any(p.get_source_output().get_node().get_type_name() == "FakeQuantize" for p in op.inputs())]
    gains = []
    for name in layers:
        if metric.drop(reference, current) <= limit or time.monotonic() > deadline:
            break
        trial = quantized.clone()
        _dequantize_layers(trial, {name})
        gains.append((metric.drop(score(trial), current), name))  # what the metric gains with it in FP32
    kept: list[str] = []
    best = quantized
    for _, name in sorted(gains, reverse=True):
        if metric.drop(reference, current) <= limit or time.monotonic() > deadline:
            break
        kept.append(name)
        best = quantized.clone()
        _dequantize_layers(best, set(kept))
        current = score(best)
    return best, kept


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


def strip_quantizers(model) -> int:
    """Remove a quantized model's quantizers in place, leaving its float graph; returns how many.

    A quantize-dequantize pair on an activation (ONNX QuantizeLinear/DequantizeLinear, which
    OpenVINO reads as FakeQuantize -> Convert to i8 -> Convert to f32 -> Subtract -> Multiply, or an
    NNCF IR's FakeQuantize alone) is bypassed: its consumers read the float tensor it quantized.
    Integer weights stay, dequantized in the graph (Convert -> Subtract -> Multiply): the float
    weights they were made from are not in the file. NNCF's own `nncf.strip` handles PyTorch
    models only (NNCF 3.4), hence this.
    """
    removed = 0
    for fq in [op for op in model.get_ordered_ops() if op.get_type_name() == "FakeQuantize"]:
        source, end = fq.input_value(0), fq.output(0)
        chain = [t.get_node() for t in end.get_target_inputs()]
        if len(chain) == 1 and chain[0].get_type_name() == "Convert" and not chain[0].get_output_element_type(0).is_real():
            node = chain[0]
            for kinds in (("Convert",), ("Subtract", "Multiply"), ("Multiply",)):  # back to float, then dequantize
                nxt = [t.get_node() for t in node.output(0).get_target_inputs()]
                if len(nxt) != 1 or nxt[0].get_type_name() not in kinds:
                    break
                node = nxt[0]
                if node.get_type_name() == "Multiply":
                    break
            if node.get_type_name() != "Multiply":
                continue  # a chain this does not know: left quantized
            end = node.output(0)
        end.replace(source)
        removed += 1
    if removed:
        model.validate_nodes_and_infer_types()
    return removed


def task_float_graph(task: dict) -> None:
    """Write the float graph of an IR quantized beforehand (its quantizers removed) for its FP32 runs."""
    import openvino as ov

    model = ov.Core().read_model(task["ir"])
    removed = strip_quantizers(model)
    ov.save_model(model, task["out"], compress_to_fp16=False)
    _emit({"type": "result", "path": task["out"], "removed": removed})
