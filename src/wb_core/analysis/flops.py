"""Count a model's floating-point operations from its OpenVINO IR.

Neither runtime reports FLOPs, so we count the ops that dominate the arithmetic of CNNs and
transformers: convolutions and matrix products, 2 FLOPs per multiply-accumulate. Element-wise
ops, pooling and activations are left out; they are a few percent at most in the models this
workbench targets, which is good enough for "percent of peak".
"""

from __future__ import annotations

import math
from pathlib import Path

# MACs per op type, from static shapes: (output shape, input shapes) -> multiply-accumulates.


def _prod(dims) -> int:
    return int(math.prod(int(d) for d in dims))


def _conv_macs(out, ins) -> int:
    # weights [C_out, C_in, k...]: every output element needs C_in x k... MACs.
    return _prod(out) * _prod(ins[1][1:])


def _group_conv_macs(out, ins) -> int:
    # weights [G, C_out/G, C_in/G, k...]
    return _prod(out) * _prod(ins[1][2:])


def _deconv_macs(out, ins) -> int:
    # weights [C_in, C_out, k...]: every input element is spread over C_out x k... outputs.
    return _prod(ins[0]) * _prod(ins[1][1:])


def _matmul_macs(out, ins, transpose_a: bool) -> int:
    a = ins[0]
    k = a[-2] if (transpose_a and len(a) > 1) else a[-1]
    return _prod(out) * int(k)


def count_model_flops(model) -> int:
    """FLOPs of one inference of an `openvino.Model` whose shapes are all static."""
    total = 0
    for op in model.get_ordered_ops():
        kind = op.get_type_name()
        if kind not in ("Convolution", "GroupConvolution", "ConvolutionBackpropData", "MatMul"):
            continue
        try:
            out = list(op.get_output_partial_shape(0).to_shape())
            ins = [list(op.get_input_partial_shape(i).to_shape()) for i in range(2)]
        except RuntimeError:  # a dynamic dimension left: skip rather than guess
            continue
        if kind == "Convolution":
            macs = _conv_macs(out, ins)
        elif kind == "GroupConvolution":
            macs = _group_conv_macs(out, ins)
        elif kind == "ConvolutionBackpropData":
            macs = _deconv_macs(out, ins)
        else:
            attrs = op.get_attributes()
            macs = _matmul_macs(out, ins, bool(attrs.get("transpose_a", False)))
        total += 2 * macs
    return total


def flops_per_sample(ir_path: str | Path, input_shapes: dict[str, tuple[int, ...]] | None = None,
                     batch_size: int = 1) -> float | None:
    """FLOPs per sample of the IR at `batch_size`, counted in a worker (the parent never imports OpenVINO).

    `input_shapes` fills dynamic dimensions (name -> full shape); without it, dynamic non-batch
    dimensions make the count impossible and the result is None.
    """
    from wb_core.proc.parent import run_task

    shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    msg = run_task({"task": "wb_core.analysis.flops:task_flops", "ir_path": str(ir_path), "shapes": shapes,
                    "batch_size": int(batch_size)}, timeout=120, what=f"counting the FLOPs of {Path(ir_path).name}")
    return msg.get("flops_per_sample")


def task_flops(task: dict) -> None:
    """Worker side of flops_per_sample: read the IR, reshape it to the batch, count."""
    import openvino as ov

    from wb_core.models import ov_inputs
    from wb_core.proc.channel import emit

    batch_size = task["batch_size"]
    model = ov.Core().read_model(task["ir_path"])
    shapes, result = {}, None
    for spec in ov_inputs(model):
        shape = list(task["shapes"].get(spec.name) or spec.shape)
        if not shape:
            continue
        shape[0] = batch_size
        if any(int(d) < 0 for d in shape):
            break
        shapes[spec.name] = ov.PartialShape([int(d) for d in shape])
    else:
        try:
            if shapes:
                model.reshape(shapes)
            flops = count_model_flops(model)
            result = flops / batch_size if flops else None
        except RuntimeError:
            result = None
    emit({"type": "result", "flops_per_sample": result})
