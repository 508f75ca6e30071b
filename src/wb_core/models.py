"""Model files: detect the format, fingerprint the content, describe inputs, make input batches.

Formats: TensorFlow SavedModel directory, Keras `.keras` file, ONNX `.onnx` (with its external data
files), OpenVINO IR `.xml`+`.bin`, TensorFlow Lite `.tflite` and PaddlePaddle `.pdmodel` (+`.pdiparams`),
the last two read by OpenVINO's own frontends.
Inspecting TensorFlow formats needs TensorFlow, which costs seconds and ~800 MB, so the parent
process asks a child for it (see `wb_core.proc.parent`); ONNX and IR are read with OpenVINO in-process.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from wb_core.config import InputOptions, default_int_range
from wb_core.errors import ConfigError, ModelError, Sentence, setting
from wb_core.model_inputs import (  # noqa: F401 - first_line and ov_inputs are read from here too
    InputSpec,
    batch_axis_of,
    first_line,
    ov_inputs,
    ov_read_error,
    resolve_shape,
)

# Each format the workbench reads, with its name in words ("openvino" is the IR format, not the backend).
FORMAT_TITLES = {"savedmodel": "TensorFlow SavedModel", "keras": "Keras", "onnx": "ONNX", "openvino": "OpenVINO IR",
                 "tflite": "TensorFlow Lite", "paddle": "PaddlePaddle"}
FORMATS = tuple(FORMAT_TITLES)
IR_FORMAT = "openvino"  # the OpenVINO IR files the variant step makes and reads


def format_title(fmt: str) -> str:
    """A model format in words ("OpenVINO IR"); the key itself for one not listed."""
    return FORMAT_TITLES.get(fmt, fmt)

_FLOAT_DTYPES = {"float32", "float16", "float64", "bfloat16"}
_INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"}


def detect_format(path: str | Path) -> str:
    """Return one of FORMATS for a user path, or raise ModelError saying why not."""
    from wb_core.streams import refuse_special

    p = Path(path)
    if not p.exists():
        raise ModelError(f"Model path '{p}' does not exist.")
    refuse_special(p, "Model path", ModelError)
    if p.is_dir():
        if (p / "saved_model.pb").is_file():
            return "savedmodel"
        if not any(p.iterdir()):
            raise ModelError(f"Model directory '{p}' is empty.")
        raise ModelError(f"Directory '{p}' is not a TensorFlow SavedModel (it has no saved_model.pb).")
    if p.stat().st_size == 0:
        raise ModelError(f"Model file '{p}' is empty.")
    suffix = p.suffix.lower()
    if suffix == ".keras":
        return "keras"
    if suffix == ".onnx":
        return "onnx"
    if suffix == ".tflite":
        return "tflite"
    if suffix == ".pdmodel":
        if not p.with_suffix(".pdiparams").is_file():
            raise ModelError(f"PaddlePaddle model '{p}' has no weights file '{p.with_suffix('.pdiparams').name}' "
                             f"beside it.")
        return "paddle"
    if suffix == ".xml":
        if not p.with_suffix(".bin").is_file():
            raise ModelError(f"OpenVINO IR '{p}' has no weights file '{p.with_suffix('.bin').name}' beside it.")
        return IR_FORMAT
    if suffix == ".bin" and p.with_suffix(".xml").is_file():
        raise ModelError(f"'{p}' is the weights half of an OpenVINO IR; pass '{p.with_suffix('.xml')}' instead.")
    if suffix in (".h5", ".hdf5"):
        raise ModelError(f"'{p}' is a legacy HDF5 Keras file; save it as .keras or as a SavedModel first.")
    raise ModelError(
        f"'{p}' is not a model format the workbench reads; use a SavedModel directory, .keras, .onnx, .xml "
        f"(OpenVINO IR), .tflite (TensorFlow Lite) or .pdmodel (PaddlePaddle)."
    )


MAIN = "."  # the label of the file the user names, whatever its name: a renamed copy is the same model


def model_files(path: str | Path) -> list[tuple[str, Path]]:
    """Every file the model reads, each with its label: what the model calls it, so that a renamed or
    moved copy has the same labels. The file the user names is MAIN; an IR's weights are `.bin`; an
    ONNX model's external data files are their `location`; a SavedModel's files (variables/, assets/)
    are their paths inside the folder."""
    p = Path(path)
    if p.is_dir():
        return [(str(f.relative_to(p)), f) for f in sorted(p.rglob("*")) if f.is_file()]
    files = [(MAIN, p)]
    weights = {".xml": ".bin", ".pdmodel": ".pdiparams"}.get(p.suffix.lower())
    if weights and p.with_suffix(weights).exists():
        files.append((weights, p.with_suffix(weights)))
    if p.suffix.lower() == ".onnx":
        files += [(loc, p.parent / loc) for loc in onnx_external_files(p)]
    return files


_EXTERNAL: dict[tuple, tuple[str, ...]] = {}  # ONNX file (path, size, mtime) -> its external data locations


def onnx_external_files(path: str | Path) -> tuple[str, ...]:
    """The external data files an ONNX model keeps its tensors in (each initializer's and constant's
    `location`), in order; a location outside the model's folder, or a file that is not there, is
    refused in a sentence."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _EXTERNAL:
        try:
            import onnx
            from onnx.external_data_helper import _get_all_tensors, uses_external_data
        except ImportError:
            return ()
        try:
            proto = onnx.load(str(p), load_external_data=False)
        except Exception:
            return ()  # unreadable: the model's reader gives the sentence
        locations: list[str] = []
        for tensor in _get_all_tensors(proto):
            if not uses_external_data(tensor):
                continue
            loc = next((e.value for e in tensor.external_data if e.key == "location"), "")
            if loc and loc not in locations:
                locations.append(loc)
        _EXTERNAL[key] = tuple(locations)
    for loc in _EXTERNAL[key]:
        target = Path(loc)
        if target.is_absolute() or ".." in target.parts:
            raise ModelError(f"ONNX model '{p}' reads its weights from '{loc}', outside its own folder; keep the "
                             f"external data files beside the model.")
        if not (p.parent / target).is_file():
            raise ModelError(f"ONNX model '{p}' keeps its weights in '{loc}', which is not beside it "
                             f"(looked for {p.parent / target}); copy it there.")
    return _EXTERNAL[key]


