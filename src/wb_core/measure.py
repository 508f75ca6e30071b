"""Measure one configuration: warm-up, windows until throughput is stable, latency statistics.

`Latency.from_values` is the one place that turns raw latencies into statistics; the rest of the
workbench reads those fields.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np
import psutil

from wb_core.config import MeasureSettings

Infer = Callable[[dict], object]

# A point is measured on a busy machine when, during its window, other processes used more than
# this many cores' worth of CPU time on the cores it ran on, or the hypervisor stole more than
# this share of those cores' time.
BUSY_OTHER_CPU = 0.25
BUSY_STEAL_PCT = 5.0


@dataclass(frozen=True)
class LoadSnapshot:
    """Per-CPU time counters of /proc/stat for some cores, with our own process's CPU time, at one instant."""

    wall_s: float
    own_cpu_s: float
    cpus: tuple[int, ...]
    busy_ticks: int  # user + nice + system + irq + softirq + steal, summed over `cpus`
    steal_ticks: int
    total_ticks: int  # busy + idle + iowait


def load_snapshot(cpus=None) -> LoadSnapshot | None:
    """Counters for `cpus` (default: the CPUs this process may run on); None where /proc/stat is unreadable."""
    cpus = tuple(sorted(os.sched_getaffinity(0) if cpus is None else cpus))
    wanted = {f"cpu{c}" for c in cpus}
    busy = steal = total = 0
    seen = 0
    t = os.times()
    wall = time.perf_counter()
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                name, _, rest = line.partition(" ")
                if name not in wanted:
                    continue
                v = [int(x) for x in rest.split()[:8]] + [0] * 8
                user, nice, system, idle, iowait, irq, softirq, st = v[:8]
                b = user + nice + system + irq + softirq + st
                busy += b
                steal += st
                total += b + idle + iowait
                seen += 1
    except (OSError, ValueError):
        return None
    if seen != len(cpus):
        return None
    return LoadSnapshot(wall, t.user + t.system, cpus, busy, steal, total)


def machine_load(a: LoadSnapshot | None, b: LoadSnapshot | None) -> dict:
    """What else ran on our cores between two snapshots.

    `other_cpu`: cores' worth of CPU time used by other processes (and stolen by the hypervisor)
    on the cores watched, our own process's CPU time subtracted; `steal_pct`: the share of those
    cores' time the hypervisor gave to other guests; `busy`: either beyond its threshold
    (BUSY_OTHER_CPU, BUSY_STEAL_PCT). Empty when the counters could not be read.
    """
    if a is None or b is None or a.cpus != b.cpus or b.wall_s <= a.wall_s:
        return {}
    tick = float(os.sysconf("SC_CLK_TCK"))
    wall = b.wall_s - a.wall_s
    others_s = max(0.0, (b.busy_ticks - a.busy_ticks) / tick - (b.own_cpu_s - a.own_cpu_s))
    total = b.total_ticks - a.total_ticks
    other_cpu = others_s / wall
    steal_pct = 100.0 * (b.steal_ticks - a.steal_ticks) / total if total > 0 else 0.0
    return {"other_cpu": round(other_cpu, 4), "steal_pct": round(steal_pct, 3), "load_cores": list(a.cpus),
            "busy": is_busy(other_cpu, steal_pct)}


def is_busy(other_cpu, steal_pct) -> bool:
    """The busy-machine rule: others used more than BUSY_OTHER_CPU cores, or steal above BUSY_STEAL_PCT."""
    return bool((other_cpu or 0.0) > BUSY_OTHER_CPU or (steal_pct or 0.0) > BUSY_STEAL_PCT)


