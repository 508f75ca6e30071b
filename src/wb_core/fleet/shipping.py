"""Ship a model's files to hosts that do not share its path.

A model is packed once on the coordinator (an IR's .xml with its .bin, a single file, or every
file of a SavedModel folder), sent to every host by the engine, and unpacked on each host into
its cache under the content hash, so a host unpacks a given model once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from wb_core.paths import cache_dir


@dataclass(frozen=True)
class ShippedModel:
    """A model's files in memory: `entry` is the path a worker loads, relative to the files' root."""

    digest: str
    entry: str
    files: dict  # relative path -> bytes


def pack(path: str | Path) -> ShippedModel:
    path = Path(path)
    if path.is_dir():
        root, entry = path.parent, path.name
        members = [p for p in sorted(path.rglob("*")) if p.is_file()]
    else:
        root, entry = path.parent, path.name
        members = [path] + ([path.with_suffix(".bin")] if path.suffix == ".xml" and path.with_suffix(".bin").exists()
                            else [])
    files = {str(p.relative_to(root)): p.read_bytes() for p in members}
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode())
        h.update(hashlib.sha256(files[name]).digest())
    return ShippedModel(digest=h.hexdigest()[:16], entry=entry, files=files)


def unpack(model: ShippedModel) -> Path:
    """Write the files under this host's cache (once per content) and return the path to load."""
    final = cache_dir() / "shipped" / model.digest
    if not final.exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{model.digest}-", dir=final.parent))
        try:
            for rel, data in model.files.items():
                dest = tmp / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            try:
                os.rename(tmp, final)  # atomic; a concurrent unpack of the same content may win
            except OSError:
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final / model.entry
