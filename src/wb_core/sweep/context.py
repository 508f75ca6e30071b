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
import os
import platform
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from wb_core import hardware
from wb_core.backends.registry import backend_formats, default_backend, runtime_distributions
from wb_core.config import InputOptions, MeasureSettings, RunConfig, check_timeout
from wb_core.errors import ConfigError, Sentence, WorkbenchError, counted, printable, setting, were
from wb_core.measure import BUSY_OTHER_CPU, BUSY_STEAL_PCT
from wb_core.models import detect_format, fingerprint, resolve_int_ranges
from wb_core.stats import summarize
from wb_core.store import Store
from wb_core.variants.description import ModelDescription, describe_model
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
    held_elsewhere: int = 0  # points another live sweep was measuring: left to it
    busy: list[str] = field(default_factory=list)  # labels of points measured while others used our cores
    ci: object = None  # what an interval target gave (sweep.local.CiOutcome), when one was set
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # things a user should know, e.g. accuracy skipped
    skip_reasons: list[str] = field(default_factory=list)  # why points were skipped, each reason once

    def line(self) -> str:
        # A study whose points were all skipped says why on its one line, not only in the stored rows.
        shown = self.skip_reasons[:3] + ([f"{len(self.skip_reasons) - 3} more reasons"] if len(self.skip_reasons) > 3
                                         else [])
        why = f" ({'; '.join(printable(r) for r in shown)})" if self.skipped and shown else ""
        return (f"Study '{printable(self.study)}' in {printable(self.db)}: "
                f"{self.ok} ok, {self.failed} failed, {self.skipped} skipped{why}, "
                f"{self.skipped_done} already stored"
                + (f", {self.held_elsewhere} left to another sweep measuring them" if self.held_elsewhere else "")
                + (" (cancelled)" if self.cancelled else "") + ".")


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
        from wb_core.models import format_title

        return f"the {cfg.backend} backend cannot run a model in the {format_title(fmt)} format"
    ok, why = hw.supports(cfg.precision)
    if not ok:
        return f"{cfg.precision} skipped: {why}"
    if cfg.cores and not set(cfg.cores) <= set(hw.available_cpus):
        return f"cores {cfg.cores} are not available to this process"
    return None


# Input element types the backends can generate and feed, with the integer range each one holds.
FEEDABLE_DTYPES = {"float32": None, "float16": None, "bfloat16": None, "float64": None, "bool": (0, 2),
                   "int8": (-(2**7), 2**7), "uint8": (0, 2**8), "int16": (-(2**15), 2**15), "uint16": (0, 2**16),
                   "int32": (-(2**31), 2**31), "uint32": (0, 2**32), "int64": (-(2**63), 2**63 - 1),
                   "uint64": (0, 2**63 - 1)}
MAX_POOL_BYTES = 2 << 30  # the random samples one worker draws its batches from
MIN_REQUESTS = 10  # an open-loop point must expect at least this many requests in its measuring time