@dataclass
class Latency:
    p50: float
    p90: float
    p95: float
    p99: float
    mean: float
    stdev: float
    min: float
    max: float
    count: int

    @classmethod
    def from_values(cls, values_ms) -> Latency:
        a = np.asarray(values_ms, dtype=np.float64)
        if a.size == 0:
            nan = float("nan")
            return cls(nan, nan, nan, nan, nan, nan, nan, nan, 0)
        p50, p90, p95, p99 = np.percentile(a, [50, 90, 95, 99])
        return cls(float(p50), float(p90), float(p95), float(p99), float(a.mean()),
                   float(a.std(ddof=1)) if a.size > 1 else 0.0, float(a.min()), float(a.max()), int(a.size))

    def as_columns(self) -> dict:
        return {f"latency_ms_{k}": v for k, v in asdict(self).items() if k != "count"}


P99_MIN_REQUESTS = 100


def is_stable(window_throughputs: list[float], n: int, tolerance: float, requests: int | None = None,
              min_requests: int = 0) -> bool:
    """The last `n` windows agree when their spread is under `tolerance` of their mean, and at least
    `min_requests` requests completed (three windows of a slow model can hold six requests: they
    may agree by chance, and a p99 from them is the largest of six)."""
    if len(window_throughputs) < n:
        return False
    if requests is not None and requests < min_requests:
        return False
    last = window_throughputs[-n:]
    mean = sum(last) / n
    return mean > 0 and (max(last) - min(last)) / mean <= tolerance


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(make_infer: Callable[[], Infer], batches: list, batch_size: int, settings: MeasureSettings,
            concurrency: int = 1, heartbeat: Callable[[], None] | None = None, make_async=None,
            make_loop=None) -> dict:
    """Measure a closed loop of `concurrency` requests in flight; return flat metric columns.

    `make_infer()` returns a callable that runs one request synchronously. `make_loop(jobs, batches)`,
    where the session offers it, returns a `RequestLoop`: requests whose inputs were set once, kept
    in flight by the runtime, with no Python work per request beyond starting it and reading the
    runtime's own latency; it is used for every concurrency. Without it, with concurrency > 1,
    `make_async(jobs, on_done)` keeps the requests in flight from one thread through a queue; without
    either (TensorFlow) each request stream gets a Python thread of its own.
    """
    window_s = min(settings.window_s, settings.max_time_s / settings.min_windows)
    proc = psutil.Process()
    infer = make_infer()
    first_ms = _first_inference_ms(infer, batches[0])
    if make_loop is not None:
        return _measure_loop(make_loop(concurrency, batches), batch_size, settings, concurrency, window_s, proc,
                             first_ms, heartbeat)
    if concurrency == 1:
        return _measure_inline(infer, batches, batch_size, settings, window_s, proc, first_ms, heartbeat)
    if make_async is not None:
        return _measure_async(make_async, batches, batch_size, settings, concurrency, window_s, proc, first_ms,
                              heartbeat)
    return _measure_threads([infer] + [make_infer() for _ in range(concurrency - 1)], batches, batch_size,
                            settings, window_s, proc, first_ms, heartbeat)


class RequestLoop(Protocol):
    """Requests run by the runtime with their inputs set once (a session's `make_loop(jobs, batches)`).

    `started` counts the requests started since `begin()`; `run_until(t_ns)` keeps requests flowing
    until t_ns (perf_counter_ns); `finish()` waits for those in flight and returns the end time and
    the latency (ms) of every request started since `begin()`.
    """

    started: int

    def begin(self) -> None: ...

    def run_until(self, t_ns: int) -> None: ...

    def finish(self) -> tuple[int, list[float]]: ...


# Windows open at this fraction of `window_s` (never under MIN_WINDOW_S): a runtime whose figures are
# steady agrees over short windows already; windows that disagree double, up to `window_s`.
FIRST_WINDOW_FRACTION = 0.125
MIN_WINDOW_S = 0.05
# Warm-up runs in slices of this fraction of `warmup_s`; it ends early once two slices agree.
WARMUP_SLICES = 10


