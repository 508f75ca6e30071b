"""The model behind a study: the files each backend ran, and its FLOPs per sample.

Both come from the variant cache that profiling filled, so they cost nothing after a sweep; a
model that has moved since gives None rather than an error, because exports and reports still
make sense without them.
"""

from __future__ import annotations

from functools import lru_cache

from wb_core.errors import WorkbenchError


def study_model_paths(study: dict) -> dict[str, str | None]:
    """`ir_path` (OpenVINO) and `savedmodel_path` (TensorFlow) of a study's model, None when unavailable."""
    from wb_core.backends.registry import loaders
    from wb_core.variants.convert import ensure_ir, ensure_savedmodel

    path, fmt, fp = study.get("model_path"), study.get("model_format"), study.get("model_fingerprint")
    out: dict[str, str | None] = {"ir_path": None, "savedmodel_path": None}
    if not path:
        return out
    try:
        out["ir_path"] = str(ensure_ir(path, fmt, fp))
    except (WorkbenchError, OSError):
        pass
    if loaders(fmt, "savedmodel"):  # a backend that runs this model as a SavedModel
        try:
            out["savedmodel_path"] = str(ensure_savedmodel(path, fmt, fp))
        except (WorkbenchError, OSError):
            pass
    return out


def study_flops(study: dict, ir_path: str | None = None) -> float | None:
    """FLOPs per sample of the study's model, with the study's sizes for dynamic dimensions."""
    if ir_path is None:
        ir_path = study_model_paths(study).get("ir_path")
    if not ir_path:
        return None
    inputs = ((study.get("spec") or {}).get("inputs")) or {}
    return _flops(str(ir_path), _shapes_key(study, inputs))


def _shapes_key(study: dict, opts: dict) -> tuple:
    """Input shapes with dynamic non-batch dimensions filled in (hashable, for the cache)."""
    shapes = []
    given = opts.get("shapes") or {}
    dyn = opts.get("dynamic_size")
    for spec in study.get("inputs") or []:
        shape = list(given.get(spec["name"]) or spec["shape"])
        shape = [1] + [(dyn if (d is None or int(d) < 0) and dyn else int(d)) for d in shape[1:]]
        shapes.append((spec["name"], tuple(shape)))
    return tuple(shapes)


@lru_cache(maxsize=32)
def _flops(ir_path: str, shapes: tuple) -> float | None:
    from wb_core.analysis.flops import flops_per_sample

    try:
        return flops_per_sample(ir_path, dict(shapes) or None)
    except Exception:  # a model OpenVINO cannot reshape: report no FLOPs rather than fail the report
        return None
