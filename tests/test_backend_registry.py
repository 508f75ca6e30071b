"""A new backend is one module plus one registration: the rest of the workbench reads the registry.

The toy backend here follows docs/architecture.md ("A backend"): a session module, and a
`register(BackendInfo(...))` line. The worker processes see it through a sitecustomize module
(standing in for the line in registry.py), this process through the same call.
"""

from __future__ import annotations

import textwrap

import pytest

from wb_core.backends import registry
from wb_core.config import SweepSpec, field_help
from wb_core.errors import ConfigError
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep

TOY_SESSION = textwrap.dedent('''
    """A toy backend: reads an OpenVINO IR's inputs and answers with the sum of each batch."""
    import numpy as np

    from wb_core.models import ov_inputs, read_ov_model


    class ToySession:
        def __init__(self, model_path, cfg):
            self.inputs = ov_inputs(read_ov_model(model_path))
            self.cfg = cfg

        def prepare(self, batch_size, opts):
            return {}

        def convert_batches(self, batches):
            return batches

        def make_infer(self):
            return lambda batch: float(sum(np.sum(v) for v in batch.values()))

        def info(self):
            return {"executed_precision": "f32", "toy_threads": self.cfg.threads}
''')

REGISTRATION = ('from wb_core.backends.registry import BackendInfo, register\n'
                'register(BackendInfo(name="toy", description="A toy backend (sums its inputs)", '
                'formats=("openvino",), session="toy_backend:ToySession", distributions=(), loads="openvino-ir", '
                'settings=("threads",), env={"threads": ("TOY_THREADS",)}))\n')


@pytest.fixture
def toy_backend(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "toy_backend.py").write_text(TOY_SESSION)
    (site / "sitecustomize.py").write_text(REGISTRATION)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.syspath_prepend(str(site))
    exec(REGISTRATION, {})
    yield "toy"
    registry._REGISTRY.pop("toy", None)


def test_a_registered_backend_is_swept_like_the_others(toy_backend, lenet_ir, db, fast):
    assert "toy" in field_help("backends")  # the CLI's --backend help and the dashboard's tooltip
    spec = SweepSpec(backends="toy,openvino", threads="1,2", batch_sizes="1,4", streams="2")
    configs = [c for c in spec.expand() if c.backend == "toy"]
    assert configs and all(c.streams is None for c in configs)  # a setting the toy does not read is dropped

    summary = run_sweep(lenet_ir, spec, db, "toy", settings=fast)

    assert summary.failed == 0, summary.errors
    df = load_results(db, "toy")
    toy = df[df.backend == "toy"]
    assert len(toy) == 4 and (toy.status == "ok").all() and (toy.throughput > 0).all()
    assert sorted(toy.toy_threads) == [1, 1, 2, 2]  # the worker opened the registered session


def test_a_backend_that_cannot_run_the_format_is_skipped_with_its_reason(toy_backend, lenet_savedmodel, db, fast):
    summary = run_sweep(lenet_savedmodel, SweepSpec(backends="toy"), db, "toy-sm", settings=fast)
    assert summary.skipped == 1
    assert "the toy backend cannot run a model in the TensorFlow SavedModel format" in load_results(db, "toy-sm").error.iloc[0]


def test_the_worker_environment_comes_from_the_registration(toy_backend):
    assert registry.get("toy").process_env({"threads": 3}) == {"TOY_THREADS": "3"}
    assert registry.get("tensorflow").process_env({"threads": 2, "onednn": False}) == {
        "TF_NUM_INTRAOP_THREADS": "2", "OMP_NUM_THREADS": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}


def test_an_unknown_backend_names_the_registered_ones():
    with pytest.raises(ConfigError, match="openvino, tensorflow"):
        SweepSpec(backends="pytorch")


def test_every_registered_session_class_exists():
    import importlib

    for name in registry.names():
        module, _, cls = registry.get(name).session.partition(":")
        assert hasattr(importlib.import_module(module), cls), name