def check_inputs(specs, inputs: InputOptions, settings: MeasureSettings, configs: list[RunConfig]) -> None:
    """Refuse, before any worker starts, inputs the backends cannot feed and options that name no input.

    Checks: every input has a rank and a type the workbench can generate; names given in
    --shape / --int-range exist (the real names are listed); integer ranges fit the input's type;
    every batch size resolves to a shape; the sample pool fits in memory; an open-loop rate sends
    enough requests within the measuring time.
    """
    from wb_core.models import resolve_shape

    names = [s.name for s in specs]
    known = set(names) | {n.split(":")[0] for n in names}
    for what, given in ((setting("shapes", "A shape"), inputs.shapes),
                        (setting("int_ranges", "An integer range"), inputs.int_ranges)):
        for name in given:
            if name not in known:
                raise ConfigError(f"{what} names input '{name}', which the model does not have; its inputs are "
                                  f"{', '.join(repr(n) for n in names) or 'none'}.")
    for s in specs:
        if s.dtype not in FEEDABLE_DTYPES:
            raise ConfigError(f"Input '{s.name}' has type {s.dtype}, which the workbench cannot generate; it feeds "
                              f"{', '.join(FEEDABLE_DTYPES)}.")
        if len(s.shape) == 0 and not any(len(o.shape) for o in specs):  # a sample rate beside the audio is fed once
            raise ConfigError(f"Input '{s.name}' is a scalar (rank 0) and the model has no input with a batch; the "
                              f"workbench feeds batched inputs.")
        bounds = FEEDABLE_DTYPES[s.dtype]
        if bounds and s.dtype != "bool":
            rng = inputs.int_ranges.get(s.name) or inputs.int_ranges.get(s.name.split(":")[0]) or inputs.int_range
            if rng is None:
                continue  # the input gets a default by its name
            lo, hi = rng
            if lo < bounds[0] or hi > bounds[1]:
                raise ConfigError(f"Integer range {lo}:{hi} does not fit input '{s.name}' of type {s.dtype} "
                                  f"({bounds[0]}:{bounds[1]}); give {setting('int_ranges', 'an integer range')} "
                                  f"{s.name}=LOW:HIGH inside it.")
    check_lengths_against_shapes(specs, inputs, configs)
    sample_bytes = 0
    from wb_core.config import with_point_shapes

    for b, seq, shape in sorted({(c.batch_size, c.seq_len or 0, c.shape or "") for c in configs}):
        opts = with_point_shapes(inputs, RunConfig(default_backend(), seq_len=seq or None, shape=shape or None))
        sample_bytes = 0
        for s in specs:
            shape = resolve_shape(s, b, opts)
            elements = 1
            for d in shape:
                elements *= d
            sample_bytes += elements // b * 8
    if sample_bytes * settings.pool_size > MAX_POOL_BYTES:
        raise ConfigError(f"A pool of {settings.pool_size} samples of this model's inputs would take "
                          f"{sample_bytes * settings.pool_size / 2**30:,.1f} GiB (limit "
                          f"{MAX_POOL_BYTES / 2**30:g} GiB); use a smaller pool_size.")
    for c in configs:
        if c.rate and c.rate * settings.max_time_s < MIN_REQUESTS:
            raise ConfigError(f"Rate {c.rate:g} requests/s would send fewer than {MIN_REQUESTS} requests in the "
                              f"{settings.max_time_s:g} s measuring time; raise {setting('rates', 'the rate')} or "
                              f"{setting('max_time_s', 'the measuring time')}.")


def check_lengths_against_shapes(specs, inputs: InputOptions, configs: list[RunConfig]) -> None:
    """A sequence length (--dynamic-size) must size something, and no shape may fix that dimension
    to another length: the model's inputs would disagree and every point would fail."""
    from wb_core.config import with_point_shapes

    lengths = sorted({c.seq_len for c in configs if c.seq_len})
    if not lengths:
        return
    given = ", ".join(map(str, lengths))
    sized = False
    for c in configs:
        if not c.seq_len:
            continue
        opts = with_point_shapes(inputs, c)
        for s in specs:
            fixed = opts.shapes.get(s.name) or opts.shapes.get(s.name.split(":")[0])
            dynamic = [i for i in range(1, len(s.shape)) if s.shape[i] < 0]
            if fixed is None:
                sized = sized or bool(dynamic)
                continue
            for i in dynamic:
                if i < len(fixed) and fixed[i] > 0 and fixed[i] != c.seq_len:
                    raise ConfigError(
                        f"The shape {s.name}={'x'.join(map(str, fixed))} fixes the sequence length of '{s.name}' "
                        f"to {fixed[i]}, but {setting('seq_lens', 'the sequence length')} asks for {given}; give the "
                        f"length one way: {setting('seq_lens', 'the sequence length')} alone, or "
                        f"{setting('shapes', 'a shape')} for every input.")
                sized = sized or fixed[i] < 0
    if not sized:
        seq = setting("seq_lens", "the sequence length")
        raise ConfigError(f"{seq} {given} sizes dynamic dimensions, but none of the model's inputs has one "
                          f"left ({', '.join(s.describe() for s in specs)}); leave {seq} out.")


# Backends known to open a model, per (backend, model fingerprint, runtime version): checked once.
_LOADABLE: set[tuple[str, str, str]] = set()