def _measure_loop(loop: RequestLoop, batch_size, settings, concurrency, window_s, proc, first_ms, heartbeat):
    """Closed loop of a runtime's own requests: no Python work per completion."""
    perf = time.perf_counter_ns
    loop.begin()
    _warm_slices(lambda t: loop.run_until(t), lambda: loop.started, settings, settings.warmup_iters * concurrency,
                 heartbeat)
    loop.finish()
    cpu0 = proc.cpu_times()
    load0 = load_snapshot()
    loop.begin()
    wall0 = perf()
    windows = _windows_until_stable(lambda: loop.started, loop.run_until, batch_size, settings, window_s, wall0,
                                    heartbeat)
    end, lat = loop.finish()
    cpu1 = proc.cpu_times()
    load1 = load_snapshot()
    return _result(lat, windows, batch_size, (end - wall0) / 1e9, cpu0, cpu1, first_ms, settings,
                   machine_load(load0, load1))


def _warm_slices(run_until: Callable[[int], None], count: Callable[[], int], settings: MeasureSettings,
                 min_requests: int, heartbeat) -> None:
    """Warm up for at most `warmup_s`, in slices; stop early once `min_requests` ran and the last two
    slices' rates agree within the tolerance (the runtime is warm: more warm-up changes nothing)."""
    perf = time.perf_counter_ns
    start = perf()
    t_end = start + int(settings.warmup_s * 1e9)
    slice_ns = max(int(settings.warmup_s * 1e9 / WARMUP_SLICES), 1_000_000)
    rates: list[float] = []
    seen, s_start = count(), start
    while True:
        run_until(min(s_start + slice_ns, t_end))
        now = perf()
        total = count()
        rates.append((total - seen) / max(now - s_start, 1))
        seen, s_start = total, now
        if heartbeat is not None:
            heartbeat()
        if total >= min_requests and (now >= t_end or is_stable(rates, 2, settings.tolerance)):
            return
        if now >= t_end:  # warmup_iters not reached yet: slices go on until they are
            t_end = now + slice_ns


def _first_inference_ms(infer: Infer, batch) -> float:
    """The first request on its own: what a cold server pays on its first call."""
    t0 = time.perf_counter()
    infer(batch)
    return (time.perf_counter() - t0) * 1e3


def _windows_until_stable(records, run_until: Callable[[int], None], batch_size: int,
                          settings: MeasureSettings, window_s: float, wall0: int, heartbeat) -> list[float]:
    """Throughput of successive windows of completed requests, until the last ones agree or time is up.

    `records` is a list that grows by one entry per completed request, or a callable returning the
    count; `run_until(t_ns)` keeps requests flowing until t_ns. Windows open short (FIRST_WINDOW_FRACTION
    of `window_s`) and double while the last ones disagree: steady figures are done in a fraction of the
    time, noisy ones get the full windows.
    """
    count = records if callable(records) else records.__len__
    windows: list[float] = []
    length = max(min(window_s, MIN_WINDOW_S), window_s * FIRST_WINDOW_FRACTION)
    w_start, seen = wall0, count()
    while True:
        run_until(w_start + int(length * 1e9))
        now = time.perf_counter_ns()
        total = count()
        windows.append((total - seen) * batch_size / ((now - w_start) / 1e9))
        seen, w_start = total, now
        if heartbeat:
            heartbeat()
        if (is_stable(windows, settings.min_windows, settings.tolerance, total, settings.min_requests)
                or (now - wall0) / 1e9 >= settings.max_time_s):
            return windows
        if len(windows) >= settings.min_windows and not is_stable(windows, settings.min_windows, settings.tolerance):
            length = min(window_s, length * 2)


