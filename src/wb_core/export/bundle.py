"""Deployment bundles: each format's files plus the model files in that format's repository layout.

A bundle can be copied to a server as is: the scripts find the model where the server expects it
and skip their copy step. The model files are the ones the run measured: the OpenVINO IR it ran
(an INT8 run's quantized IR, not the study's FP32 one) or the SavedModel TensorFlow ran.

Layouts (version folder 1 in each):
  ovms       models/NAME/1/model.xml + model.bin
  triton     model_repository/NAME/1/model.xml + model.bin, or model_repository/NAME/1/model.savedmodel/
  tfserving  models/NAME/1/saved_model.pb + variables/
  kserve     model/NAME/1/... (OVMS or TF Serving layout; storageUri points at model/NAME)
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from wb_core.errors import WorkbenchError
from wb_core.export.common import model_file_name, served_file
from wb_core.export.deployment import DeploymentConfig


def _ir_files(dep: DeploymentConfig) -> tuple[Path, Path] | None:
    ir = dep.model.ir_path
    if not ir or not str(ir).endswith(".xml"):
        return None
    xml, binf = Path(ir), Path(str(ir)[:-4] + ".bin")
    return (xml, binf) if xml.is_file() and binf.is_file() else None


def _savedmodel_files(dep: DeploymentConfig) -> list[tuple[str, Path]] | None:
    sm = dep.model.savedmodel_path
    if not sm or not (Path(sm) / "saved_model.pb").is_file():
        return None
    root = Path(sm)
    return [(p.relative_to(root).as_posix(), p) for p in sorted(root.rglob("*")) if p.is_file()]


def model_files(dep: DeploymentConfig, fmt: str, notes: list[str]) -> list[tuple[str, Path]]:
    """(path inside the format's folder, file on disk) for the model files of `fmt`; notes say what is missing."""
    from wb_core.export.formats import declared

    name = dep.serving_name
    layout = declared(fmt)
    if not layout.model_dir:  # a format without model files (the deployment YAML)
        return []
    base = layout.model_dir.format(name=name)
    kind = served_file(dep, fmt)
    wants_ir = kind == "openvino-ir"
    if kind != "savedmodel" and not wants_ir:  # a runtime that serves the model file as it is (ONNX)
        src = Path(dep.model.path)
        if not src.is_file():
            notes.append(f"The bundle has no model files for {fmt}: the model file ({src}) is not on disk.")
            return []
        from wb_core.models import onnx_external_files

        extra = onnx_external_files(src) if src.suffix.lower() == ".onnx" else ()  # the weights it reads by name
        return _as_measured(dep, fmt, notes, [(f"{base}/{model_file_name(dep, fmt)}", src)]
                            + [(f"{base}/{loc}", src.parent / loc) for loc in extra])
    if wants_ir:
        files = _ir_files(dep)
        if files is None:
            notes.append(f"The bundle has no model files for {fmt}: the OpenVINO IR ({dep.model.ir_path or 'none'}) "
                         "is not on disk; profile the study again to rebuild it.")
            return []
        return _as_measured(dep, fmt, notes, [(f"{base}/model.xml", files[0]), (f"{base}/model.bin", files[1])])
    files = _savedmodel_files(dep)
    if files is None:
        notes.append(f"The bundle has no model files for {fmt}: it serves a SavedModel, and this study has none "
                     f"on disk ({dep.model.savedmodel_path or 'its model is not a TensorFlow model'}).")
        return []
    base = (layout.savedmodel_dir or layout.model_dir).format(name=name)
    return _as_measured(dep, fmt, notes, [(f"{base}/{rel}", src) for rel, src in files])


def _as_measured(dep: DeploymentConfig, fmt: str, notes: list[str], files: list[tuple[str, Path]]
                 ) -> list[tuple[str, Path]]:
    """`files`, when they hold what the run measured: the workbench's cache is keyed by content, but a
    user's own file (an IR, an ONNX file and its weights, a SavedModel) may have been rewritten since."""
    from wb_core.errors import ModelError
    from wb_core.models import check_measured, own_files

    if not own_files([src for _, src in files], dep.model.path):
        return files
    try:
        check_measured(dep.model.path, dep.model.fingerprint)
    except ModelError as e:
        why = str(e).rstrip(".")
        notes.append(f"The bundle has no model files for {fmt}: {why[:1].lower()}{why[1:]}.")
        return []
    return files


def write_model_files(dep: DeploymentConfig, fmt: str, base: str | Path, notes: list[str]) -> list[str]:
    """Copy the model files of `fmt` under `base`; the relative paths written."""
    import shutil

    written = []
    for rel, src in model_files(dep, fmt, notes):
        dest = Path(base) / rel
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
        except OSError as e:
            raise WorkbenchError(f"Cannot copy the model file '{src}' to '{dest}': {e.strerror or e}.") from None
        written.append(rel)
    return written


def zip_bundle(dep: DeploymentConfig, formats: str | list[str],
               with_models: bool = True) -> tuple[str, bytes, list[str]]:
    """(file name, zip bytes, notes): the formats' files and, with `with_models`, the model files.

    One format goes at the top of the zip; several get a folder each, as `export` writes them.
    """
    from wb_core.export.formats import EXPORTERS, parse_formats

    names = parse_formats(",".join(formats) if isinstance(formats, (list, tuple)) else formats)
    buf = io.BytesIO()
    notes: list[str] = []
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for fmt in names:
            prefix = "" if len(names) == 1 else f"{fmt}/"
            res = EXPORTERS[fmt].render(dep)
            for rel, text in res.files.items():
                info = zipfile.ZipInfo(prefix + rel)
                info.external_attr = (0o755 if rel.endswith(".sh") else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, text.encode("utf-8", "surrogateescape"))
            if with_models:
                for rel, src in model_files(dep, fmt, notes):
                    try:
                        zf.write(src, prefix + rel)
                    except OSError as e:
                        raise WorkbenchError(f"Cannot read the model file '{src}': {e.strerror or e}.") from None
    label = names[0] if len(names) == 1 else "deploy"
    return f"{dep.serving_name}-{label}.zip", buf.getvalue(), notes
