"""The module graph, read from the imports: no circles, no arrow up a layer, one public face.

Layers, lowest first (a module may import its own layer and those below, never above):
  0 foundations   version, errors, paths, parsing, precisions, limits, metrics, axis, axes, options, config, hardware,
                  backends.registry, demo_catalog (the demos' names and paths; demo, which builds them, is layer 2)
  1 data          models, model_inputs, accuracy, measure, store, text (tokenized text), backends (sessions)
  2 processes     proc, variants, demo, data (datasets, demo data included)
  3 sweeps        sweep, fleet (the executor and the coordinator), pipeline and training studies
  4 results       analysis, plots, report, export, fleet.compare and fleet.plots (reading fleet studies),
                  tune (search, confirm and export in one budget)
  5 the API       api (and the package itself, which re-exports it); faces, the kit the CLI and the
                  dashboard share beyond the verbs
  6 faces         cli, ui
The notebooks import only `wb_core.api`; the CLI and the dashboard it and `wb_core.faces` (plus their
own package); the benchmarks `wb_core.api`, but for the measurement internals named in BENCHMARK_INTERNALS.

What counts as an import: `import x` and `from x import y` anywhere (inside functions too),
relative imports (`from . import x`, `from ..store import y`), `importlib.import_module("wb_core.x")`
(an f-string names a module of the package its literal start names), and a declaration string `"wb_core.x:Name"` or
`"wb_core.x"` (an entry point a worker or a registry loads later). A declaration string may name a
module of its own package only (a package late-binding its own parts); across packages it is an
import like any other. An import under `if TYPE_CHECKING:` names a type for annotations and never
runs: it is no arrow (a backend session types its RunConfig that way), but a face may not make one
either. Heavy runtimes (OpenVINO, TensorFlow, Keras, NNCF, ONNX, ONNX Runtime) are
imported only where a worker runs: see WORKER_SIDE.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "wb_core"

LAYERS = [
    {"wb_core.version", "wb_core.errors", "wb_core.paths", "wb_core.streams", "wb_core.config", "wb_core.hardware",
     "wb_core.run_options",
     "wb_core.stats", "wb_core.parsing", "wb_core.precisions", "wb_core.limits", "wb_core.metrics", "wb_core.axis",
     "wb_core.axes", "wb_core.naming",
     "wb_core.options",
     "wb_core.demo_catalog",
     "wb_core.backends.registry", "wb_core.backends"},
    # Every backend session module is data-layer code (only the registry is a foundation).
    {"wb_core.models", "wb_core.model_inputs", "wb_core.accuracy", "wb_core.measure", "wb_core.store", "wb_core.text",
     *{f"wb_core.backends.{p.stem}" for p in (Path(__file__).resolve().parent.parent / "src" / "wb_core" /
                                             "backends").glob("*.py") if p.stem not in ("registry", "__init__")}},
    {"wb_core.proc", "wb_core.variants", "wb_core.demo", "wb_core.data", "wb_core.optimum_export"},
    {"wb_core.sweep", "wb_core.fleet", "wb_core.pipeline", "wb_core.training", "wb_core.generation"},
    {"wb_core.analysis", "wb_core.plots", "wb_core.report", "wb_core.export", "wb_core.fleet.compare",
     "wb_core.fleet.plots", "wb_core.tune"},
    {"wb_core.api", "wb_core.faces", "wb_core"},
    {"wb_core.cli", "wb_core.ui", "wb_core.__main__"},
]

HEAVY = {"openvino", "tensorflow", "keras", "nncf", "onnx", "onnxruntime", "tf2onnx"}

# Where a heavy runtime may be imported: modules that run only inside a worker process, and any
# function named `task_*` (a worker's entry point, however it is reached). Other functions that
# import one are listed, each with the reason: WORKER_SIDE runs only in a worker; IN_PARENT runs in
# the parent by design.
WORKER_MODULES = re.compile(r"^wb_core\.(proc\.worker|\w+\.\w*tasks|backends\.(?!registry$|base$)\w+)$")
WORKER_SIDE = {
    ("wb_core.demo", "build_demo"): "called by demo.task_demo, inside the worker",
    ("wb_core.demo", "build_text_encoder"): "called by build_demo, inside the worker",
    ("wb_core.models", "read_ov_model"): "called by worker tasks (describe, layers) and by the serve check (below)",
    ("wb_core.models", "check_onnx_opsets"): "called by the worker's describe task",
    ("wb_core.variants.recipes", "nncf_arguments"): "called by variants.tasks.task_quantize",
}
IN_PARENT = {
    ("wb_core.export.servecheck", "_same_outputs"): (
        "`wb serve-check` compares the served answer with OpenVINO's own, in the process that holds "
        "the tritonserver client; it runs only on that request, never in a sweep, report or export"),
    ("wb_core.models", "onnx_external_files"): (
        "the fingerprint of an ONNX model covers its external data files, named inside it: the onnx "
        "library reads the graph's tensor records (load_external_data=False, no weights, no runtime), "
        "once per file content"),
}

# The internals a benchmark may import besides wb_core.api, each with its reason. Everything a
# face does goes through the API; these measure the workbench's own parts, which no face does.
BENCHMARK_INTERNALS = {
    "wb_core.sweep.local": "scaling.py runs hand-made configs (each thread count pinned to as many cores), "
                           "which no sweep spec expresses",
    "wb_core.variants.quantize": "int8_recipes.py and precision_throughput.py build each INT8 recipe's variant "
                                 "directly, on one calibration set, to time and compare the recipes",
    "wb_core.models": "fingerprints the model file those variants are cached under",
    "wb_core.data": "the calibration set those variants are built from",
    "wb_core.demo": "int8_recipes.py builds the text encoder at a chosen size",
    "wb_core.backends.openvino": "precision_throughput.py reads which precision each op really executed in",
    "wb_core.store": "noise.py reads each repeat round's busy flag (the API gives a run's summary only)",
    "wb_core.sweep.context": "run_all.py records the library versions a study records, beside the figures",
    "wb_core.export.tritonserver": "serving.py finds the tritonserver binary before it plans its runs",
    "wb_core.cli": "dashboard_start.py starts `wb dashboard` as a user does and reads its fallback page source",
    "wb_core.cli.dashboard": "(the same)",
    "wb_core.sweep.paired": "comparison_design.py reads each side-by-side block's own figures (CPU time, trimmed "
                            "windows, the order of each cycle), which a confirmation sums up",
    "wb_core.stats": "comparison_design.py computes each design's ratio from the same per-round and per-cycle "
                     "values the verdicts use",
    "wb_core.paths": "genai_fidelity.py keeps the decoder it builds in the workbench's cache folder",
    "wb_core.axes": "genai_fidelity.py offers the declared weight formats as its --weights choices",
    "wb_core.generation.spec": "genai_fidelity.py names the weight-compressed point whose cached folder the "
                               "reference loads, so both sides run the same files",
    "wb_core.generation.study": "(the same: the folder and the generator's fingerprint it is cached under)",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    name = ".".join(parts)
    return name.removesuffix(".__init__")


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}
ENTRY = re.compile(r"^(wb_core(?:\.\w+)+)(?::\w+)?$")


def resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def package_of(name: str) -> str:
    return ".".join(name.split(".")[:2])


def _relative_base(here: str, level: int, is_package: bool) -> str:
    parts = here.split(".") if is_package else here.split(".")[:-1]
    return ".".join(parts[:len(parts) - (level - 1)])


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The import statements under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): they never run."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return out


def references(source: str, here: str = "", is_package: bool = False) -> list[tuple[str, str]]:
    """(kind, module) for every wb_core module a source names: kind is "import", "declared", or
    "typing" (an import under `if TYPE_CHECKING:`, for annotations only: it never runs, so it is no
    arrow of the import graph; the faces may not make one either)."""
    out = []
    tree = ast.parse(source)
    typing_only = _type_checking_only(tree)

    def add(kind, name):
        target = resolve(name)
        if target and target != here:
            out.append((kind, target))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) in typing_only:
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if isinstance(node, ast.ImportFrom) and node.level:
                names = [".".join(filter(None, [_relative_base(here, node.level, is_package), node.module or ""]))]
            for module in names:
                if module.split(".")[0] == "wb_core":
                    for alias in (node.names if isinstance(node, ast.ImportFrom) else [None]):
                        add("typing", f"{module}.{alias.name}" if alias else module)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(filter(None, [_relative_base(here, node.level, is_package), module]))
            if module.split(".")[0] == "wb_core":
                for alias in node.names:
                    add("import", f"{module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "wb_core":
                    add("import", alias.name)
        elif isinstance(node, ast.Call) and node.args and (
                getattr(node.func, "attr", None) == "import_module" or getattr(node.func, "id", None) in
                ("import_module", "__import__")):
            arg = node.args[0]
            if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant) \
                    and str(arg.values[0].value).startswith("wb_core"):
                add("declared", str(arg.values[0].value).rstrip("."))  # some module of that package
            elif isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("wb_core"):
                add("import", arg.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := ENTRY.match(node.value)):
            add("declared", m.group(1))
    return out


def imports_of(source: str, here: str = "", is_package: bool = False) -> set[str]:
    """Every wb_core module a source imports or declares, at the top or inside functions."""
    return {t for _, t in references(source, here, is_package)}


def edges(name: str, refs) -> set[str]:
    """A module's arrows: its imports, and what it declares in another package (imports for type
    annotations only, under TYPE_CHECKING, are not arrows: they never run)."""
    return {t for kind, t in refs if kind == "import" or (kind == "declared" and package_of(t) != package_of(name))}


REFERENCES = {name: references(path.read_text(), name, path.name == "__init__.py") for name, path in MODULES.items()}
GRAPH = {name: edges(name, refs) for name, refs in REFERENCES.items()}


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


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one node (each a circle of imports)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        for b in targets:
            if package_of(a) != package_of(b):
                out.setdefault(package_of(a), set()).add(package_of(b))
    return out


def test_no_import_cycles():
    cycles = strongly_connected(GRAPH)
    assert not cycles, f"import cycles: {cycles}"


# Circles between packages still to be removed, each by moving the piece that causes it. The test
# fails on a new circle, on one that grows, and on one listed here that has gone (shrink the list).
# Removed so far: {proc, demo, data, variants} (worker tasks named by their callers, precision tasks
# in variants/tasks.py), {sweep, fleet, analysis, export} (the fleet registers its sweep runner in
# wb_core.sweep; tune, which searches, confirms and exports, is a module of its own).
# {config, backends, models} (backends/ held the layer-0 registry, read by config through axes, and
# the sessions, which read config and models): the sessions now read their input helpers from
# model_inputs, and the run options' types under TYPE_CHECKING only.
KNOWN_CIRCLES: list[list[str]] = []


def test_type_checking_imports_are_no_arrows():
    here = "wb_core.backends.openvino"
    typed = ("from typing import TYPE_CHECKING\nfrom wb_core.errors import ConfigError\n"
             "if TYPE_CHECKING:\n    from wb_core.config import RunConfig\n    import wb_core.models\n")
    refs = references(typed, here)
    assert ("typing", "wb_core.config") in refs and ("typing", "wb_core.models") in refs
    assert edges(here, refs) == {"wb_core.errors"}
    runs = "import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    from wb_core.config import RunConfig\n"
    assert edges(here, references(runs, here)) == {"wb_core.config"}  # the else branch runs


def test_no_circle_between_packages():
    """A package (`wb_core.sweep`, `wb_core.config`, ...) may not reach itself through others, even
    when every module-level arrow points down: such a circle ties the packages into one."""
    circles = strongly_connected(package_graph(GRAPH))
    detail = [f"{a} -> {b}" for c in circles for a, targets in sorted(GRAPH.items()) for b in sorted(targets)
              if package_of(a) in c and package_of(b) in c and package_of(a) != package_of(b)
              and c not in KNOWN_CIRCLES]
    assert sorted(circles) == sorted(KNOWN_CIRCLES), (
        f"circles between packages: {circles}; known: {KNOWN_CIRCLES}\n" + "\n".join(detail))


def test_no_import_goes_up_a_layer():
    upward = [f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
              for a, targets in GRAPH.items() for b in targets
              if layer_of(b) > layer_of(a) and not (a == "wb_core" and b == "wb_core.api")]
    assert not upward, "\n".join(upward)


def reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def workers_started_by_foundations(graph: dict[str, set[str]]) -> list[str]:
    return [f"{a} (layer {layer_of(a)}) reaches {b}" for a in sorted(graph) if layer_of(a) <= 1
            for b in sorted(reaches(graph, a)) if b == "wb_core.proc" or b.startswith("wb_core.proc.")]


def test_a_foundation_never_starts_a_worker():
    """Foundations and data modules (layers 0 and 1) never reach proc/, directly or through another
    module: what needs a worker (building a demo, converting a model) lives a layer up, and the facts
    it works from (the demos' names and paths: demo_catalog) stay below, starting nothing."""
    assert layer_of("wb_core.demo_catalog") == 0 and layer_of("wb_core.demo") == 2
    assert not workers_started_by_foundations(GRAPH), "\n".join(workers_started_by_foundations(GRAPH))
    # the rule sees a worker started through another module: the catalog importing the builder
    broken = {**GRAPH, "wb_core.demo_catalog": GRAPH["wb_core.demo_catalog"] | {"wb_core.demo"}}
    assert "wb_core.demo_catalog (layer 0) reaches wb_core.proc.parent" in workers_started_by_foundations(broken)


def test_declarations_name_real_modules():
    """An entry-point string names a module and attribute that exist (a typo would fail only in a worker)."""
    missing = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ENTRY.match(node.value) \
                    and ":" in node.value:
                module, attr = node.value.split(":")
                if module not in MODULES or not re.search(rf"^(def|class) {attr}\b|^{attr}\s*=",
                                                          MODULES[module].read_text(), re.M):
                    missing.append(f"{name}: {node.value}")
    assert not missing, "\n".join(missing)


def _face_violations(name: str, targets: set[str], own: str) -> list[str]:
    return [f"{name} imports {t}" for t in sorted(targets)
            if t not in ("wb_core.api", "wb_core.faces") and not t.startswith(own)]


def test_cli_and_ui_use_only_the_api():
    bad = []
    for name, targets in GRAPH.items():
        for face in ("wb_core.cli", "wb_core.ui"):
            if name == face or name.startswith(face + "."):  # annotations too: a face names only API types
                bad += _face_violations(name, targets | {t for _, t in REFERENCES[name]}, face)
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


BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_benchmarks_use_the_api_or_a_named_internal(path):
    bad = [t for t in sorted(imports_of(path.read_text())) if t not in ("wb_core", "wb_core.api")
           and t not in BENCHMARK_INTERNALS]
    assert not bad, f"{path.name} imports {bad}: use wb_core.api, or name the internal and why in BENCHMARK_INTERNALS"


def test_every_benchmark_internal_is_used():
    used = set().union(*(imports_of(p.read_text()) for p in BENCHMARKS))
    assert not set(BENCHMARK_INTERNALS) - used, f"allowed but unused: {set(BENCHMARK_INTERNALS) - used}"


def heavy_imports(source: str) -> list[tuple[str | None, str]]:
    """(top-level function or class holding it, runtime) for every heavy runtime a source imports."""
    out = []

    def walk(node, holder):
        for child in ast.iter_child_nodes(node):
            here = holder
            if holder is None and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                here = child.name
            names = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            out.extend((here, n.split(".")[0]) for n in names if n.split(".")[0] in HEAVY)
            walk(child, here)

    walk(ast.parse(source), None)
    return out


def test_heavy_runtimes_only_in_workers():
    bad = [f"{name}{'.' + fn if fn else ''} imports {runtime}"
           for name, path in sorted(MODULES.items()) for fn, runtime in heavy_imports(path.read_text())
           if not WORKER_MODULES.match(name) and not (fn or "").startswith("task_")
           and (name, fn) not in WORKER_SIDE and (name, fn) not in IN_PARENT]
    assert not bad, "a heavy runtime imported outside a worker:\n" + "\n".join(bad)


def test_worker_side_declarations_are_still_true():
    holders = {(name, fn) for name, path in MODULES.items() for fn, _ in heavy_imports(path.read_text())}
    listed = set(WORKER_SIDE) | set(IN_PARENT)
    assert not listed - holders, f"no longer import a runtime: {listed - holders}"


def test_the_api_names_resolve():
    import wb_core
    from wb_core import api

    for name in api.__all__:
        if f"wb_core.{name}" in MODULES:
            continue  # `wb_core.export` is the package; the function is `wb_core.api.export`
        assert getattr(api, name) is getattr(wb_core, name)


def test_no_store_runner_or_registry_behind_the_api():
    """No public name of the API or of the faces' kit is the store, a sweep runner, a converter or a
    registry (docs/api.md and tests/test_api_surface.py hold the API's list)."""
    from wb_core import api, faces

    internal = {"wb_core.store", "wb_core.store.sql", "wb_core.sweep.local", "wb_core.sweep.search",
                "wb_core.variants.convert", "wb_core.proc.parent",
                "wb_core.fleet.cli_support", "wb_core.backends.registry"}
    leaked = [f"{m.__name__}.{n}" for m in (api, faces) for n in m.__all__
              if getattr(getattr(m, n), "__module__", None) in internal]
    assert not leaked, f"internals behind the API: {leaked}"


def test_the_parent_never_imports_a_runtime(lenet_ir, tmp_path):
    """Profile, read with efficiency (FLOPs), recommend, export every format and write the report in
    one process: the runtimes load only in the workers it starts."""
    import subprocess
    import sys

    script = f"""
import sys
from wb_core import api
db = {str(tmp_path / "p.db")!r}
api.profile({str(lenet_ir)!r}, db=db, study="s", settings=api.MeasureSettings(max_time_s=0.2, warmup_s=0.05))
df = api.results("s", db, "efficiency")
assert df["gflops"].notna().all(), df.columns
dep = api.deployment_for_study(db, "s")
api.export(dep, list(api.FORMATS), {str(tmp_path / "out")!r})
api.write_report(db, "s", {str(tmp_path / "report.html")!r})
print("LOADED", sorted(m for m in sys.modules if m.split(".")[0] in {sorted(HEAVY)!r}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": str(SRC.parent)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "LOADED []" in out.stdout, out.stdout[-500:]
