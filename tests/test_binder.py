"""binder/ installs what pyproject.toml asks for: its dependencies plus the `ui` extra, same bounds."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml on Python 3.10 needs tomli")

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"


def _requirements(lines) -> dict[str, str]:
    """name -> specifier, names normalised the way pip compares them."""
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"([A-Za-z0-9._-]+)\s*(.*)", line)
        name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
        out[name] = ",".join(sorted(s.strip() for s in m.group(2).split(",") if s.strip()))
    return out


def test_binder_requirements_agree_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _requirements(project["dependencies"] + project["optional-dependencies"]["ui"])
    binder = _requirements((BINDER / "requirements.txt").read_text().splitlines())
    missing = {k: v for k, v in wanted.items() if k not in binder}
    extra = sorted(set(binder) - set(wanted))
    different = {k: (binder[k], v) for k, v in wanted.items() if k in binder and binder[k] != v}
    assert not (missing or extra or different), (
        f"binder/requirements.txt is out of step with pyproject.toml: missing {missing}, extra {extra}, "
        f"different bounds (binder, pyproject) {different}")


def test_binder_post_build_installs_the_package_and_the_demo():
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK)
    text = post.read_text()
    assert "pip install --no-deps -e ." in text and "wb demo-model lenet-digits" in text
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
