"""The inputs and outputs of the model files an export ships: names, element types and shapes.

Serving configs must name a model's tensors as the served file names them: an IR converted from a
SavedModel can call its input `keras_tensor` where the signature said `image`. So the Triton
export reads them from the IR itself when it is on disk (reading an IR's graph takes
milliseconds), and falls back to the study's inputs otherwise.
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
    from wb_core.models import _ov_dtype

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
    """(inputs, outputs) of an IR, after reshaping its inputs to `shapes` when given; None if unreadable."""
    if not ir_path or not Path(ir_path).is_file():
        return None
    try:
        import openvino as ov

        model = ov.Core().read_model(str(ir_path))
        if shapes:
            model.reshape({port.get_any_name(): ov.PartialShape(list(shapes[port.get_any_name()]))
                           for port in model.inputs if port.get_any_name() in shapes})
        return ([_tensor(p, i, "input") for i, p in enumerate(model.inputs)],
                [_tensor(p, i, "output") for i, p in enumerate(model.outputs)])
    except Exception:  # an IR that does not read (or reshape) leaves the study's inputs to go by
        return None