def check_backends_load(description: ModelDescription, backends: Iterable[str], timeout_s: float | None = None) -> None:
    """Every backend a study asks for can open the model with its own reader (the registry's
    `load_checks`), checked in one worker before anything is stored; a backend that cannot stops the
    study with its own sentence, which names it. A success is remembered (in this process and in
    the cache) per model content and runtime version, so a model is opened this way once."""
    from wb_core.backends.registry import get, load_check
    from wb_core.paths import cache_dir
    from wb_core.proc.parent import run_task

    def version(backend: str) -> str:
        try:
            return importlib.metadata.version(get(backend).distributions[0])
        except (importlib.metadata.PackageNotFoundError, IndexError):
            return "unknown"

    todo = []
    for backend in dict.fromkeys(backends):
        if description.only_backends and backend not in description.only_backends:
            continue  # its points are skipped with the description's sentence, not refused here
        ref = load_check(backend, description.format)
        if ref is None:
            continue
        key = (backend, str(description.fingerprint), version(backend))
        marker = cache_dir() / "loadable" / "-".join(key)
        if key in _LOADABLE or marker.exists():
            _LOADABLE.add(key)
            continue
        todo.append((key, marker, ref))
    if not todo:
        return
    run_task({"task": "wb_core.sweep.context:task_check_loads", "path": str(description.path),
              "checks": [ref for _, _, ref in todo]}, timeout=timeout_s or 600,
             what=f"opening '{description.path}' with each backend asked for")
    for key, marker, _ in todo:
        _LOADABLE.add(key)
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        except OSError:
            pass  # a cache that cannot be written only costs the check again next time


def task_check_loads(task: dict) -> None:
    """In a worker: open the model with each backend's reader; the first that cannot raises its ModelError."""
    from wb_core.backends.registry import _load
    from wb_core.proc.channel import emit

    for ref in task["checks"]:
        _load(ref)(task["path"])
    emit({"type": "result"})


def point_timeout(settings: MeasureSettings) -> float:
    return LOAD_ALLOWANCE_S + settings.warmup_s + settings.max_time_s * 2


