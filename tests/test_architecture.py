"""The module graph, read from the imports: no circles, no arrow up a layer, one public face.

Layers, lowest first (a module may import its own layer and those below, never above):
  0 foundations   version, errors, paths, parsing, axis, axes, config, hardware, backends.registry
  1 data          models, accuracy, measure, store, text (tokenized text), backends (sessions)
  2 processes     proc, variants, demo, data (datasets, demo data included)
  3 sweeps        sweep, fleet (the executor and the coordinator), pipeline and training studies
  4 results       analysis, plots, report, export, fleet.compare and fleet.plots (reading fleet studies)
  5 the API       api (and the package itself, which re-exports it)
  6 faces         cli, ui
The CLI, the dashboard and the notebooks import only `wb_core.api` (plus their own package).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "wb_core"

LAYERS = [
    {"wb_core.version", "wb_core.errors", "wb_core.paths", "wb_core.streams", "wb_core.config", "wb_core.hardware",
     "wb_core.stats", "wb_core.parsing", "wb_core.axis", "wb_core.axes", "wb_core.backends.registry",
     "wb_core.backends"},
    # Every backend session module is data-layer code (only the registry is a foundation).
    {"wb_core.models", "wb_core.accuracy", "wb_core.measure", "wb_core.store", "wb_core.text",
     *{f"wb_core.backends.{p.stem}" for p in (Path(__file__).resolve().parent.parent / "src" / "wb_core" /
                                             "backends").glob("*.py") if p.stem not in ("registry", "__init__")}},
    {"wb_core.proc", "wb_core.variants", "wb_core.demo", "wb_core.data"},
    {"wb_core.sweep", "wb_core.fleet", "wb_core.pipeline", "wb_core.training"},
    {"wb_core.analysis", "wb_core.plots", "wb_core.report", "wb_core.export", "wb_core.fleet.compare",
     "wb_core.fleet.plots"},
    {"wb_core.api", "wb_core"},
    {"wb_core.cli", "wb_core.ui", "wb_core.__main__"},
]


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    name = ".".join(parts)
    return name.removesuffix(".__init__")


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}


def resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(source: str, here: str = "") -> set[str]:
    """Every wb_core module a source imports, at the top or inside functions."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "wb_core":
            for alias in node.names:
                target = resolve(f"{node.module}.{alias.name}")
                if target and target != here:
                    out.add(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "wb_core":
                    target = resolve(alias.name)
                    if target and target != here:
                        out.add(target)
    return out


GRAPH = {name: imports_of(path.read_text(), name) for name, path in MODULES.items()}


def layer_of(name: str) -> int:
    best, depth = None, -1
    for i, members in enumerate(LAYERS):
        for m in members:
            if (name == m or name.startswith(m + ".")) and m.count(".") > depth:
                best, depth = i, m.count(".")
    assert best is not None, f"{name} belongs to no layer; add it to LAYERS in {__file__}"
    return best


def test_every_module_has_a_layer():
    for name in MODULES:
        layer_of(name)


def test_no_import_cycles():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_no_import_goes_up_a_layer():
    upward = [f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
              for a, targets in GRAPH.items() for b in targets
              if layer_of(b) > layer_of(a) and not (a == "wb_core" and b == "wb_core.api")]
    assert not upward, "\n".join(upward)


def _face_violations(name: str, targets: set[str], own: str) -> list[str]:
    return [f"{name} imports {t}" for t in sorted(targets)
            if t != "wb_core.api" and not t.startswith(own)]


def test_cli_and_ui_use_only_the_api():
    bad = []
    for name, targets in GRAPH.items():
        for face in ("wb_core.cli", "wb_core.ui"):
            if name == face or name.startswith(face + "."):
                bad += _face_violations(name, targets, face)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")) + [ROOT / "workbench" / "dashboard.ipynb"],
                         ids=lambda p: p.name)
def test_notebooks_use_only_the_api(path):
    nb = json.loads(path.read_text())
    code = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                     for c in nb["cells"] if c["cell_type"] == "code")
    allowed = "wb_core.ui" if path.parent.name == "workbench" else "wb_core.api"
    bad = [t for t in imports_of(code) if t != allowed and t != "wb_core"]
    assert not bad, f"{path.name} imports {bad}"


def test_the_api_names_resolve():
    import wb_core
    from wb_core import api

    for name in api.__all__:
        if f"wb_core.{name}" in MODULES:
            continue  # `wb_core.export` is the package; the function is `wb_core.api.export`
        assert getattr(api, name) is getattr(wb_core, name)
