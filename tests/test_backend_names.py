"""Backends are known only to the registry: no code outside `backends/` decides by a backend's name.

The first test reads every module of `wb_core` outside `backends/` (its syntax tree, so comments
and docstrings do not count) and fails on a registered backend's name used as a backend:

- compared with a backend (`cfg.backend == "openvino"`, `"tensorflow" in backends`, also inside a
  comprehension over backends),
- passed as one (`backend=`/`backends=` keywords, `RunConfig`'s first argument, a question to the
  registry such as `backend_formats("tensorflow")`),
- given as a backend default (a parameter, field or option named after backends), a record's
  `"backend"` entry, or a literal list made only of backend names.

The same word as a model format ("openvino" IR files), a package, a serving system's own runtime
name (Triton's `openvino` backend, KServe's `tensorflow` model format) or a folder name is not a
backend use and is not flagged. The few sites left are listed in ALLOWED, each with its reason.

The second test registers a backend no code names, with its own serving map and defaults, and
follows it through the exporters and `api.default_configs`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wb_core.backends import registry

SRC = Path(__file__).resolve().parents[1] / "src" / "wb_core"

# (module path under wb_core, enclosing definition) -> why a backend's name is written there.
ALLOWED = {
    ("models.py", "<module>"):
        "the model formats in words: 'openvino' there is the IR format's name, which the backend shares",
    ("training/study.py", "<module>"):
        "a training study trains with Keras on TensorFlow, whatever backends are registered: its record "
        "names the runtime it trained with",
}

REGISTRY_QUESTIONS = {"get", "get_backend", "backend_formats", "serving", "title", "runtime_label",
                      "named_properties", "open_session", "process_env"}


def _names_in(value) -> set[str]:
    """Registered backend names a string constant holds (`"openvino"`, `"openvino,tensorflow"`)."""
    if not isinstance(value, str):
        return set()
    return {p.strip() for p in value.split(",")} & set(registry.names())


def _constant_names(node) -> set[str]:
    if isinstance(node, ast.Constant):
        return _names_in(node.value)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return set().union(*(_constant_names(e) for e in node.elts)) if node.elts else set()
    return set()


def _mentions_backend(node) -> bool:
    return node is not None and "backend" in ast.unparse(node).lower()


def _literal_backend_list(node) -> bool:
    """A list/tuple/set display made only of backend names: a choice of backends."""
    return (isinstance(node, (ast.List, ast.Tuple, ast.Set)) and bool(node.elts)
            and all(isinstance(e, ast.Constant) and _names_in(e.value) for e in node.elts))


def backend_name_uses(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, enclosing definition, what) for each backend name used as a backend in a module."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def scope(node) -> str:
        chain, n = [], node
        while n in parents:
            n = parents[n]
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                chain.append(n.name)
        return ".".join(reversed(chain)) or "<module>"

    def in_backend_comprehension(node) -> bool:
        n = node
        while n in parents:
            n = parents[n]
            if isinstance(n, (ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
                return _mentions_backend(n)
        return False

    # Parameters of the module's own functions, to see a backend passed by position (`_basis("openvino")`).
    params = {n.name: [a.arg for a in n.args.posonlyargs + n.args.args] for n in ast.walk(tree)
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found = []

    def flag(node, what):
        found.append((node.lineno, scope(node), what))

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(operands):
                named = _constant_names(op)
                others = operands[:i] + operands[i + 1:]
                if named and (any(_mentions_backend(o) for o in others) or in_backend_comprehension(node)):
                    flag(node, f"compares a backend with {sorted(named)}")
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            for kw in node.keywords:
                if kw.arg and "backend" in kw.arg and _constant_names(kw.value):
                    flag(node, f"passes {kw.arg}={sorted(_constant_names(kw.value))}")
            if fname == "RunConfig" and node.args and _constant_names(node.args[0]):
                flag(node, f"makes a RunConfig on {sorted(_constant_names(node.args[0]))}")
            own = params.get(fname, [])
            if own[:1] in (["self"], ["cls"]) and isinstance(func, ast.Attribute):
                own = own[1:]
            for name, a in zip(own, node.args):
                if "backend" in name and _constant_names(a):
                    flag(node, f"passes {name} {sorted(_constant_names(a))} by position")
            asks_registry = isinstance(func, ast.Name) or (isinstance(func, ast.Attribute)
                                                           and ast.unparse(func.value).endswith("registry"))
            if fname in REGISTRY_QUESTIONS and asks_registry:
                for a in node.args:
                    if _constant_names(a):
                        flag(node, f"asks the registry about {sorted(_constant_names(a))} by name")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args
            pairs = list(zip(args[len(args) - len(node.args.defaults):], node.args.defaults))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
            for a, d in pairs:
                default = d.args[0] if isinstance(d, ast.Call) and d.args else d  # typer.Option("openvino", ...)
                if "backend" in a.arg and _constant_names(default):
                    flag(d, f"defaults parameter {a.arg} to {sorted(_constant_names(default))}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if value is not None and any(_mentions_backend(t) for t in targets):
                inner = value.args[0] if isinstance(value, ast.Call) and value.args else value
                if _constant_names(value) or _constant_names(inner):
                    flag(node, "gives a backend default by name")
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value in ("backend", "backends") and _constant_names(v):
                    flag(node, f"records backend {sorted(_constant_names(v))}")
            keyed = set().union(*(_constant_names(k) for k in node.keys if k is not None)) if node.keys else set()
            if keyed and all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in node.values):
                flag(node, f"keeps a table of words by backend {sorted(keyed)}")
        if _literal_backend_list(node) and not isinstance(parents.get(node), ast.Compare):
            flag(node, f"lists backends {sorted(_constant_names(node))} by name")
    return found


def _uses_in_tree() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("backends/"):
            continue
        for line, where, what in backend_name_uses(ast.parse(path.read_text(), str(path))):
            out.setdefault((rel, where), []).append(f"{rel}:{line} ({where}) {what}")
    return out


def test_no_backend_name_outside_the_registry():
    uses = _uses_in_tree()
    unexplained = [u for key, found in uses.items() if key not in ALLOWED for u in found]
    assert not unexplained, "Backend names outside backends/ (ask the registry instead):\n" + "\n".join(unexplained)
    stale = [key for key in ALLOWED if key not in uses]
    assert not stale, f"Allowed sites that no longer name a backend (remove them from ALLOWED): {stale}"


@pytest.mark.parametrize("code, flagged", [
    ('if dep.backend == "tensorflow": pass', True),
    ('ok = "openvino" in backends', True),
    ('both = all(str(b) == "openvino" for b in frame["backend"])', True),
    ('RunConfig("openvino", batch_size=1)', True),
    ('SweepSpec(backends="openvino,tensorflow")', True),
    ('backend_formats("tensorflow")', True),
    ('def f(backends="openvino"): pass', True),
    ('def f(backend: str = typer.Option("openvino", "--backend")): pass', True),
    ('record = {"backend": "tensorflow", "precision": "fp32"}', True),
    ('for b in ("tensorflow", "openvino"): pass', True),
    ('shown = {"openvino": "OpenVINO", "tensorflow": "TensorFlow"}.get(str(v), str(v))', True),
    ('def basis(backend): pass\nbasis("openvino")', True),
    ('class P:\n    def _basis(self, backend): pass\n    def f(self): return self._basis("openvino")', True),
    # The same words, not as backends: a model format, a serving system's runtime, a package, folders.
    ('if fmt == "openvino": pass', False),
    ('if served.runtime == "tensorflow": pass', False),
    ('version = versions.get("openvino")', False),
    ('GENERIC = {"saved_model", "openvino", "onnx", "tensorflow"}', False),
    ('FORMATS = ("savedmodel", "keras", "onnx", "openvino")', False),
    ('model = {"modelFormat": {"name": "openvino"}}', False),
    ('versions = {"nncf": version("nncf"), "openvino": version("openvino")}', False),
    ('def convert(fmt): pass\nconvert("openvino")', False),
])
def test_the_check_sees_backend_uses_and_only_those(code, flagged):
    assert bool(backend_name_uses(ast.parse(code))) is flagged


# ---- a backend no code names flows through the exporters and the defaults

TOY = "toyrt"


@pytest.fixture
def toy_backend():
    info = registry.register(registry.BackendInfo(
        name=TOY, description="A runtime declared only here", formats=("openvino", "onnx"),
        session="nowhere:Session", distributions=("toyrt", "toyrt-cpu"), loads="openvino-ir",
        settings=("threads",), env={"onednn": ("TOYRT_FAST_KERNELS",)}, title="Toy Runtime",
        serving={"triton": registry.Serving("toyrt_backend", model_file="model.toy"), "ovms": "toy-ovms"},
        defaults=(("Toy Runtime as shipped", {}), ("Toy Runtime with 3 threads", {"threads": 3})),
        variant_default={"threads": 2}))
    yield info
    registry._REGISTRY.pop(TOY, None)


def _toy_deployment(onednn=None):
    from wb_core.export.deployment import build

    study = {"name": "s", "model_path": "/models/lenet/model.xml", "model_format": "openvino",
             "model_fingerprint": "f", "inputs": [{"name": "x", "shape": [-1, 4], "dtype": "float32"}],
             "hardware": {"cpu_model": "CPU"}, "versions": {"toyrt": "1.0", "toyrt-cpu": "1.1"}}
    run = {"key": "k1", "backend": TOY, "precision": "fp32", "batch_size": 4, "threads": 2, "cores": "0-1",
           "concurrency": 1, "instances": 1, "throughput": 100.0, "latency_ms_p50": 1.0, "latency_ms_p99": 2.0,
           "onednn": onednn}
    dep = build(study, run)
    dep.onednn = onednn
    return dep


def test_a_backend_declared_only_in_the_registry_flows_through_exports_and_defaults(toy_backend):
    from wb_core import api
    from wb_core.export.formats import EXPORTERS

    dep = _toy_deployment(onednn=False)

    triton = EXPORTERS["triton"].render(dep)
    pbtxt = triton.files["model_repository/lenet/config.pbtxt"]
    assert 'backend: "toyrt_backend"' in pbtxt and 'default_model_filename: "model.toy"' in pbtxt
    assert 'backend: "openvino"' not in pbtxt and "platform:" not in pbtxt
    assert "-e TOYRT_FAST_KERNELS=0" in triton.files["run_triton.sh"]  # the backend's own env declaration
    # The provenance names the most specific distribution the study recorded, and the title.
    assert "with toyrt-cpu 1.1 on CPU" in pbtxt and "Settings: Toy Runtime, FP32" in pbtxt

    # OVMS names a runtime for it, so the run counts as served as measured: no "measured with" note.
    ovms = EXPORTERS["ovms"].render(dep)
    assert not any("measured with" in n for n in ovms.notes)
    # TF Serving names none: the note says so with the backend's title and the backends it does serve.
    tfs = EXPORTERS["tfserving"].render(dep)
    note = next(n for n in tfs.notes if "measured with" in n)
    assert note.startswith("This run was measured with Toy Runtime;") and "tensorflow" in note and TOY not in note

    defaults = api.default_configs([TOY], batch_size=8)
    assert list(defaults) == ["Toy Runtime as shipped", "Toy Runtime with 3 threads"]
    assert all(c.backend == TOY and c.batch_size == 8 for c in defaults.values())
    assert defaults["Toy Runtime with 3 threads"].threads == 3 and defaults["Toy Runtime as shipped"].threads is None


def test_the_registry_answers_for_a_backend_it_does_not_know_without_failing():
    # Rows of an older store may name a backend this install does not register.
    assert registry.title("retired-runtime") == "retired-runtime"
    assert registry.runtime_label("retired-runtime", {"retired-runtime": "0.9"}) == "retired-runtime 0.9"


@pytest.fixture
def file_backend():
    """A backend that runs ONNX files as they are, declared with plain runtime names."""
    info = registry.register(registry.BackendInfo(
        name="filert", description="Runs ONNX files as they are", formats=("onnx",), session="nowhere:Session",
        distributions=(), loads="onnx", settings=("threads", "inter_op_threads"),
        serving={"triton": "onnxruntime", "kserve": "onnx"}))
    yield info
    registry._REGISTRY.pop("filert", None)


def test_a_backend_that_serves_the_model_file_as_it_is_gets_that_file_in_the_exports(file_backend, tmp_path):
    import yaml

    from wb_core.export.bundle import model_files
    from wb_core.export.deployment import build
    from wb_core.export.formats import EXPORTERS
    from wb_core.export.kserve import supports

    onnx = tmp_path / "lenet" / "lenet.onnx"
    onnx.parent.mkdir()
    onnx.write_bytes(b"not really onnx")
    from wb_core.models import fingerprint

    # The study's fingerprint is the file's, as a sweep stores it: the bundle copies only what was measured.
    study = {"name": "s", "model_path": str(onnx), "model_format": "onnx", "model_fingerprint": fingerprint(onnx),
             "inputs": [{"name": "x", "shape": [-1, 4], "dtype": "float32"}], "hardware": {}, "versions": {}}
    run = {"key": "k2", "backend": "filert", "precision": "fp32", "batch_size": 1, "threads": 2,
           "inter_op_threads": 1, "concurrency": 1, "instances": 1, "latency_ms_p50": 1.0}
    dep = build(study, run)

    triton = EXPORTERS["triton"].render(dep)
    pbtxt = triton.files["model_repository/lenet/config.pbtxt"]
    assert 'backend: "onnxruntime"' in pbtxt and "default_model_filename" not in pbtxt
    assert 'key: "intra_op_thread_count"\n  value { string_value: "2" }' in pbtxt  # Triton onnxruntime's own keys
    assert f"cp {onnx} model_repository/lenet/1/model.onnx" in triton.files["run_triton.sh"]
    assert model_files(dep, "triton", []) == [("model_repository/lenet/1/model.onnx", onnx)]

    # KServe: the declared model format, served by the runtime KServe lists it under.
    service = yaml.safe_load(EXPORTERS["kserve"].render(dep).files["inferenceservice.yaml"])
    model = service["spec"]["predictor"]["model"]
    assert model["modelFormat"] == {"name": "onnx"} and model["runtime"] == "kserve-openvino"
    assert supports(model["runtime"], model["modelFormat"])
    assert model_files(dep, "kserve", []) == [("model/lenet/1/model.onnx", onnx)]