def _measure_threads(infers: list[Infer], batches, batch_size, settings, window_s, proc, first_ms, heartbeat):
    """Closed loop with one Python thread per request stream (runtimes release the GIL in infer)."""
    records: list[tuple[int, int]] = []  # (end_ns, latency_ns), appended by every stream
    stop = threading.Event()
    measuring = threading.Event()

    def loop(infer: Infer, offset: int):
        i = offset
        n = len(batches)
        perf = time.perf_counter_ns
        append = records.append
        while not stop.is_set():
            b = batches[i % n]
            s = perf()
            infer(b)
            e = perf()
            if measuring.is_set():
                append((e, e - s))
            i += 1

    # Warm-up: the streams run for warmup_s before measuring starts.
    threads = [threading.Thread(target=loop, args=(inf, k), daemon=True) for k, inf in enumerate(infers)]
    for t in threads:
        t.start()
    time.sleep(settings.warmup_s)
    cpu0 = proc.cpu_times()
    load0 = load_snapshot()
    wall0 = time.perf_counter_ns()
    measuring.set()
    windows = _windows_until_stable(
        records, lambda t: time.sleep(max(0.0, (t - time.perf_counter_ns()) / 1e9)), batch_size, settings,
        window_s, wall0, heartbeat)
    measuring.clear()
    end = time.perf_counter_ns()
    cpu1 = proc.cpu_times()
    load1 = load_snapshot()
    stop.set()
    for t in threads:
        t.join(timeout=60)
    lat = [v / 1e6 for e, v in records if e <= end]
    return _result(lat, windows, batch_size, (end - wall0) / 1e9, cpu0, cpu1, first_ms, settings,
                   machine_load(load0, load1))


def _measure_async(make_async, batches, batch_size, settings, concurrency, window_s, proc, first_ms, heartbeat):
    """Closed loop through an async queue: submit whenever a request slot is idle."""
    perf = time.perf_counter_ns
    records: list[tuple[int, int]] = []  # (end_ns, latency_ns), appended by the runtime's callbacks
    measuring = [False]

    def on_done(start_ns: int) -> None:
        e = perf()
        if measuring[0]:
            records.append((e, e - start_ns))

    queue = make_async(concurrency, on_done)
    n = len(batches)
    i = 0

    def submit_until(t_ns: int) -> None:
        nonlocal i
        while perf() < t_ns:
            queue.submit(batches[i % n])
            i += 1

    t_end = perf() + int(settings.warmup_s * 1e9)
    while i < settings.warmup_iters * concurrency or perf() < t_end:
        queue.submit(batches[i % n])
        i += 1
    queue.wait_all()
    cpu0 = proc.cpu_times()
    load0 = load_snapshot()
    wall0 = perf()
    measuring[0] = True
    windows = _windows_until_stable(records, submit_until, batch_size, settings, window_s, wall0, heartbeat)
    end = perf()
    cpu1 = proc.cpu_times()
    load1 = load_snapshot()
    measuring[0] = False
    queue.wait_all()
    lat = [v / 1e6 for e, v in records if e <= end]
    return _result(lat, windows, batch_size, (end - wall0) / 1e9, cpu0, cpu1, first_ms, settings,
                   machine_load(load0, load1))


def _measure_inline(infer, batches, batch_size, settings, window_s, proc, first_ms, heartbeat):
    """Concurrency 1: the timed loop runs in this thread, with nothing between the calls."""
    perf = time.perf_counter_ns
    n = len(batches)
    lat: list[int] = []
    pos = [0]

    def run_until(t_ns: int) -> None:
        i, append = pos[0], lat.append
        e = perf()
        while e < t_ns:
            s = perf()
            infer(batches[i % n])
            e = perf()
            append(e - s)
            i += 1
        pos[0] = i

    _warm_slices(run_until, lat.__len__, settings, settings.warmup_iters, heartbeat)
    lat.clear()
    cpu0 = proc.cpu_times()
    load0 = load_snapshot()
    wall0 = perf()
    windows = _windows_until_stable(lat, run_until, batch_size, settings, window_s, wall0, heartbeat)
    end = perf()
    cpu1 = proc.cpu_times()
    load1 = load_snapshot()
    return _result([v / 1e6 for v in lat], windows, batch_size, (end - wall0) / 1e9, cpu0, cpu1, first_ms, settings,
                   machine_load(load0, load1))


