"""Parent side of a sweep: group run configs into worker processes and store every point at once.

One worker per process-level group (everything but the batch size). A worker that times out,
crashes or raises turns its unfinished points into failed records carrying the reason and the
tail of stderr; the sweep goes on with the next group.
"""

from __future__ import annotations

import collections
import importlib.metadata
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from wb_core import hardware
from wb_core.backends.base import BACKEND_FORMATS
from wb_core.proc.parent import run_child
from wb_core.config import InputOptions, MeasureSettings, RunConfig, SweepSpec
from wb_core.errors import ConfigError, WorkbenchError
from wb_core.models import detect_format, fingerprint, resolve_shape
from wb_core.variants.planner import PrecisionOptions, VariantPlanner
from wb_core.store import Store
from wb_core.variants.convert import inspect_inputs

# Seconds without a message before a worker is declared hung, on top of the measuring time.
LOAD_ALLOWANCE_S = 300.0


@dataclass
class SweepSummary:
    study: str
    db: str
    planned: int = 0
    skipped_done: int = 0
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    cancelled: bool = False
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # things a user should know, e.g. accuracy skipped

    def line(self) -> str:
        return (f"Study '{self.study}' in {self.db}: {self.ok} ok, {self.failed} failed, {self.skipped} skipped, "
                f"{self.skipped_done} already stored" + (" (cancelled)" if self.cancelled else "") + ".")


