"""A study measured on this machine: worker groups, one after another, every point stored at once.

One worker per process-level group (everything but the batch size). A worker that times out,
crashes or raises turns its unfinished points into failed records carrying the reason and the
tail of its output; the sweep goes on with the next group. Multi-instance groups run N pinned
workers over one common window. Shared set-up (preflight, the study, storing) is the
`SweepContext`'s.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from wb_core.backends.registry import get as get_backend
from wb_core.config import InputOptions, MeasureSettings, RunConfig, SweepSpec
from wb_core.errors import ConfigError, Sentence, WorkbenchError, counted, setting, were
from wb_core.proc.parent import run_child
from wb_core.proc.supervisor import StartBarrier, Supervisor
from wb_core.sweep.context import SweepContext, SweepSummary, point_timeout
from wb_core.variants.planner import PrecisionOptions


def run_sweep(model, spec: SweepSpec, db: str | Path, study: str,
              settings: MeasureSettings | None = None, inputs: InputOptions | None = None,
              on_point: Callable[[dict], None] | None = None, progress: bool = False,
              cancel: threading.Event | None = None, memory_limit_mb: int | None = None,
              configs: Iterable[RunConfig] | None = None, timeout_s: float | None = None,
              precision: PrecisionOptions | None = None, executor=None,
              remeasure_busy: bool = False, ci_target: float | None = None,
              max_rounds: int = 10) -> SweepSummary:
    """Measure every config of `spec` (or the given `configs`) not yet stored in `study`.

    `model`: a path, or the `ModelDescription` read already (then the model is not read again).

    `timeout_s`: seconds a worker may stay silent before it is declared hung and killed
    (default: a load allowance plus twice the measuring time).
    `precision` carries the data, metric and quantization settings for INT8/BF16 variants and
    accuracy (see wb_core.variants.planner); by default a demo model uses its own data.
    `executor`: None runs the worker groups here, one after another; a fleet executor
    (`DaskExecutor` of the fleet package, which registers its runner in `wb_core.sweep`) runs them
    on the hosts of a cluster, once per hardware type.
    `remeasure_busy`: points (or rounds) stored as measured on a busy machine are measured again.
    `ci_target` (0.03: +-3%): after the rounds of `spec.repeats` (at least 3 with a target), the
    leading configs get extra rounds until each one's 95% throughput interval is within that
    fraction of its median, or `max_rounds` extra rounds are spent (`refine_leaders`); the
    summary says which leaders reached it, and `summary.ci` holds the outcome.
    """
    from wb_core.config import check_ci_target, check_max_rounds

    ci_target = check_ci_target(ci_target)
    if ci_target is not None:
        max_rounds = check_max_rounds(max_rounds)
        if executor is not None:
            raise ConfigError("An interval target adds rounds on this machine; leave out the cluster.")
    configs = list(configs) if configs is not None else spec.expand()
    if executor is not None:
        from wb_core.sweep import EXECUTOR_SWEEPS

        if not EXECUTOR_SWEEPS:
            raise ConfigError("No package that runs sweeps on an executor is loaded (import wb_core.fleet).")
        return EXECUTOR_SWEEPS[-1](executor, model, spec, db, study, settings=settings, inputs=inputs,
                                   on_point=on_point, progress=progress, cancel=cancel, memory_limit_mb=memory_limit_mb,
                                   configs=configs, timeout_s=timeout_s, precision=precision)
    repeats = getattr(spec, "repeats", 1)
    if ci_target is not None and repeats < MIN_CI_ROUNDS:
        repeats = MIN_CI_ROUNDS  # an interval from fewer rounds is too wide to say who leads
    ctx = SweepContext(model, db, study, configs, settings=settings, inputs=inputs, precision=precision,
                       on_point=on_point, progress=progress, cancel=cancel, memory_limit_mb=memory_limit_mb,
                       timeout_s=timeout_s, repeats=repeats, remeasure_busy=remeasure_busy)
    ctx.summary.notes.extend(getattr(spec, "notes", []))  # combinations the spec left out, and why
    with ctx.open(ctx.spec_record(sweep=spec.to_dict(), **({"ci_target": ci_target, "max_rounds": max_rounds}
                                                           if ci_target is not None else {}))):
        measure_configs(ctx, configs)
        if ci_target is not None and not ctx.cancelled:
            ctx.summary.ci = refine_leaders(ctx, configs, ci_target, max_rounds)
    return ctx.summary


MIN_CI_ROUNDS = 3  # first rounds before an interval target picks the leaders


def measure_configs(ctx: SweepContext, configs: list[RunConfig]) -> None:
    """Measure the configs not stored yet, group by group, recording each point through `ctx`.

    With `ctx.repeats` > 1 every config is measured in that many rounds instead (`measure_rounds`).
    """
    configs = ctx.planner.adapt(configs)  # e.g. a model quantized beforehand runs as int8
    if ctx.repeats > 1:
        measure_rounds(ctx, configs)
        return
    todo = ctx.claim(ctx.todo(configs))
    ctx.start_progress(len(todo))
    for members in worker_groups(todo):
        if ctx.cancelled:
            break
        feasible = []
        for c in members:  # a worker group may hold settings (threads) that one point cannot have here
            why = ctx.infeasible(c)
            if why:
                ctx.record(c, "skipped", error=why)
            else:
                feasible.append(c)
        if not feasible:
            continue
        members = feasible
        head = members[0]
        try:
            path, extra = ctx.variant(head)  # variant and accuracy columns, the same for every point
        except ConfigError:
            raise  # bad data or settings: no point of the sweep would mean anything
        except WorkbenchError as e:
            for c in members:
                ctx.record(c, "failed", error=str(e))
            continue
        run_group(path, members, ctx.settings, ctx.inputs, ctx.recorder(extra), ctx.cancel, ctx.memory_limit_mb,
                  ctx.summary, ctx.timeout_s)


def worker_key(c: RunConfig) -> tuple:
    """The settings that need a worker process of their own: `RunConfig.group` without the settings
    the backend's session takes when it opens (those it reads with no environment variable declared
    in the registry, such as OpenVINO's threads, streams and hint, which are compile properties).
    Points that differ only in those share one worker, which opens a session for each; what is set
    before the runtime loads (cores, environment variables, the model file) still splits workers.
    A multi-instance group keeps its own key: its instances share one window per point."""
    if c.instances > 1:
        return c.group
    info = get_backend(c.backend)
    in_session = set(info.settings) - set(info.env)
    return tuple((k, v) for k, v in c.group if k not in in_session)


def worker_groups(configs: Iterable[RunConfig]) -> list[list[RunConfig]]:
    """Configs by worker (see `worker_key`), in the order each worker first appears; within a worker,
    the points of one session setting next to each other, so that each session opens once."""
    groups: dict[tuple, list[RunConfig]] = collections.OrderedDict()
    for c in configs:
        groups.setdefault(worker_key(c), []).append(c)
    out = []
    for members in groups.values():
        sessions: dict[tuple, list[RunConfig]] = collections.OrderedDict()
        for c in members:
            sessions.setdefault(c.group, []).append(c)
        out.append([c for same in sessions.values() for c in same])
    return out


def measure_rounds(ctx: SweepContext, configs: list[RunConfig], seed: int = 0) -> None:
    """Measure every config in `ctx.repeats` rounds, interleaved: in each round every worker group
    runs once, in a fresh process, in an order shuffled anew, so drift over the rounds (a
    neighbour starting, the CPU warming) falls on all configs alike and rounds pair up.

    Each round is stored as it arrives and the point's summary (median, interval) rewritten.
    Rounds already stored are kept: a resumed study measures only the rounds it lacks. A config
    stored earlier as one measurement counts that as its first round.
    """
    import random

    have: dict[str, set[int]] = {}
    skipped: set[str] = set()  # a config that cannot run here needs no more rounds
    for r in ctx.store.rounds(ctx.study):
        if ctx.remeasure_busy and r["status"] == "ok" and (r.get("metrics") or {}).get("busy"):
            continue  # a round measured on a busy machine is measured again
        if r["status"] in ("ok", "skipped"):
            have.setdefault(r["key"], set()).add(int(r["round"]))
        if r["status"] == "skipped":
            skipped.add(r["key"])
    stored = ctx.stored([c.key for c in configs if c.key not in have])
    for key, point in stored.items():
        if ctx.remeasure_busy and point["status"] == "ok" and (point.get("metrics") or {}).get("busy"):
            continue
        if point["status"] in ("ok", "skipped"):  # measured once before, without rounds
            ctx.store.add_round(ctx.study, key, 0, point["status"], point["metrics"], point["error"])
            have[key] = {0}
            if point["status"] == "skipped":
                skipped.add(key)
    needed = {c.key: [] if c.key in skipped else [r for r in range(ctx.repeats) if r not in have.get(c.key, set())]
              for c in configs}
    todo = [c for c in configs if needed[c.key]]
    ctx.summary.planned += len(configs)
    ctx.summary.skipped_done += len(configs) - len(todo)
    ctx.start_progress(sum(len(needed[c.key]) for c in todo))
    groups: dict[tuple, list[RunConfig]] = collections.OrderedDict()
    for c in todo:
        groups.setdefault(c.group, []).append(c)
    rng = random.Random(seed)
    for round_no in range(ctx.repeats):
        order = list(groups.values())
        rng.shuffle(order)
        for members in order:
            if ctx.cancelled:
                return
            _measure_round(ctx, [c for c in members if round_no in needed[c.key] and c.key not in skipped], round_no,
                           skipped)


def _measure_round(ctx: SweepContext, members: list[RunConfig], round_no: int, skipped: set[str]) -> None:
    """One round of one worker group in a fresh worker, each point stored as a round as it arrives."""
    if not members:
        return
    head = members[0]
    why = ctx.infeasible(head)
    if why:
        for c in members:
            ctx.record_round(c, round_no, "skipped", error=why)
            skipped.add(c.key)
        return
    try:
        path, extra = ctx.variant(head)
    except ConfigError:
        raise
    except WorkbenchError as e:
        for c in members:
            ctx.record_round(c, round_no, "failed", error=str(e))
        return
    run_group(path, members, ctx.settings, ctx.inputs, ctx.round_recorder(extra, round_no), ctx.cancel,
              ctx.memory_limit_mb, ctx.summary, ctx.timeout_s)


@dataclasses.dataclass
class CiOutcome:
    """What a `--ci` target gave: the leading configurations, which reached it, and the rounds it added."""

    target: float
    extra_rounds: int = 0
    budget: int = 0
    reached: list[str] = dataclasses.field(default_factory=list)  # labels
    missed: list[str] = dataclasses.field(default_factory=list)
    half_widths: dict[str, float] = dataclasses.field(default_factory=dict)  # label -> fraction of the median

    def sentence(self) -> str:
        pct = f"+-{100 * self.target:g}%"
        added = f"after {counted(self.extra_rounds, 'extra round')} of at most {self.budget}"
        if not self.reached and not self.missed:
            return f"Interval target {pct}: no configuration was measured ok, so no leader to refine."

        def named(labels):
            return "; ".join(f"{lab} ({_pm(self.half_widths.get(lab))})" for lab in labels)

        out = f"Interval target {pct}, {added}: "
        if self.reached:
            out += f"{counted(len(self.reached), 'leading configuration')} reached it: {named(self.reached)}"
        if self.missed:
            out += ("; " if self.reached else "") + (f"{counted(len(self.missed), 'leading configuration')} did not reach "
                                                     f"it (the round budget ran out): {named(self.missed)}; raise "
                                                     f"{setting('max_rounds', 'the extra-round budget')} to go on")
        return Sentence(out + ".")


def _pm(half: float | None) -> str:
    return "no interval" if half is None or half != half else f"+-{100 * half:.1f}%"


def _throughput_interval(point: dict | None) -> tuple[float, float, float] | None:
    """(median, low, high) of a repeated point's throughput, or None without an interval."""
    if not point or point.get("status") != "ok":
        return None
    m = point.get("metrics") or {}
    try:
        med, lo, hi = float(m["throughput"]), float(m["throughput_ci_low"]), float(m["throughput_ci_high"])
    except (KeyError, TypeError, ValueError):
        return None
    return (med, lo, hi) if med > 0 else None


