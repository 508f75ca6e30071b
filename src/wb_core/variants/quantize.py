"""The INT8 variant: an OpenVINO IR quantized by NNCF, built once and cached.

The cache key covers the model's content hash, the calibration data's content hash and every
setting that changes the result (method, subset size, accuracy bound, metric, NNCF and OpenVINO
versions). TensorFlow, Keras and ONNX models are first converted to an FP32 IR, so they reach
INT8 through this OpenVINO variant; the TensorFlow runtime itself never runs INT8 here.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import dataclass
from pathlib import Path

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
                   settings: QuantizeSettings) -> tuple[Path, dict]:
    """Path of the INT8 IR and its build info (method, calibration samples, ...)."""
    fp32_ir = ensure_ir(model, fmt, model_fp)

    def build(tmp: Path):
        what = f"quantizing '{model}' to INT8" + ("" if settings.recipe == "auto" else f" ({settings.recipe})")
        res = run_task({"task": "wb_core.variants.tasks:task_quantize", "ir": str(fp32_ir), "data": str(data_path),
                        "out": str(tmp / "model.xml"),
                        "subset_size": settings.subset_size, "max_drop": settings.max_drop,
                        "metric": settings.metric, "output": settings.output, "recipe": settings.recipe,
                        "base": settings.base, "limit": settings.limit, "budget_s": settings.budget_s,
                        "batch_axes": dict(settings.batch_axes)},
                       timeout=3600 if settings.budget_s is None else settings.budget_s + 600, what=what)
        info = {"variant": settings.method, "calibration_size": res.get("calibration_samples"),
                "calibration_data": data_fp, "subset_size": settings.subset_size,
                "max_accuracy_drop": settings.max_drop, "accuracy_control_metric": res.get("metric"),
                "accuracy_control_reference": res.get("reference"), "model_family": res.get("family"),
                "model_family_reason": res.get("family_reason"), "quant_recipe": res.get("recipe"),
                "quant_seconds": res.get("seconds"), "fp32_layers": res.get("fp32_layers")}
        (tmp / "info.json").write_text(json.dumps(info))

    folder = _cached("int8", variant_key(model_fp, data_fp, settings), build)
    return folder / "model.xml", json.loads((folder / "info.json").read_text())
