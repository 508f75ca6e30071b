"""The inputs and outputs of the model files an export ships: names, element types and shapes.

Serving configs must name a model's tensors as the served file names them: an IR converted from a
SavedModel can call its input `keras_tensor` where the signature said `image`. So the Triton
export reads them from the IR itself when it is on disk (in a worker: the parent never imports
OpenVINO), and falls back to the study's inputs otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Tensor:
    name: str
    dtype: str  # numpy-style name: float32, int64, ...
    shape: list[int]  # -1 marks a dynamic dimension; dimension 0 is the batch


def _dtype(t) -> str:
    from wb_core.model_inputs import _ov_dtype

    return _ov_dtype(t)


def _tensor(port, i: int, kind: str) -> Tensor:
    try:
        name = port.get_any_name()
    except RuntimeError:
        name = f"{kind}_{i}"
    ps = port.get_partial_shape()
    shape = [-1 if d.is_dynamic else d.get_length() for d in ps] if ps.rank.is_static else [-1]
    return Tensor(name, _dtype(port.get_element_type()), shape)


def ir_io(ir_path: str | None, shapes: dict[str, list[int]] | None = None) -> tuple[list[Tensor], list[Tensor]] | None:
    """(inputs, outputs) of an IR, after reshaping its inputs to `shapes` when given; None if unreadable.

    The IR is read in a worker, so the parent never imports OpenVINO.
    """
    if not ir_path or not Path(ir_path).is_file():
        return None
    from wb_core.errors import WorkbenchError
    from wb_core.proc.parent import run_task

    try:
        msg = run_task({"task": "wb_core.export.modelio:task_ir_io", "ir_path": str(ir_path),
                        "shapes": {k: [int(d) for d in v] for k, v in (shapes or {}).items()}},
                       timeout=120, what=f"reading the inputs and outputs of {Path(ir_path).name}")
    except WorkbenchError:  # a worker that cannot start leaves the study's inputs to go by
        return None
    if msg.get("io") is None:
        return None
    ins, outs = msg["io"]
    return [Tensor(**t) for t in ins], [Tensor(**t) for t in outs]


def task_ir_io(task: dict) -> None:
    """Worker side of ir_io."""
    from dataclasses import asdict

    import openvino as ov

    from wb_core.proc.channel import emit

    shapes = task["shapes"]
    try:
        model = ov.Core().read_model(task["ir_path"])
        if shapes:
            model.reshape({port.get_any_name(): ov.PartialShape(list(shapes[port.get_any_name()]))
                           for port in model.inputs if port.get_any_name() in shapes})
        io = ([asdict(_tensor(p, i, "input")) for i, p in enumerate(model.inputs)],
              [asdict(_tensor(p, i, "output")) for i, p in enumerate(model.outputs)])
    except Exception:  # an IR that does not read (or reshape) leaves the study's inputs to go by
        io = None
    emit({"type": "result", "io": io})
