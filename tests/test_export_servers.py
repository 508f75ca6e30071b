"""Exports fed to the real consumers, for single-core, multi-core, non-contiguous, batched, bf16,
multi-stream and TensorFlow runs:

- Triton: a real `tritonserver` (2.51, the binary nvidia-pytriton ships, with the Python backend
  only) loads each exported repository with its `--host-policy` flags and
  --disable-auto-complete-config. The openvino and tensorflow exports may only fail for the
  missing backend library; their Python-backend variants must reach READY and answer like
  OpenVINO itself. Negative controls show the test tells "config rejected" from "backend
  missing".
- KServe: each InferenceService loads, strictly (no unknown field, every type right), into the
  `kserve` package's own V1beta1InferenceService, and names a runtime/format pair KServe ships.
- OVMS: config.json passes the rules OVMS documents and OpenVINO compiles with its plugin_config.
- `serve_check`: served vs predicted through a real server; a port in use, a server that does not
  start and a server killed mid-check each give one sentence, a failed record, and no process left.

Install the servers' packages without their dependencies (their pins conflict with this
project's numpy, pandas and psutil ranges): `pip install --no-deps nvidia-pytriton==0.7.0 kserve==0.21.0`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from analysis_data import HARDWARE, make_study_db, run
from wb_core.errors import ConfigError, WorkbenchError
from wb_core.export import render
from wb_core.export.deployment import DeploymentConfig, build
from wb_core.export.kserve import KSERVE_RUNTIMES, supports
from wb_core.export.ovms import check_config
from wb_core.export.triton import host_policy_flags, layout, render_python
from wb_core.export.tritonserver import MISSING_BACKEND, TritonServer, find_tritonserver, load_errors

NO_TRITON = ("tritonserver is not installed: `pip install --no-deps nvidia-pytriton==0.7.0` ships a real one "
             "(--no-deps: its numpy<2 pin conflicts with this project)")


def _tritonserver_binary_present() -> bool:
    """A tritonserver executable where find_tritonserver looks, checked here without wb_core."""
    import shutil

    if os.environ.get("WB_TRITONSERVER") or shutil.which("tritonserver"):
        return True
    spec = importlib.util.find_spec("pytriton")
    return bool(spec and spec.submodule_search_locations and
                (Path(list(spec.submodule_search_locations)[0]) / "tritonserver" / "bin" / "tritonserver").is_file())


@pytest.fixture(scope="module")
def triton():
    # Skip only when no binary is there at all; a binary that is there but unusable (no Python
    # stub, no backends) is a failure to see, not "not installed".
    if not _tritonserver_binary_present():
        pytest.skip(NO_TRITON)
    return find_tritonserver()


@pytest.fixture(scope="module")
def tiny_ir(tmp_path_factory) -> Path:
    """A small OpenVINO IR: x [N, 4] -> relu(x @ W) [N, 3] (f32 weights, so results compare exactly)."""
    import openvino as ov
    from openvino import opset13 as ops

    x = ops.parameter([-1, 4], np.float32, name="x")
    w = ops.constant(np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0)
    y = ops.relu(ops.matmul(x, w, False, False))
    y.output(0).get_tensor().set_names({"y"})
    path = tmp_path_factory.mktemp("ir") / "model.xml"
    ov.save_model(ov.Model([y], [x], "tiny"), str(path), compress_to_fp16=False)
    return path


# The runs every format is checked with (analysis_data.run fields, plus instance slices).
CASES = {
    "single-core": dict(cores=[0], threads=1,
                        ov_properties={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"}),
    "multi-core": dict(cores=[0, 1], threads=2, ov_properties={"INFERENCE_PRECISION_HINT": "f32",
                                                               "INFERENCE_NUM_THREADS": "2"}),
    "non-contiguous": dict(cores=[0, 2], threads=2, ov_properties={"INFERENCE_PRECISION_HINT": "f32",
                                                                   "INFERENCE_NUM_THREADS": "2"}),
    "split-instances": dict(cores=[0, 1], threads=1, instances=2, cores_per_instance=1,
                            ov_properties={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"}),
    "batched": dict(batch=8, cores=[0], threads=1,
                    ov_properties={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"}),
    "bf16": dict(precision="bf16", batch=4, cores=[1], threads=1, cpu_pinning=True,
                 ov_properties={"INFERENCE_PRECISION_HINT": "bf16", "INFERENCE_NUM_THREADS": "1",
                                "ENABLE_CPU_PINNING": "True"}),
    "streams": dict(cores=[0, 1], threads=2, streams=2, concurrency=2,
                    ov_properties={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "2",
                                   "NUM_STREAMS": "2"}),
    "unpinned": dict(threads=None, ov_properties={"INFERENCE_PRECISION_HINT": "f32"}, ov_streams=1, ov_threads=2),
    "tensorflow": dict(backend="tensorflow", batch=4, threads=2, inter_op_threads=1, cores=[0, 1], onednn=True),
}


def case_dep(name: str, ir: Path, sm: Path | None = None) -> DeploymentConfig:
    kw = dict(CASES[name])
    cpi = kw.pop("cores_per_instance", None)
    r = run(**kw)
    r["cores_per_instance"] = cpi
    study = {"name": "t", "model_path": f"/zoo/{name}/saved_model", "model_format": "savedmodel",
             "model_fingerprint": "fp", "hardware": HARDWARE, "hardware_fingerprint": "hw",
             "versions": {"openvino": "2026.4.1"}, "inputs": [{"name": "x", "shape": [-1, 4], "dtype": "float32"}]}
    return build(study, r, ir_path=str(ir), savedmodel_path=str(sm) if sm else None)


OV_CASES = [c for c in CASES if c != "tensorflow"]


def _write(res, root: Path) -> None:
    for rel, text in res.files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _copy_ir(ir: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "model.xml").write_bytes(ir.read_bytes())
    (dest / "model.bin").write_bytes(ir.with_suffix(".bin").read_bytes())


def _run_to_exit(server: TritonServer, timeout: float = 90) -> str:
    server.start()
    try:
        server.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    finally:
        server.stop()
    return server.log()


def verdict(errors: list[str]) -> str:
    """What a failed load says: only missing backend libraries, or a rejected configuration."""
    if not errors:
        return "loaded"
    return "backend missing" if all(MISSING_BACKEND.search(e) for e in errors) else "config rejected"


def _errors_by_model(log: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in load_errors(log):
        model, _, text = e.partition(": ")
        out.setdefault(model, []).append(text)
    return out


# ---- Triton


def test_triton_loads_every_export_and_lacks_only_the_backend(triton, tiny_ir, tmp_path):
    base, repo = tmp_path / "export", tmp_path / "export" / "model_repository"
    flags: list[str] = []
    sm = tmp_path / "sm"
    (sm / "variables").mkdir(parents=True)
    (sm / "saved_model.pb").write_bytes(b"")
    for name in CASES:
        dep = case_dep(name, tiny_ir, sm)
        dep.model.name = name
        res = render(dep, "triton")
        _write(res, base)
        flags += [f for f in host_policy_flags(dep) if f not in flags]
        if dep.backend == "openvino":
            _copy_ir(tiny_ir, repo / name / "1")
        else:
            (repo / name / "1" / "model.savedmodel").mkdir(parents=True)
    for f in flags:  # one range per policy: LO-HI
        lo, hi = f.rsplit("cpu-cores=", 1)[1].split("-")
        assert lo.isdigit() and hi.isdigit() and int(lo) <= int(hi)
    log = _run_to_exit(TritonServer(repo, triton, flags, workdir=tmp_path / "server"))
    errors = _errors_by_model(log)
    assert set(errors) == set(CASES), log[-3000:]
    for name, errs in errors.items():
        assert verdict(errs) == "backend missing", (name, errs)
        backend = "tensorflow" if name == "tensorflow" else "openvino"
        assert all(MISSING_BACKEND.search(e).group(1) == backend for e in errs)


def test_python_variants_reach_ready_with_the_exported_host_policies(triton, tiny_ir, tmp_path):
    import openvino as ov
    import tritonclient.grpc as grpcclient

    base, repo = tmp_path / "export", tmp_path / "export" / "model_repository"
    flags: list[str] = []
    deps = {}
    for name in CASES:
        dep = case_dep(name, tiny_ir)
        if dep.backend == "tensorflow":  # its layout and host policies, served by the OpenVINO twin
            dep = dataclasses.replace(dep, backend="openvino", runtime_properties={})
        dep.model.name = name
        deps[name] = dep
        _write(render_python(dep, {"x": [dep.batch_size, 4]}), base)
        _copy_ir(tiny_ir, repo / name / "1")
        flags += [f for f in host_policy_flags(dep) if f not in flags]
    # Every host policy flag is used by some instance group, so Triton parses each one.
    used = {g.policy for d in deps.values() for g in layout(d, []).groups if g.policy}
    assert {f.split(",")[0].split("=")[1] for f in flags} == used
    with TritonServer(repo, triton, flags, workdir=tmp_path / "server") as server:
        for name in deps:
            server.wait_ready(name, timeout_s=120)
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
        compiled = ov.Core().compile_model(str(tiny_ir), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        for name, dep in deps.items():
            x = np.random.default_rng(0).random((dep.batch_size, 4), dtype=np.float32)
            inp = grpcclient.InferInput("x", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            result = client.infer(name, [inp])
            y = result.as_numpy("y")
            assert y is not None and y.size, (name, result.get_response())
            tol = 0.05 if dep.precision == "bf16" else 1e-5
            np.testing.assert_allclose(y, compiled(x)[0], rtol=tol, atol=tol, err_msg=name)
        # The batched model pads a short batch, as the openvino backend's ENABLE_BATCH_PADDING does.
        x = np.ones((3, 4), np.float32)
        inp = grpcclient.InferInput("x", [3, 4], "FP32")
        inp.set_data_from_numpy(x)
        assert client.infer("batched", [inp]).as_numpy("y").shape == (3, 3)
    assert not server.alive()


def test_the_check_tells_a_rejected_config_from_a_missing_backend(triton, tiny_ir, tmp_path):
    base, repo = tmp_path / "export", tmp_path / "export" / "model_repository"
    dep = case_dep("non-contiguous", tiny_ir)
    dep.model.name = "badpolicy"
    _write(render_python(dep, {"x": [1, 4]}), base)
    _copy_ir(tiny_ir, repo / "badpolicy" / "1")
    bad_flags = [f.replace("cpu-cores=0-2", "cpu-cores=0,2") for f in host_policy_flags(dep)]
    assert bad_flags != host_policy_flags(dep)
    ov_dep = case_dep("batched", tiny_ir)
    ov_dep.model.name = "badbatch"
    res = render(ov_dep, "triton")
    res.files["model_repository/badbatch/config.pbtxt"] = res.files["model_repository/badbatch/config.pbtxt"].replace(
        "preferred_batch_size: [ 8 ]", "preferred_batch_size: [ 16 ]")
    _write(res, base)
    _copy_ir(tiny_ir, repo / "badbatch" / "1")
    log = _run_to_exit(TritonServer(repo, triton, bad_flags, workdir=tmp_path / "server"))
    errors = _errors_by_model(log)
    assert verdict(errors["badpolicy"]) == "config rejected" and "cpu-cores" in errors["badpolicy"][0]
    assert verdict(errors["badbatch"]) == "config rejected" and "preferred" in errors["badbatch"][0]


# ---- KServe


@pytest.fixture(scope="module")
def kserve_models():
    """kserve.models (the generated V1beta1* classes), without running kserve/__init__ and its server stack."""
    spec = importlib.util.find_spec("kserve")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("kserve is not installed: `pip install --no-deps kserve==0.21.0` (--no-deps: its pandas<3 and "
                    "psutil<6 pins conflict with this project)")
    saved = {k: v for k, v in sys.modules.items() if k == "kserve" or k.startswith("kserve.")}
    pkg = types.ModuleType("kserve")
    pkg.__path__ = list(spec.submodule_search_locations)
    sys.modules["kserve"] = pkg
    try:
        import kserve.models as models

        yield models
    finally:
        for k in [k for k in sys.modules if k == "kserve" or k.startswith("kserve.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def _load(models, cls, data, where="$"):
    """Build `cls` from a YAML mapping field by field; unknown keys and wrong types fail, setters validate."""

    assert isinstance(data, dict), f"{where}: expected a mapping for {cls.__name__}"
    by_json = {v: k for k, v in cls.attribute_map.items()}
    unknown = set(data) - set(by_json)
    assert not unknown, f"{where}: {cls.__name__} has no field(s) {sorted(unknown)}"
    kwargs = {by_json[k]: _value(models, cls.openapi_types[by_json[k]], v, f"{where}.{k}") for k, v in data.items()}
    return cls(**kwargs)


def _value(models, typ: str, v, where):
    import kubernetes.client as k8s

    # OpenAPI generator spellings: kserve's `list[X]` / `dict(str, X)`, kubernetes' `List[X]` / `Dict[str, X]`.
    if typ.startswith(("list[", "List[")):
        assert isinstance(v, list), f"{where}: expected a list"
        return [_value(models, typ[5:-1], x, f"{where}[{i}]") for i, x in enumerate(v)]
    if typ.startswith(("dict(", "Dict[")):
        assert isinstance(v, dict), f"{where}: expected a mapping"
        inner = typ[5:-1].split(",", 1)[1].strip()
        return {k: _value(models, inner, x, f"{where}.{k}") for k, x in v.items()}
    native = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object,
              "ResourceQuantity": (str, int, float)}
    if typ in native:
        assert isinstance(v, native[typ]) and not (typ == "int" and isinstance(v, bool)), \
            f"{where}: expected {typ}, got {type(v).__name__}"
        return v
    cls = getattr(models, typ, None) or getattr(k8s, typ, None)
    assert cls is not None, f"{where}: unknown type {typ}"
    return _load(models, cls, v, where)


def test_kserve_files_load_into_kserves_own_models(kserve_models, tiny_ir, tmp_path):
    for name in CASES:
        dep = case_dep(name, tiny_ir)
        doc = yaml.safe_load(render(dep, "kserve").files["inferenceservice.yaml"])
        isvc = _load(kserve_models, kserve_models.V1beta1InferenceService, doc)
        model = isvc.spec.predictor.model
        assert model.runtime in KSERVE_RUNTIMES, name
        fmt = {"name": model.model_format.name, "version": model.model_format.version}
        assert supports(model.runtime, {k: v for k, v in fmt.items() if v is not None}), (name, fmt)
        assert model.resources.requests == model.resources.limits
    with pytest.raises(AssertionError, match="no field"):
        _load(kserve_models, kserve_models.V1beta1InferenceService, {"apiVersion": "v", "kind": "k", "specs": {}})


def test_kserve_rule_rewritten_from_the_controller():
    """Cases worked out by hand from KServe's RuntimeSupportsModel and the runtimes' supportedModelFormats
    (config/runtimes/*.yaml in KServe's repository). No KServe controller or its runtime files are
    installed here, so this checks our rewrite of the rule against those hand-worked cases, not
    against the controller itself."""
    assert supports("kserve-openvino", {"name": "openvino"})
    assert supports("kserve-openvino", {"name": "openvino", "version": "10"})
    assert not supports("kserve-openvino", {"name": "openvino", "version": "11"})
    assert not supports("kserve-openvino", {"name": "openvino_ir"})
    assert not supports("kserve-ovms", {"name": "openvino"})  # not a runtime KServe ships
    assert supports("kserve-tensorflow-serving", {"name": "tensorflow", "version": "2"})
    assert not supports("kserve-tensorflow-serving", {"name": "tensorflow"}, protocol="v2")


# ---- OVMS


@pytest.mark.parametrize("name", OV_CASES + ["tensorflow"])
def test_ovms_configs_follow_the_documented_rules(name, tiny_ir):
    import openvino as ov

    core = ov.Core()
    cfg = json.loads(render(case_dep(name, tiny_ir), "ovms").files["config.json"])
    assert check_config(cfg, set(core.get_property("CPU", "SUPPORTED_PROPERTIES"))) == []
    core.compile_model(str(tiny_ir), "CPU", cfg["model_config_list"][0]["config"]["plugin_config"])


# ---- serve check


def _serve_study(tmp_path, tiny_ir, **kw):
    db = tmp_path / "wb.db"
    r = run(**kw)
    make_study_db(db, [r], model_path=str(tiny_ir), inputs=[{"name": "x", "shape": [-1, 4], "dtype": "float32"}])
    return db, r["key"]


def _checks(db):
    from wb_core.export.servecheck import load_serve_checks

    return load_serve_checks(db, "t")


def _no_server_left(marker: str) -> None:
    import psutil

    deadline = time.time() + 10
    while time.time() < deadline:
        left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
        if not left:
            return
        time.sleep(0.2)
    raise AssertionError(f"processes left: {[p.pid for p in left]}")


def test_serve_check_measures_the_served_model(triton, tiny_ir, tmp_path):
    from wb_core.export.servecheck import serve_check

    db, key = _serve_study(tmp_path, tiny_ir, batch=4, cores=[0], threads=1, thr=4000.0, p99=1.0,
                           ov_properties={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"})
    out = tmp_path / "kept"
    res = serve_check(db, "t", key, max_time=1.5, out=out)
    assert res.status == "ok" and res.served["throughput"] > 0 and res.served["requests"] > 0
    assert res.ratio["throughput"] == pytest.approx(res.served["throughput"] / 4000.0)
    assert res.server_cpus == [0] and res.server["version"].startswith("2.")
    assert "served/predicted" in res.describe()
    stored = _checks(db)
    assert stored[0]["status"] == "ok" and stored[0]["served"]["throughput"] == res.served["throughput"]
    assert len(list((out / "model_repository").glob("*/1/model.py"))) == 1
    assert res.served["outputs_match"] is True
    _no_server_left(str(out / "model_repository"))


def test_serve_check_replays_a_poisson_run_at_its_rate(triton, tiny_ir, tmp_path):
    from wb_core.export.servecheck import serve_check
    from wb_core.store import Store

    db = tmp_path / "wb.db"
    r = run(cores=[0], threads=1, thr=100.0, p99=2.0, ov_properties={"INFERENCE_PRECISION_HINT": "f32",
                                                                      "INFERENCE_NUM_THREADS": "1"})
    make_study_db(db, [], model_path=str(tiny_ir), inputs=[{"name": "x", "shape": [-1, 4], "dtype": "float32"}])
    cfg = {k: r.get(k) for k in ("backend", "precision", "batch_size", "threads", "instances", "concurrency")}
    cfg.update(cores=[0], rate=100.0)
    with Store(db) as s:
        s.add_run("t", "poisson", cfg, "ok", {k: v for k, v in r.items() if k.startswith(("latency_", "throughput",
                                                                                             "ov_", "rss"))})
    # 100 requests/s for 4 s: a light load even for a busy machine, and about 400 arrivals, whose count
    # varies by sqrt(400) (5%): four of those (20%) hold any correct schedule; a rate ignored does not.
    res = serve_check(db, "t", "poisson", max_time=4.0)
    assert res.mode == "poisson" and res.rate == 100.0 and not res.served["saturated"]
    assert res.served["achieved_rate"] == pytest.approx(100.0, rel=4 / math.sqrt(100 * 4.0))
    assert res.served["latency_ms_p99"] > 0 and "Poisson arrivals at 100 requests/s" in res.describe()


def test_serve_check_bad_inputs_are_one_sentence_and_leave_nothing(triton, tiny_ir, tmp_path, monkeypatch):
    from wb_core.export.servecheck import serve_check

    db, key = _serve_study(tmp_path, tiny_ir, cores=[0], threads=1,
                           ov_properties={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=f"Port {port} on 127.0.0.1 is in use"):
            serve_check(db, "t", key, port=port, max_time=1)
    # A server that does not start.
    fake = tmp_path / "bin" / "tritonserver"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'error: creating server: Internal - no GPU here' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(WorkbenchError, match=r"tritonserver exited before it was ready \(exit code 3\): creating "
                                             r"server: Internal - no GPU here\."):
        serve_check(db, "t", key, tritonserver=fake, max_time=1)
    # A server killed in the middle of the measurement: SIGKILL half a second after the load starts.
    import psutil

    from wb_core.export import servecheck

    out = tmp_path / "dies"
    original = servecheck.closed_loop

    def load_then_kill(*a, **kw):
        server = next(p for p in psutil.process_iter(["name", "cmdline"]) if p.info["name"] == "tritonserver"
                      and str(out) in " ".join(p.info["cmdline"] or []))
        threading.Timer(0.5, server.kill).start()
        return original(*a, **kw)

    monkeypatch.setattr(servecheck, "closed_loop", load_then_kill)
    with pytest.raises(WorkbenchError, match=r"tritonserver died during the measurement \(exit code -9\)"):
        serve_check(db, "t", key, max_time=20, out=out)
    _no_server_left(str(out / "model_repository"))
    stored = _checks(db)
    assert [c["status"] for c in stored] == ["failed"] * 3 and all(c["error"] for c in stored)


def test_serve_check_refuses_runs_it_cannot_serve(tmp_path, tiny_ir):
    from wb_core.export.servecheck import serve_check

    db, key = _serve_study(tmp_path, tiny_ir, backend="tensorflow", cores=[0], threads=1)
    with pytest.raises(ConfigError, match="replays OpenVINO runs"):
        serve_check(db, "t", key)
    (tmp_path / "b").mkdir()
    db2, key2 = _serve_study(tmp_path / "b", tiny_ir, cores=[0], threads=1)
    with pytest.raises(ConfigError, match="measuring time must be a positive number") as caught:
        serve_check(db2, "t", key2, max_time=-1)
    assert caught.value.field == "max_time_s"  # the CLI says --max-time
    # The API and the command say the same sentences.
    from typer.testing import CliRunner

    from wb_core.api import serve_check as api_serve_check
    from wb_core.cli import app

    with pytest.raises(ConfigError, match="replays OpenVINO runs"):
        api_serve_check("t", key, db=db)
    r = CliRunner().invoke(app, ["serve-check", "--study", "t", "--run", key2, "--db", str(db2),
                                 "--tritonserver", str(tmp_path / "nowhere" / "tritonserver")])
    assert isinstance(r.exception, ConfigError) and "does not exist" in str(r.exception)
    r = CliRunner().invoke(app, ["serve-check", "--study", "t", "--run", key2, "--db", str(db2), "--port", "0"])
    assert isinstance(r.exception, ConfigError) and "port number" in str(r.exception)


# ---- the dashboard's Export tab


def test_export_tab_downloads_the_model_and_shows_serve_checks(tiny_ir, tmp_path):
    pytest.importorskip("ipywidgets", reason="the ui extra is not installed (pip install -e '.[ui]')")
    import base64
    import io
    import re
    import zipfile

    from wb_core.export.servecheck import ServeCheckResult, _store
    from wb_core.ui.export_panel import ExportPanel
    from wb_core.ui.state import DashboardState

    db, key = _serve_study(tmp_path, tiny_ir, cores=[0], threads=1, thr=5000.0,
                           ov_properties={"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"})
    _store(db, ServeCheckResult(study="t", run_key=key, status="failed", error="tritonserver exited before it was "
                                                                               "ready (exit code 1): no."))
    _store(db, ServeCheckResult(study="t", run_key=key, status="ok", predicted={"throughput": 5000.0},
                                served={"throughput": 2500.0}, ratio={"throughput": 0.5}))
    panel = ExportPanel(DashboardState(db=db, study="t", selected_key=key))
    panel.shown()  # the tab renders once it is on screen
    panel.format.value = "ovms"
    data = base64.b64decode(re.search(r"base64,([^\"]+)\"", panel.download.value).group(1))
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = zf.namelist()
    assert "config.json" in names and any(n.endswith("/1/model.xml") for n in names)
    assert "5,000 → 2,500 (0.50x)" in panel.serve_result.value and "exit code 1" in panel.serve_result.value
    panel.with_models.value = False
    data = base64.b64decode(re.search(r"base64,([^\"]+)\"", panel.download.value).group(1))
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert not any(n.endswith(".xml") for n in zf.namelist())
    panel.with_models.value = True
    panel.folder.value = str(tmp_path / "written")
    panel.write.click()
    assert list((tmp_path / "written" / "models").glob("*/1/model.bin"))


def test_cli_export_bundle_and_name(tiny_ir, tmp_path):
    from typer.testing import CliRunner

    from wb_core.cli import app

    db, key = _serve_study(tmp_path, tiny_ir, cores=[0], threads=1)
    out = tmp_path / "deploy"
    r = CliRunner().invoke(app, ["export", "--study", "t", "--run", key, "--db", str(db), "--format", "ovms,triton",
                                 "--out", str(out), "--bundle", "--name", "Tiny Net"])
    assert r.exit_code == 0, r.output
    assert (out / "ovms" / "models" / "tiny-net" / "1" / "model.bin").is_file()
    assert (out / "triton" / "model_repository" / "tiny-net" / "1" / "model.xml").is_file()
    assert str(out / "triton" / "model_repository" / "tiny-net" / "1" / "model.xml") in r.output
    cfg = (out / "triton" / "model_repository" / "tiny-net" / "config.pbtxt").read_text()
    assert 'name: "x"' in cfg and 'name: "y"' in cfg  # inputs and outputs read from the IR