# SHA-256 per file, by (path, inode, size, mtime): a rewritten file gets a new mtime, so it is read again,
# while the checks that a model is still the one measured cost one stat() per file after the first. Only
# files unchanged for RACY_S are kept: a rewrite within the file system's clock tick keeps the mtime.
_DIGESTS: dict[tuple, str] = {}
RACY_S = 2.0


def file_digests(path: str | Path) -> dict[str, str]:
    """Label -> SHA-256 of the bytes, for every file the model reads (see `model_files`)."""
    out = {}
    for label, f in model_files(path):
        st = f.stat()
        key = (str(f.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
        digest = _DIGESTS.get(key)
        if digest is None:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            digest = h.hexdigest()
            if time.time() - st.st_mtime > RACY_S:
                _DIGESTS[key] = digest
        out[label] = digest
    return out


def fingerprint(path: str | Path, digests: dict[str, str] | None = None) -> str:
    """Content hash of every file the model reads (each by its label, not its name, and its bytes):
    a changed weights file changes it; a renamed or moved identical copy keeps it."""
    digests = file_digests(path) if digests is None else digests
    h = hashlib.sha256()
    for label in sorted(digests):
        h.update(f"{label}\0{digests[label]}\n".encode())
    return h.hexdigest()[:16]


def check_measured(path: str | Path, fp: str | None) -> None:
    """Refuse to use the model at `path` for a study that measured content `fp` (its stored fingerprint)
    when a file it reads now holds something else: a converted file cached under `fp`, a layer profile
    or a bundle would otherwise be the changed model under the study's name. None: nothing to compare."""
    if not fp or fp == "None" or fingerprint(path) == fp:
        return
    raise ModelError(f"The model at '{path}' has changed since it was measured (its files' content differs from the "
                     f"study's); profile it again in a new study.")


def own_files(paths, model: str | Path) -> bool:
    """Whether any of `paths` is a file the model at `model` reads (the user's own, which may have been
    rewritten since it was measured) rather than one the workbench made (cached by content)."""
    model = Path(model)
    try:
        if not model.exists():
            return False
        own = {f.resolve() for _, f in model_files(model)}
    except (ModelError, OSError):
        return True  # a file it reads is missing: what it reads now cannot be what was measured
    return any(Path(p).resolve() in own for p in paths)


def changed_files(stored: dict[str, str], path: str | Path) -> list[str]:
    """The files of the model at `path` whose content is not what `stored` (label -> digest) recorded,
    by the name they have now; a file that was added or is no longer read is listed too."""
    current = file_digests(path)
    p = Path(path)
    names = {label: str(f.relative_to(p)) if p.is_dir() else f.name for label, f in model_files(p)}
    out = [names.get(label, label) for label in sorted(set(current) | set(stored))
           if current.get(label) != stored.get(label)]
    return out


def ov_outputs(model) -> list[str]:
    """Output names of an openvino.Model, in order (`output_N` for an unnamed one)."""
    out = []
    for i, port in enumerate(model.outputs):
        names = sorted(port.get_names())
        out.append(names[0] if names else f"output_{i}")
    return out


def quantized_weights(model) -> str | None:
    """'int8' when the model was quantized beforehand (FakeQuantize ops or 8-bit weights), else None."""
    for op in model.get_ops():
        kind = op.get_type_name()
        if kind == "FakeQuantize":
            return "int8"
        low_bits = kind == "Constant" and op.get_element_type().get_type_name() in ("i8", "u8", "i4", "u4")
        if low_bits and op.get_output_partial_shape(0).rank.get_length() >= 2:  # weights, not a zero point
            return "int8"
    return None


def _integer_parameters(model):
    """(input name, Parameter) of each input that does not take real numbers."""
    for i, param in enumerate(model.get_parameters()):
        if param.get_element_type().is_real():
            continue
        try:
            name = model.inputs[i].get_any_name()
        except RuntimeError:
            name = f"input_{i}"
        yield name, param


def embedding_rows(model) -> dict[str, int]:
    """Integer inputs of an openvino.Model that index an embedding table: input name -> table rows.

    An input feeding (directly or through a Convert) the indices of a Gather whose data is a
    constant can only take values below that constant's size on the gathered axis.
    """
    out: dict[str, int] = {}
    for name, param in _integer_parameters(model):
        frontier = [param.output(0)]
        for _ in range(3):  # the input, a Convert, maybe a Reshape
            nxt = []
            for port in frontier:
                for target in port.get_target_inputs():
                    node = target.get_node()
                    kind = node.get_type_name()
                    if kind == "Gather" and target.get_index() == 1:
                        rows = _gather_rows(node)
                        if rows:
                            out[name] = min(rows, out.get(name, rows))
                    elif kind in ("Convert", "Reshape", "Squeeze", "Unsqueeze"):
                        nxt.append(node.output(0))
            frontier = nxt
    return out


def _gather_rows(gather) -> int | None:
    data = gather.input_value(0).get_node()
    while data.get_type_name() in ("Convert", "Dequantize", "Multiply", "Subtract") and data.get_input_size():
        data = data.input_value(0).get_node()
    if data.get_type_name() != "Constant":
        return None
    axis_node = gather.input_value(2).get_node()
    if axis_node.get_type_name() != "Constant":
        return None
    axis = int(np.asarray(axis_node.get_data()).reshape(-1)[0])
    shape = list(data.get_output_shape(0))
    return int(shape[axis]) if -len(shape) <= axis < len(shape) else None


def read_ov_model(path: str | Path):
    """Read an ONNX or IR file with OpenVINO, turning runtime errors into a ModelError."""
    import openvino as ov

    try:
        return ov.Core().read_model(str(path))
    except Exception as e:  # OpenVINO raises RuntimeError with a long C++ trace
        raise ov_read_error(path, e) from None


def check_ov_model(model, path) -> None:
    """Refuse a model with no inputs or no layers (nothing but parameters, constants and results)."""
    if not model.inputs:
        raise ModelError(f"Model '{path}' has no inputs; the workbench measures models that take input.")
    kinds = {op.get_type_name() for op in model.get_ops()}
    if not kinds - {"Parameter", "Result", "Constant", "Identity"}:
        raise ModelError(f"Model '{path}' has no layers (only inputs and outputs); there is nothing to measure.")


def check_onnx_opsets(path) -> None:
    """Refuse an ONNX file that imports a standard opset newer than any this installation knows."""
    try:
        import onnx
    except ImportError:
        return  # OpenVINO's own reader decides
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception:
        return  # unreadable: OpenVINO's reader gives the sentence
    newest = onnx.defs.onnx_opset_version()
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx") and imp.version > newest:
            raise ModelError(f"ONNX model '{path}' imports opset {imp.version}, newer than the newest known here "
                             f"({newest}); export it with opset {newest} or lower.")
        if imp.domain in ("", "ai.onnx") and imp.version < 1:
            raise ModelError(f"ONNX model '{path}' imports opset {imp.version}, which does not exist.")


def make_batches(specs: list[InputSpec], batch_size: int, opts: InputOptions, pool_size: int = 32,
                 seed: int = 0, max_batches: int = 8, max_bytes: int = 256 << 20) -> list[dict[str, np.ndarray]]:
    """Distinct random input batches drawn from a seeded pool of `pool_size` samples per input.

    Batches are pre-built (so no copying happens inside the timed loop) and cycled by the caller.
    """
    rng = np.random.default_rng(seed)
    shapes = {s.name: resolve_shape(s, batch_size, opts) for s in specs}
    axes = {s.name: batch_axis_of(s, opts) for s in specs}
    sample_bytes = sum(int(np.prod(sh or (1,))) // batch_size * 4 for sh in shapes.values())
    n_batches = max(1, min(max_batches, max_bytes // max(1, sample_bytes * batch_size)))
    text = _text_pool(specs, shapes, opts)
    pool = text or {}
    if text:
        pool_size = len(next(iter(text.values())))
    scalars = {}  # inputs without a batch (a sample rate): one value, the same in every batch
    for s in specs if not text else ():
        shape = shapes[s.name]
        dims = (1,) if not shape else (pool_size,) + tuple(d for i, d in enumerate(shape) if i != axes[s.name])
        dtype = np.dtype("float32" if s.dtype == "bfloat16" else s.dtype)
        if s.dtype in _INT_DTYPES:
            lo, hi = opts.range_for(s.name) or default_int_range(s.name)[0]
            if s.dtype == "bool":
                values = rng.integers(0, 2, size=dims).astype(bool)
            else:
                values = rng.integers(lo, hi, size=dims).astype(dtype)
        else:
            values = rng.random(size=dims, dtype=np.float32).astype(dtype)
        if shape:
            pool[s.name] = values
        else:
            scalars[s.name] = np.asarray(values[0])
    batches = []
    for j in range(n_batches):
        idx = (np.arange(batch_size) + j * batch_size) % pool_size
        # Samples are drawn along the pool's first axis and put on each input's own batch axis.
        batches.append({**{name: np.ascontiguousarray(np.moveaxis(arr[idx], 0, axes.get(name, 0)))
                           for name, arr in pool.items()}, **scalars})
    return batches


def _text_pool(specs: list[InputSpec], shapes: dict, opts: InputOptions) -> dict[str, np.ndarray] | None:
    """Tokenized text for these shapes, when the sweep has some (see wb_core.text); else None."""
    if not opts.samples:
        return None
    from wb_core.text import sample_arrays

    lengths = {sh[1] for sh in shapes.values() if len(sh) == 2}
    if len(lengths) != 1:
        return None
    arrays = sample_arrays(opts.samples, lengths.pop())
    if not arrays or any(s.name not in arrays for s in specs):
        return None
    return {s.name: np.ascontiguousarray(arrays[s.name].astype(np.dtype(s.dtype), copy=False)) for s in specs}


def resolve_int_ranges(specs: list[InputSpec], opts: InputOptions, rows: dict[str, int] | None = None,
                       declared: dict[str, list] | None = None) -> tuple[InputOptions, list[str]]:
    """Every integer input's range made explicit, checked against the tables it indexes.

    Returns the options with a range for each integer input, and a note for each input that got
    a default (the value the model's graph names for it, as `declared` holds it: a sample rate;
    else chosen by its name; token ids span the embedding table when `rows` names it). A range
    reaching past the table is refused before anything is measured.
    """
    import dataclasses

    opts.check_names(specs)
    rows = rows or {}
    ranges, notes = dict(opts.int_ranges), []
    for s in specs:
        if s.dtype not in _INT_DTYPES or s.dtype == "bool":
            continue
        bound = rows.get(s.name) or rows.get(s.name.split(":")[0])
        given = opts.range_for(s.name)
        if given is None and (declared or {}).get(s.name):
            value, why = declared[s.name]
            given = (int(value), int(value) + 1)
            notes.append(Sentence(f"Integer input '{s.name}' gets {why}; choose another with "
                                  f"{setting('int_ranges', 'an integer range')} {s.name}=LOW:HIGH."))
        if given is None:
            given, why = default_int_range(s.name, bound)
            notes.append(Sentence(f"Integer input '{s.name}' gets values {why}; choose them with "
                                  f"{setting('int_ranges', 'an integer range')} {s.name}=LOW:HIGH."))
        lo, hi = given
        if bound and (lo < 0 or hi > bound):
            raise ConfigError(f"The range {lo}:{hi} for input '{s.name}' reaches past the model's embedding table of "
                              f"{bound} rows; valid values are 0:{bound}.")
        ranges[s.name] = tuple(given)
    return dataclasses.replace(opts, int_ranges=ranges), notes


_COMPARISONS = ("Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual")


def declared_values(model) -> dict[str, list]:
    """Integer inputs without a batch (a sample rate) whose value the model's graph names: input name
    -> [value, why]. silero-vad compares its `sr` input with 16000 (and 8000): the first value it is
    compared with is the one it expects. Read on an openvino.Model."""
    out: dict[str, list] = {}
    for name, param in _integer_parameters(model):
        rank = param.get_partial_shape().rank
        if rank.is_dynamic or rank.get_length() > 1:
            continue
        frontier = [param.output(0)]
        for _ in range(3):  # the input, a Convert or Squeeze, the comparison
            nxt = []
            for port in frontier:
                for target in port.get_target_inputs():
                    node = target.get_node()
                    kind = node.get_type_name()
                    if kind in _COMPARISONS and name not in out:
                        other = node.input_value(1 - target.get_index()).get_node()
                        if other.get_type_name() == "Constant":
                            values = np.asarray(other.get_data()).reshape(-1)
                            if values.size == 1:
                                out[name] = [int(values[0]), f"{int(values[0])}, the value the model's graph compares "
                                                              f"it with"]
                    elif kind in ("Convert", "Squeeze", "Unsqueeze", "Reshape"):
                        nxt.append(node.output(0))
            frontier = nxt
    return out