class SweepContext:
    """One study being measured: preflight done once, the store open, every point recorded.

    Preflight (format, fingerprint, inputs, shapes for every batch size, the variant planner and
    its data check) runs in the constructor, before anything is written: a model that cannot be
    read or data that cannot feed it stop the study with nothing stored. `open()` then creates or
    checks the study record. `model` is a path, or the `ModelDescription` the caller read already
    (the API and tune read a model once for everything after); `input_specs`: the model's inputs
    when the caller has read them its own way (a training study's check of the model does). Either
    way no worker is started to read the model again.
    `random_inputs=False`: the workers feed data of their own (decoded frames, training data), so
    the checks and notes about the random inputs a sweep draws do not apply.
    """

    def __init__(self, model: str | Path, db: str | Path, study: str, configs: Iterable[RunConfig], *,
                 settings: MeasureSettings | None = None, inputs: InputOptions | None = None,
                 precision: PrecisionOptions | None = None, on_point: Callable[[dict], None] | None = None,
                 progress: bool = False, progress_label: str = "profiling", cancel: threading.Event | None = None,
                 memory_limit_mb: int | None = None, timeout_s: float | None = None,
                 summary: SweepSummary | None = None, repeats: int = 1, remeasure_busy: bool = False,
                 input_specs: list | None = None, random_inputs: bool = True):
        self.model = model.path if isinstance(model, ModelDescription) else Path(model)
        self.db, self.study = db, study
        self.settings = settings or MeasureSettings()
        self.inputs = inputs or InputOptions()
        self.on_point, self.cancel = on_point, cancel
        self.memory_limit_mb, self.timeout_s = memory_limit_mb, check_timeout(timeout_s)
        if memory_limit_mb is not None:
            from wb_core.config import check_number

            check_number(memory_limit_mb, "The worker memory limit (MB)", 1, 1 << 24, integer=True)
        self._progress, self._progress_label = progress, progress_label
        self.summary = summary or SweepSummary(study=study, db=str(db))
        self.repeats = check_repeats(repeats)
        self.remeasure_busy = bool(remeasure_busy)
        self._busy_stored: set[str] | None = None  # keys stored as busy when this sweep began
        self._remeasured: set[str] = set()
        self.observations: dict[str, dict] = {}  # key -> the point as recorded, for strategies
        self.store: Store | None = None
        self.bar = None
        self.host = socket.gethostname()
        self.owner = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # this sweep, in the store's leases
        self._heartbeat_stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        configs = list(configs)
        if isinstance(model, ModelDescription):  # read once already, by the API or tune
            self.description = model
        elif input_specs is not None:  # read already, by a task that checked the model further
            self.description = ModelDescription(path=self.model, format=detect_format(self.model),
                                                fingerprint=fingerprint(self.model), inputs=tuple(input_specs))
        else:
            self.description = describe_model(self.model, timeout_s)
        check_backends_load(self.description, [c.backend for c in configs], timeout_s)
        self._place_batch_axes()
        self.hardware = hardware.detect()
        if self.inputs.text:
            precision = self._prepare_text(configs, precision)
        if random_inputs:
            self.inputs, input_notes = resolve_int_ranges(self.input_specs, self.inputs,
                                                          self.description.embedding_rows,
                                                          self.description.declared_values)
            for note in input_notes if not self.inputs.samples else ():  # text fills every input
                self.note(note)
            check_inputs(self.input_specs, self.inputs, self.settings, configs)
        self.planner = VariantPlanner(self.description, precision, self.hardware)
        self.planner.input_options = self.inputs  # random inputs for the accuracy guard take the sweep's sizes
        if progress:
            self.planner.on_progress = self._show_progress
        self.planner.check_data(configs)  # data that cannot feed the model stops the study here too

    def _place_batch_axes(self) -> None:
        """Each input's batch axis, the user's over the model's, on the description and in the input
        options every worker reads (a worker's own reading of the model knows its layout at most)."""
        from wb_core.model_inputs import with_batch_axes

        given = dict(self.inputs.batch_axes)
        if given:
            self.inputs.check_names(self.input_specs)
            self.description = dataclasses.replace(self.description,
                                                   inputs=tuple(with_batch_axes(self.description.inputs, given)))
        for s in self.input_specs:
            why = self.description.batch_axis_reasons.get(s.name)
            if s.batch_axis and s.name not in given and why:
                self.note(Sentence(f"Input '{s.name}' takes its batch on axis {s.batch_axis} ({why}); choose another "
                                   f"with {setting('batch_axes', 'a batch axis')} {s.name}=AXIS."))
        axes = {s.name: s.batch_axis for s in self.input_specs if s.batch_axis or s.name in given}
        if axes != self.inputs.batch_axes:
            self.inputs = dataclasses.replace(self.inputs, batch_axes=axes)

    # The model as preflight read it.
    @property
    def format(self) -> str:
        return self.description.format

    @property
    def fingerprint(self) -> str:
        return self.description.fingerprint

    @property
    def input_specs(self) -> list:
        return list(self.description.inputs)

    def _prepare_text(self, configs: list[RunConfig], precision: PrecisionOptions | None) -> PrecisionOptions:
        """Tokenize the text at every sequence length of the sweep: the workers' inputs, and the data
        for calibration and accuracy (at the longest length)."""
        from wb_core.config import parse_shape_map
        from wb_core.data import Dataset
        from wb_core.text import input_role, prepare_text

        lengths = {c.seq_len for c in configs if c.seq_len}
        for c in configs:  # a shape axis: the length its token-ids input takes
            for name, dims in (parse_shape_map(c.shape) if c.shape else {}).items():
                if input_role(name) == "ids" and len(dims) == 2 and dims[1] > 0:
                    lengths.add(dims[1])
        if not lengths and self.inputs.dynamic_size:
            lengths = {self.inputs.dynamic_size}
        if not lengths:  # a model with a fixed sequence length, or one given with --shape
            for s in self.input_specs:
                shape = self.inputs.shapes.get(s.name) or s.shape
                if input_role(s.name) == "ids" and len(shape) == 2 and shape[1] > 0:
                    lengths = {shape[1]}
        if not lengths:
            raise ConfigError(f"Text needs a sequence length to pad or truncate to: give "
                              f"{setting('seq_lens', 'a sequence length')} N (or several, e.g. 32,128,384, as a sweep "
                              f"axis).")
        prec = precision or PrecisionOptions()
        if prec.data is not None:
            raise ConfigError(f"Give the text ({setting('text', 'Text file')}) or the data ({setting('data', 'Data')}), "
                              f"not both: the text is the data.")
        ts = prepare_text(self.inputs.text, self.inputs.tokenizer, self.input_specs, sorted(lengths),
                          self.description.embedding_rows)
        self.inputs = dataclasses.replace(self.inputs, samples=str(ts.path))
        for n in ts.notes:
            self.note(n)
        return dataclasses.replace(prec, data=Dataset(x=ts.data, source=ts.source), input_map={})

    def note(self, text: str) -> None:
        """Something the user should know about this study; each note is kept once."""
        if text not in self.summary.notes:
            self.summary.notes.append(text)

    # ---- the study record ----
    def open(self, spec_record: dict, hardware: dict | None = None, hardware_fingerprint: str | None = None,
             model_path: str | None = None, spec_field: str | None = None) -> SweepContext:
        """Open the store and create (or check) the study; `spec_record` is what this run was asked
        (stored under `spec_field` of the study's spec when given, keeping the sweep's)."""
        self.store = Store(self.db)
        try:
            self.store.ensure_study(self.study, model_path or str(self.model.resolve()), self.format,
                                    self.fingerprint, hardware or self.hardware.to_dict(),
                                    hardware_fingerprint or self.hardware.fingerprint, library_versions(),
                                    spec_record, [s.to_dict() for s in self.input_specs], spec_field=spec_field)
        except BaseException:
            self.store.close()
            raise
        return self

    def spec_record(self, **what) -> dict:
        """The study's record of a run: what was asked, with the settings and input options."""
        rec = {**what, "settings": self.settings.__dict__, "inputs": self.inputs.to_dict(),
               "precision": self.planner.options.record()}
        if self.description.files:  # each file's digest: a later confirmation names the one that changed
            rec["model_files"] = dict(self.description.files)
        return rec

    def __enter__(self) -> SweepContext:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=10)
            self._heartbeat = None
        if self.store is not None:
            try:
                self.store.release(self.owner)
            except WorkbenchError:
                pass
        self._note_busy()
        for note in self.planner.notes:
            if note not in self.summary.notes:
                self.summary.notes.append(note)
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.store is not None:
            self.store.close()
            self.store = None

    def _note_busy(self) -> None:
        """Say which points of this run were measured on a busy machine, and how to measure them again."""
        busy = [p for p in self.observations.values() if p["status"] == "ok" and (p.get("metrics") or {}).get("busy")]
        if not busy or self.summary.busy:
            return
        self.summary.busy = [p["config"].label() if hasattr(p["config"], "label") else p["key"] for p in busy]
        self.note(Sentence(f"{counted(len(busy), 'point')} {were(len(busy))} measured on a busy machine (other "
                           f"processes used more than {BUSY_OTHER_CPU:g} cores' worth of CPU on their cores, or the "
                           f"hypervisor stole more than {BUSY_STEAL_PCT:g}%): re-measure them by profiling the same study again "
                           f"with {setting('remeasure_busy', 'remeasure_busy=True')}."))

    # ---- planning ----
    def busy_stored(self) -> set[str]:
        """Keys stored as measured on a busy machine, when this sweep re-measures them (else none)."""
        if not self.remeasure_busy:
            return set()
        if self._busy_stored is None:
            self._busy_stored = self.store.busy_keys(self.study)
        return self._busy_stored - self._remeasured

    def done_keys(self) -> set[str]:
        """Keys stored as done; with `remeasure_busy`, a point stored as busy is not done."""
        return self.store.done_keys(self.study) - self.busy_stored()

    def todo(self, configs: list, key: Callable = lambda c: c.key) -> list:
        """The configs not stored yet (counted as planned; the stored ones as already done). `key`
        gives an item's study key (a pipeline or training point's key includes its data)."""
        done = self.done_keys()
        todo = [c for c in configs if key(c) not in done]
        self.summary.planned += len(configs)
        self.summary.skipped_done += len(configs) - len(todo)
        return todo

    # ---- leases: two sweeps never measure one point ----
    def claim(self, configs: list, key: Callable = lambda c: c.key) -> list:
        """The configs this sweep may measure: each claimed in the store first. Points another live
        sweep holds are left to it, counted and said in the summary. `key` gives an item's study key
        (a fleet claims one key per configuration and hardware type)."""
        mine, held = [], {}
        for c in configs:
            holder = self.store.claim(self.study, key(c), self.owner, self.host, os.getpid())
            if holder is None:
                mine.append(c)
            else:
                held.setdefault(f"{holder['host']} pid {holder['pid']}", []).append(c)
        done = self.done_keys() if mine else set()  # stored by another sweep since `todo` looked
        for c in [c for c in mine if key(c) in done]:
            self.store.release(self.owner, self.study, key(c))
            mine.remove(c)
            self.summary.skipped_done += 1
        for who, cs in held.items():
            self.summary.held_elsewhere += len(cs)
            self.summary.notes.append(f"{counted(len(cs), 'point')} {were(len(cs))} left to another sweep measuring "
                                      f"them ({who}); rerun once it ends to measure any it could not.")
        if mine:
            self._start_heartbeat()
        return mine

    def _start_heartbeat(self) -> None:
        if self._heartbeat is not None:
            return
        from wb_core.store import LEASE_STALE_S

        def beat():
            store = Store(self.db)
            try:
                while not self._heartbeat_stop.wait(LEASE_STALE_S / 6):
                    try:
                        store.refresh_leases(self.owner)
                    except WorkbenchError:
                        pass
            finally:
                store.close()

        self._heartbeat = threading.Thread(target=beat, name="wb-lease-heartbeat", daemon=True)
        self._heartbeat.start()

    def infeasible(self, cfg: RunConfig, hw: hardware.Hardware | None = None) -> str | None:
        """Why `cfg` cannot run (on `hw`, this machine by default), or None."""
        return infeasible_reason(cfg, self.format, hw or self.hardware) or self.planner.infeasible(cfg)

    def variant(self, cfg: RunConfig) -> tuple[Path, dict]:
        """The model file `cfg` runs and the variant/accuracy columns every point of it carries."""
        return self.planner.path_for(cfg), self.planner.columns_for(cfg)

    def worker_timeout(self) -> float:
        return self.timeout_s or point_timeout(self.settings)

    # ---- progress and cancellation ----
    def points_to_measure(self, points: list, key: Callable = lambda c: c.key):
        """The points not stored yet and claimed by this sweep, one at a time with progress, until
        the sweep is cancelled (the study loops of pipelines and training)."""
        todo = self.claim(self.todo(points, key=key), key=key)
        self.start_progress(len(todo))
        for p in todo:
            if self.cancelled:
                return
            yield p

    def _show_progress(self, text: str) -> None:
        """A step that takes minutes (INT8 accuracy control), on the progress bar or, before it, on stderr."""
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=True)
        else:
            print(f"{self._progress_label}: {text}", file=sys.stderr, flush=True)

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
               where: str | None = None, probe_of: str | None = None) -> dict:
        """Store one point now, count it, show it, and keep it as an observation (`probe_of`: a
        probe of that run, such as a max-rate search's rate, stored apart from the runs)."""
        key = key or cfg.key
        metrics = metrics or {}
        if status == "ok" and not host:
            others = self.store.other_sweeps(self.owner, self.host)
            if others:  # measured while another sweep of ours ran on this machine's CPUs
                metrics = {**metrics, "contended": True, "concurrent_sweeps": others}
        redo = key in self.busy_stored()  # a busy point measured again replaces the stored one
        self._remeasured.add(key)
        self.store.add_run(self.study, key, cfg.to_dict(), status, metrics, error, host=host,
                           hardware_fingerprint=hardware_fingerprint, replace=redo and status == "ok",
                           release_owner=self.owner,  # one transaction: the point, and its lease given back
                           probe_of=probe_of)
        setattr(self.summary, status, getattr(self.summary, status) + 1)
        if error and status == "failed":
            self.summary.errors.append(f"{cfg.label()}{f' on {where}' if where else ''}: {error}")
        self._skip_reason(status, error)
        if self.bar is not None:
            self.bar.update(1)
        point = {"key": key, "config": cfg, "status": status, "metrics": metrics, "error": error}
        if host or hardware_fingerprint:
            point.update(host=host, hardware_fingerprint=hardware_fingerprint)
        self.observations[key] = point
        if self.on_point:
            self.on_point(point)
        return point

    def _skip_reason(self, status: str, error: str | None) -> None:
        if status == "skipped" and error and str(error) not in self.summary.skip_reasons:
            self.summary.skip_reasons.append(str(error))

    def record_round(self, cfg: RunConfig, round_no: int, status: str, metrics: dict | None = None,
                     error: str | None = None) -> dict:
        """Store one round of a repeated point now, and rewrite the point's summary from all its rounds.

        The point (one row, its key unchanged) carries the median round's metrics with the
        throughput and p99 replaced by their medians over the rounds, a 95% interval of each,
        their coefficients of variation, and the per-round values for paired comparisons.
        """
        key = cfg.key
        self.store.add_round(self.study, key, round_no, status, metrics or {}, error)
        rounds = self.store.rounds(self.study, key)
        status, summary_metrics, error = aggregate_rounds(rounds, max(self.repeats, len(rounds)))
        self.store.add_run(self.study, key, cfg.to_dict(), status, summary_metrics, error, replace=True)
        extra = round_no >= self.repeats  # a round an interval target added: the point was counted already
        if not extra and (len(rounds) >= self.repeats or status == "skipped"):  # counted once, when its last round is in
            setattr(self.summary, status, getattr(self.summary, status) + 1)
            if error and status == "failed":
                self.summary.errors.append(f"{cfg.label()}: {error}")
            self._skip_reason(status, error)
        if self.bar is not None:
            self.bar.update(1)
        point = {"key": key, "config": cfg, "status": status, "metrics": summary_metrics, "error": error,
                 "round": round_no}
        self.observations[key] = point
        if self.on_point:
            self.on_point(point)
        return point

    def round_recorder(self, extra: dict, round_no: int) -> Callable:
        """`record_round` for the points of one variant in one round."""
        def record(cfg, status, metrics=None, error=None):
            self.record_round(cfg, round_no, status, {**extra, **(metrics or {})} if status != "skipped" else metrics,
                              error)

        return record

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


