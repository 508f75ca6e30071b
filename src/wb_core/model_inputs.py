"""What a model's inputs are and how big a batch of them is: the input description every
backend session returns, the concrete shape at a batch size, and OpenVINO's reader errors in words.

Backend sessions read these at run time; `models` re-exports them. This module imports no other
package of the workbench but `errors`, so a session can use it without tying `backends/` to
`models` and `config` (the run options it reads are typed under TYPE_CHECKING only).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wb_core.errors import ConfigError, ModelError, setting

if TYPE_CHECKING:
    from wb_core.config import InputOptions


MAX_INPUT_BYTES = 8 << 30  # one generated input batch; beyond this a shape is a typo, not a plan


@dataclass(frozen=True)
class InputSpec:
    """One model input. `shape` uses -1 for a dynamic dimension; `batch_axis` is the dimension that
    holds the batch (0 for most inputs; 1 for a recurrent state laid out [layers, batch, hidden])."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    batch_axis: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        if not self.batch_axis:
            d.pop("batch_axis")  # the common case stays as it always was stored
        return d

    @classmethod
    def from_dict(cls, d: dict) -> InputSpec:
        return cls(name=d["name"], shape=tuple(d["shape"]), dtype=d["dtype"], batch_axis=int(d.get("batch_axis") or 0))

    def describe(self) -> str:
        dims = "x".join("?" if d < 0 else str(d) for d in self.shape) or "scalar"
        where = f" (batch on axis {self.batch_axis})" if self.batch_axis else ""
        return f"{self.name}: {dims} {self.dtype}{where}"

    @property
    def batched(self) -> bool:
        """The input has a batch dimension (a scalar, such as a sample rate, has none)."""
        return len(self.shape) > 0

    def sample_shape(self) -> tuple[int, ...]:
        """The shape of one sample: the input's shape without its batch dimension."""
        return tuple(d for i, d in enumerate(self.shape) if i != self.batch_axis) if self.batched else ()


def ov_inputs(model) -> list[InputSpec]:
    """InputSpecs of an openvino.Model; the batch axis from the input's layout when it names one (N)."""
    specs = []
    for i, port in enumerate(model.inputs):
        try:
            name = port.get_any_name()
        except RuntimeError:
            name = f"input_{i}"
        ps = port.get_partial_shape()
        shape = tuple(-1 if d.is_dynamic else d.get_length() for d in ps) if ps.rank.is_static else (-1,)
        specs.append(InputSpec(name=name, shape=shape, dtype=_ov_dtype(port.get_element_type()),
                               batch_axis=_layout_batch_axis(port, len(shape))))
    return specs


def _layout_batch_axis(port, rank: int) -> int:
    """Where the input's layout (set in the IR, e.g. `?N?`) puts the batch; 0 when it sets none."""
    try:
        layout = port.get_node().get_layout()
        if layout.empty or not layout.has_name("N"):
            return 0
        axis = int(layout.get_index_by_name("N"))
    except Exception:  # an older layout API, or a layout without a batch letter
        return 0
    axis = axis + rank if axis < 0 else axis
    return axis if 0 <= axis < rank else 0


def batch_axis_of(spec: InputSpec, opts: InputOptions | None = None) -> int:
    """The input's batch axis: the one given in the options (by name), else the model's own."""
    given = dict(getattr(opts, "batch_axes", None) or {})
    axis = given.get(spec.name, given.get(spec.name.split(":")[0], spec.batch_axis))
    return int(axis) if spec.batched else 0


def with_batch_axes(specs, axes: dict | None) -> list[InputSpec]:
    """The specs with the batch axes given by name (the others as they are)."""
    from dataclasses import replace

    axes = axes or {}
    out = []
    for s in specs:
        axis = axes.get(s.name, axes.get(s.name.split(":")[0]))
        out.append(replace(s, batch_axis=int(axis)) if axis is not None and s.batched else s)
    return out


def guess_batch_axes(specs: list[InputSpec]) -> dict[str, tuple[int, str]]:
    """Inputs whose batch is plainly not on axis 0, with the reason: input name -> (axis, why).

    A recurrent state laid out [layers, batch, hidden] (silero-vad's `state` is 2x?x128) has a fixed
    first dimension while the batch of the other inputs is dynamic (or of a fixed size b): when exactly
    one of its other dimensions is dynamic (or b), that one is its batch. Inputs whose layout names
    the batch are left as they are.
    """
    main = next((s for s in specs if s.batched and s.batch_axis == 0 and s.shape[0] < 0), None) \
        or next((s for s in specs if s.batched and s.batch_axis == 0), None)
    if main is None:
        return {}
    batch = main.shape[0]
    out = {}
    for s in specs:
        if s is main or s.batch_axis or len(s.shape) < 2 or s.shape[0] == batch or s.shape[0] < 0:
            continue
        same = [i for i, d in enumerate(s.shape) if i > 0 and d == batch]
        if len(same) == 1:
            size = "dynamic" if batch < 0 else f"{batch}"
            out[s.name] = (same[0], f"its first dimension is fixed at {s.shape[0]} while the batch of '{main.name}' "
                                    f"is {size}, as is its dimension {same[0]}")
    return out


def _ov_dtype(t) -> str:
    name = t.get_type_name() if hasattr(t, "get_type_name") else str(t)
    return {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i64": "int64",
            "i32": "int32", "i8": "int8", "u8": "uint8", "boolean": "bool"}.get(name, name)