def leaders(ctx: SweepContext, configs: list[RunConfig]) -> dict[str, tuple[float, float, float]]:
    """The configs whose throughput interval overlaps the best median's interval: key -> (median, low, high)."""
    points = ctx.stored([c.key for c in configs])
    ivs = {k: iv for k, iv in ((k, _throughput_interval(p)) for k, p in points.items()) if iv is not None}
    if not ivs:
        return {}
    best = max(ivs, key=lambda k: ivs[k][0])
    _, blo, bhi = ivs[best]
    return {k: iv for k, iv in ivs.items() if iv[1] <= bhi and blo <= iv[2]}


def refine_leaders(ctx: SweepContext, configs: list[RunConfig], target: float, budget: int,
                   seed: int = 1) -> CiOutcome:
    """Add rounds to the leading configs until each one's 95% throughput interval is within `target`
    (a fraction of its median) or `budget` extra rounds are spent.

    Leaders are the configs whose intervals overlap the best median's; they are found again after
    every round, since a narrower interval may leave a config behind. Each extra round runs the
    leaders still short of the target, their worker groups in a shuffled order, each in a fresh
    worker, numbered after the highest round stored so rounds pair up across configs.
    """
    import random

    configs = ctx.planner.adapt(configs)
    by_key = {c.key: c for c in configs}
    outcome = CiOutcome(target=target, budget=budget)
    rng = random.Random(seed)
    skipped: set[str] = set()

    def half(iv):
        med, lo, hi = iv
        return (hi - lo) / 2 / med

    while True:
        lead = leaders(ctx, configs)
        short = [by_key[k] for k, iv in lead.items() if half(iv) > target and k not in skipped]
        if not short or outcome.extra_rounds >= budget or ctx.cancelled:
            break
        stored = ctx.store.rounds(ctx.study)
        round_no = 1 + max((int(r["round"]) for r in stored if r["key"] in by_key), default=-1)
        groups: dict[tuple, list[RunConfig]] = collections.OrderedDict()
        for c in short:
            groups.setdefault(c.group, []).append(c)
        order = list(groups.values())
        rng.shuffle(order)
        for members in order:
            if ctx.cancelled:
                break
            _measure_round(ctx, members, round_no, skipped)
        outcome.extra_rounds += 1
    for k, iv in sorted(leaders(ctx, configs).items(), key=lambda kv: -kv[1][0]):
        label = by_key[k].label()
        outcome.half_widths[label] = half(iv)
        (outcome.reached if half(iv) <= target else outcome.missed).append(label)
    ctx.note(outcome.sentence())
    return outcome