MAX_REPEATS = 1000


def check_repeats(repeats) -> int:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ConfigError(f"Repeats must be a whole number of at least 1 (rounds per configuration); got {repeats!r}.")
    if repeats > MAX_REPEATS:
        raise ConfigError(f"Repeats of {repeats} is beyond the supported maximum of {MAX_REPEATS}.")
    return repeats


def aggregate_rounds(rounds: list[dict], planned: int = 1) -> tuple[str, dict, str | None]:
    """One point from its rounds: (status, metrics, error).

    ok when any round is ok. The metrics are the median-throughput round's, with `throughput`
    and `latency_ms_p99` replaced by their medians over the ok rounds, and, per metric, the mean,
    a 95% t interval of the mean (`*_ci_low`, `*_ci_high`) and the CV; `rounds` counts ok rounds,
    `round_ids` names them and `round_throughput` / `round_p99` list their values in that order.
    """
    ok = [r for r in rounds if r["status"] == "ok"]
    if not ok:
        last = rounds[-1]
        return last["status"], dict(last.get("metrics") or {}), last.get("error")
    thr = [_num(r["metrics"].get("throughput")) for r in ok]
    p99 = [_num(r["metrics"].get("latency_ms_p99")) for r in ok]
    order = sorted(range(len(ok)), key=lambda i: (thr[i] is None, thr[i] or 0.0))
    median_round = ok[order[(len(order) - 1) // 2]]
    m = dict(median_round["metrics"])
    for name, values in (("throughput", thr), ("latency_ms_p99", p99)):
        s = summarize(values)
        if s is None:
            continue
        m[name] = s.median
        m[f"{name}_mean"] = s.mean
        m[f"{name}_ci_low"] = s.low if s.n > 1 else None
        m[f"{name}_ci_high"] = s.high if s.n > 1 else None
        m[f"{name}_cv"] = s.cv if s.n > 1 else None
    m["rounds"] = len(ok)
    m["rounds_planned"] = planned
    m["rounds_failed"] = len(rounds) - len(ok)
    m["round_ids"] = [int(r["round"]) for r in ok]
    m["round_throughput"] = thr
    m["round_p99"] = p99
    m["stable"] = all(bool(r["metrics"].get("stable", True)) for r in ok)
    loads = [r["metrics"] for r in ok if "busy" in r["metrics"]]
    if loads:  # the point is busy when any of its rounds was; the worst round's load is shown
        m["busy"] = any(bool(x["busy"]) for x in loads)
        m["busy_rounds"] = [int(r["round"]) for r in ok if r["metrics"].get("busy")]
        for name in ("other_cpu", "steal_pct"):
            values = [_num(x.get(name)) for x in loads]
            values = [v for v in values if v is not None]
            m[name] = max(values) if values else None
    return "ok", m, None


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None
