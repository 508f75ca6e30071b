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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from wb_core import hardware
from wb_core.backends.base import BACKEND_FORMATS
from wb_core.child import run_child
from wb_core.config import InputOptions, MeasureSettings, RunConfig, SweepSpec
from wb_core.errors import ConfigError, WorkbenchError
from wb_core.models import detect_format, fingerprint, resolve_shape
from wb_core.precision import PrecisionOptions, VariantPlanner
from wb_core.store import Store
from wb_core.variants import inspect_inputs

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
              configs: Iterable[RunConfig] | None = None,
              precision: PrecisionOptions | None = None) -> SweepSummary:
    """Measure every config of `spec` (or the given `configs`) not yet stored in `study`.

    `precision` carries the data, metric and quantization settings for INT8/BF16 variants and
    accuracy (see wb_core.precision); by default a demo model uses its own data.
    """
    settings = settings or MeasureSettings()
    inputs = inputs or InputOptions()
    model = Path(model)
    fmt = detect_format(model)
    fp = fingerprint(model)
    hw = hardware.detect()
    configs = list(configs) if configs is not None else spec.expand()
    # Preflight: a model that cannot be read, or inputs that cannot be shaped, stop the sweep
    # before anything is written.
    specs = inspect_inputs(model)
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

            _run_group(path, members, settings, inputs, record_with, cancel, memory_limit_mb, summary)
        summary.notes.extend(planner.notes)
        if bar is not None:
            bar.close()
    return summary


def _run_group(path, members, settings, inputs, record, cancel, memory_limit_mb, summary):
    by_key = {c.key: c for c in members}
    pending = dict(by_key)
    group = members[0].to_dict()
    group.pop("batch_size")
    task = {"task": "measure", "model_path": str(path), "group": group,
            "points": [{"key": c.key, "batch_size": c.batch_size} for c in members],
            "settings": settings.__dict__, "inputs": inputs.to_dict()}

    def on_message(msg: dict):
        if msg.get("type") == "point" and msg.get("key") in pending:
            cfg = pending.pop(msg["key"])
            record(cfg, msg["status"], msg.get("metrics"), msg.get("error"))

    outcome = run_child(task, timeout=point_timeout(settings), on_message=on_message, cancel=cancel,
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


def _progress(total: int, enabled: bool):
    if not enabled or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="point", desc="profiling", dynamic_ncols=True)