def run_group(path, members: list[RunConfig], settings: MeasureSettings, inputs: InputOptions, record,
              cancel: threading.Event | None = None, memory_limit_mb: int | None = None,
              summary: SweepSummary | None = None, timeout_s: float | None = None) -> SweepSummary:
    """Run one worker group on this machine (N pinned instances, or one worker process).

    `record(cfg, status, metrics=None, error=None)` is called once per point as it arrives.
    This is what a fleet host runs for each group it is given.
    """
    summary = summary or SweepSummary(study="", db="")
    run = _run_instances if members[0].instances > 1 else _run_group
    run(path, members, settings, inputs, record, cancel, memory_limit_mb, summary, timeout_s)
    return summary


def _run_group(path, members, settings, inputs, record, cancel, memory_limit_mb, summary, timeout_s=None):
    pending = {c.key: c for c in members}
    started: list[str] = []  # keys the worker began, in order
    task = worker_task("measure", path, members, settings, inputs)

    def on_message(msg: dict):
        if msg.get("type") == "start" and msg.get("key") in pending:
            started.append(msg["key"])
        if msg.get("type") == "point" and msg.get("key") in pending:
            cfg = pending.pop(msg["key"])
            record(cfg, msg["status"], msg.get("metrics"), msg.get("error"))

    outcome = run_child(task, timeout=timeout_s or point_timeout(settings), on_message=on_message, cancel=cancel,
                        memory_limit_mb=memory_limit_mb)
    if outcome.cancelled:
        summary.cancelled = True
        return  # unfinished points stay unstored: a resume measures them
    if pending:
        running = [k for k in started if k in pending]
        # The worker died while measuring a point: that point is what failed. Points it never began
        # stay unstored, so a rerun measures them; a worker that died before its first point
        # (loading, compiling) fails them all, since none of them could run.
        blamed = running[-1:] if started else list(pending)
        for key in blamed:
            record(pending.pop(key), "failed", error=outcome.sentence(),
                   metrics={"stderr_tail": outcome.stderr_tail[-2000:]})
        if pending:
            summary.notes.append(f"{counted(len(pending), 'point')} {were(len(pending))} not started before the worker died; "
                                 f"rerunning "
                                 f"the same command measures them.")