def _result(lat_ms, windows, batch_size, wall_s, cpu0, cpu1, first_ms, settings, load: dict | None = None) -> dict:
    stats = Latency.from_values(lat_ms)
    busy = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    spread = 0.0
    if len(windows) >= 2:
        last = windows[-settings.min_windows:]
        spread = (max(last) - min(last)) / (sum(last) / len(last)) if sum(last) else 0.0
    return {
        **stats.as_columns(),
        "throughput": stats.count * batch_size / wall_s if wall_s > 0 else float("nan"),
        "cpu_util": busy / wall_s if wall_s > 0 else float("nan"),
        "rss_mb": peak_rss_mb(),
        "requests": stats.count,
        "measure_s": wall_s,
        "windows": len(windows),
        "window_spread": spread,
        "stable": is_stable(windows, settings.min_windows, settings.tolerance, stats.count, settings.min_requests),
        # A p99 needs about 100 requests to be more than the largest of a few; fewer are flagged.
        "p99_supported": stats.count >= P99_MIN_REQUESTS,
        "first_inference_ms": first_ms,
        "latency_hist": latency_histogram(lat_ms),
        **(load or {}),
    }


def warm_up(infer: Infer, batches: list, settings: MeasureSettings, heartbeat: Callable[[], None] | None = None) -> None:
    """At least `warmup_iters` requests, for up to `warmup_s` seconds: it ends early once two slices of
    the warm-up run at the same rate. `heartbeat` is called after each slice."""
    perf = time.perf_counter_ns
    n = len(batches)
    done = [0]

    def run_until(t_ns: int) -> None:
        i = done[0]
        while perf() < t_ns:
            infer(batches[i % n])
            i += 1
        done[0] = i

    _warm_slices(run_until, lambda: done[0], settings, settings.warmup_iters, heartbeat)


def measure_window(make_infer: Callable[[], Infer], batches: list, batch_size: int, start_ns: int, end_ns: int,
                   concurrency: int = 1) -> dict:
    """Closed loop over a fixed window shared with other instances (CLOCK_MONOTONIC is system-wide).

    Requests keep running before `start_ns` so the instance is warm when the window opens; only
    requests that start and finish inside [start_ns, end_ns] count.
    """
    infers = [make_infer() for _ in range(concurrency)]
    records: list[tuple[int, int]] = []
    proc = psutil.Process()
    cpu = {}

    def loop(infer: Infer, offset: int):
        perf = time.perf_counter_ns
        i = offset
        while True:
            s = perf()
            if s >= end_ns:
                return
            infer(batches[i % len(batches)])
            e = perf()
            if s >= start_ns and e <= end_ns:
                records.append((s, e - s))
            i += 1

    def sample_cpu():
        now = time.perf_counter_ns()
        if now < start_ns:
            time.sleep((start_ns - now) / 1e9)
        cpu["start"] = proc.cpu_times()
        cpu["load0"] = load_snapshot()
        time.sleep(max(0.0, (end_ns - time.perf_counter_ns()) / 1e9))
        cpu["end"] = proc.cpu_times()
        cpu["load1"] = load_snapshot()

    threads = [threading.Thread(target=loop, args=(inf, k), daemon=True) for k, inf in enumerate(infers)]
    sampler = threading.Thread(target=sample_cpu, daemon=True)
    for t in threads + [sampler]:
        t.start()
    for t in threads + [sampler]:
        t.join()
    wall = (end_ns - start_ns) / 1e9
    stats = Latency.from_values([v / 1e6 for _, v in records])
    c0, c1 = cpu["start"], cpu["end"]
    return {**stats.as_columns(), "requests": stats.count, "samples": stats.count * batch_size,
            "throughput": stats.count * batch_size / wall, "measure_s": wall,
            "cpu_util": ((c1.user - c0.user) + (c1.system - c0.system)) / wall, "rss_mb": peak_rss_mb(),
            **machine_load(cpu["load0"], cpu["load1"]),
            "latencies_ms": [round(v / 1e6, 4) for _, v in records]}


