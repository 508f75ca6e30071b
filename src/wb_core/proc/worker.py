"""Child entry point: `python -m wb_core.proc.worker` reads one JSON task from its channel.

Order matters for `measure`: pin the CPU affinity FIRST, set thread variables NEXT, and only
THEN import the runtime, because TensorFlow and OpenVINO size their thread pools from what they
see at import. Everything heavy is imported inside the task functions.

Messages go to the parent as JSON lines on the channel named by `WB_CHANNEL` (see
wb_core.proc.parent), never on stdout or stderr, which belong to the runtimes and their logs.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from wb_core.limits import within_p99
from wb_core.proc.channel import emit, flush, open_channel, receive, watch_parent


def apply_process_settings(cfg: dict, memory_limit_mb: int | None) -> None:
    """Affinity, memory limit and thread variables, before any runtime is imported (a worker task of
    another package calls it too, with its configuration as a dict)."""

    if cfg.get("cores"):
        from wb_core.proc.pinning import pin

        pin(cfg["cores"])  # the parent watch thread, started before, follows too
    if memory_limit_mb:
        import resource

        limit = int(memory_limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if cfg.get("backend"):
        from wb_core.backends.registry import get

        os.environ.update(get(cfg["backend"]).process_env(cfg))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _open(task: dict, cores=None):
    """Apply process settings, then import the runtime and open the model (in that order)."""
    group = dict(task["group"])
    if cores is not None:
        group["cores"] = list(cores)
    apply_process_settings(group, task.get("memory_limit_mb"))

    from wb_core.backends.registry import open_session
    from wb_core.config import InputOptions, MeasureSettings, RunConfig

    settings = MeasureSettings(**task["settings"])
    opts = InputOptions.from_dict(task.get("inputs"))
    cfg = RunConfig.from_dict({**task["group"], "batch_size": task["points"][0]["batch_size"]})
    from wb_core.config import with_point_shapes

    opts = with_point_shapes(opts, cfg)
    t0 = time.perf_counter()
    session = open_session(task["model_path"], cfg)
    emit({"type": "loaded", "load_s": time.perf_counter() - t0, "inputs": [s.to_dict() for s in session.inputs]})
    return session, cfg, settings, opts


def _concurrency(task: dict, point: dict) -> int:
    """Requests in flight for one point (a point of a group may differ from its neighbours here)."""
    return int(point.get("concurrency") or task["group"].get("concurrency") or 1)


def _prepared_batches(session, batch_size, opts, settings, concurrency: int | None = None, pools: dict | None = None):
    """Prepare the session for a point and return (its columns, the input pool in the session's form).

    `pools` (batch size -> pool) keeps the pool of each batch size for the next points of the group:
    the same seed gives the same samples, so building it again would only cost time."""
    import dataclasses

    from wb_core.models import make_batches

    # The session compiles for the point at hand (OpenVINO's hint reads the requests in flight).
    session.cfg = dataclasses.replace(session.cfg, batch_size=batch_size,
                                      concurrency=concurrency or session.cfg.concurrency)
    extra = session.prepare(batch_size, opts)
    if pools is not None and batch_size in pools:
        return extra, pools[batch_size]
    np_batches = make_batches(session.inputs, batch_size, opts, settings.pool_size, settings.seed)
    batches = session.convert_batches(np_batches)
    if pools is not None:
        pools[batch_size] = batches
    return extra, batches


def _timed_infer(session):
    """What the timed loops call: the session's pre-bound form for a fixed pool where it has one."""
    return getattr(session, "make_bound_infer", session.make_infer)


def _each_point(points, body):
    """Run `body(point)` for each point; an error in one batch size does not lose the others."""
    from wb_core.errors import WorkbenchError
    from wb_core.models import first_line

    for p in points:
        emit({"type": "start", "key": p["key"]})
        try:
            body(p)
        except (WorkbenchError, MemoryError) as e:
            msg = str(e) if isinstance(e, WorkbenchError) else "out of memory (MemoryError) at this batch size"
            emit({"type": "point", "key": p["key"], "status": "failed", "error": msg})
        except Exception as e:
            emit({"type": "point", "key": p["key"], "status": "failed",
                  "error": f"{type(e).__name__}: {first_line(e)}", "traceback": traceback.format_exc(limit=5)})


def task_measure(task: dict) -> None:
    """Measure every batch size of one process-level group; one `point` message per key."""
    from wb_core.measure import measure, measure_poisson

    session, cfg, settings, opts = _open(task)
    rate = task["group"].get("rate")
    pools: dict = {}
    current = [session, cfg]

    def body(p):
        session, cfg = _session_for(task, p, current, pools)
        concurrency = _concurrency(task, p)
        extra, batches = _prepared_batches(session, p["batch_size"], opts, settings, concurrency, pools)
        if cfg.untouched and cfg.hint:  # as many requests in flight as the runtime asks for
            concurrency = int(session.info().get("ov_optimal_requests") or concurrency)
            extra["requests_in_flight"] = concurrency
        if rate:
            metrics = measure_poisson(_timed_infer(session), batches, p["batch_size"], float(rate), settings,
                                      concurrency=concurrency, seed=settings.seed)
        else:
            metrics = measure(_timed_infer(session), batches, p["batch_size"], settings, concurrency=concurrency,
                              heartbeat=lambda: emit({"type": "heartbeat"}),
                              make_async=getattr(session, "make_async", None),
                              make_loop=getattr(session, "make_loop", None))
        metrics.update(extra)
        metrics.update(session.info())
        metrics.update(_thread_placement())
        emit({"type": "point", "key": p["key"], "status": "ok", "metrics": metrics})

    _each_point(task["points"], body)


def _session_for(task: dict, point: dict, current: list, pools: dict):
    """The session and config of a point: the open one, or, for a point carrying settings of its own
    (threads, streams, a hint: see wb_core.sweep.local.worker_key), a session opened for them in this
    worker, which keeps its pinning and environment. `current` holds [session, config] between points."""
    if "config" not in point:
        return current
    import dataclasses

    from wb_core.backends.registry import open_session
    from wb_core.config import RunConfig

    cfg = RunConfig.from_dict(point["config"])
    if current[1] is None or dataclasses.replace(current[1], batch_size=cfg.batch_size,
                                                 concurrency=cfg.concurrency) != cfg:
        current[:] = [None, None]  # the old session's compiled models go before the new one compiles
        pools.clear()  # a pool is in the session's own form
        current[:] = [open_session(task["model_path"], cfg), cfg]
    return current


def _thread_placement() -> dict:
    """Which CPUs this worker's threads may run on, read per thread after measuring."""
    from wb_core.proc.pinning import thread_cpus

    cpus, threads = thread_cpus()
    return {"thread_cpus": cpus, "process_threads": threads} if threads else {}


def task_instance(task: dict) -> None:
    """One of N instances measured over a common window: ready -> wait for `go` on the channel -> measure."""
    from wb_core.measure import measure_window, warm_up

    session, cfg, settings, opts = _open(task, cores=task.get("instance_cores"))

    def body(p):
        concurrency = _concurrency(task, p)
        extra, batches = _prepared_batches(session, p["batch_size"], opts, settings, concurrency)
        warm_up(_timed_infer(session)(), batches, settings, heartbeat=lambda: emit({"type": "heartbeat"}))
        emit({"type": "ready", "key": p["key"]})
        go = receive()
        if go is None:
            raise RuntimeError("the coordinator went away before the start signal")
        metrics = measure_window(_timed_infer(session), batches, p["batch_size"], int(go["start_ns"]),
                                 int(go["end_ns"]), concurrency=concurrency)
        metrics.update(extra)
        metrics.update(session.info())
        emit({"type": "point", "key": p["key"], "status": "ok", "metrics": metrics})

    _each_point(task["points"], body)


def task_max_rate(task: dict) -> None:
    """Search the highest Poisson rate whose p99 stays under a target; each probe is a point."""
    from wb_core.config import RunConfig
    from wb_core.measure import measure, measure_poisson

    session, cfg, settings, opts = _open(task)
    p99_target = float(task["p99_ms"])
    concurrency = _concurrency(task, task["points"][0])
    b = task["points"][0]["batch_size"]
    extra, batches = _prepared_batches(session, b, opts, settings)
    closed = measure(_timed_infer(session), batches, b, settings, concurrency=concurrency,
                     make_async=getattr(session, "make_async", None), make_loop=getattr(session, "make_loop", None))
    capacity = closed["throughput"] / b  # requests/s in a closed loop: an upper bound for the open loop
    lo, hi = 0.0, capacity * 1.05
    best = None
    for _ in range(int(task.get("steps", 7))):
        rate = round((lo + hi) / 2, 3)
        probe = RunConfig.from_dict({**cfg.to_dict(), "batch_size": b, "rate": rate})
        m = measure_poisson(_timed_infer(session), batches, b, rate, settings, concurrency=concurrency,
                            seed=settings.seed)
        m.update(extra)
        m.update(session.info())
        m["search"] = f"max-rate p99<{p99_target:g}ms"
        emit({"type": "point", "key": probe.key, "status": "ok", "metrics": m, "config": probe.to_dict()})
        passed = within_p99(m["latency_ms_p99"], p99_target, m["saturated"])
        if passed:
            lo = rate
            best = {"rate": rate, "p99_ms": m["latency_ms_p99"], "achieved_rate": m["achieved_rate"], "key": probe.key}
        else:
            hi = rate
        if hi - lo <= 0.02 * max(hi, 1e-9):
            break
    emit({"type": "max_rate", "closed_loop_rate": capacity, "best": best, "p99_target_ms": p99_target})


def load_keras_model(path: str):
    """A Keras file, loaded without its compile state and refusing pickled Python code."""
    import keras

    from wb_core.errors import ModelError
    from wb_core.models import first_line

    try:
        # safe_mode refuses lambda layers and other pickled Python code in the file.
        return keras.models.load_model(path, compile=False, safe_mode=True)
    except Exception as e:
        raise ModelError(f"Keras cannot load '{path}': {first_line(e)}") from None


def task_convert(task: dict) -> None:
    """Convert a model to OpenVINO IR (f32 weights kept) or a Keras file to a SavedModel."""
    convert_model_file(task)
    emit({"type": "result", "path": task["out"]})


def convert_model_file(task: dict) -> None:
    """The conversion `task_convert` does, without its message (a task that says more calls it)."""
    import openvino as ov

    from wb_core.errors import ModelError
    from wb_core.models import first_line

    fmt, path, out = task["format"], task["path"], task["out"]
    if task.get("target") == "savedmodel":
        model = load_keras_model(path)
        model.export(out, verbose=False)
        return
    try:
        if fmt == "keras":
            src = load_keras_model(path)
        else:
            src = path
        model = ov.convert_model(src)
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(f"OpenVINO cannot convert '{path}': {first_line(e)}") from None
    ov.save_model(model, out, compress_to_fp16=False)


def task_layers(task: dict) -> None:
    """Per-layer performance counters of one OpenVINO configuration (see wb_core.analysis.layers)."""
    apply_process_settings(task["config"], task.get("memory_limit_mb"))
    from wb_core.proc.layer_tasks import collect_layer_times

    emit({"type": "result", **collect_layer_times(task["model_path"], task["config"], task.get("inputs"),
                                                  iterations=int(task.get("iterations") or 100))})


def task_selftest(task: dict) -> None:
    """Used by the tests: misbehave on purpose (crash, hang, raise, noise) to exercise the parent."""
    mode = task.get("mode")
    emit({"type": "start"})
    if mode in ("noise", "noise-exit"):
        # What runtimes do under FORCE_COLOR: colour codes, progress bars redrawn with \r, a line
        # that looks like a message, and bytes that are not UTF-8, on both stdout and stderr.
        for fd in (1, 2):
            os.write(fd, b"\x1b[32m 50%|#####     |\r\x1b[0m{\"type\": \"result\", \"ok\": false}\n")
            os.write(fd, b"\xff\xfe\x80 raw bytes \xc3\x28\n\x1b[?25l")
        if mode == "noise-exit":
            os._exit(5)
    if mode == "barrier":  # ready (after `delay_s`), wait for the start signal, say when it came
        time.sleep(float(task.get("delay_s") or 0))
        emit({"type": "ready", "ready_ns": time.perf_counter_ns()})
        go = receive()
        emit({"type": "went", "go": go, "received_ns": time.perf_counter_ns()})
    elif mode == "orphan":  # leave a forked helper holding the channel behind, and exit
        pid = os.fork()
        if pid == 0:
            time.sleep(3600)
            os._exit(0)
        emit({"type": "forked", "pid": pid})
    elif mode == "big":  # one message larger than a pipe's buffer and than the output cap
        emit({"type": "big", "values": list(range(int(task.get("n") or 100_000)))})
    elif mode == "hang":
        time.sleep(3600)
    elif mode == "crash":
        os.kill(os.getpid(), 9)
    elif mode == "raise":
        raise RuntimeError("deliberate failure")
    emit({"type": "result", "ok": True})


TASKS = {"measure": task_measure, "instance": task_instance, "max_rate": task_max_rate,
         "convert": task_convert, "layers": task_layers, "selftest": task_selftest}


def task_entry(name: str):
    """The function a task names: one of TASKS, or `"package.module:task_name"`.

    Everything else (demos, INT8 and accuracy, pipeline and training studies, FLOPs) names its own
    worker-side entry point in the task it sends, so this module never names a package that starts
    workers.
    """
    if name in TASKS:
        return TASKS[name]
    module, sep, attr = name.partition(":")
    if not (sep and module.startswith("wb_core.") and attr.startswith("task_")):
        raise KeyError(f"unknown task {name!r}")
    import importlib

    return getattr(importlib.import_module(module), attr)


def main() -> int:
    watch_parent()
    open_channel()
    task = receive()
    try:
        task_entry(task["task"])(task)
    except Exception as e:
        from wb_core.errors import WorkbenchError
        from wb_core.models import first_line

        text = str(e) if isinstance(e, WorkbenchError) else f"{type(e).__name__}: {first_line(e)}"
        emit({"type": "fatal", "error": text, "error_type": type(e).__name__,
              "traceback": traceback.format_exc(limit=8)})
        return 3
    return 0


if __name__ == "__main__":
    code = main()
    for flush_one in (flush, sys.stdout.flush, sys.stderr.flush):
        try:
            flush_one()
        except Exception:
            pass
    # Every result is on the channel by now. Skip interpreter teardown: runtime destructors that join
    # their thread pools can hang there, and the parent would wait for a worker with nothing left
    # to say.
    os._exit(code)
