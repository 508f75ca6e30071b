"""Paired comparison in one worker: configurations loaded side by side, measured in alternating blocks.

Fresh-process rounds pay a worker's start for every figure, and two rounds minutes apart see
different neighbours, so on a small shared machine their ratio's interval stays wide. When the
configurations differ only in what a compiled model or session is given (threads, streams, hint,
batch, requests in flight, precision variant, session options), one pinned worker loads them all
and runs short blocks of each in turn, the order of every cycle drawn at random and the next cycle
in the reverse order (ABBA...), so drift and carry-over fall on each side alike. Each block's first
part is discarded (the caches warm again after the other configuration ran); each cycle gives one
paired ratio per compared pair, stored as one round of every configuration. The worker keeps
measuring until every compared pair is decided by the stopping rule (`wb_core.stats.decide`) or its
time is up.

Configurations that need a process of their own (other cores or pinning, instances, thread
variables set before the runtime starts, another runtime) keep fresh rounds: `worker_conflict`
says why, and so does a comparison whose copies would not fit in memory (`memory_conflict`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

from wb_core.axes import all_axes
from wb_core.config import InputOptions, MeasureSettings, RunConfig
from wb_core.errors import Sentence, counted
from wb_core.stats import DIFFERENCE, EQUIVALENT, UNDECIDED, Decision, decide, look_times

BLOCK_S = 0.3  # seconds of one block: short enough to alternate often, long enough for a slow model
DISCARD_S = 0.06  # the start of each block, left out: caches warm again after the other config ran
BLOCK_REQUESTS = 12  # a block is made longer for a slow model: at least this many requests
# ... unless that leaves fewer than TARGET_CYCLES cycles in the time given: then as short as fits
# them, down to MIN_BLOCK_REQUESTS (two of them discarded). A block's throughput counts the requests
# it started over the time until they all finished, so a short block is not rounded to whole requests,
# and the stopping rule needs cycles (stats.MIN_PAIRS) more than long ones.
TARGET_CYCLES = 8
MIN_BLOCK_REQUESTS = 6
FIRST_LOOK_S = 3.0  # seconds of measuring before the stopping rule first looks
MARGIN = 0.03  # the band within which two configurations are called equivalent
PRECISION = 0.02  # measuring goes on until the 95% interval is within this fraction too (time allowing)
MAX_S = 30.0
MEMORY_SHARE = 0.5  # of the memory available now, what the copies side by side may take
# Point settings that still take a process of their own: an open-loop rate is measured alone, and the
# input pool is built once per process for one shape.
OWN_PROCESS_POINT_FIELDS = ("rate", "seq_len", "shape")


def process_fields() -> tuple[str, ...]:
    """The settings only a process of its own can set: the backend and the placement axes (cores,
    instances), read from the axes table, and the point settings above."""
    return (*(a.name for a in all_axes() if a.stage in ("backend", "placement")), *OWN_PROCESS_POINT_FIELDS)
PAIRED, ROUNDS = "paired", "rounds"


def worker_conflict(a: RunConfig, b: RunConfig) -> str | None:
    """Why `b` cannot be measured in the same worker as `a` (None: it can)."""
    from wb_core.backends.registry import get, title

    for name in process_fields():
        if getattr(a, name) != getattr(b, name):
            if name == "backend":
                return f"it runs on {title(b.backend)}, not {title(a.backend)}"
            return f"its {name.replace('_', ' ')} differs, which takes a process of its own"
    if a.instances > 1:
        return "several instances run in processes of their own"
    if a.rate:
        return "an open-loop arrival rate is measured alone"
    info = get(a.backend)
    if info.process_env(a.to_dict()) != info.process_env(b.to_dict()):
        return f"{title(b.backend)} reads its differing settings from the environment when it starts"
    return None


def memory_conflict(paths: list[Path], configs: list[RunConfig], available_mb: float | None = None) -> str | None:
    """Why the copies would not fit side by side (None: they fit): each compiled copy is taken as
    three times its model files (weights, their reordered copy, activations and inputs) against
    MEMORY_SHARE of the memory available now."""
    import psutil

    def files_mb(p: Path) -> float:
        p = Path(p)
        if p.is_dir():
            return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 2**20
        extra = p.with_suffix(".bin")
        return (p.stat().st_size + (extra.stat().st_size if extra.exists() and extra != p else 0)) / 2**20

    need = sum(3 * files_mb(p) for p in paths)
    avail = available_mb if available_mb is not None else psutil.virtual_memory().available / 2**20
    if need > MEMORY_SHARE * avail:
        return (f"{len(configs)} copies side by side would take about {need:,.0f} MB, more than half of the "
                f"{avail:,.0f} MB available now")
    return None


def block_orders(k: int, cycles: int, seed: int = 0) -> list[list[int]]:
    """The order of the `k` configurations in each cycle: a random order, then its reverse, and so on,
    so each configuration runs as often before as after each other one (ABBA for two)."""
    rng = random.Random(seed)
    out: list[list[int]] = []
    for c in range(cycles):
        out.append(list(reversed(out[-1])) if c % 2 else rng.sample(range(k), k))
    return out


def cycle_value(block: dict, metric: str) -> float | None:
    v = block.get(metric)
    return float(v) if isinstance(v, (int, float)) and v == v and v > 0 else None


def log_ratios(cycles: list[dict], a: int, b: int, metric: str, quiet_only: bool = False) -> list[float]:
    """log(B / A) of `metric` per cycle (`cycles`: the worker's cycle messages), optionally only the
    cycles measured without other processes on the cores."""
    out = []
    for c in cycles:
        if quiet_only and c.get("busy"):
            continue
        va, vb = cycle_value(c["blocks"][a], metric), cycle_value(c["blocks"][b], metric)
        if va and vb:
            out.append(math.log(vb / va))
    return out


def judge(cycles: list[dict], pairs, metric: str, margin: float, looks: int,
          precision: float | None) -> tuple[dict[tuple[int, int], Decision | None], bool]:
    """The stopping rule on every compared pair; the quiet cycles only when there are enough of them
    (the second value says so), else all of them."""
    from wb_core.stats import MIN_PAIRS

    quiet = sum(1 for c in cycles if not c.get("busy")) >= max(MIN_PAIRS, len(cycles) // 2)
    return {(a, b): decide(log_ratios(cycles, a, b, metric, quiet_only=quiet), margin, looks, precision)
            for a, b in pairs}, quiet


# ---- worker side ----

class _Runner:
    """One configuration's session in the worker, run in blocks."""

    def __init__(self, session, batches, batch_size: int, concurrency: int):
        self.batches, self.batch_size, self.concurrency = batches, batch_size, concurrency
        # Pre-bound inputs where the session offers them (ONNX Runtime's IO binding), as a sweep's point runs.
        self.infer = getattr(session, "make_bound_infer", session.make_infer)()
        self.i = 0
        self.records: list[tuple[int, int]] = []  # (end_ns, latency_ns) of the block running
        self.queue = None
        self.infers = [self.infer]
        # The runtime's own request loop (inputs set once per request, no Python per completion), the
        # same loop a sweep's point is measured with: a block measured any other way would carry
        # Python's cost per request, which weighs on a fast configuration more than on a slow one and
        # so biases their ratio.
        make_loop = getattr(session, "make_loop", None)
        self.loop = make_loop(concurrency, batches) if make_loop is not None else None
        if self.loop is not None:
            return
        if concurrency > 1 and getattr(session, "make_async", None) is not None:
            self.queue = session.make_async(concurrency, self._done)
        elif concurrency > 1:
            self.infers += [session.make_infer() for _ in range(concurrency - 1)]

    def _done(self, start_ns: int) -> None:
        e = time.perf_counter_ns()
        self.records.append((e, e - start_ns))

    def _next(self):
        b = self.batches[self.i % len(self.batches)]
        self.i += 1
        return b

    def run(self, until_ns: int) -> None:
        """Requests flow until `until_ns`; each completed one is recorded."""
        perf = time.perf_counter_ns
        if self.queue is not None:
            while perf() < until_ns:
                self.queue.submit(self._next())
            return
        if len(self.infers) == 1:
            infer, append = self.infer, self.records.append
            while perf() < until_ns:
                s = perf()
                infer(self._next())
                e = perf()
                append((e, e - s))
            return

        def loop(infer):
            while perf() < until_ns:
                s = perf()
                infer(self._next())
                e = perf()
                self.records.append((e, e - s))

        threads = [threading.Thread(target=loop, args=(f,), daemon=True) for f in self.infers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def settle(self) -> None:
        if self.queue is not None:
            self.queue.wait_all()

    def block(self, block_s: float, discard_s: float, sub_windows: int = 4) -> dict:
        """One block: `discard_s` run and left out, then the rest measured. Wall throughput, the
        worker's CPU time per sample, mean and p99 latency, throughput of `sub_windows` equal slices
        and the load of other processes on our cores."""
        import numpy as np

        from wb_core.measure import load_snapshot, machine_load

        if self.loop is not None:
            return self._loop_block(block_s, discard_s, sub_windows)
        perf = time.perf_counter_ns
        t0 = perf()
        self.run(t0 + int(discard_s * 1e9))
        cpu0, load0, w0 = os.times(), load_snapshot(), perf()
        self.records = []
        self.run(w0 + int((block_s - discard_s) * 1e9))
        w1, cpu1, load1 = perf(), os.times(), load_snapshot()
        self.settle()
        done = [(e, v) for e, v in self.records if w0 <= e <= w1]
        self.records = []
        wall = (w1 - w0) / 1e9
        n = len(done)
        cpu_s = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
        lat = [v / 1e6 for _, v in done]
        edges = np.linspace(w0, w1, sub_windows + 1)
        counts = np.histogram([e for e, _ in done], bins=edges)[0] if done else np.zeros(sub_windows)
        sub = [float(c) * self.batch_size / (wall / sub_windows) for c in counts]
        return _block_figures(n, self.batch_size, wall, cpu_s, lat, sub, machine_load(load0, load1))

    def _loop_block(self, block_s: float, discard_s: float, sub_windows: int) -> dict:
        """A block through the runtime's request loop: the discarded start run and drained, then
        `sub_windows` slices measured back to back and drained at the end (throughput counts the
        requests started over the time until they all finished, as a sweep's point does)."""
        from wb_core.measure import load_snapshot, machine_load

        perf, loop = time.perf_counter_ns, self.loop
        loop.begin()
        loop.run_until(perf() + int(discard_s * 1e9))
        loop.finish()
        cpu0, load0, w0 = os.times(), load_snapshot(), perf()
        loop.begin()
        slice_ns = int((block_s - discard_s) * 1e9 / sub_windows)
        started = []
        for k in range(1, sub_windows + 1):
            before = loop.started
            loop.run_until(w0 + k * slice_ns)
            started.append(loop.started - before)
        w1, lat = loop.finish()
        cpu1, load1 = os.times(), load_snapshot()
        wall = (w1 - w0) / 1e9
        n = loop.started
        cpu_s = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
        sub = [float(c) * self.batch_size / (slice_ns / 1e9) for c in started]
        return _block_figures(n, self.batch_size, wall, cpu_s, lat, sub, machine_load(load0, load1))


def _block_figures(n: int, batch_size: int, wall: float, cpu_s: float, lat_ms: list, sub: list, load: dict) -> dict:
    """One block's figures from its `n` requests over `wall` seconds: wall throughput, the worker's
    CPU time per sample, mean and p99 latency, each sub-window's throughput and their trimmed mean,
    and the load of other processes on our cores."""
    import numpy as np

    lat = np.asarray(lat_ms if lat_ms else [float("nan")], dtype=float)
    return {"throughput": n * batch_size / wall if wall > 0 else float("nan"),
            "cpu_ms_per_sample": 1e3 * cpu_s / (n * batch_size) if n else float("nan"),
            "cpu_throughput": n * batch_size / cpu_s if cpu_s > 0 and n else float("nan"),
            "latency_ms_mean": float(np.mean(lat)), "latency_ms_p99": float(np.percentile(lat, 99)),
            "requests": n, "measure_s": wall, "cpu_util": cpu_s / wall if wall > 0 else float("nan"),
            "sub_throughput": sub, "trimmed_throughput": float(np.mean(sorted(sub)[1:-1])) if len(sub) > 2
            else float(np.mean(sub)), **load}

def block_length(block_s: float, request_s: float, max_s: float, configs: int) -> float:
    """Seconds of one block: at least `block_s` and BLOCK_REQUESTS of the slowest request, shortened
    (to no fewer than MIN_BLOCK_REQUESTS requests) when that would leave fewer than TARGET_CYCLES cycles
    of `configs` blocks in `max_s`."""
    long = max(block_s, BLOCK_REQUESTS * request_s)
    if configs * long * TARGET_CYCLES <= max_s:
        return long
    return max(block_s, MIN_BLOCK_REQUESTS * request_s, min(long, max_s / (TARGET_CYCLES * configs)))


def task_paired(task: dict) -> None:
    """Worker: open every configuration of `task["configs"]` side by side, warm each up, then run
    cycles of blocks until the stopping rule decides every pair of `task["pairs"]` or time is up.
    Messages: `loaded` per configuration (what it runs), `cycle` per cycle, `result` at the end."""
    from wb_core.backends.registry import open_session
    from wb_core.config import with_point_shapes
    from wb_core.measure import warm_up
    from wb_core.models import make_batches
    from wb_core.proc.channel import emit
    from wb_core.proc.worker import apply_process_settings

    began = time.perf_counter()
    configs = [RunConfig.from_dict(c["config"]) for c in task["configs"]]
    apply_process_settings(configs[0].to_dict(), task.get("memory_limit_mb"))
    settings = MeasureSettings(**task["settings"])
    runners = []
    request_s = 0.0  # the slowest configuration's request, warm
    for i, (cfg, spec) in enumerate(zip(configs, task["configs"])):
        opts = with_point_shapes(InputOptions.from_dict(task.get("inputs")), cfg)
        t0 = time.perf_counter()
        session = open_session(spec["model_path"], cfg)
        session.cfg = cfg
        extra = session.prepare(cfg.batch_size, opts)
        info = session.info()
        concurrency = cfg.concurrency
        if cfg.untouched and cfg.hint:  # as many requests in flight as the runtime asks for
            concurrency = int(info.get("ov_optimal_requests") or concurrency)
            extra["requests_in_flight"] = concurrency
        batches = session.convert_batches(make_batches(session.inputs, cfg.batch_size, opts, settings.pool_size,
                                                       settings.seed))
        runner = _Runner(session, batches, cfg.batch_size, concurrency)
        warm_up(runner.infer, batches, settings, heartbeat=lambda: emit({"type": "heartbeat"}))
        t1 = time.perf_counter()
        runner.infer(batches[0])
        request_s = max(request_s, time.perf_counter() - t1)
        runners.append(runner)
        emit({"type": "loaded", "index": i, "load_s": time.perf_counter() - t0, "metrics": {**extra, **info}})
    pairs = [tuple(p) for p in task["pairs"]]
    max_s, metric = float(task["max_s"]), task.get("metric", "throughput")
    if task.get("deadline_s"):  # the whole task, loads included, ends by then: what loading took is not measured
        max_s = max(1.0, min(max_s, float(task["deadline_s"]) - (time.perf_counter() - began)))
    looks = look_times(min(FIRST_LOOK_S, max_s), max_s)
    rng_seed = int(task.get("seed", 0))
    # A block holds at least BLOCK_REQUESTS of the slowest request, and leaves out at least two of them.
    block_s = block_length(float(task.get("block_s", BLOCK_S)), request_s, max_s, len(runners))
    discard_s = max(float(task.get("discard_s", DISCARD_S)), 2 * request_s)
    cycles: list[dict] = []
    start = time.perf_counter()
    looked, reason, orders = 0, "time", []
    while True:
        if not orders:
            orders = block_orders(len(runners), 2, rng_seed + len(cycles))
        order = orders.pop(0)
        blocks: dict[int, dict] = {}
        for j in order:
            blocks[j] = runners[j].block(block_s, discard_s)
        busy = any(b.get("busy") for b in blocks.values())
        cycle = {"type": "cycle", "cycle": len(cycles), "order": order, "busy": busy,
                 "blocks": [blocks[j] for j in range(len(runners))]}
        cycles.append(cycle)
        emit(cycle)
        elapsed = time.perf_counter() - start
        if looked < len(looks) and elapsed >= looks[looked]:
            while looked < len(looks) and elapsed >= looks[looked]:
                looked += 1
            decisions, _ = judge(cycles, pairs, metric, task["margin"], len(looks), task.get("precision"))
            if pairs and all(d is not None and d.settled for d in decisions.values()):
                reason = "decided"
                break
        if elapsed >= max_s:
            break
    emit({"type": "result", "cycles": len(cycles), "stopped": reason, "elapsed_s": time.perf_counter() - start,
          "looks": len(looks), "block_s": block_s, "discard_s": discard_s})


# ---- parent side ----

@dataclasses.dataclass
class PairedOutcome:
    """What a paired comparison gave: the configurations measured (by index), their cycles, each
    compared pair's decision, why it stopped, and the rounds it stored."""

    configs: list[RunConfig]
    cycles: list[dict] = dataclasses.field(default_factory=list)
    decisions: dict = dataclasses.field(default_factory=dict)  # (a, b) -> Decision (B over A)
    stopped: str = ""  # "decided", "time" or the reason the worker ended early
    elapsed_s: float = 0.0
    looks: int = 1
    quiet_only: bool = True
    failed: str | None = None
    fallback: str | None = None  # why fresh rounds are needed instead (nothing was measured paired)
    loaded: dict = dataclasses.field(default_factory=dict)  # index -> what its session runs
    rounds: dict = dataclasses.field(default_factory=dict)  # index -> round numbers stored

    @property
    def busy_cycles(self) -> int:
        return sum(1 for c in self.cycles if c.get("busy"))

    def sentence(self) -> Sentence:
        n = len(self.cycles)
        why = {"decided": "every comparison was decided", "time": "the time was up"}.get(self.stopped, self.stopped)
        text = (f"Measured side by side in one worker: {counted(n, 'cycle')} of alternating blocks in a balanced random "
                f"order ({self.elapsed_s:.0f} s); stopped because {why}.")
        if self.busy_cycles:
            text += (f" {self.busy_cycles} of the {n} cycles ran while other processes used these cores: "
                     + ("they were left out of the decision." if self.quiet_only else
                        "too many to leave out, so the decision rests on a busy machine."))
        return Sentence(text)


def compare_paired(paths: list[Path], configs: list[RunConfig], settings: MeasureSettings, inputs: InputOptions,
                   pairs: list[tuple[int, int]], *, metric: str = "throughput", margin: float = MARGIN,
                   precision: float | None = PRECISION, max_s: float = MAX_S, block_s: float = BLOCK_S,
                   discard_s: float = DISCARD_S, seed: int = 0, deadline_s: float | None = None,
                   on_cycle: Callable[[dict], None] | None = None,
                   on_loaded: Callable[[int, dict], None] | None = None, cancel=None,
                   memory_limit_mb: int | None = None) -> PairedOutcome:
    """Run one paired worker over `configs` (model files `paths`) and return what it measured.
    `pairs`: (a, b) indices compared, B over A; `on_cycle(msg)` is called as each cycle arrives.
    `max_s`: seconds of measuring at most; `deadline_s`: seconds the worker may take in all, its
    loads included (measuring is cut shorter when loading took longer)."""
    from wb_core.proc.parent import run_child
    from wb_core.sweep.context import point_timeout

    out = PairedOutcome(configs=list(configs))
    task = {"task": "wb_core.sweep.paired:task_paired", "settings": settings.__dict__, "inputs": inputs.to_dict(),
            "configs": [{"config": c.to_dict(), "model_path": str(p)} for c, p in zip(configs, paths)],
            "pairs": [list(p) for p in pairs], "metric": metric, "margin": margin, "precision": precision,
            "max_s": max_s, "block_s": block_s, "discard_s": discard_s, "seed": seed, "deadline_s": deadline_s}
    result: dict = {}

    def on_message(msg: dict) -> None:
        kind = msg.get("type")
        if kind == "loaded":
            out.loaded[int(msg["index"])] = msg.get("metrics") or {}
            if on_loaded:
                on_loaded(int(msg["index"]), out.loaded[int(msg["index"])])
        elif kind == "cycle":
            out.cycles.append(msg)
            if on_cycle:
                on_cycle(msg)
        elif kind == "result":
            result.update(msg)

    # Silence allowed: each config's load and warm-up, then a cycle at least every few blocks.
    timeout = point_timeout(settings) * len(configs) + 10 * block_s * len(configs)
    outcome = run_child(task, timeout=timeout, on_message=on_message, cancel=cancel, memory_limit_mb=memory_limit_mb)
    out.stopped = result.get("stopped") or ("cancelled" if outcome.cancelled else outcome.sentence())
    if not result and not outcome.cancelled:
        fatal = [m for m in outcome.messages if m.get("type") == "fatal"]
        out.failed = fatal[-1]["error"] if fatal else outcome.sentence()
    out.elapsed_s = float(result.get("elapsed_s") or 0.0)
    out.looks = int(result.get("looks") or 1)
    out.decisions, out.quiet_only = judge(out.cycles, pairs, metric, margin, out.looks, precision)
    return out


def measure_paired(ctx, configs: list[RunConfig], pairs: list[tuple[int, int]], **options) -> PairedOutcome:
    """A paired comparison inside a sweep context: each configuration's variant prepared by `ctx`,
    every cycle stored as it arrives, as one round of each configuration (numbered after the rounds
    the study holds already), with `design` "paired" and the cycle's order. Copies that would not fit
    in memory measure nothing (`fallback` says why); a worker that fails before any cycle fails every
    configuration, with its reason."""
    paths, extras = [], []
    for c in configs:
        path, extra = ctx.variant(c)
        paths.append(path)
        extras.append(extra)
    why = memory_conflict(paths, configs)
    if why:
        return PairedOutcome(configs=list(configs), fallback=why, stopped=why)
    keys = {c.key for c in configs}
    base = 1 + max((int(r["round"]) for r in ctx.store.rounds(ctx.study) if r["key"] in keys), default=-1)
    loaded: dict[int, dict] = {}
    stored: dict[int, list[int]] = {i: [] for i in range(len(configs))}

    def on_loaded(i: int, metrics: dict) -> None:
        loaded[i] = metrics

    def on_cycle(msg: dict) -> None:
        r = base + int(msg["cycle"])
        for i, (c, block) in enumerate(zip(configs, msg["blocks"])):
            ctx.record_round(c, r, "ok", {**extras[i], **loaded.get(i, {}), **block, "design": PAIRED,
                                          "cycle_busy": bool(msg.get("busy")),
                                          "cycle_order": [configs[j].key for j in msg["order"]], "stable": True})
            stored[i].append(r)

    out = compare_paired(paths, configs, ctx.settings, ctx.inputs, pairs, on_cycle=on_cycle, on_loaded=on_loaded,
                         cancel=ctx.cancel, memory_limit_mb=ctx.memory_limit_mb, **options)
    out.rounds = stored
    if out.failed and not out.cycles:
        for c in configs:
            ctx.record_round(c, base, "failed", error=out.failed)
    return out


def run_paired(model, db, study: str, configs: list[RunConfig], pairs: list[tuple[int, int]], *,
               settings: MeasureSettings | None = None, inputs: InputOptions | None = None, precision=None,
               progress: bool = False, cancel=None, **options) -> PairedOutcome:
    """Measure `configs` side by side in one worker in study `study` (see `measure_paired`); pairs
    (a, b) are compared B over A. Configurations that cannot share one worker (`worker_conflict` with
    the first) or a model whose variants change the configurations (one quantized beforehand) are not
    measured: `fallback` says why, for the caller to measure fresh rounds instead."""
    from wb_core.config import SweepSpec
    from wb_core.sweep.context import SweepContext

    for c in configs[1:]:
        why = worker_conflict(configs[0], c)
        if why:
            return PairedOutcome(configs=list(configs), fallback=f"{c.label()} cannot share a worker: {why}")
    ctx = SweepContext(model, db, study, configs, settings=settings, inputs=inputs, precision=precision,
                       progress=progress, cancel=cancel, repeats=2)
    if [c.key for c in ctx.planner.adapt(configs)] != [c.key for c in configs]:
        return PairedOutcome(configs=list(configs), fallback="the model holds INT8 weights already, so its "
                                                             "configurations change with the variant it runs")
    with ctx.open(ctx.spec_record(sweep=SweepSpec(repeats=2).to_dict(), design=PAIRED)):
        for c in configs:
            why = ctx.infeasible(c)
            if why:
                return PairedOutcome(configs=list(configs), fallback=f"{c.label()} cannot run here: {why}")
        return measure_paired(ctx, configs, pairs, **options)


__all__ = ["DIFFERENCE", "EQUIVALENT", "PAIRED", "ROUNDS", "UNDECIDED", "PairedOutcome", "block_orders",
           "compare_paired", "judge", "log_ratios", "measure_paired", "memory_conflict", "run_paired", "task_paired",
           "worker_conflict"]
