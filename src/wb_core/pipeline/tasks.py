"""The worker side of a pipeline point: preprocessing processes and the inference process.

`pipeline_pre` (N of them) pins itself to the preprocessing cores, decodes and preprocesses its
share of the source into shared batch slots, and posts each full batch to the queue.
`pipeline_infer` pins itself to the inference cores, sets thread variables, THEN imports the
runtime (as every measuring worker does), compiles the model for the batch size, and runs K
threads that take batches off the queue and run the model. With no preprocessing processes it
runs the serial pipeline instead: decode, preprocess and infer one after another in one loop.

All of them say `ready`, wait for the parent's start time (CLOCK_MONOTONIC), work, and report
their stage times, CPU time and placement on their channel (wb_core.proc.channel).
"""

from __future__ import annotations

import os
import resource
import threading
import time

from wb_core.proc.channel import emit, receive

HEARTBEAT_S = 2.0
OCCUPANCY_SAMPLE_S = 0.002
MAX_LATENCIES = 500_000


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _placement() -> dict:
    """CPUs every thread of this process may run on (read after the work, when pools exist)."""
    from wb_core.proc.pinning import thread_cpus

    cpus, threads = thread_cpus()
    return {"cpus": cpus, "threads": threads}


def _wait_for_go() -> int:
    go = receive()
    if go is None:
        raise RuntimeError("the parent went away before the start signal")
    start = int(go["start_ns"])
    delay = (start - time.perf_counter_ns()) / 1e9
    if delay > 0:
        time.sleep(delay)
    return start


class _Heartbeat:
    """Tell the parent we are alive while working (its inactivity timeout is reset by any message)."""

    def __init__(self):
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(HEARTBEAT_S):
            emit({"type": "heartbeat"})

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()


def _sleep_ms(ms: float) -> None:
    """Artificial delay (tests make one side slow on purpose)."""
    if ms:
        time.sleep(ms / 1e3)


def _maybe_crash(inject: dict, role: str) -> None:
    """Die the way an out-of-memory kill does (tests check that the study survives it)."""
    if inject.get("crash") == role:
        os.kill(os.getpid(), 9)


def task_pipeline_pre(task: dict) -> None:
    """One preprocessing process: pin, get ready, then fill and post batches of its units."""

    if task.get("cores"):
        from wb_core.proc.pinning import pin

        pin(task["cores"])
    from wb_core.pipeline.queue import DONE, SlotQueue
    from wb_core.pipeline.source import FrameReader

    if any(u["kind"] == "video" for u in task["units"]):
        import av  # noqa: F401 - imported before the clock starts

    q = SlotQueue.attach(task["queue"])
    reader = FrameReader(task["geometry"], task.get("decode_threads", 1))
    inject = task.get("inject") or {}
    delay_ms = float(inject.get("pre_delay_ms") or 0)
    emit({"type": "ready", "role": "pre", "index": task["index"], "pid": os.getpid()})
    start = _wait_for_go()
    cpu0 = _cpu_s()
    clock = time.perf_counter_ns
    decode_ns = pre_ns = wait_ns = 0
    frames = batches = 0
    slot, fill = None, 0
    with _Heartbeat():
        for _ in range(int(task.get("passes", 1))):
            for unit in task["units"]:
                it = reader.frames(unit)
                while True:
                    t0 = clock()
                    try:
                        frame = next(it)
                    except StopIteration:
                        break
                    t1 = clock()
                    if slot is None:
                        slot = q.take_free()
                        fill = 0
                        t1b = clock()
                        wait_ns += t1b - t1
                    else:
                        t1b = t1
                    reader.preprocess(frame, q.data[slot, fill])
                    _sleep_ms(delay_ms)
                    t2 = clock()
                    decode_ns += t1 - t0
                    pre_ns += t2 - t1b
                    q.starts[slot, fill] = t0
                    fill += 1
                    frames += 1
                    if fill == q.batch:
                        q.post(slot, fill)
                        batches += 1
                        slot = None
                        _maybe_crash(inject, "pre")
        if slot is not None and fill:
            q.post(slot, fill)
            batches += 1
        end = clock()
        q.post_marker(DONE, int(task["index"]))
    cpu1 = _cpu_s()
    emit({"type": "pre_done", "index": task["index"], "frames": frames, "batches": batches,
          "decode_s": decode_ns / 1e9, "preprocess_s": pre_ns / 1e9, "queue_wait_s": wait_ns / 1e9,
          "active_s": (end - start) / 1e9, "cpu_s": cpu1 - cpu0, "rss_mb": _peak_rss_mb(),
          "skipped": reader.skipped, **{f"placement_{k}": v for k, v in _placement().items()}})
    q.close()


