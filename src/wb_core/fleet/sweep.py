"""The coordinator of a fleet study: plan per hardware type, keep every host busy, store each point.

A fleet study measures the sweep once per hardware type present (hosts of one type share its
work), so CPU types can be compared side by side. A point's key is its RunConfig key combined
with the hardware type, so a rerun skips exactly what each type already has.

Each host runs one group at a time (measurements need the host to themselves); hosts run in
parallel. Only this process writes the store. When a host drops out, its unfinished group goes
back to the queue if a live host of the same hardware type remains, else its points are marked
failed with the reason; the queued groups of a type with no live host left fail the same way.

A host that stops answering (no point for `hang_s` while it runs a group) is treated as dropped
out; a host that sends a point that is not a measurement (a throughput that is not a positive
number, a key it was not given) gets no more work and its group goes to another host of its type.
A lost connection to the cluster puts the groups in flight back in the queue once it is back.

Every point is claimed in the store's leases before it is queued, so two coordinators sharing a
store (a study started twice, or restarted while the first still runs) never measure one point;
a coordinator that was killed leaves leases that its restart takes over (see Store.claim).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from wb_core.config import InputOptions, MeasureSettings, RunConfig, SweepSpec
from wb_core.errors import WorkbenchError
from wb_core.fleet.hosts import Host, by_type
from wb_core.sweep.context import SweepContext, SweepSummary
from wb_core.variants.description import ModelDescription

# A group whose host dies this many times is not tried again (it may be what kills them).
MAX_ATTEMPTS = 3
POLL_S = 0.1
LIVENESS_EVERY_S = 0.5
# A host running a group that sends no point for 1.5 worker timeouts plus this is hung (points take
# at most the worker timeout each; the margin covers starting the group's worker).
HANG_MARGIN_S = 10.0
# A finished group's result is gathered from its host; a host that died after finishing leaves Dask
# waiting for a worker that never comes back (its job was pinned there), so gathering gives up after
# this and the host's liveness decides what happens to the group.
GATHER_TIMEOUT_S = 10.0

log = logging.getLogger("wb_core.fleet")


def fleet_key(cfg: RunConfig, hardware_fingerprint: str) -> str:
    """The study key of a configuration measured on one hardware type."""
    return cfg.key_on(hardware_fingerprint)


@dataclass
class Job:
    id: str
    fingerprint: str
    path: str
    members: list[RunConfig]
    attempt: int = 1
    host: Host | None = None
    abandoned: bool = False  # its host sent garbage: nothing more from this job is taken


@dataclass
class _Plan:
    queues: dict[str, collections.deque] = field(default_factory=dict)
    pending: dict[tuple[str, str], RunConfig] = field(default_factory=dict)  # (type, cfg.key) -> cfg


def run_fleet_sweep(executor, model: str | Path | ModelDescription, spec: SweepSpec, db: str | Path, study: str,
                    settings: MeasureSettings | None = None, inputs: InputOptions | None = None,
                    on_point: Callable[[dict], None] | None = None, progress: bool = False,
                    cancel: threading.Event | None = None, memory_limit_mb: int | None = None,
                    configs: Iterable[RunConfig] | None = None, timeout_s: float | None = None,
                    precision=None) -> SweepSummary:
    """Measure every config of `spec` on every hardware type among the executor's hosts.

    Precision variants (INT8 IRs) are built and their accuracy measured once, here on the
    coordinator; the hosts load them from the same (shared or shipped) paths.
    """
    configs = list(configs) if configs is not None else spec.expand()
    # The hosts load the model by its path: an absolute one.
    model = (dataclasses.replace(model, path=model.path.resolve()) if isinstance(model, ModelDescription)
             else Path(model).resolve())
    ctx = SweepContext(model, db, study, configs, settings=settings, inputs=inputs,
                       precision=precision, on_point=on_point, progress=progress, cancel=cancel,
                       memory_limit_mb=memory_limit_mb, timeout_s=timeout_s)
    hosts = executor.hosts()
    for note in getattr(executor, "notes", []):
        ctx.note(note)
    if not hosts:
        raise WorkbenchError("The cluster has no hosts to run on; start a worker on each host first "
                             "(see docs/fleet.md).")
    first = hosts[0]
    record = ctx.spec_record(sweep=spec.to_dict(), fleet={"hosts": [h.name for h in hosts],
                                                          "hardware_types": list(by_type(hosts))})
    with ctx.open(record, hardware=first.hardware, hardware_fingerprint=first.fingerprint):
        for h in hosts:
            ctx.store.add_host(study, h.name, h.fingerprint, h.hardware)
        run = _FleetRun(executor, ctx, hosts)
        ctx.summary.planned = len(configs) * len(run.types)
        run.plan(configs)
        ctx.start_progress(len(run.plan_.pending))
        run.loop()
    return ctx.summary


class _FleetRun:
    """The state of one fleet sweep: queues per hardware type, jobs in flight, points pending."""

    def __init__(self, executor, ctx: SweepContext, hosts: list[Host]):
        self.executor, self.ctx = executor, ctx
        self.settings, self.inputs = ctx.settings, ctx.inputs
        self.memory_limit_mb, self.timeout_s = ctx.memory_limit_mb, ctx.timeout_s
        self.extras: dict[tuple, dict] = {}  # (backend, precision) -> variant and accuracy columns
        self.types = by_type(hosts)
        self.alive: dict[str, Host] = {h.id: h for h in hosts}
        self.busy: set[str] = set()
        self.last_heard: dict[str, float] = {}  # host id -> when it last sent a point (or got a group)
        self.hang_s = ctx.worker_timeout() * 1.5 + HANG_MARGIN_S
        self.running: dict[object, Job] = {}
        self.jobs: dict[str, Job] = {}
        self.plan_ = _Plan(queues={fp: collections.deque() for fp in self.types})
        self.summary = ctx.summary
        self._ids = (f"{time.time_ns():x}-{i}" for i in range(1 << 62))

    # ---- storing ----
    def record(self, fp: str, cfg: RunConfig, status: str, metrics: dict | None = None, error: str | None = None,
               host: str | None = None) -> None:
        extra = self.extras.get((cfg.backend, cfg.precision), {}) if status != "skipped" else {}
        metrics = {**extra, **(metrics or {}), "config_key": cfg.key}
        self.ctx.record(cfg, status, metrics, error, key=fleet_key(cfg, fp), host=host, hardware_fingerprint=fp,
                        where=host or fp)

    def fail_pending(self, job: Job, members: list[RunConfig], error: str) -> None:
        for cfg in members:
            if self.plan_.pending.pop((job.fingerprint, cfg.key), None) is not None:
                self.record(job.fingerprint, cfg, "failed", error=error, host=job.host.name if job.host else None)

    def remaining(self, job: Job) -> list[RunConfig]:
        return [c for c in job.members if (job.fingerprint, c.key) in self.plan_.pending]

    # ---- planning ----
    def plan(self, configs: list[RunConfig]) -> None:
        done = self.ctx.done_keys()
        groups: dict[tuple, list[RunConfig]] = collections.OrderedDict()
        for c in configs:
            groups.setdefault(c.group, []).append(c)
        paths: dict[tuple, str | WorkbenchError] = {}
        for fp, hosts in self.types.items():
            hw = hosts[0].to_hardware()
            for members in groups.values():
                todo = [c for c in members if fleet_key(c, fp) not in done]
                self.summary.skipped_done += len(members) - len(todo)
                if not todo:
                    continue
                why = self.ctx.infeasible(todo[0], hw)
                if why:
                    for c in todo:
                        self.record(fp, c, "skipped", error=why)
                    continue
                variant = (todo[0].backend, todo[0].precision)
                if variant not in paths:
                    try:
                        # Variant and accuracy columns, the same on every host.
                        path, self.extras[variant] = self.ctx.variant(todo[0])
                        paths[variant] = str(path)
                    except WorkbenchError as e:
                        paths[variant] = e
                if isinstance(paths[variant], WorkbenchError):
                    for c in todo:
                        self.record(fp, c, "failed", error=str(paths[variant]))
                    continue
                todo = self.ctx.claim(todo, key=lambda c, fp=fp: fleet_key(c, fp))  # others' points stay theirs
                if not todo:
                    continue
                for c in todo:
                    self.plan_.pending[(fp, c.key)] = c
                self.plan_.queues[fp].append(self.new_job(fp, paths[variant], todo))

    def new_job(self, fp: str, path: str, members: list[RunConfig], attempt: int = 1) -> Job:
        job = Job(id=next(self._ids), fingerprint=fp, path=path, members=members, attempt=attempt)
        self.jobs[job.id] = job
        return job

    # ---- the loop ----
    def loop(self) -> None:
        last_check = 0.0
        while self.running or any(self.plan_.queues.values()):
            if self.ctx.cancelled:
                for fut in self.running:
                    self.executor.cancel(fut)
                self.summary.cancelled = True  # unfinished points stay unstored: a rerun measures them
                break
            self.dispatch()
            self.drain_points(POLL_S)
            self.collect_finished()
            if time.monotonic() - last_check > LIVENESS_EVERY_S:
                self.check_hosts()
                last_check = time.monotonic()
        self.drain_points(0)

    def dispatch(self) -> None:
        for host in list(self.alive.values()):
            q = self.plan_.queues[host.fingerprint]
            if host.id in self.busy or not q:
                continue
            job = q.popleft()
            job.host = host
            task = {"id": job.id, "path": job.path, "members": [c.to_dict() for c in job.members],
                    "settings": self.settings.__dict__, "inputs": self.inputs.to_dict(),
                    "memory_limit_mb": self.memory_limit_mb, "timeout_s": self.timeout_s}
            self.running[self.executor.submit(host, task)] = job
            self.busy.add(host.id)
            self.last_heard[host.id] = time.monotonic()

    def drain_points(self, wait_s: float) -> None:
        points = self.executor.points()
        try:
            msg = points.get(timeout=wait_s) if wait_s else points.get_nowait()
            while True:
                self.take_point(msg)
                msg = points.get_nowait()
        except queue.Empty:
            pass

    def take_point(self, msg) -> None:
        job = self.jobs.get(msg.get("job")) if isinstance(msg, dict) else None
        if job is None or job.abandoned:
            return
        self.last_heard[job.host.id] = time.monotonic()
        why = malformed(msg, {c.key for c in job.members})
        if why:
            self.host_sent_garbage(job, why)
            return
        cfg = self.plan_.pending.pop((job.fingerprint, msg.get("key")), None)
        if cfg is None:
            return  # already stored (streamed, then repeated in the job's result)
        self.record(job.fingerprint, cfg, msg["status"], msg.get("metrics"), msg.get("error"), host=job.host.name)
        sent = msg.get("sent_at")
        if isinstance(sent, (int, float)):
            log.debug("stored %s from %s %.6f s after it was sent", msg["key"], job.host.name, time.time() - sent)

    def host_sent_garbage(self, job: Job, why: str) -> None:
        """A host answered with something that is not a measurement: it gets no more work."""
        host = job.host
        log.warning("host %s sent a malformed point (%s); it gets no more work", host.name, why)
        self.summary.errors.append(f"Host {host.name} sent a point that is not a measurement ({why}); it was given "
                                   f"no more work and its group went to another host of its type.")
        for other in [j for j in self.jobs.values() if j.host is not None and j.host.id == host.id]:
            other.abandoned = True
        self.host_lost(host, quiet=True)

    def collect_finished(self) -> None:
        for fut, job in list(self.running.items()):
            if not fut.done() or fut not in self.running:  # taken out meanwhile: its host was set aside
                continue
            del self.running[fut]
            self.busy.discard(job.host.id)
            if job.abandoned:
                continue
            if self.interrupted(fut):
                # The connection to the cluster dropped: the group goes back to the queue, on its type.
                rest = self.remaining(job)
                log.warning("the connection to the cluster dropped; the group on host %s goes back to the queue",
                            job.host.name)
                if rest:
                    self.plan_.queues[job.fingerprint].appendleft(
                        self.new_job(job.fingerprint, job.path, rest, attempt=job.attempt))
                continue
            try:
                result = fut.result(timeout=GATHER_TIMEOUT_S)
            except BaseException as e:
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                if job.host.id not in self.executor.live_hosts():
                    self.host_lost(job.host, extra_job=job)
                elif isinstance(e, TimeoutError):  # a live host slow to hand its result over: look again
                    self.running[fut] = job
                    self.busy.add(job.host.id)
                else:
                    self.fail_pending(job, job.members, f"The group failed on host {job.host.name}: "
                                      f"{type(e).__name__}: {e}".rstrip(": "))
                continue
            self.drain_points(0)
            for msg in (result.get("points", []) if isinstance(result, dict) else []):
                self.take_point(msg)
            if job.abandoned:
                continue
            self.fail_pending(job, job.members, f"Host {job.host.name} finished the group without reporting "
                                                f"this point.")

    def interrupted(self, fut) -> bool:
        """Whether the engine gave up `fut` because its connection to the cluster dropped."""
        check = getattr(self.executor, "interrupted", None)
        return bool(check and check(fut))

    def check_hosts(self) -> None:
        live = self.executor.live_hosts()
        for host_id in [h for h in self.alive if h not in live]:
            self.host_lost(self.alive[host_id])
        now = time.monotonic()
        for host_id in sorted({job.host.id for job in self.running.values()}):
            silent = now - self.last_heard.get(host_id, now)
            if host_id in self.alive and silent > self.hang_s:
                host = self.alive[host_id]
                log.warning("host %s stopped answering (%.0f s without a point)", host.name, silent)
                self.summary.errors.append(f"Host {host.name} stopped answering ({silent:.0f} s without a point "
                                           f"while running a group); it was given no more work.")
                self.host_lost(host, quiet=True)

    def host_lost(self, host: Host, extra_job: Job | None = None, quiet: bool = False) -> None:
        """A host left the cluster: retry its group on a host of the same type, or fail it."""
        if host.id in self.alive:
            del self.alive[host.id]
            if not quiet:
                log.warning("host %s dropped out", host.name)
                self.summary.errors.append(f"Host {host.name} dropped out of the cluster.")
        self.busy.discard(host.id)
        self.drain_points(0)  # points it sent before dying are kept
        lost = [extra_job] if extra_job else []
        for fut, job in list(self.running.items()):
            if job.host.id == host.id:
                del self.running[fut]
                self.executor.cancel(fut)
                lost.append(job)
        same_type = [h for h in self.alive.values() if h.fingerprint == host.fingerprint]
        for job in lost:
            rest = self.remaining(job)
            if not rest:
                continue
            if same_type and job.attempt < MAX_ATTEMPTS:
                retry = self.new_job(job.fingerprint, job.path, rest, attempt=job.attempt + 1)
                self.plan_.queues[job.fingerprint].appendleft(retry)
            elif same_type:
                self.fail_pending(job, rest, f"Host {host.name} dropped out mid-group; the group was tried "
                                             f"{job.attempt} times on hosts that all dropped out, so it is not "
                                             f"tried again.")
            else:
                self.fail_pending(job, rest, f"Host {host.name} dropped out mid-group, and no other host with the "
                                             f"same hardware ({host.fingerprint}) is left to retry it.")
        if not same_type:
            q = self.plan_.queues[host.fingerprint]
            while q:
                job = q.popleft()
                self.fail_pending(job, job.members, f"No host with hardware {host.fingerprint} is left in the "
                                                    f"cluster (host {host.name} dropped out).")


def malformed(msg: dict, keys: set[str]) -> str | None:
    """Why a point message from a host is not a measurement of its group, or None when it is."""
    if msg.get("key") not in keys:
        return f"key {str(msg.get('key'))[:40]!r} is not one of its group's"
    status, metrics = msg.get("status"), msg.get("metrics")
    if status not in ("ok", "failed", "skipped"):
        return f"status {str(status)[:40]!r}"
    if not isinstance(metrics, dict):
        return f"metrics of type {type(metrics).__name__}"
    if status != "ok":
        return None
    for name, low in (("throughput", 0.0), ("latency_ms_p99", 0.0)):
        value = metrics.get(name)
        if name == "latency_ms_p99" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low \
                or (name == "throughput" and value == 0):
            return f"{name} {str(value)[:40]!r}"
    return None