def measure_poisson(make_infer: Callable[[], Infer], batches: list, batch_size: int, rate: float,
                    settings: MeasureSettings, concurrency: int = 1, seed: int = 0) -> dict:
    """Open-loop server scenario: Poisson arrivals at `rate` requests/s, latency from arrival.

    A dispatcher releases requests at their arrival times into a queue served by `concurrency`
    executors, so queueing delay is part of the latency. If the executors cannot keep up, the
    point is reported as saturated with the achieved rate and the backlog, and no latency (a
    latency measured on a growing queue only says how long we chose to measure).
    """
    import queue

    import numpy as np

    infers = [make_infer() for _ in range(concurrency)]
    warm_up(infers[0], batches, settings)
    duration = settings.max_time_s
    rng = np.random.default_rng(seed)
    n_expected = int(rate * duration * 1.5) + 10
    gaps = rng.exponential(1.0 / rate, size=n_expected)
    perf = time.perf_counter_ns
    q: queue.Queue = queue.Queue()
    done: list[tuple[int, int]] = []  # (arrival_ns, end_ns)
    stop = threading.Event()
    proc = psutil.Process()
    start = perf() + 50_000_000
    end = start + int(duration * 1e9)
    arrivals = start + np.cumsum(gaps * 1e9).astype(np.int64)
    arrivals = arrivals[arrivals < end]

    def dispatch():
        # No busy-waiting: it would steal the core the executors run on. A late wake-up is
        # charged to the request, since latency counts from the scheduled arrival.
        for t in arrivals:
            now = perf()
            if t > now:
                time.sleep((t - now) / 1e9)
            q.put(int(t))
        stop.set()

    def execute(infer: Infer, offset: int):
        i = offset
        while True:
            try:
                arrival = q.get(timeout=0.05)
            except queue.Empty:
                if stop.is_set() or perf() > end:
                    return
                continue
            if perf() > end:  # past the window: the rest is backlog
                return
            infer(batches[i % len(batches)])
            done.append((arrival, perf()))
            i += 1

    cpu0 = proc.cpu_times()
    load0 = load_snapshot()
    threads = [threading.Thread(target=dispatch, daemon=True)]
    threads += [threading.Thread(target=execute, args=(inf, k), daemon=True) for k, inf in enumerate(infers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=duration + 60)
    cpu1 = proc.cpu_times()
    load1 = load_snapshot()
    finished = [(a, e) for a, e in done if e <= end]
    arrived = len(arrivals)
    backlog = arrived - len(finished)
    achieved = len(finished) / duration
    # Saturated: the queue was still growing, more than a few requests per executor left behind.
    saturated = backlog > max(3 * concurrency, 0.02 * arrived)
    lat_ms = [(e - a) / 1e6 for a, e in finished]
    stats = Latency.from_values(lat_ms)
    cols = {**stats.as_columns(), "latency_hist": latency_histogram(lat_ms)}
    if saturated:
        cols = {k: None for k in cols}
    wall = duration
    return {**cols, "throughput": achieved * batch_size, "target_rate": rate, "achieved_rate": achieved,
            "arrived": arrived, "backlog": backlog, "saturated": saturated, "requests": len(finished),
            "cpu_util": ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) / wall,
            "rss_mb": peak_rss_mb(), "measure_s": wall, "stable": not saturated, **machine_load(load0, load1)}


HIST_BINS = 50


def latency_histogram(values_ms, bins: int = HIST_BINS) -> dict | None:
    """A compact latency distribution: log-spaced bin edges (ms) and counts.

    Log spacing keeps both the bulk and the tail visible; raw latencies would be too many to store.
    """
    a = np.asarray(values_ms, dtype=np.float64)
    a = a[np.isfinite(a) & (a > 0)]
    if a.size == 0:
        return None
    lo, hi = float(a.min()), float(a.max())
    if hi <= lo:
        hi = lo * 1.001 + 1e-9
    edges = np.geomspace(lo, hi, bins + 1)
    counts, _ = np.histogram(a, bins=edges)
    return {"edges_ms": [float(f"{e:.4g}") for e in edges], "counts": [int(c) for c in counts]}