def task_pipeline_infer(task: dict) -> None:
    """The inference side: pin and set threads, import the runtime, then run K consumers (or the serial loop)."""
    from wb_core.proc.worker import apply_process_settings

    group = dict(task["group"])
    apply_process_settings(group, task.get("memory_limit_mb"))

    import numpy as np

    from wb_core.backends.registry import open_session
    from wb_core.config import InputOptions, RunConfig
    from wb_core.measure import Latency
    from wb_core.pipeline.queue import DONE, STOP, SlotQueue
    from wb_core.pipeline.source import FrameReader, run_serial

    cfg = RunConfig.from_dict(group)
    b = cfg.batch_size
    t0 = time.perf_counter()
    session = open_session(task["model_path"], cfg)
    load_s = time.perf_counter() - t0
    extra = session.prepare(b, InputOptions.from_dict(task.get("inputs")))
    name = session.inputs[0].name
    producers = int(task["pre_workers"])
    consumers = 1 if producers == 0 else max(1, cfg.concurrency)
    infers = [session.make_infer() for _ in range(consumers)]
    inject = task.get("inject") or {}
    delay_ms = float(inject.get("infer_delay_ms") or 0)
    frame_shape = tuple(task["frame_shape"])

    def as_input(arr):
        return session.convert_batches([{name: np.asarray(arr)}])[0]

    warm = np.zeros((b,) + frame_shape, dtype=np.float32)
    t0 = time.perf_counter()
    infers[0](as_input(warm))
    first_ms = (time.perf_counter() - t0) * 1e3
    for extra_infer in infers[1:]:
        extra_infer(as_input(warm))
    q = SlotQueue.attach(task["queue"]) if producers else None
    if q is not None:
        for s in range(q.slots):
            q.release(s)
    elif any(u["kind"] == "video" for u in task["units"]):
        import av  # noqa: F401 - imported before the clock starts
    emit({"type": "ready", "role": "infer", "pid": os.getpid(), "load_s": load_s})

    clock = time.perf_counter_ns
    lat_ms: list = []
    lock = threading.Lock()
    stats = {"infer_ns": 0, "wait_ns": 0, "frames": 0, "batches": 0, "end_ns": 0, "done": 0}
    occupancy_seen: list[int] = []

    start = _wait_for_go()
    cpu0 = _cpu_s()
    with _Heartbeat():
        if q is None:
            reader = FrameReader(task["geometry"], task.get("decode_threads", 1))
            batch = np.zeros((b,) + frame_shape, dtype=np.float32)

            def on_batch(n, starts):
                s = clock()
                infers[0](as_input(batch))
                _sleep_ms(delay_ms)
                _maybe_crash(inject, "infer")
                e = clock()
                stats["infer_ns"] += e - s
                stats["frames"] += n
                stats["batches"] += 1
                stats["end_ns"] = e
                if len(lat_ms) < MAX_LATENCIES:
                    lat_ms.extend(((e - starts[:n]) / 1e6).tolist())

            serial = run_serial(reader, task["units"], int(task.get("passes", 1)), batch, on_batch, clock)
            skipped = reader.skipped
            samples: list[int] = []
        else:
            serial, skipped = None, []
            samples = []
            sampling = threading.Event()

            def sampler():
                while not sampling.wait(OCCUPANCY_SAMPLE_S):
                    samples.append(q.pending())

            failures: list[BaseException] = []

            def consume(k: int):
                try:
                    _consume(k)
                except BaseException as e:
                    failures.append(e)

            def _consume(k: int):
                infer = infers[k]
                while True:
                    w0 = clock()
                    seen = q.pending()
                    slot, n = q.take_full()
                    w1 = clock()
                    if slot == STOP:
                        return
                    if slot == DONE:
                        with lock:
                            stats["done"] += 1
                            last = stats["done"] == producers
                        if last:
                            for _ in range(consumers):
                                q.post_marker(STOP)
                        continue
                    infer(as_input(q.data[slot]))
                    _sleep_ms(delay_ms)
                    _maybe_crash(inject, "infer")
                    e = clock()
                    lat = ((e - q.starts[slot, :n]) / 1e6).tolist()
                    q.release(slot)
                    with lock:
                        stats["wait_ns"] += w1 - w0
                        stats["infer_ns"] += e - w1
                        stats["frames"] += n
                        stats["batches"] += 1
                        stats["end_ns"] = max(stats["end_ns"], e)
                        occupancy_seen.append(seen)
                        if len(lat_ms) < MAX_LATENCIES:
                            lat_ms.extend(lat)

            watcher = threading.Thread(target=sampler, daemon=True)
            watcher.start()
            threads = [threading.Thread(target=consume, args=(k,), daemon=True) for k in range(consumers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            sampling.set()
            watcher.join(timeout=5)
            if failures:
                raise failures[0]
    cpu1 = _cpu_s()
    lat = Latency.from_values(lat_ms)
    # The FIFO also carries the end markers of the preprocessing processes, which are not batches:
    # a queue never holds more batches than its depth.
    occ = np.minimum(np.asarray(samples, dtype=np.float64), int(task.get("queue_depth") or 1))
    emit({"type": "infer_done", "frames": stats["frames"], "batches": stats["batches"],
          "start_ns": start, "end_ns": stats["end_ns"] or clock(),
          "infer_s": stats["infer_ns"] / 1e9, "infer_wait_s": stats["wait_ns"] / 1e9,
          "consumers": consumers, "cpu_s": cpu1 - cpu0, "rss_mb": _peak_rss_mb(),
          "first_inference_ms": first_ms, "load_s": load_s, "latency": lat.as_columns(),
          "occupancy_samples": occ.tolist()[:: max(1, len(occ) // 400)] if occ.size else [],
          "occupancy_mean": float(occ.mean()) if occ.size else None,
          "occupancy_empty_frac": float((occ == 0).mean()) if occ.size else None,
          "occupancy_full_frac": float((occ >= int(task.get("queue_depth") or 1)).mean()) if occ.size else None,
          "occupancy_at_take_mean": float(np.mean(occupancy_seen)) if occupancy_seen else None,
          "serial": serial, "skipped": skipped, "extra": extra, "info": session.info(),
          **{f"placement_{k}": v for k, v in _placement().items()}})
    if q is not None:
        q.close()