# What OpenVINO's reader says (after its C++ file and line) -> what is wrong, in words.
_OV_READ_ERRORS = (
    (r"No conversion rule found for operations?: (?P<ops>[^\n]+)",
     "it uses operations OpenVINO has no conversion for ({ops})"),
    (r"Incorrect weights in bin file|weights.*(?:out of|exceed)|Empty weights data",
     "its weights file '{bin}' does not match it (cut short, or from another model); copy both files again"),
    (r"Error parsing|pugi|not well.formed|XML",
     "it is not a complete IR file (its XML is broken{where}); save or copy the model again"),
    (r"doesn't contain the operation with type: (?P<op>\S+)",
     "it uses an operation '{op}' that this OpenVINO does not know; save it again with this OpenVINO version"),
    (r"unsupported opset: (?P<opset>\S+)",
     "it was saved with operation set '{opset}', which this OpenVINO does not know; save it again with this "
     "OpenVINO version"),
    (r"While validating node|Argument has \d+ outputs|edge",
     "its layers are not wired together correctly (an edge points to a missing layer or port); export it again"),
    (r"Unable to read the model|Please check that model format",
     "it is not a valid {kind} model (none of OpenVINO's readers understands its content); export or copy it "
     "again"),
    (r"[Mm]odel file .* is not found|cannot open|No such file|does not exist",
     "the file or its weights cannot be opened; check that both the .xml and the .bin are there and readable"),
)


def ov_read_error(path: str | Path, e: BaseException | str) -> ModelError:
    """OpenVINO's reader error as one plain sentence naming the file and what is wrong with it.

    OpenVINO's messages start with its own C++ source paths ("Exception from src/...", "Check '...'
    failed at src/..."); those mean nothing to the person whose model it is.
    """
    text = str(e)
    p = Path(path)
    for pattern, words in _OV_READ_ERRORS:
        m = re.search(pattern, text)
        if m:
            at = re.search(r"at offset (\d+)", text)
            kind = {".onnx": "ONNX", ".xml": "OpenVINO IR", ".pb": "TensorFlow", ".tflite": "TensorFlow Lite"}.get(
                p.suffix.lower(), "model")
            fields = {"bin": p.with_suffix(".bin").name, "where": f" near byte {at.group(1)}" if at else "", "kind": kind,
                      **{k: v.strip("'\".,:") for k, v in m.groupdict().items()}}
            return ModelError(f"OpenVINO cannot read the model '{p}': {words.format(**fields)}.")
    detail = _last_line(text)
    return ModelError(f"OpenVINO cannot read the model '{p}': {detail.rstrip('.')}.")


def _last_line(text: str, limit: int = 200) -> str:
    """OpenVINO puts the message last, under lines naming its own sources."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    plain = [ln for ln in lines if not ln.startswith(("Exception from ", "Check ", "Traceback", "File "))
             and "src/" not in ln and ".cpp:" not in ln]
    return (plain[-1] if plain else "the file is not a model it reads")[:limit]


def first_line(e: BaseException | str, limit: int = 300) -> str:
    """The first meaningful line of an exception message, short enough for one sentence."""
    text = str(e).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Check ", "Traceback", "File ")) and "src/" not in line[:40]:
            return line[:limit]
    return (text.splitlines()[0] if text else type(e).__name__)[:limit]


def resolve_shape(spec: InputSpec, batch_size: int, opts: InputOptions) -> tuple[int, ...]:
    """Concrete shape for one input at a batch size, filling dynamic dimensions from the options.

    The batch goes on the input's batch axis (`batch_axis_of`); a scalar input has no batch."""
    if batch_size < 1:
        raise ConfigError(f"Batch size must be at least 1; got {batch_size}.")
    shape = list(opts.shapes.get(spec.name) or opts.shapes.get(spec.name.split(":")[0]) or spec.shape)
    if len(shape) != len(spec.shape) and spec.shape != (-1,):
        raise ConfigError(
            f"Shape {tuple(shape)} given for input '{spec.name}' has {len(shape)} dimensions; the model expects "
            f"{len(spec.shape)} ({spec.describe()})."
        )
    if not shape:
        return ()
    axis = batch_axis_of(spec, opts)
    if not 0 <= axis < len(shape):
        raise ConfigError(f"The batch axis {axis} given for input '{spec.name}' is not one of its {len(shape)} "
                          f"dimensions ({spec.describe()}); give {setting('batch_axes', 'a batch axis')} "
                          f"{spec.name}=0..{len(shape) - 1}.")
    shape[axis] = batch_size
    for i in range(len(shape)):
        if shape[i] < 0 and i != axis:
            if opts.dynamic_size is None:
                raise ConfigError(
                    f"Input '{spec.name}' has a dynamic dimension {i} ({spec.describe()}); give its size with "
                    f"{setting('seq_lens', 'a sequence length')} N or {setting('shapes', 'a shape')} {spec.name}=1x..."
                )
            shape[i] = opts.dynamic_size
    elements = 1
    for d in shape:
        elements *= d
    if elements * 4 > MAX_INPUT_BYTES:
        raise ConfigError(
            f"Input '{spec.name}' at batch size {batch_size} would be {tuple(shape)} = {elements * 4 / 2**30:,.1f} GiB, "
            f"too large to generate (limit {MAX_INPUT_BYTES / 2**30:g} GiB)."
        )
    return tuple(shape)
