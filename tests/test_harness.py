"""The measurement harness: the runtime's own request loops, pre-bound inputs, short windows for
steady figures, and sessions that reuse what a group's points share.

Tiny real models are built here: an OpenVINO graph with the opset API, an ONNX graph with onnx.helper.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from wb_core import measure as m
from wb_core.config import InputOptions, MeasureSettings, RunConfig

QUICK = MeasureSettings(warmup_s=0.05, window_s=0.1, max_time_s=0.6, min_windows=3, tolerance=0.5, min_requests=10)


@pytest.fixture(scope="module")
def tiny_ir(tmp_path_factory):
    """y = relu(x @ W) with a dynamic batch, saved as an IR."""
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([-1, 16], np.float32, name="x")
    w = ops.constant(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32))
    model = ov.Model([ops.relu(ops.matmul(x, w, False, False))], [x], "tiny")
    path = tmp_path_factory.mktemp("ir") / "tiny.xml"
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path


def ov_session(path, **cfg):
    from wb_core.backends.openvino import OpenVINOSession

    return OpenVINOSession(str(path), RunConfig(backend="openvino", **cfg))


def pool(session, batch_size, n=4):
    from wb_core.models import make_batches

    session.prepare(batch_size, InputOptions())
    return session.convert_batches(make_batches(session.inputs, batch_size, InputOptions(), n, 0))


def test_the_async_path_is_the_runtimes_queue_with_inputs_set_once_and_no_python_callback(tiny_ir, monkeypatch):
    import openvino as ov

    session = ov_session(tiny_ir, precision="fp32", streams=2)
    batches = pool(session, batch_size=2)
    callbacks, queues = [], []
    real_queue = ov.AsyncInferQueue

    class CountingQueue(real_queue):
        def __init__(self, *a):
            super().__init__(*a)
            queues.append(self)

        def set_callback(self, fn):  # a Python callback would run for every completed request
            callbacks.append(fn)
            super().set_callback(fn)

    monkeypatch.setattr(ov, "AsyncInferQueue", CountingQueue)

    def refuse_make_async(jobs, on_done):
        raise AssertionError("the per-request Python queue was used")

    made = []

    def make_loop(jobs, b):
        made.append(session.make_loop(jobs, b))
        return made[-1]

    res = m.measure(session.make_infer, batches, 2, QUICK, concurrency=3, make_async=refuse_make_async,
                    make_loop=make_loop)
    assert len(queues) == 1 and callbacks == []
    loop = made[0]
    # Each request holds its own batch of the pool, shared with the pool's arrays (not copied per call).
    for k, request in enumerate(loop.requests):
        data = request.get_input_tensor(0).data
        assert np.shares_memory(data, batches[k % len(batches)][0])
    # The figures mean what they did: throughput = samples completed / measuring time; one runtime
    # latency per request, each positive and no longer than the whole measurement.
    assert res["requests"] > 0 and res["requests"] == loop.started
    assert res["throughput"] == pytest.approx(res["requests"] * 2 / res["measure_s"], rel=1e-9)
    assert 0 < res["latency_ms_min"] <= res["latency_ms_p50"] <= res["latency_ms_max"] <= res["measure_s"] * 1e3
    assert res["latency_hist"] and sum(res["latency_hist"]["counts"]) == res["requests"]


def test_latencies_are_the_runtimes_own_and_one_per_request(tiny_ir):
    session = ov_session(tiny_ir, precision="fp32", streams=2)
    batches = pool(session, batch_size=1)
    loop = session.make_loop(2, batches)
    loop.begin()
    t0 = time.perf_counter_ns()
    loop.run_until(t0 + 50_000_000)
    end, lat = loop.finish()
    assert len(lat) == loop.started > 0
    # No request takes longer than the loop ran; the runtime's latency is what its request reports.
    assert all(0 < v <= (end - t0) / 1e6 for v in lat)
    assert lat[-1] == pytest.approx(loop.requests[-1].latency) or lat[-2] == pytest.approx(loop.requests[-1].latency)


def test_one_request_in_flight_runs_one_synchronous_request_with_its_inputs_set_once(tiny_ir):
    session = ov_session(tiny_ir, precision="fp32", hint="latency")
    batches = pool(session, batch_size=4)
    res = m.measure(session.make_infer, batches, 4, QUICK, make_loop=session.make_loop)
    loop = session.make_loop(1, batches)
    assert np.shares_memory(loop.request.get_input_tensor(0).data, batches[0][0])
    assert res["throughput"] == pytest.approx(res["requests"] * 4 / res["measure_s"], rel=1e-9)
    assert res["latency_ms_p50"] > 0


def test_a_session_compiles_once_for_points_that_differ_only_in_requests(tiny_ir):
    session = ov_session(tiny_ir, precision="fp32", hint="throughput", untouched=True)
    session.prepare(2, InputOptions())
    first = session.compiled
    session.prepare(2, InputOptions())
    assert session.compiled is first
    session.prepare(4, InputOptions())
    assert session.compiled is not first
    session.prepare(2, InputOptions())
    assert session.compiled is first  # back to an earlier batch: reused, not compiled again


def test_onnxruntime_timed_loop_runs_through_io_binding(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from wb_core.backends.onnxruntime import OnnxRuntimeSession
    from wb_core.proc.worker import _timed_infer

    w = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "t",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
                              [numpy_helper.from_array(w, "W")])
    path = tmp_path / "t.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    session = OnnxRuntimeSession(str(path), RunConfig(backend="onnxruntime", threads=1))
    batches = pool(session, batch_size=3, n=4)
    calls = []
    real_run = session.session.run
    session.session.run = lambda *a, **k: calls.append(1) or real_run(*a, **k)
    res = m.measure(_timed_infer(session), batches, 3, QUICK)
    # The timed loop never went through `run`; each batch of the pool was bound once, not per call.
    assert calls == [] and session.bindings_made == len(batches) and res["requests"] > len(batches)
    infer = session.make_bound_infer()
    out = session.outputs_of(infer(batches[1]))
    np.testing.assert_allclose(out["y"], batches[1]["x"] @ w, rtol=1e-5)


class SteadyCounter:
    """Requests completing at `rate` per second of wall time (or alternating rates when `noisy`)."""

    def __init__(self, rate, noisy=False):
        self.rate, self.noisy, self.count, self.exact, self.calls = rate, noisy, 0, 0.0, []

    def run_until(self, t_ns):
        start = time.perf_counter_ns()
        time.sleep(max(0.0, (t_ns - start) / 1e9))
        now = time.perf_counter_ns()
        self.calls.append((start, t_ns))
        factor = (2.0 if len(self.calls) % 2 else 1.0) if self.noisy else 1.0
        self.exact += self.rate * factor * (now - start) / 1e9
        self.count = int(self.exact)

    def __call__(self):
        return self.count


def test_steady_figures_are_done_in_short_windows_and_noisy_ones_get_longer_windows():
    settings = MeasureSettings(window_s=0.4, min_windows=3, tolerance=0.05, max_time_s=3.0, min_requests=10)
    steady = SteadyCounter(10_000)
    t0 = time.perf_counter_ns()
    windows = m._windows_until_stable(steady, steady.run_until, 1, settings, 0.4, t0, None)
    assert len(windows) == 3  # three agreeing short windows: 0.15 s, not 1.2 s
    assert (time.perf_counter_ns() - t0) / 1e9 < 0.4 * 3
    noisy = SteadyCounter(10_000, noisy=True)
    m._windows_until_stable(noisy, noisy.run_until, 1, settings, 0.4, time.perf_counter_ns(), None)
    lengths = [(t - s) / 1e9 for s, t in noisy.calls]
    assert lengths[0] == pytest.approx(0.4 * m.FIRST_WINDOW_FRACTION, abs=0.03)
    assert max(lengths) == pytest.approx(0.4, abs=0.05)


def test_warm_up_ends_early_when_steady_but_not_before_its_requests():
    settings = MeasureSettings(warmup_s=1.0, tolerance=0.05)
    steady = SteadyCounter(10_000)
    t0 = time.perf_counter()
    m._warm_slices(steady.run_until, steady, settings, 10, None)
    assert time.perf_counter() - t0 < 0.7 and len(steady.calls) == 2  # two agreeing slices
    slow = SteadyCounter(10)  # 10 requests a second: 20 requests take about 2 s, beyond warmup_s
    settings = MeasureSettings(warmup_s=0.2, tolerance=0.05)
    m._warm_slices(slow.run_until, slow, settings, 20, None)
    assert slow() >= 20


def test_points_differing_only_in_session_settings_share_a_worker_and_others_do_not():
    from wb_core.sweep.local import worker_groups

    def cfgs(backend, **axes):
        import itertools

        names = list(axes)
        return [RunConfig(backend=backend, **dict(zip(names, values))) for values in itertools.product(*axes.values())]

    # Threads and streams are compile properties: one worker per set of cores, each session's points together.
    groups = worker_groups(cfgs("openvino", threads=[1, 2], cores=[None, (0,)], batch_size=[1, 8]))
    assert len(groups) == 2 and all(len(g) == 4 for g in groups)
    assert all(len({c.cores for c in g}) == 1 for g in groups)
    assert [c.threads for c in groups[0]] == [1, 1, 2, 2]
    # TensorFlow's threads are environment variables set before the import: a worker each.
    assert len(worker_groups(cfgs("tensorflow", threads=[1, 2], batch_size=[1, 8]))) == 2
    # Multi-instance points keep their own workers.
    assert len(worker_groups(cfgs("openvino", threads=[1, 2], instances=[2]))) == 2


def test_a_shared_worker_compiles_each_point_with_its_own_settings(tiny_ir, db, fast):
    from wb_core.config import SweepSpec
    from wb_core.store import load_results
    from wb_core.sweep.local import run_sweep

    spec = SweepSpec(backends="openvino", threads="1,2", hints="none,throughput", batch_sizes="1,2")
    summary = run_sweep(tiny_ir, spec, db, "shared", settings=fast)
    df = load_results(db, "shared")
    assert summary.failed == 0 and len(df) == 8 and (df.status == "ok").all()
    # What each compiled model holds, read back from it, is what its point asked for.
    assert (df.ov_threads.astype(int) == df.threads.astype(int)).all()
    hinted = df.hint == "throughput"
    assert df[hinted].ov_properties.map(lambda p: p.get("PERFORMANCE_HINT")).eq("THROUGHPUT").all()
    assert df[~hinted].ov_properties.map(lambda p: "PERFORMANCE_HINT" not in p).all()
