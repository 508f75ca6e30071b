"""Saving a browser upload as a model file on the server, safely.

The browser sends file names and bytes that we must not trust: a name is reduced to a plain file
name (no folders, no `..`), the total size is capped, and a zip (a SavedModel folder) is unpacked
only when every member stays inside the target folder. Each upload gets its own folder.
"""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from pathlib import Path

from wb_core.api import ModelError
from wb_core.faces import cache_dir

DEFAULT_LIMIT_MB = 200
MODEL_SUFFIXES = (".onnx", ".keras", ".tflite", ".xml", ".bin", ".zip")


def upload_limit_mb() -> int:
    """The upload size limit: `$WB_UPLOAD_LIMIT_MB`, else 200 MB."""
    try:
        return max(1, int(os.environ.get("WB_UPLOAD_LIMIT_MB", DEFAULT_LIMIT_MB)))
    except ValueError:
        return DEFAULT_LIMIT_MB


def safe_name(name: str) -> str:
    """A plain file name from whatever the browser sent: no folders, no leading dots, safe characters."""
    base = re.split(r"[\\/]", str(name))[-1]
    base = re.sub(r"[^A-Za-z0-9._-]", "_", base).lstrip(".")
    if not base or base in (".", ".."):
        raise ModelError(f"The uploaded file name '{name}' has no usable characters.")
    return base[:120]


def upload_message(error: BaseException, names: list[str]) -> str:
    """An error about an uploaded model in one full sentence naming what the user uploaded, with
    the server's folders taken out (the user never saw them)."""
    text = str(error).strip()
    # Any path into the uploads folder becomes the file's own name.
    text = re.sub(r"(?:/[^\s'\"]*)?/uploads/[^\s'\"]*", lambda m: Path(m.group(0)).name, text)
    text = re.sub(r"/(?:[\w.-]+/)+([\w.-]+)", r"\1", text)  # any other server path: its last part only
    shown = ", ".join(f"'{n}'" for n in names)
    if not any(n in text for n in names):
        text = f"{text.rstrip('.')} (uploaded as {shown})."
    return f"The upload {shown} could not be used. {text or 'It is not a model.'}"


def save_upload(files: list[dict], dest_root: Path | None = None, limit_mb: int | None = None) -> Path:
    """Write uploaded files (dicts with `name` and `content`) and return the model path among them.

    Accepts one .onnx or .keras file, an IR's .xml with its .bin, or a .zip of a SavedModel folder.
    """
    if not files:
        raise ModelError("No file was uploaded; choose a model file first.")
    limit = (limit_mb or upload_limit_mb()) * 2**20
    total = sum(len(f["content"]) for f in files)
    if total > limit:
        raise ModelError(f"The upload is {total / 2**20:.1f} MB, over the limit of {limit // 2**20} MB; "
                         f"put the model on the server and give its path instead.")
    names = [safe_name(f["name"]) for f in files]
    for n in names:
        if not n.lower().endswith(MODEL_SUFFIXES):
            raise ModelError(f"'{n}' is not a model file the workbench reads; upload .onnx, .keras, "
                             f".tflite, an IR's .xml with its .bin, or a SavedModel folder as .zip.")
    root = dest_root or cache_dir() / "uploads"
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="upload-", dir=root))
    for n, f in zip(names, files):
        (folder / n).write_bytes(bytes(f["content"]))
    return _model_in(folder, names, limit)


def _model_in(folder: Path, names: list[str], limit: int) -> Path:
    lower = {n.lower(): n for n in names}
    zips = [n for n in names if n.lower().endswith(".zip")]
    if zips:
        out = folder / "unpacked"
        unpack_zip(folder / zips[0], out, limit)
        found = sorted(p.parent for p in out.rglob("saved_model.pb"))
        if found:
            return found[0]
        for suffix in (".onnx", ".keras", ".tflite", ".xml"):
            hits = sorted(out.rglob(f"*{suffix}"))
            if hits:
                return hits[0]
        raise ModelError(f"'{zips[0]}' holds no model (no saved_model.pb, .onnx, .keras or .xml inside).")
    for suffix in (".onnx", ".keras", ".tflite", ".xml"):
        hits = [n for n in lower if n.endswith(suffix)]
        if hits:
            return folder / lower[hits[0]]
    raise ModelError("Only an IR's .bin was uploaded; upload its .xml together with it.")


def unpack_zip(path: Path, out: Path, limit: int) -> None:
    """Unpack a zip, refusing members that would land outside `out` or a total size over `limit`."""
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise ModelError(f"'{path.name}' is not a valid zip file.") from None
    with zf:
        members = zf.infolist()
        if sum(m.file_size for m in members) > limit:
            raise ModelError(f"'{path.name}' unpacks to more than the upload limit of {limit // 2**20} MB.")
        out.mkdir(parents=True, exist_ok=True)
        root = out.resolve()
        for m in members:
            target = (out / m.filename).resolve()
            if not target.is_relative_to(root) or m.filename.startswith(("/", "\\")):
                raise ModelError(f"'{path.name}' has a member '{m.filename}' pointing outside its folder; "
                                 f"it was not unpacked.")
            if (m.external_attr >> 16) & 0o170000 == 0o120000:  # a symlink could point anywhere
                raise ModelError(f"'{path.name}' holds a symbolic link ('{m.filename}'); it was not unpacked.")
        zf.extractall(out)