def worker_task(kind: str, path, members: list[RunConfig], settings, inputs) -> dict:
    """The task a worker runs for one group: its settings and its points (key, batch size, concurrency)."""
    group = members[0].to_dict()
    group.pop("batch_size")
    group.pop("concurrency")
    # Points of more than one session setting (see worker_key) each carry their own config.
    mixed = any(c.group != members[0].group for c in members)
    return {"task": kind, "model_path": str(path), "group": group,
            "points": [{"key": c.key, "batch_size": c.batch_size, "concurrency": c.concurrency,
                        **({"config": c.to_dict()} if mixed else {})} for c in members],
            "settings": settings.__dict__, "inputs": inputs.to_dict()}


def _run_instances(path, members, settings, inputs, record, cancel, memory_limit_mb, summary, timeout_s=None):
    """N workers, each pinned to its own cores, measured over one common window per point.

    Each worker loads, compiles and warms up, says `ready`, and waits; when all are ready the
    parent sends one start/end time on CLOCK_MONOTONIC (shared by all processes on Linux).
    Aggregate throughput = the instances' completed samples in the window / window length.
    """
    from wb_core.measure import Latency, latency_histogram

    head = members[0]
    base = worker_task("instance", path, members, settings, inputs)
    if memory_limit_mb:
        base["memory_limit_mb"] = memory_limit_mb
    placement = head.instance_cores()
    window_s = settings.max_time_s
    with Supervisor(timeout=timeout_s or point_timeout(settings), cancel=cancel) as sup:
        children = [sup.start({**base, "instance_cores": list(c) if c else None}, keep_channel_open=True,
                              name=f"instance {i}") for i, c in enumerate(placement)]
        events = sup.events()  # one stream for the whole group: each point reads on where the last stopped
        for cfg in members:
            barrier = StartBarrier(children, lead_s=0.2, window_s=window_s)
            results: dict[int, dict] = {}
            failure = None
            for w, msg in events:
                i = children.index(w)
                if msg is None:
                    if i not in results:  # died, hung (killed after its timeout) or cancelled
                        failure = f"instance {i}: {w.outcome.reason()}"
                        break
                    continue
                if msg.get("key") != cfg.key:
                    continue
                if msg["type"] == "ready":
                    barrier.ready(w)
                elif msg["type"] == "point":
                    if msg["status"] != "ok":
                        failure = f"instance {i}: {msg.get('error')}"
                        break
                    results[i] = msg.get("metrics") or {}
                    if len(results) == len(children):
                        break
            if sup.cancelled:
                summary.cancelled = True
                return
            if failure is None and len(results) < len(children):  # pragma: no cover - every end is an event
                failure = "the instances ended before reporting"
            if failure:
                record(cfg, "failed", error=failure[0].upper() + failure[1:] + ".")
                # Instances out of step cannot share a window any more: fail the rest of the group.
                for rest in members[members.index(cfg) + 1:]:
                    record(rest, "failed", error="An earlier point of this multi-instance group failed.")
                return
            per = [results[i] for i in range(len(children))]
            pooled = [v for m in per for v in m.get("latencies_ms", [])]
            lat = Latency.from_values(pooled)
            samples = sum(m["samples"] for m in per)
            metrics = {
                **lat.as_columns(),
                "latency_hist": latency_histogram(pooled),
                "throughput": samples / window_s,
                "cpu_util": sum(m["cpu_util"] for m in per),
                "rss_mb": sum(m["rss_mb"] for m in per),
                "requests": sum(m["requests"] for m in per),
                "measure_s": window_s,
                "executed_precision": per[0].get("executed_precision"),
                "oversubscribed": cfg.oversubscribed or len(set(c for cs in placement if cs for c in cs))
                < sum(len(cs) for cs in placement if cs),
                "instance_cores": [list(c) if c else None for c in placement],
                "instance_metrics": [{k: v for k, v in m.items() if k != "latencies_ms"} for m in per],
                "stable": True,
            }
            loads = [m for m in per if "busy" in m]
            if loads:  # others on the cores of any instance
                metrics["other_cpu"] = sum(float(m.get("other_cpu") or 0.0) for m in loads)
                metrics["steal_pct"] = max(float(m.get("steal_pct") or 0.0) for m in loads)
                metrics["busy"] = any(bool(m["busy"]) for m in loads)
            record(cfg, "ok", metrics)
