"""What the workbench knows about a model, read once: `describe_model(path)` -> `ModelDescription`.

Format, content fingerprint (of every file the model reads, each file's digest kept), inputs (name,
shape, dtype), outputs, the rows of the embedding tables its integer inputs index, whether its
weights are quantized already, its family (which decides the INT8 recipe) and which of its inputs a
tokenizer fills. The family is read here once, and only here: `wb inspect`, the profile's rows and
the INT8 recipe all read this reading. Reading a model costs a child process (a
broken file can crash the reader, and the readers import heavy runtimes), so the description is
cached per model content and handed on: the sweep's preflight, the variant planner, tune, the
training study and `wb inspect` all read the same one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from wb_core.backends.registry import title
from wb_core.model_inputs import InputSpec
from wb_core.models import detect_format, file_digests, fingerprint, format_title
from wb_core.proc.parent import run_task


@dataclass(frozen=True)
class ModelDescription:
    """One model, as every step after preflight sees it.

    `family` is transformer, cnn or other, with `family_reason` saying why: read from the graph
    OpenVINO reads for an IR or an ONNX file, and from the IR it converts a TensorFlow model to
    (None, with the reason, when OpenVINO cannot convert it). `files` maps each file the model reads
    to its SHA-256 (see `wb_core.models.model_files`), so that a later check can name the file that
    changed. `text_roles` maps each input a tokenizer fills to its role (ids, attention_mask,
    type_ids); empty when the model has no token-ids input.
    """

    path: Path
    format: str
    fingerprint: str
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...] = ()
    embedding_rows: dict[str, int] = field(default_factory=dict)
    quantized: str | None = None
    family: str | None = None
    family_reason: str | None = None
    text_roles: dict[str, str] = field(default_factory=dict)
    # ---- which runtimes read it ----
    # The backends that alone run it (empty: every backend whose formats include it), and why: a model
    # OpenVINO cannot read but ONNX Runtime runs (an `ai.onnx.ml` operator) is described by the onnx
    # library and runs on ONNX Runtime only.
    only_backends: tuple[str, ...] = ()
    only_reason: str | None = None
    # ---- inputs beyond the first axis ----
    # Why an input's batch is not on axis 0 (its layout says so, or its shape shows it), by input name.
    batch_axis_reasons: dict[str, str] = field(default_factory=dict)
    # Inputs without a batch whose value the model names (a sample rate): name -> [value, why].
    declared_values: dict[str, list] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def is_text(self) -> bool:
        """The model takes token ids (a tokenizer can feed it)."""
        return "ids" in self.text_roles.values()

    def facts(self) -> list[tuple[str, str]]:
        """(label, value) rows as every face shows the model: `wb inspect`, the dashboard's model panel."""
        rows = [("Path", str(self.path)), ("Format", format_title(self.format))]
        rows += [(f"Input {i + 1}", s.describe()) for i, s in enumerate(self.inputs)]
        if self.outputs:
            rows.append(("Outputs", ", ".join(self.outputs)))
        if self.family or self.family_reason:
            rows.append(("Family", f"{self.family or 'not read'} ({self.family_reason})"))
        if self.quantized:
            rows.append(("Weights quantized already", self.quantized))
        if self.only_backends:
            rows.append(("Runs on", f"{', '.join(map(title, self.only_backends))} only ({self.only_reason})"))
        if self.is_text:
            rows.append(("Text inputs", ", ".join(f"{n} ({r})" for n, r in self.text_roles.items())))
        return rows

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = str(self.path)
        d["inputs"] = [s.to_dict() for s in self.inputs]
        d["outputs"] = list(self.outputs)
        d["only_backends"] = list(self.only_backends)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ModelDescription:
        return cls(**{**d, "path": Path(d["path"]), "inputs": tuple(InputSpec.from_dict(s) for s in d["inputs"]),
                      "outputs": tuple(d.get("outputs") or ()), "only_backends": tuple(d.get("only_backends") or ())})


def text_roles_of(inputs) -> dict[str, str]:
    """Each input a tokenizer fills, with its role; empty unless one input takes token ids."""
    from wb_core.text import input_role

    roles = {s.name: role for s in inputs if (role := input_role(s.name))}
    ids = [s for s in inputs if roles.get(s.name) == "ids" and s.dtype in ("int64", "int32")]
    return roles if ids else {}


# Descriptions per model content: a search calls the runner many times, and each read costs a child process.
_DESCRIBED: dict[tuple[str, str], ModelDescription] = {}


