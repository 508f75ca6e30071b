"""The figures quoted in README.md and docs/ come from BENCHMARKS.md, a test, or a named citation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _checker():
    spec = importlib.util.spec_from_file_location("check_doc_figures", ROOT / "benchmarks" / "check_doc_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_quoted_figure_has_a_source():
    assert _checker().unsourced() == []


def test_the_check_finds_a_figure_without_a_source(tmp_path):
    check = _checker()
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "BENCHMARKS.md").write_text("| int8 | 2.48x |\n")
    (tmp_path / "tests" / "test_x.py").write_text("SPREAD = '9-36%'\n")
    (tmp_path / "README.md").write_text("INT8 ran at 2.48x and 0.78x of FP32; noise 9-36%, or 10 - 40 %.\n")
    (tmp_path / "docs" / "a.md").write_text("BF16 ran 1.71x faster.\n")
    found = [(path, fig) for path, _, fig in check.unsourced(tmp_path)]
    assert found == [("README.md", "0.78x"), ("README.md", "10 - 40 %"), ("docs/a.md", "1.71x")]
