"""The INT8 variant: an OpenVINO IR quantized by NNCF, built once and cached.

TensorFlow, Keras and ONNX models are first converted to an FP32 IR, so they reach INT8 through
this OpenVINO variant; the TensorFlow runtime itself never runs INT8 here. The cache key covers what
NNCF reads: the converted IR's graph key (what it computes, names aside: a Keras model and its
SavedModel export share it, and so share their INT8 work, minutes of NNCF's accuracy control), the
calibration data's content hash and every setting that changes the result (recipe, method, subset
size, accuracy bound and guard limit, metric, NNCF and OpenVINO versions). A shared INT8 IR whose
port names differ from the model's (Keras and SavedModel name their outputs differently) is copied
once with the model's names.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import dataclass
from pathlib import Path

from wb_core.models import IR_FORMAT
from wb_core.proc.parent import run_task
from wb_core.variants.convert import _cached, ensure_ir

DEFAULT_SUBSET = 300


@dataclass(frozen=True)
class QuantizeSettings:
    subset_size: int = DEFAULT_SUBSET
    max_drop: float | None = None  # set: accuracy-aware quantization with this absolute bound
    metric: str = "auto"  # metric name for accuracy-aware mode
    output: str | None = None  # the output accuracy-aware mode reads; None: the first
    recipe: str = "auto"  # see wb_core.variants.recipes; "auto": the model family's first
    base: str | None = None  # the recipe accuracy control and mixed precision build on
    limit: float | None = None  # the accuracy guard's bound, for accuracy control and mixed precision
    budget_s: float | None = None  # mixed precision's time budget
    batch_axes: tuple = ()  # (input, axis) pairs for inputs whose batch is not on axis 0

    @property
    def method(self) -> str:
        if self.recipe == "mixed-precision":
            return "int8-mixed"
        return "int8-aac" if self.max_drop is not None or self.recipe == "accuracy-control" else "int8-ptq"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def variant_key(model_fp: str, data_fp: str, settings: QuantizeSettings) -> str:
    blob = json.dumps({"model": model_fp, "data": data_fp, "method": settings.method,
                       "subset": settings.subset_size, "max_drop": settings.max_drop, "metric": settings.metric,
                       "nncf": _version("nncf"), "openvino": _version("openvino"),
                       **({"output": settings.output} if settings.output else {}),
                       **({"batch_axes": [list(p) for p in settings.batch_axes]} if settings.batch_axes else {}),
                       "recipe": settings.recipe, "base": settings.base, "limit": settings.limit}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_int8_ir(model: str | Path, fmt: str, model_fp: str, data_path: Path, data_fp: str,
                   settings: QuantizeSettings, family: tuple[str | None, str | None] | None = None,
                   on_message=None) -> tuple[Path, dict]:
    """Path of the INT8 IR and its build info (method, calibration samples, ...).

    `family`: (name, reason) as the model's description read it; None: read from the FP32 IR.
    `on_message`: called with each progress message of the quantizing worker."""
    from wb_core.variants.convert import ir_facts

    fp32_ir = ensure_ir(model, fmt, model_fp)
    facts = ir_facts(fp32_ir) if fmt != IR_FORMAT or family is None else {}
    family = family or (facts.get("family"), facts.get("family_reason"))
    content = facts.get("graph") if fmt != IR_FORMAT else None  # a user's IR is its own content: its fingerprint
    content = f"graph:{content}" if content else model_fp

    built = []

    def build(tmp: Path):
        built.append(True)
        what = f"quantizing '{model}' to INT8" + ("" if settings.recipe == "auto" else f" ({settings.recipe})")
        res = run_task({"task": "wb_core.variants.tasks:task_quantize", "ir": str(fp32_ir), "data": str(data_path),
                        "out": str(tmp / "model.xml"), "family": family[0], "family_reason": family[1],
                        "subset_size": settings.subset_size, "max_drop": settings.max_drop,
                        "metric": settings.metric, "output": settings.output, "recipe": settings.recipe,
                        "base": settings.base, "limit": settings.limit, "budget_s": settings.budget_s,
                        "batch_axes": dict(settings.batch_axes)},
                       timeout=3600 if settings.budget_s is None else settings.budget_s + 600, what=what,
                       on_message=on_message)
        info = {"variant": settings.method, "calibration_size": res.get("calibration_samples"),
                "calibration_data": data_fp, "subset_size": settings.subset_size,
                "max_accuracy_drop": settings.max_drop, "accuracy_control_metric": res.get("metric"),
                "accuracy_control_reference": res.get("reference"), "model_family": res.get("family"),
                "model_family_reason": res.get("family_reason"), "quant_recipe": res.get("recipe"),
                "quant_seconds": res.get("seconds"), "fp32_layers": res.get("fp32_layers")}
        (tmp / "info.json").write_text(json.dumps(info))
        (tmp / "source.json").write_text(json.dumps({"io": facts.get("io")}))

    key = variant_key(content, data_fp, settings)
    folder = _cached("int8", key, build)
    info = json.loads((folder / "info.json").read_text())
    built_from = json.loads((folder / "source.json").read_text()).get("io") if (folder / "source.json").is_file() \
        else None
    if facts.get("io") and built_from and built_from != facts["io"]:  # built for a twin: the model's own names
        named = hashlib.sha256(json.dumps(facts["io"], sort_keys=True).encode()).hexdigest()[:8]

        def rename(tmp: Path):
            run_task({"task": "wb_core.variants.ir_tasks:task_rename_io", "ir": str(folder / "model.xml"),
                      "io": facts["io"], "out": str(tmp / "model.xml")}, timeout=600,
                     what=f"naming the INT8 IR's inputs and outputs as '{model}' does")
            (tmp / "info.json").write_text(json.dumps(info))
            (tmp / "source.json").write_text(json.dumps({"io": facts["io"]}))

        folder = _cached("int8", f"{key}-{named}", rename)
    return folder / "model.xml", {**info, **({} if built else {"quant_reused": True})}