def describe_model(path: str | Path, timeout_s: float | None = None) -> ModelDescription:
    """Read a model once (in a child process) into its description; cached per path and content."""
    path = Path(path)
    fmt = detect_format(path)
    digests = file_digests(path)
    fp = fingerprint(path, digests)
    key = (str(path.resolve()), fp)
    if key not in _DESCRIBED:
        res = run_task({"task": "wb_core.variants.description:task_describe", "format": fmt, "path": str(path)},
                       timeout=timeout_s or 600, what=f"reading the inputs of '{path}'")
        inputs, axis_reasons = _batch_axes_read(tuple(InputSpec.from_dict(d) for d in res["inputs"]))
        family, reason = res.get("family"), res.get("family_reason")
        if family is None and not res.get("only_backends"):
            # a TensorFlow model: OpenVINO and NNCF see it as the IR it converts to
            family, reason = _family_of_converted(path, fmt, fp)
        _DESCRIBED[key] = ModelDescription(
            path=path, format=fmt, fingerprint=fp, inputs=inputs, outputs=tuple(res.get("outputs") or ()),
            embedding_rows=dict(res.get("embedding_rows") or {}), quantized=res.get("quantized"),
            family=family, family_reason=reason, text_roles=text_roles_of(inputs),
            only_backends=tuple(res.get("only_backends") or ()), only_reason=res.get("only_reason"),
            batch_axis_reasons=axis_reasons, declared_values=dict(res.get("declared_values") or {}),
            files=digests)
    return _DESCRIBED[key]


def _batch_axes_read(inputs: tuple[InputSpec, ...]) -> tuple[tuple[InputSpec, ...], dict[str, str]]:
    """The inputs with their batch axes: the model's layout where it names one, else where the shape shows it."""
    from wb_core.model_inputs import guess_batch_axes, with_batch_axes

    reasons = {s.name: "the model's layout puts the batch (N) there" for s in inputs if s.batch_axis}
    guessed = guess_batch_axes(list(inputs))
    reasons.update({name: why for name, (_, why) in guessed.items()})
    return tuple(with_batch_axes(inputs, {name: axis for name, (axis, _) in guessed.items()})), reasons


def _family_of_converted(path: Path, fmt: str, fp: str) -> tuple[str | None, str | None]:
    """The family of the IR a model converts to (converted once, into the cache every later step uses)."""
    from wb_core.errors import WorkbenchError
    from wb_core.variants.convert import ensure_ir, ir_facts

    try:
        facts = ir_facts(ensure_ir(path, fmt, fp))
    except WorkbenchError as e:
        return None, f"OpenVINO could not convert it, so it has no INT8 variant: {e}"
    return facts.get("family"), facts.get("family_reason")


# ---- in the child process ----

def _sole_description(fmt: str, path: str, refused: Exception) -> dict | None:
    """A model OpenVINO refuses, described by the first backend that reads it alone; None when none does."""
    from wb_core.backends.registry import sole_readers, title
    from wb_core.errors import ModelError

    errors = []
    for backend, read in sole_readers(fmt):
        try:
            res = read(path)
        except ModelError as e:
            errors.append(str(e))
            continue
        if res is None:  # not a model this reader knows
            continue
        reason = str(refused).rstrip(".")
        return {**res, "only_backends": [backend],
                "only_reason": f"{reason}; {title(backend)} runs it as it is"}
    if errors:
        raise ModelError(f"{str(refused).rstrip('.')}; {' '.join(errors)}")
    return None


def task_describe(task: dict) -> None:
    """Read the model: a backend's own reader (a SavedModel's signature), Keras, or OpenVINO (IR, ONNX)."""
    from wb_core.backends.registry import reader
    from wb_core.proc.channel import emit

    fmt = task["format"]
    read = reader(fmt)
    if read is not None:
        emit({"type": "result", "inputs": [s.to_dict() for s in read(task["path"])]})
    elif fmt == "keras":
        emit({"type": "result", "inputs": [s.to_dict() for s in _keras_inputs(task["path"])]})
    else:
        emit({"type": "result", **_openvino_description(fmt, task["path"])})


def _keras_inputs(path: str) -> list[InputSpec]:
    from wb_core.proc.worker import load_keras_model

    model = load_keras_model(path)
    return [InputSpec(name=t.name, shape=tuple(-1 if d is None else int(d) for d in t.shape),
                      dtype=str(t.dtype).replace("<dtype: '", "").replace("'>", "")) for t in model.inputs]


def _openvino_description(fmt: str, path: str) -> dict:
    from wb_core.errors import ModelError
    from wb_core.model_inputs import ov_inputs
    from wb_core.models import (
        check_onnx_opsets,
        check_ov_model,
        declared_values,
        embedding_rows,
        ov_outputs,
        quantized_weights,
        read_ov_model,
    )
    from wb_core.variants.family import detect_family

    if fmt == "onnx":
        check_onnx_opsets(path)
    try:
        model = read_ov_model(path)
    except ModelError as refused:
        alone = _sole_description(fmt, path, refused)
        if alone is None:
            raise
        return alone
    check_ov_model(model, path)
    specs = ov_inputs(model)
    if not specs:
        raise ModelError(f"Model '{path}' has no inputs; the workbench measures models that take input.")
    family = detect_family(model)
    return {"inputs": [s.to_dict() for s in specs], "outputs": ov_outputs(model),
            "embedding_rows": embedding_rows(model), "quantized": quantized_weights(model),
            "family": family.name, "family_reason": family.reason, "declared_values": declared_values(model)}
