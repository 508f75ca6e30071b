"""Every notebook in notebooks/ runs top to bottom, shrunk through its `parameters` cell.

Like papermill, the overrides go into a new cell right after the cell tagged `parameters`; a
notebook without that cell, or without a parameter the test shrinks, fails loudly rather than
running full size. A notebook whose metadata `wb.requires` names a module that is missing here
is skipped, saying which.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the ui extra is not installed (pip install -e '.[ui]')")
nbclient = pytest.importorskip("nbclient", reason="the ui extra is not installed (pip install -e '.[ui]')")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Small enough for a 2-core machine: short windows, few points.
SHRINK = {"max_time": 0.3}
SHRINK_PER_NOTEBOOK = {
    "03-batch-size": {"batch_sizes": "1,4"},
    "06-pipeline": {"model": "lenet-digits", "frames": 24, "width": 160, "height": 96, "image_scale": "unit",
                    "pre_workers": "0,1", "batch": 4, "batch_sizes": "1,4", "rounds": 1},
}
# Notebooks without a model-call profile: their own shrink replaces SHRINK.
SHRINK_INSTEAD = {"07-training-threads": {"samples": 512, "batch": 64, "epochs": 1, "rounds": 1}}


def inject_parameters(nb, values: dict) -> None:
    """Insert a cell setting `values` after the `parameters` cell; fail if it or a name is missing."""
    idx = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(idx) != 1:
        raise AssertionError(f"expected exactly one cell tagged 'parameters', found {len(idx)}")
    source = nb.cells[idx[0]].source
    for name in values:
        if not any(line.split("=")[0].strip() == name for line in source.splitlines() if "=" in line):
            raise AssertionError(f"the parameters cell does not define '{name}'")
    cell = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in values.items()))
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(idx[0] + 1, cell)


def test_injection_refuses_a_notebook_without_parameters():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    with pytest.raises(AssertionError, match="tagged 'parameters'"):
        inject_parameters(nb, {"x": 2})


def test_every_notebook_is_here():
    names = [p.stem for p in NOTEBOOKS]
    assert names == ["01-quickstart", "02-threads-and-cores", "03-batch-size", "04-int8-accuracy", "05-export",
                     "06-pipeline", "07-training-threads"]


# four worker processes; quantization and accuracy; TensorFlow training workers
SLOW = {"02-threads-and-cores", "04-int8-accuracy", "07-training-threads"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p for p in NOTEBOOKS],
                         ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch, lenet_dir):
    nb = nbformat.read(path, as_version=4)
    missing = [m for m in nb.metadata.get("wb", {}).get("requires", []) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}, which this checkout does not have")
    shrink = SHRINK_INSTEAD.get(path.stem, SHRINK)
    inject_parameters(nb, {**shrink, "db": str(tmp_path / "nb.db"), **SHRINK_PER_NOTEBOOK.get(path.stem, {})})
    # The kernel imports this checkout's wb_core and finds the test cache (WB_CACHE_DIR, set in conftest).
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    assert (tmp_path / "nb.db").exists()
