"""Child-process tasks for precision variants: quantize, evaluate, and the TensorFlow BF16 probe.

They run inside `python -m wb_core.proc.worker`, named by the task the parent side sends
(`wb_core.variants.quantize`, `wb_core.variants.planner`), because they import OpenVINO, NNCF or
TensorFlow. Each emits one `result` message.
"""

from __future__ import annotations

import os
import shutil
import tempfile
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


class ReferenceSpool:
    """FP32's outputs, batch by batch, in a folder: written by FP32's evaluation, read back one batch at
    a time by each variant's, so neither process ever holds every output."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def _path(self, k: int) -> Path:
        return self.folder / f"{k:06d}.npz"

    def write(self, k: int, arrays: list[np.ndarray]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self._path(k), "wb") as f:
            np.savez(f, *arrays)

    def read(self, k: int) -> list[np.ndarray]:
        with np.load(self._path(k), allow_pickle=False) as f:
            return [f[f"arr_{i}"] for i in range(len(f.files))]


def _by_name(res, wanted: list[str]) -> list[np.ndarray]:
    """The outputs called `wanted`, in that order (a name may lack its ':0' suffix)."""
    entries = _output_entries(res)
    out = []
    for name in wanted:
        for names, arr in entries:
            if name in names or name in {n.split(":")[0] for n in names}:
                out.append(arr)
                break
        else:
            have = ", ".join(names[0] for names, _ in entries)
            raise ConfigError(f"The model has no output '{name}' (its outputs: {have}).")
    return out


def _static_output_bytes(session) -> int | None:
    """Bytes of every output for one sample, where the compiled model states its output shapes."""
    compiled = getattr(session, "compiled", None)
    try:
        total, batch = 0, None
        for port in compiled.outputs:
            shape = port.get_partial_shape()
            if not shape.is_static:
                return None
            dims = [d.get_length() for d in shape]
            batch = dims[0] if dims else 1
            total += int(np.prod(dims[1:] or [1])) * port.get_element_type().size
        return total if batch else None
    except (AttributeError, TypeError, RuntimeError):
        return None


def _mb(n: float) -> str:
    return f"{n / 2 ** 30:.1f} GB" if n >= 2 ** 30 else f"{n / 2 ** 20:.0f} MB"


# A batch's outputs are held about this many times over while accuracy is measured: the runtime's
# output tensor, the copy it returns, FP32's batch read back beside it, and the float64 copies the
# comparison makes of a few samples. Measured on a 30522-token language model: 4.8 batches' worth.
OUTPUT_COPIES = 6


def worker_rss() -> int:
    """Bytes this process holds now (its resident set)."""
    import psutil

    return int(psutil.Process().memory_info().rss)


def _peak_rss() -> int | None:
    """Bytes this process has held at most (the kernel's high-water mark), where /proc tells."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))
    except (OSError, StopIteration, ValueError):
        return None


def fit_batch(batch: int, fixed: bool, per_sample: int, budget: int | None, held: int = 0) -> int:
    """The largest batch (at most `batch`) that keeps the worker within the memory budget: the `held`
    bytes it holds before any output (the runtime, the model, the data) plus OUTPUT_COPIES times the
    batch's outputs. A ModelError says so when not even one sample (or the model's fixed batch) fits."""
    from wb_core.errors import ModelError

    cost = OUTPUT_COPIES * per_sample
    room = (budget or 0) - held
    if not budget or per_sample <= 0 or cost * batch <= room:
        return batch
    if fixed or cost > room:
        size = batch if fixed else 1
        raise ModelError(f"The worker measuring accuracy holds {_mb(held)} before any output (the runtime and the "
                         f"model), and one batch of {size} sample{'s' if size != 1 else ''} gives "
                         f"{_mb(per_sample * size)} of outputs, about {_mb(cost * size)} with FP32's beside them and "
                         f"the copies the comparison makes: more than the memory budget of {_mb(budget)}, so "
                         f"accuracy is not measured. Give a larger memory budget, or choose a smaller output to "
                         f"judge.")
    return max(1, room // cost)


def _headline_metric(task: dict, ds):
    """(metric, targets-of(batch index range, FP32 batch)) for the headline accuracy figure."""
    from wb_core.accuracy import reference_targets, resolve_metric

    spec = task.get("metric") or "auto"
    if isinstance(spec, dict) and "pickled" in spec:
        import base64

        import cloudpickle

        spec = cloudpickle.loads(base64.b64decode(spec["pickled"]))
    target = task.get("target")
    if target == "labels":
        metric = resolve_metric(spec, ds.y)
        return metric, lambda lo, hi, ref: ds.y[lo:hi]
    if target == "refs":
        given = np.asarray(ds.refs[task["refs_name"]])
        metric, _ = reference_targets(spec, given[:1])

        def targets(lo, hi, ref):
            rows = given[lo:hi]
            if rows.size != ref.size:
                raise ConfigError(f"The reference outputs '{task['refs_name']}' in the data have samples of shape "
                                  f"{tuple(given.shape[1:])}, but the model's output gives {tuple(ref.shape[1:])}.")
            return reference_targets(spec, rows.reshape(ref.shape).astype(np.float32))[1]

        return metric, targets
    metric, _ = reference_targets(spec, np.zeros((1, 1), np.float32))
    return metric, lambda lo, hi, ref: reference_targets(spec, ref)[1]


def _decoding(spec):
    """(the user's decoding function, its name in sentences) from a task's spec, or (None, "")."""
    if spec is None:
        return None, ""
    if isinstance(spec, dict) and "pickled" in spec:
        import base64

        import cloudpickle

        fn = cloudpickle.loads(base64.b64decode(spec["pickled"]))
        return fn, getattr(fn, "__name__", "decode")
    from wb_core.accuracy import load_function

    return load_function(str(spec), "decoding"), str(spec)


def task_evaluate(task: dict) -> None:
    """Run the validation samples through one variant batch by batch; emit its accuracy figures.

    Task: backend, variant {model_path, precision, untouched}, data (npz), judged (output names; None:
    every output), headline (the output the headline metric reads; None: the first), metric (a name,
    an import path, or {"pickled": ...}), target ("labels", "refs" with refs_name, or "reference": FP32's
    outputs), spool (a folder), write (True for FP32: its judged outputs go to the spool; False: they are
    read from it and compared), batch and samples (FP32's, given to the variants), kinds (FP32's reading
    of its outputs), budget (bytes the worker may hold: its runtime and model, and a batch's outputs with
    FP32's beside them).
    Only running sums are kept: one batch of outputs at a time, never all of them.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from wb_core.backends.registry import open_session
    from wb_core.config import InputOptions, RunConfig
    from wb_core.data import check_inputs
    from wb_core.model_inputs import with_batch_axes
    from wb_core.variants.agreement import (
        DecodedAgreement,
        OutputAgreement,
        OutputKind,
        RunningScore,
        decode_batch,
        read_kind,
    )

    ds = _load(task["data"])
    v = task["variant"]
    cfg = RunConfig(backend=task["backend"], precision=v["precision"], untouched=bool(v.get("untouched")))
    session = open_session(v["model_path"], cfg)
    specs = with_batch_axes(session.inputs, dict(task.get("batch_axes") or {}))  # the model's layout, or the user's
    by_name = {s.name: s for s in specs}
    feeds = check_inputs(ds.x, specs, "validation data")
    n = min(ds.size, int(task.get("samples") or ds.size))
    fixed = any(s.shape and s.batched and s.shape[s.batch_axis] > 0 for s in specs)
    largest = int(task.get("batch") or _batch_for(specs, n))
    budget = task.get("budget")
    fit = not task.get("batch")  # FP32 sizes the batch; the variants take FP32's, batch k beside batch k
    # Fitting starts from one sample: what the worker holds then is what it holds beside any batch.
    batch = 1 if fit and not fixed else largest

    def prepare(b: int):
        session.prepare(b, InputOptions(shapes={k: _model_shape(by_name[k], b, a) for k, a in feeds.items()
                                                if by_name[k].batched},
                                        batch_axes={s.name: s.batch_axis for s in specs if s.batch_axis}))
        return session.make_infer()

    infer = prepare(batch)
    held = worker_rss()
    per_sample = _static_output_bytes(session)
    if per_sample and fit:
        fit, fitted = False, fit_batch(largest, fixed, per_sample, budget, held)
        if fitted != batch:
            batch, infer = fitted, prepare(fitted)
    spool = ReferenceSpool(task["spool"])
    write = bool(task.get("write"))
    kinds = [OutputKind.from_dict(k) for k in task["kinds"]] if task.get("kinds") else None
    judged, headline = task.get("judged"), task.get("headline")
    metric, targets_of = _headline_metric(task, ds)
    decode, decode_name = _decoding(task.get("decode"))
    decoded = None
    score = RunningScore(metric)
    agreements: list = []
    names: list[str] = []
    done, k, started, capped = 0, 0, time.perf_counter(), None
    while done < n:
        chunk = {name: x[done:done + batch] for name, x in feeds.items()}
        m = len(next(iter(chunk.values())))
        chunk = {name: _as_batch(np.concatenate([x, np.repeat(x[-1:], batch - m, axis=0)]) if m < batch else x,
                                 by_name.get(name)) for name, x in chunk.items()}
        (converted,) = session.convert_batches([chunk])
        res = infer(converted)
        if not names:
            names = output_names(res)
            judged = judged or names
            headline = headline if headline in judged else judged[0]
            if fit:  # the backend states no output shapes: the first batch tells
                per_sample = sum(int(a.nbytes) for _, a in _output_entries(res)) // batch
                fit, fitted = False, fit_batch(largest, fixed, per_sample, budget, held)
                if fitted != batch:
                    del res
                    batch, infer = fitted, prepare(fitted)
                    continue  # this batch again, at the size that fits
        outs = [a[:m] for a in _by_name(res, judged)]
        del res
        refs = outs if write else spool.read(k)
        if write:
            if k == 0:  # FP32's outputs go to disk: take no more samples than half its free space holds
                free = shutil.disk_usage(spool.folder.parent if not spool.folder.exists() else spool.folder).free
                per = max(1, sum(int(a.nbytes) for a in outs) // max(m, 1))
                room = max(m, int(free * 0.5) // per)
                if room < n:
                    n, capped = room, {"disk_free": free}
            spool.write(k, outs)
            if kinds is None:
                kinds = [read_kind(name, a) for name, a in zip(judged, outs)]
            if decode is not None and k == 0:  # FP32 tries the user's decoding first: a broken one fails here
                decode_batch(decode, outs[judged.index(headline)], headline, decode_name)
        else:
            if not agreements:
                agreements = [OutputAgreement(kind) for kind in kinds]
            for acc, out, ref in zip(agreements, outs, refs):
                acc.update(out, ref)
            if decode is not None:
                h = judged.index(headline)
                decoded = decoded or DecodedAgreement(headline)
                decoded.update(decode_batch(decode, outs[h], headline, decode_name),
                               decode_batch(decode, refs[h], headline, decode_name))
        h = judged.index(headline)
        score.update(outs[h], targets_of(done, done + m, refs[h]))
        done += m
        k += 1
    seconds = time.perf_counter() - started  # the validation pass, compile excluded: a rough speed
    _emit({"type": "result", "ok": True, "outputs": names, "judged": judged, "headline": headline,
           "executed_precision": session.info().get("executed_precision"), "samples": done, "batch": batch,
           "kinds": [kd.to_dict() for kd in kinds or []], "value": score.value, "metric": metric.name,
           "agreement": [{"output": a.kind.output, "figures": a.figures()} for a in agreements],
           **({"decoded": {"output": decoded.output, "by": decode_name, "figures": decoded.figures()}}
              if decoded is not None else {}),
           "samples_per_s": round(done / seconds, 1) if seconds > 0 else None,
           "budget": budget, "peak_rss": _peak_rss(), "fitted": batch < largest,
           **({"capped_by_disk": capped["disk_free"], "data_samples": ds.size} if capped else {})})


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
    spool_dir = tempfile.mkdtemp(prefix="wb-validate-")
    try:
        if recipe in ("accuracy-control", "mixed-precision"):
            val_items = _items(check_inputs(ds.x, specs, "validation data"), step, single, specs)
            metric, target_of, reference = _validation_targets(task, ds, model, val_items, step, output, spool_dir)
            info["metric"] = metric.name
            if reference:
                info["reference"] = reference
        if recipe == "accuracy-control":
            sign = 1.0 if metric.higher_is_better else -1.0  # NNCF expects higher = better
            indexed = list(enumerate(val_items))
            validations = []

            def validate(compiled, data):
                validations.append(time.monotonic())  # progress: NNCF validates once per step of its search
                _emit({"type": "progress", "stage": "accuracy-control", "validations": len(validations),
                       "elapsed_s": round(validations[-1] - started, 1)})
                # one item at a time against its targets: no output is kept beyond its score
                per_item, total, count = [], 0.0, 0
                for i, xb in data:
                    scores = sign * metric.per_sample(pick_output(compiled(xb), output), target_of(i))
                    per_item.append(float(scores.mean()))
                    total, count = total + float(scores.sum()), count + len(scores)
                return total / max(count, 1), per_item

            bound = task.get("max_drop") if task.get("max_drop") is not None else task.get("limit")
            quantized = nncf.quantize_with_accuracy_control(
                model, calibration, nncf.Dataset(indexed, lambda item: item[1]), validate,
                max_drop=float(bound), drop_type=nncf.DropType.ABSOLUTE, subset_size=subset, **nncf_arguments(base))
            info.update(base=base, validations=len(validations))
        elif recipe == "mixed-precision":
            quantized = nncf.quantize(model, calibration, subset_size=subset, **nncf_arguments(base))
            deadline = started + float(task.get("budget_s") or 600)
            quantized, kept = _mixed_precision(model, quantized, val_items, target_of, metric, output,
                                               float(task.get("limit") or 0.01), deadline)
            info.update(base=base, fp32_layers=kept)
        else:
            quantized = nncf.quantize(model, calibration, subset_size=subset, **nncf_arguments(recipe))
    finally:
        shutil.rmtree(spool_dir, ignore_errors=True)
    ov.save_model(quantized, task["out"], compress_to_fp16=False)
    _emit({"type": "result", "path": task["out"], "seconds": round(time.monotonic() - started, 2), **info})


def _validation_targets(task: dict, ds, model, val_items: list, step: int, output, spool_dir: str):
    """(metric, targets of item i, reference) for validation: the labels, else the FP32 model's own
    outputs, kept on disk item by item (a spool) rather than in memory."""
    import openvino as ov

    from wb_core.accuracy import reference_targets, resolve_metric

    if ds.y is not None:
        targets = ds.y[:len(val_items) * step]
        return (resolve_metric(task.get("metric") or "auto", targets),
                lambda i: targets[i * step:(i + 1) * step], None)
    fp32 = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    spool = ReferenceSpool(spool_dir)
    for i, it in enumerate(val_items):
        spool.write(i, [pick_output(fp32(it), output)])
    name = task.get("metric") or "auto"
    metric, _ = reference_targets(name, spool.read(0)[0])
    return metric, lambda i: reference_targets(name, spool.read(i)[0])[1], "fp32 outputs"


WEIGHTED = ("MatMul", "Convolution", "GroupConvolution", "ConvolutionBackpropData")


def _dequantize_layers(model, names: set[str]) -> None:
    """Feed the named layers their floating-point inputs: their FakeQuantize inputs are bypassed."""
    for op in model.get_ops():
        if op.get_friendly_name() in names:
            for port in op.inputs():
                src = port.get_source_output().get_node()
                if src.get_type_name() == "FakeQuantize":
                    port.replace_source_output(src.input_value(0))


def _mixed_precision(model, quantized, val_items, target_of, metric, output, limit: float, deadline: float):
    """Keep the most sensitive layers in FP32 until the drop against FP32 is within `limit`.

    A layer's sensitivity is the metric gained when it alone runs in floating point; layers are
    then returned to FP32 most sensitive first. Stops at the deadline with the best model so far.
    """
    import openvino as ov

    from wb_core.variants.agreement import RunningScore

    core = ov.Core()

    def score(m) -> float:
        compiled = core.compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        running = RunningScore(metric)
        for i, it in enumerate(val_items):
            running.update(pick_output(compiled(it), output), target_of(i))
        return running.value

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
