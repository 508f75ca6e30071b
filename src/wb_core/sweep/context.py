"""What every way of running a study shares: preflight once, the study record, store writes,
progress, cancellation and the summary.

A local grid, a multi-instance group, the max-rate search, the smart search and the fleet
coordinator all open one `SweepContext` per study and call `record` for each point: the point is
stored the moment it arrives, counted in the summary, shown on the progress bar, passed to the
caller's `on_point`, and kept as an observation for a search strategy to read back without
reloading the study.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import platform
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from wb_core import hardware
from wb_core.backends.registry import backend_formats, runtime_distributions
from wb_core.config import InputOptions, MeasureSettings, RunConfig
from wb_core.models import detect_format, fingerprint, resolve_int_ranges, resolve_shape
from wb_core.store import Store
from wb_core.variants.convert import inspect_details, inspect_inputs
from wb_core.variants.planner import PrecisionOptions, VariantPlanner

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
    """Versions of Python and of every runtime a registered backend uses (stored with each study)."""
    out = {"python": platform.python_version()}
    for dist in (*runtime_distributions(), "nncf", "numpy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def infeasible_reason(cfg: RunConfig, fmt: str, hw: hardware.Hardware) -> str | None:
    """Why a config cannot run here (checked before any worker starts), or None."""
    if fmt not in backend_formats(cfg.backend):
        return f"the {cfg.backend} backend cannot run a {fmt} model"
    ok, why = hw.supports(cfg.precision)
    if not ok:
        return f"{cfg.precision} skipped: {why}"
    if cfg.cores and not set(cfg.cores) <= set(hw.available_cpus):
        return f"cores {cfg.cores} are not available to this process"
    return None


def point_timeout(settings: MeasureSettings) -> float:
    return LOAD_ALLOWANCE_S + settings.warmup_s + settings.max_time_s * 2


class SweepContext:
    """One study being measured: preflight done once, the store open, every point recorded.

    Preflight (format, fingerprint, inputs, shapes for every batch size, the variant planner and
    its data check) runs in the constructor, before anything is written: a model that cannot be
    read or data that cannot feed it stop the study with nothing stored. `open()` then creates or
    checks the study record.
    """

    def __init__(self, model: str | Path, db: str | Path, study: str, configs: Iterable[RunConfig], *,
                 settings: MeasureSettings | None = None, inputs: InputOptions | None = None,
                 precision: PrecisionOptions | None = None, on_point: Callable[[dict], None] | None = None,
                 progress: bool = False, progress_label: str = "profiling", cancel: threading.Event | None = None,
                 memory_limit_mb: int | None = None, timeout_s: float | None = None,
                 summary: SweepSummary | None = None):
        self.model = Path(model)
        self.db, self.study = db, study
        self.settings = settings or MeasureSettings()
        self.inputs = inputs or InputOptions()
        self.on_point, self.cancel = on_point, cancel
        self.memory_limit_mb, self.timeout_s = memory_limit_mb, timeout_s
        self._progress, self._progress_label = progress, progress_label
        self.summary = summary or SweepSummary(study=study, db=str(db))
        self.observations: dict[str, dict] = {}  # key -> the point as recorded, for strategies
        self.store: Store | None = None
        self.bar = None
        configs = list(configs)
        self.format = detect_format(self.model)
        self.fingerprint = fingerprint(self.model)
        self.hardware = hardware.detect()
        self.details = inspect_details(self.model, timeout_s)
        self.input_specs = inspect_inputs(self.model, timeout_s)
        self.inputs, input_notes = resolve_int_ranges(self.input_specs, self.inputs, self.details.get("embedding_rows"))
        for note in input_notes:
            self.note(note)
        for b in sorted({c.batch_size for c in configs}):
            for seq in sorted({c.seq_len for c in configs}, key=lambda v: v or 0):
                opts = self.inputs if seq is None else dataclasses.replace(self.inputs, dynamic_size=seq)
                for s in self.input_specs:
                    resolve_shape(s, b, opts)
        self.planner = VariantPlanner(self.model, self.format, self.fingerprint, precision, self.hardware,
                                      self.input_specs, details=self.details)
        self.planner.check_data(configs)  # data that cannot feed the model stops the study here too

    def note(self, text: str) -> None:
        """Something the user should know about this study; each note is kept once."""
        if text not in self.summary.notes:
            self.summary.notes.append(text)

    # ---- the study record ----
    def open(self, spec_record: dict, hardware: dict | None = None, hardware_fingerprint: str | None = None,
             model_path: str | None = None) -> SweepContext:
        """Open the store and create (or check) the study; `spec_record` is what this run was asked."""
        self.store = Store(self.db)
        try:
            self.store.ensure_study(self.study, model_path or str(self.model.resolve()), self.format,
                                    self.fingerprint, hardware or self.hardware.to_dict(),
                                    hardware_fingerprint or self.hardware.fingerprint, library_versions(),
                                    spec_record, [s.to_dict() for s in self.input_specs])
        except BaseException:
            self.store.close()
            raise
        return self

    def spec_record(self, **what) -> dict:
        """The study's record of a run: what was asked, with the settings and input options."""
        return {**what, "settings": self.settings.__dict__, "inputs": self.inputs.to_dict()}

    def __enter__(self) -> SweepContext:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for note in self.planner.notes:
            if note not in self.summary.notes:
                self.summary.notes.append(note)
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.store is not None:
            self.store.close()
            self.store = None

    # ---- planning ----
    def done_keys(self) -> set[str]:
        return self.store.done_keys(self.study)

    def todo(self, configs: list[RunConfig]) -> list[RunConfig]:
        """The configs not stored yet (counted as planned; the stored ones as already done)."""
        done = self.done_keys()
        todo = [c for c in configs if c.key not in done]
        self.summary.planned += len(configs)
        self.summary.skipped_done += len(configs) - len(todo)
        return todo

    def infeasible(self, cfg: RunConfig, hw: hardware.Hardware | None = None) -> str | None:
        """Why `cfg` cannot run (on `hw`, this machine by default), or None."""
        return infeasible_reason(cfg, self.format, hw or self.hardware) or self.planner.infeasible(cfg)

    def variant(self, cfg: RunConfig) -> tuple[Path, dict]:
        """The model file `cfg` runs and the variant/accuracy columns every point of it carries."""
        return self.planner.path_for(cfg), self.planner.columns_for(cfg)

    def worker_timeout(self) -> float:
        return self.timeout_s or point_timeout(self.settings)

    # ---- progress and cancellation ----
    def start_progress(self, total: int) -> None:
        if self._progress and total > 0 and self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="point", desc=self._progress_label, dynamic_ncols=True)

    @property
    def cancelled(self) -> bool:
        if self.cancel is not None and self.cancel.is_set():
            self.summary.cancelled = True
        return self.summary.cancelled

    # ---- storing ----
    def record(self, cfg: RunConfig, status: str, metrics: dict | None = None, error: str | None = None, *,
               key: str | None = None, host: str | None = None, hardware_fingerprint: str | None = None,
               where: str | None = None) -> dict:
        """Store one point now, count it, show it, and keep it as an observation."""
        key = key or cfg.key
        metrics = metrics or {}
        self.store.add_run(self.study, key, cfg.to_dict(), status, metrics, error, host=host,
                           hardware_fingerprint=hardware_fingerprint)
        setattr(self.summary, status, getattr(self.summary, status) + 1)
        if error and status == "failed":
            self.summary.errors.append(f"{cfg.label()}{f' on {where}' if where else ''}: {error}")
        if self.bar is not None:
            self.bar.update(1)
        point = {"key": key, "config": cfg, "status": status, "metrics": metrics, "error": error}
        if host or hardware_fingerprint:
            point.update(host=host, hardware_fingerprint=hardware_fingerprint)
        self.observations[key] = point
        if self.on_point:
            self.on_point(point)
        return point

    def recorder(self, extra: dict) -> Callable:
        """`record` for the points of one variant: its variant/accuracy columns added to each."""
        def record(cfg, status, metrics=None, error=None):
            self.record(cfg, status, {**extra, **(metrics or {})} if status != "skipped" else metrics, error)

        return record

    def stored(self, keys: Iterable[str]) -> dict[str, dict]:
        """Points of this study by key: recorded in this run, or read from the store for the others."""
        keys = list(keys)
        out = {k: self.observations[k] for k in keys if k in self.observations}
        missing = [k for k in keys if k not in out]
        if missing:
            out.update(self.store.points(self.study, missing))
        return out
