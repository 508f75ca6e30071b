"""Runnable variants of a user model, built once and cached by content hash.

- OpenVINO runs an IR: TensorFlow/Keras/ONNX models are converted (f32 weights kept, so that the
  FP32 variant really is FP32).
- TensorFlow runs a SavedModel: a Keras file is exported to one.
BF16 is a runtime hint, not a file. Conversions run in a child process (TensorFlow is heavy and a
broken model can crash the converter), and land in the cache atomically, keyed by the fingerprint of
every file the model reads (an ONNX model's external data, a SavedModel's variables). Beside each
converted IR, `ir.json` keeps what the converter read of it (`wb_core.variants.ir_tasks`): its
graph key, port names and family.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from wb_core.backends.registry import backend_formats, get, loaders, names
from wb_core.errors import ModelError
from wb_core.models import IR_FORMAT, check_measured, detect_format, fingerprint
from wb_core.paths import cache_dir
from wb_core.proc.parent import run_task


def _cached(kind: str, fp: str, build) -> Path:
    root = cache_dir() / kind
    final = root / fp
    if final.exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{fp}-", dir=root))
    try:
        build(tmp)
        if not final.exists():
            tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def ensure_ir(path: str | Path, fmt: str | None = None, fp: str | None = None) -> Path:
    """Path of an OpenVINO IR `.xml` for the model (the model itself if it is one)."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt == IR_FORMAT:
        check_measured(path, fp)
        return path
    fp = fp or fingerprint(path)

    def build(tmp: Path):
        check_measured(path, fp)  # a file converted now is cached under `fp`: it must hold what `fp` names
        res = run_task({"task": "wb_core.variants.ir_tasks:task_convert_ir", "format": fmt, "path": str(path),
                        "out": str(tmp / "model.xml")},
                       timeout=1800, what=f"converting '{path}' to OpenVINO IR")
        _keep_facts(tmp / "model.xml", res)

    return _cached("ir", fp, build) / "model.xml"


FACTS = ("graph", "io", "family", "family_reason")


def _keep_facts(xml: Path, facts: dict) -> dict:
    facts = {k: facts.get(k) for k in FACTS}
    tmp = xml.with_name(f".ir-{os.getpid()}.json")
    tmp.write_text(json.dumps(facts))
    tmp.replace(xml.with_name("ir.json"))
    return facts


def ir_facts(xml: str | Path) -> dict:
    """Graph key, port names and family of an IR (see `wb_core.variants.ir_tasks`): kept beside the
    IRs this cache converted, read in a worker (and kept) for older ones and for a user's own IR."""
    xml = Path(xml)
    side = xml.with_name("ir.json")
    in_cache = cache_dir().resolve() in xml.resolve().parents
    if in_cache and side.is_file():
        return json.loads(side.read_text())
    res = run_task({"task": "wb_core.variants.ir_tasks:task_ir_facts", "ir": str(xml)}, timeout=600,
                   what=f"reading the OpenVINO IR '{xml}'")
    return _keep_facts(xml, res) if in_cache else {k: res.get(k) for k in FACTS}


def ensure_savedmodel(path: str | Path, fmt: str | None = None, fp: str | None = None) -> Path:
    """Path of a SavedModel directory for the TensorFlow backend."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt == "savedmodel":
        check_measured(path, fp)
        return path
    if not loaders(fmt, "savedmodel"):
        runs_sm = ", ".join(n for n in names() if get(n).loads == "savedmodel") or "none registered"
        able = " or ".join(n for n in names() if fmt in backend_formats(n))
        raise ModelError(f"No backend that runs a SavedModel ({runs_sm}) can run a {fmt} model ('{path.name}')"
                         + (f"; use the {able} backend." if able else "."))
    fp = fp or fingerprint(path)

    def build(tmp: Path):
        check_measured(path, fp)
        run_task({"task": "convert", "target": "savedmodel", "format": fmt, "path": str(path),
                  "out": str(tmp / "saved_model")}, timeout=1800, what=f"exporting '{path}' as a SavedModel")

    return _cached("savedmodel", fp, build) / "saved_model"


def variant_path(backend: str, path: str | Path, fmt: str, fp: str) -> Path:
    """The file a backend's worker loads for this model (its registry entry's `loads`)."""
    loads = get(backend).loads
    if loads in MAKERS:
        return MAKERS[loads](path, fmt, fp)
    if loads == fmt:  # a backend that runs the model file as it is
        check_measured(path, fp)
        return Path(path)
    raise ModelError(f"The {backend} backend loads {loads} files, which the workbench cannot make from a {fmt} model.")


# The files a backend may load (BackendInfo.loads), and how each is made from a model.
MAKERS = {"openvino-ir": ensure_ir, "savedmodel": ensure_savedmodel}


def ensure_float_ir(path: str | Path, fmt: str | None = None, fp: str | None = None) -> tuple[Path, int]:
    """The float graph of a model quantized beforehand (its quantizers removed; see
    `tasks.strip_quantizers`), for its FP32 runs; and how many quantizers were removed."""
    import json

    path = Path(path)
    fp = fp or fingerprint(path)
    ir = ensure_ir(path, fmt, fp)

    def build(tmp: Path):
        res = run_task({"task": "wb_core.variants.tasks:task_float_graph", "ir": str(ir), "out": str(tmp / "model.xml")},
                       timeout=1800, what=f"removing the quantizers of '{path}'")
        (tmp / "info.json").write_text(json.dumps({"removed": int(res.get("removed") or 0)}))

    folder = _cached("ir-float", fp, build)
    return folder / "model.xml", int(json.loads((folder / "info.json").read_text())["removed"])