def library_versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in ("openvino", "tensorflow", "tensorflow-cpu", "keras", "nncf", "numpy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def infeasible_reason(cfg: RunConfig, fmt: str, hw: hardware.Hardware) -> str | None:
    """Why a config cannot run here (checked before any worker starts), or None."""
    if fmt not in BACKEND_FORMATS[cfg.backend]:
        return f"the {cfg.backend} backend cannot run a {fmt} model"
    ok, why = hw.supports(cfg.precision)
    if not ok:
        return f"{cfg.precision} skipped: {why}"
    if cfg.cores and not set(cfg.cores) <= set(hw.available_cpus):
        return f"cores {cfg.cores} are not available to this process"
    return None


def point_timeout(settings: MeasureSettings) -> float:
    return LOAD_ALLOWANCE_S + settings.warmup_s + settings.max_time_s * 2


def run_sweep(model: str | Path, spec: SweepSpec, db: str | Path, study: str,
              settings: MeasureSettings | None = None, inputs: InputOptions | None = None,
              on_point: Callable[[dict], None] | None = None, progress: bool = False,
              cancel: threading.Event | None = None, memory_limit_mb: int | None = None,
              configs: Iterable[RunConfig] | None = None, timeout_s: float | None = None,
              precision: PrecisionOptions | None = None, executor=None) -> SweepSummary:
    """Measure every config of `spec` (or the given `configs`) not yet stored in `study`.

    `timeout_s`: seconds a worker may stay silent before it is declared hung and killed
    (default: a load allowance plus twice the measuring time).
    `precision` carries the data, metric and quantization settings for INT8/BF16 variants and
    accuracy (see wb_core.variants.planner); by default a demo model uses its own data.
    `executor`: None runs the worker groups here, one after another; a fleet executor
    (`wb_core.fleet.DaskExecutor`) runs them on the hosts of a cluster, once per hardware type.
    """
    if executor is not None:
        from wb_core.fleet.sweep import run_fleet_sweep

        return run_fleet_sweep(executor, model, spec, db, study, settings=settings, inputs=inputs, on_point=on_point,
                               progress=progress, cancel=cancel, memory_limit_mb=memory_limit_mb, configs=configs,
                               timeout_s=timeout_s, precision=precision)
    settings = settings or MeasureSettings()
    inputs = inputs or InputOptions()
    model = Path(model)
    fmt = detect_format(model)
    fp = fingerprint(model)
    hw = hardware.detect()
    configs = list(configs) if configs is not None else spec.expand()
    # Preflight: a model that cannot be read, or inputs that cannot be shaped, stop the sweep
    # before anything is written.
    specs = inspect_inputs(model, timeout_s)
    for b in sorted({c.batch_size for c in configs}):
        for s in specs:
            resolve_shape(s, b, inputs)
    planner = VariantPlanner(model, fmt, fp, precision, hw, specs)
    planner.check_data(configs)  # data that cannot feed the model stops the sweep here too
    with Store(db) as store:
        store.ensure_study(study, str(model.resolve()), fmt, fp, hw.to_dict(), hw.fingerprint,
                           library_versions(), {"sweep": spec.to_dict(), "settings": settings.__dict__,
                                                "inputs": inputs.to_dict()}, [s.to_dict() for s in specs])
        done = store.done_keys(study)
        summary = SweepSummary(study=study, db=str(db), planned=len(configs))
        todo = [c for c in configs if c.key not in done]
        summary.skipped_done = len(configs) - len(todo)
        bar = _progress(len(todo), progress)

        def record(cfg: RunConfig, status: str, metrics: dict | None = None, error: str | None = None):
            store.add_run(study, cfg.key, cfg.to_dict(), status, metrics, error)
            setattr(summary, status, getattr(summary, status) + 1)
            if error and status == "failed":
                summary.errors.append(f"{cfg.label()}: {error}")
            if bar is not None:
                bar.update(1)
            if on_point:
                on_point({"key": cfg.key, "config": cfg, "status": status, "metrics": metrics or {}, "error": error})

        groups: dict[tuple, list[RunConfig]] = collections.OrderedDict()
        for c in todo:
            groups.setdefault(c.group, []).append(c)
        for members in groups.values():
            if cancel is not None and cancel.is_set():
                summary.cancelled = True
                break
            head = members[0]
            why = infeasible_reason(head, fmt, hw) or planner.infeasible(head)
            if why:
                for c in members:
                    record(c, "skipped", error=why)
                continue
            try:
                path = planner.path_for(head)
                extra = planner.columns_for(head)  # variant and accuracy, the same for every point
            except ConfigError:
                raise  # bad data or settings: no point of the sweep would mean anything
            except WorkbenchError as e:
                for c in members:
                    record(c, "failed", error=str(e))
                continue

            def record_with(cfg, status, metrics=None, error=None, _extra=extra):
                record(cfg, status, {**_extra, **(metrics or {})} if status != "skipped" else metrics, error)

            if head.instances > 1:
                _run_instances(path, members, settings, inputs, record_with, cancel, memory_limit_mb, summary,
                               timeout_s)
            else:
                _run_group(path, members, settings, inputs, record_with, cancel, memory_limit_mb, summary, timeout_s)
        summary.notes.extend(planner.notes)
        if bar is not None:
            bar.close()
    return summary


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
    task = _task("measure", path, members, settings, inputs)

    def on_message(msg: dict):
        if msg.get("type") == "point" and msg.get("key") in pending:
            cfg = pending.pop(msg["key"])
            record(cfg, msg["status"], msg.get("metrics"), msg.get("error"))

    outcome = run_child(task, timeout=timeout_s or point_timeout(settings), on_message=on_message, cancel=cancel,
                        memory_limit_mb=memory_limit_mb)
    if outcome.cancelled:
        summary.cancelled = True
        return  # unfinished points stay unstored: a resume measures them
    if pending:
        reason = outcome.reason()
        tail = outcome.stderr_tail.strip().splitlines()
        detail = f" Last output: {tail[-1][:300]}" if tail and not outcome.timed_out else ""
        for cfg in pending.values():
            record(cfg, "failed", error=f"{reason[0].upper()}{reason[1:]}.{detail}",
                   metrics={"stderr_tail": outcome.stderr_tail[-2000:]})


def _task(kind: str, path, members: list[RunConfig], settings, inputs) -> dict:
    group = members[0].to_dict()
    group.pop("batch_size")
    return {"task": kind, "model_path": str(path), "group": group,
            "points": [{"key": c.key, "batch_size": c.batch_size} for c in members],
            "settings": settings.__dict__, "inputs": inputs.to_dict()}


def _run_instances(path, members, settings, inputs, record, cancel, memory_limit_mb, summary, timeout_s=None):
    """N workers, each pinned to its own cores, measured over one common window per point.

    Each worker loads, compiles and warms up, says `ready`, and waits; when all are ready the
    parent sends one start/end time on CLOCK_MONOTONIC (shared by all processes on Linux).
    Aggregate throughput = the instances' completed samples in the window / window length.
    """
    from wb_core.proc.parent import ChildProc, ChildOutcome
    from wb_core.measure import Latency, latency_histogram

    head = members[0]
    base = _task("instance", path, members, settings, inputs)
    if memory_limit_mb:
        base["memory_limit_mb"] = memory_limit_mb
    placement = head.instance_cores()
    children = [ChildProc({**base, "instance_cores": list(c) if c else None}, keep_channel_open=True) for c in placement]
    timeout = timeout_s or point_timeout(settings)
    window_s = settings.max_time_s
    try:
        for cfg in members:
            ready: set[int] = set()
            results: dict[int, dict] = {}
            sent = False
            failure = None
            while len(results) < len(children) and failure is None:
                for i, ch in enumerate(children):
                    for msg in ch.messages():
                        if msg.get("key") != cfg.key:
                            continue
                        if msg["type"] == "ready":
                            ready.add(i)
                        elif msg["type"] == "point":
                            if msg["status"] != "ok":
                                failure = f"instance {i}: {msg.get('error')}"
                            results[i] = msg.get("metrics") or {}
                    if ch.finished and i not in results and failure is None:
                        out = ChildOutcome(returncode=ch.wait(), timed_out=False, stderr_tail=ch.stderr_tail())
                        failure = f"instance {i}: {out.reason()}"
                    elif ch.idle_for() > timeout:
                        failure = f"instance {i}: the worker stopped responding and was killed after its timeout"
                if cancel is not None and cancel.is_set():
                    summary.cancelled = True
                    return
                if not sent and len(ready) == len(children):
                    start = time.perf_counter_ns() + 200_000_000
                    for ch in children:
                        ch.send({"start_ns": start, "end_ns": start + int(window_s * 1e9)})
                    sent = True
                time.sleep(0.02)
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
            record(cfg, "ok", metrics)
    finally:
        for ch in children:
            ch.kill()
            ch.wait()


def find_max_rate(model: str | Path, config: RunConfig, p99_ms: float, db: str | Path, study: str,
                  settings: MeasureSettings | None = None, inputs: InputOptions | None = None,
                  steps: int = 7) -> dict:
    """Highest Poisson arrival rate (requests/s) whose measured p99 stays under `p99_ms`.

    A bisection between 0 and the closed-loop capacity, inside one worker; every probed rate is
    stored as a point of the study. Returns {"best": {...} or None, "closed_loop_rate", ...}.
    """
    if not p99_ms or p99_ms <= 0:
        from wb_core.errors import ConfigError

        raise ConfigError(f"The p99 target must be a positive number of milliseconds; got {p99_ms!r}.")
    settings = settings or MeasureSettings(max_time_s=3.0)
    inputs = inputs or InputOptions()
    model = Path(model)
    fmt = detect_format(model)
    fp = fingerprint(model)
    hw = hardware.detect()
    specs = inspect_inputs(model)
    result: dict = {}
    with Store(db) as store:
        store.ensure_study(study, str(model.resolve()), fmt, fp, hw.to_dict(), hw.fingerprint, library_versions(),
                           {"find_max_rate": config.to_dict(), "p99_ms": p99_ms, "settings": settings.__dict__},
                           [s.to_dict() for s in specs])
        planner = VariantPlanner(model, fmt, fp, None, hw, specs)  # int8 needs its quantized IR here too
        why = infeasible_reason(config, fmt, hw) or planner.infeasible(config)
        if why:
            from wb_core.errors import ConfigError

            raise ConfigError(f"Cannot search a rate for this configuration: {why}.")
        path = planner.path_for(config)
        task = _task("max_rate", path, [config], settings, inputs)
        task.update({"p99_ms": p99_ms, "steps": steps})

        def on_message(msg):
            if msg.get("type") == "point" and msg.get("config"):
                store.add_run(study, msg["key"], msg["config"], msg["status"], msg.get("metrics"), msg.get("error"))
            elif msg.get("type") == "max_rate":
                result.update(msg)

        outcome = run_child(task, timeout=point_timeout(settings) * (steps + 2), on_message=on_message)
        if not result:
            raise WorkbenchError(f"The rate search failed: {outcome.reason()}.")
    return result


def _progress(total: int, enabled: bool):
    if not enabled or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="point", desc="profiling", dynamic_ncols=True)
