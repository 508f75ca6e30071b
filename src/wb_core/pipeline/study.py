"""Pipeline studies: decode and preprocess in N processes feeding inference through a bounded queue.

A point is one arrangement: N preprocessing processes (0 = the serial pipeline, everything in one
loop), the cores each side is pinned to, the queue depth, and the inference settings of
`wb profile` (backend, precision, batch size, threads, streams, inference threads). The parent
scans the source once, then for each point starts the inference process and the N preprocessing
processes under one supervisor (wb_core.proc.supervisor), waits until all are ready (model compiled,
decoders imported), gives them one start time, and merges what they report into one row.

Rows go to the same store and schema as `wb profile` (wb_core.store): the config columns (with
`cores` = the inference side's cores), `throughput` in frames/s, `latency_ms_*` per frame from the
start of its decode to its result, `cpu_util` of both sides together, and the pipeline columns
(see PIPELINE_COLUMNS).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from wb_core.axes import all_axes
from wb_core.axis import Axis
from wb_core.config import InputOptions, RunConfig, SweepSpec, format_cores, parse_cores, parse_positive_ints, split_values
from wb_core.data import ImageOptions
from wb_core.errors import ConfigError, WorkbenchError
from wb_core.sweep.context import LOAD_ALLOWANCE_S, SweepContext, SweepSummary

# Columns a pipeline row adds to the public result columns.
PIPELINE_COLUMNS = (
    "study_kind", "pre_workers", "pre_cores", "queue_depth", "passes", "decode_threads",
    "frames", "frames_expected", "frames_skipped", "files_skipped", "wall_s",
    "stage_ms_decode", "stage_ms_preprocess", "stage_ms_infer",
    "decode_s", "preprocess_s", "queue_wait_s", "infer_s", "infer_wait_s",
    "pre_idle_frac", "infer_idle_frac", "queue_mean", "queue_empty_frac", "queue_full_frac", "bottleneck",
    "pre_cpu_util", "infer_cpu_util", "pre_cpus", "infer_cpus",
)
IDLE_THRESHOLD = 0.2  # a side that waits this share of its time or more is not the bottleneck
REPORT_GRACE_S = 30.0  # preprocessing processes report this soon after the inference side has finished


@dataclass
class PipelinePoint:
    """One pipeline arrangement: the inference RunConfig plus the preprocessing side."""

    infer: RunConfig
    pre_workers: int
    pre_cores: tuple[int, ...] | None
    queue_depth: int
    passes: int = 1
    decode_threads: int = 1

    def to_dict(self) -> dict:
        return {**self.infer.to_dict(), "study_kind": "pipeline", "pre_workers": self.pre_workers,
                "pre_cores": format_cores(self.pre_cores), "queue_depth": self.queue_depth,
                "passes": self.passes, "decode_threads": self.decode_threads}

    def key_for(self, source_fp: str, geometry: dict) -> str:
        blob = json.dumps({**self.to_dict(), "source": source_fp, "geometry": geometry}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def label(self) -> str:
        side = "serial" if not self.pre_workers else f"{self.pre_workers} pre-worker(s) on {format_cores(self.pre_cores)}"
        return f"{side}, inference {self.infer.label()}"


# Axes the pipeline's inference side reads its own way: (the default as text, the help).
INFERENCE_OWN = {"concurrency": ("1", "Inference threads taking batches off the queue, e.g. 1,2.")}


def inference_axes() -> tuple[Axis, ...]:
    """The sweep axes of a pipeline study's inference side: every axis that tells one configuration from
    another (the "identity" role, a backend's own settings included), placement aside (the pipeline
    pins each side itself: `pre_cores`, `infer_cores`); each as the pipeline reads it (INFERENCE_OWN)."""
    out = []
    for a in all_axes():
        if "identity" not in a.roles or a.stage == "placement":
            continue
        if a.name in INFERENCE_OWN:
            text, words = INFERENCE_OWN[a.name]
            a = dataclasses.replace(a, text_default=text, help=words, sweep_default=(int(text),))
        out.append(a)
    return tuple(out)


pipeline_axes = inference_axes  # as the API offers it to the faces


def _inference_fields(cls):
    """Give PipelineSpec one field per inference axis, by its SweepSpec name (None: the axis's default)."""
    for a in inference_axes():
        cls.__annotations__[a.spec] = "object"
        setattr(cls, a.spec, None)
    cls.__annotations__["infer"] = cls.__annotations__.pop("infer")  # the derived SweepSpec last
    return cls


@dataclass
@_inference_fields
class PipelineSpec:
    """The grid of a pipeline study: the preprocessing side's settings, and one field per inference axis
    (`inference_axes`: the values `wb profile` takes, by SweepSpec field name)."""

    pre_workers: object = "1"  # 0 = serial (decode, preprocess and infer in one loop)
    pre_cores: object = "none"
    infer_cores: object = "none"
    queue_depth: object = "auto"  # batches the queue holds; auto = max(4, 2 x pre-workers)
    passes: int = 1  # times the source is read
    decode_threads: int = 1  # FFmpeg decoder threads per process (0 = FFmpeg's choice)
    infer: SweepSpec = field(init=False, repr=False)

    def __post_init__(self):
        self.pre_workers = _counts(self.pre_workers, "Pre-workers")
        self.pre_cores = _cores_list(self.pre_cores)
        self.infer_cores = _cores_list(self.infer_cores)
        depth = split_values(self.queue_depth) if not isinstance(self.queue_depth, int) else [str(self.queue_depth)]
        self.queue_depth = [None if d.lower() == "auto" else parse_positive_ints(d, "Queue depth", 4096)[0]
                            for d in depth] or [None]
        for name in ("passes", "decode_threads"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < (1 if name == "passes" else 0) or v > 10_000:
                raise ConfigError(f"{name.replace('_', ' ').capitalize()} must be a whole number "
                                  f"{'of at least 1' if name == 'passes' else 'from 0 (automatic) up'}; got {v!r}.")
        self.infer = SweepSpec(cores=self.infer_cores,
                               **{a.spec: a.values(getattr(self, a.spec)) for a in inference_axes()})

    def expand(self) -> list[PipelinePoint]:
        out: dict[str, PipelinePoint] = {}
        for rc in self.infer.expand():
            for n in self.pre_workers:
                for pc in (self.pre_cores if n else [None]):
                    for depth in self.queue_depth:
                        cfg = rc if n or rc.concurrency == 1 else None
                        if cfg is None:
                            continue  # the serial loop runs one request at a time
                        p = PipelinePoint(infer=cfg, pre_workers=n, pre_cores=pc,
                                          queue_depth=depth or max(4, 2 * n), passes=self.passes,
                                          decode_threads=self.decode_threads)
                        out.setdefault(json.dumps(p.to_dict(), sort_keys=True), p)
        return list(out.values())

    def to_dict(self) -> dict:
        return {"pre_workers": self.pre_workers, "pre_cores": [format_cores(c) for c in self.pre_cores],
                "infer_cores": [format_cores(c) for c in self.infer_cores],
                "queue_depth": [d or "auto" for d in self.queue_depth], "passes": self.passes,
                "decode_threads": self.decode_threads, "inference": self.infer.to_dict()}


def _counts(values, name) -> list[int]:
    out = []
    for v in (split_values(values) if not isinstance(values, int) else [str(values)]):
        try:
            n = int(v)
        except ValueError:
            raise ConfigError(f"{name} must be whole numbers (0 for the serial pipeline); got '{v}'.") from None
        if n < 0 or n > 256:
            raise ConfigError(f"{name} must be from 0 (serial) to 256; got {n}.")
        if n not in out:
            out.append(n)
    if not out:
        raise ConfigError(f"{name} needs at least one value, e.g. 0,1,2.")
    return out


def _cores_list(values) -> list:
    if values is None:
        return [None]
    items = split_values(values) if isinstance(values, str) else list(values)
    out = []
    for c in items:
        c = c if (c is None or isinstance(c, tuple)) else parse_cores(c)
        if c not in out:
            out.append(c)
    return out or [None]


# ---- running ----

def run_pipeline(model: str | Path, source: str | Path, spec: PipelineSpec, db: str | Path, study: str,
                 image: ImageOptions | None = None, inputs: InputOptions | None = None, data=None,
                 on_point: Callable[[dict], None] | None = None, progress: bool = False,
                 cancel: threading.Event | None = None, timeout_s: float | None = None,
                 inject: dict | None = None) -> SweepSummary:
    """Measure every pipeline point of `spec` not yet stored in `study`; returns the sweep summary.

    `image`: the preprocessing (size, scale, channels, layout; by default the model input's own).
    `data`: calibration data when an int8 variant is asked for. `inject` (for checking the
    harness) slows a side down or breaks one on purpose: {"pre_delay_ms": ms per frame,
    "infer_delay_ms": ms per batch, "crash": "pre" or "infer" (that side dies after its first batch)}.
    """
    from wb_core.pipeline.source import frame_geometry, scan_source
    from wb_core.variants.planner import PrecisionOptions

    model = Path(model)
    image = image or ImageOptions()
    points = spec.expand()
    # Preflight once (format, fingerprint, inputs, the variant planner), nothing stored yet. The
    # pipeline feeds decoded frames, not random samples.
    ctx = SweepContext(model, db, study, [p.infer for p in points], inputs=inputs, random_inputs=False,
                       precision=PrecisionOptions(data=data, image=image, accuracy=False),
                       on_point=_with_point(on_point), progress=progress, progress_label="pipeline", cancel=cancel,
                       timeout_s=timeout_s)
    specs = ctx.input_specs
    if len(specs) != 1:
        raise ConfigError(f"A pipeline feeds one image input; '{model}' has {len(specs)} inputs "
                          f"({', '.join(s.describe() for s in specs)}).")
    geo = frame_geometry(image, specs[0])
    plan = scan_source(source)
    if plan.skipped:
        ctx.note(f"{len(plan.skipped)} file(s) of the source were skipped: "
                 + "; ".join(f"{s['path']} ({s['reason']})" for s in plan.skipped[:5])
                 + (" ..." if len(plan.skipped) > 5 else ""))

    def key(p: PipelinePoint) -> str:
        return p.key_for(plan.fingerprint, geo.to_dict())

    record = {"kind": "pipeline", "pipeline": spec.to_dict(), "source": plan.source, "source_frames": plan.frames,
              "geometry": geo.to_dict(), "inputs": ctx.inputs.to_dict()}
    with ctx.open(record):
        for p in ctx.points_to_measure(points, key=key):
            why = ctx.infeasible(p.infer) or _cores_missing(p, ctx.hardware)
            if why:
                status, metrics, error = "skipped", {}, why
            else:
                try:
                    path = ctx.planner.path_for(p.infer)
                    status, metrics, error = run_point(path, p, plan, geo.to_dict(), ctx.inputs,
                                                       timeout_s=timeout_s, cancel=cancel, inject=inject)
                except ConfigError:
                    raise
                except WorkbenchError as e:
                    status, metrics, error = "failed", {}, str(e)
                if status == "cancelled":
                    ctx.summary.cancelled = True  # the point stays unstored: a rerun measures it
                    break
            ctx.record(p, status, {**metrics, "study_kind": "pipeline", "source": plan.source}, error, key=key(p))
    return ctx.summary


def _with_point(on_point: Callable[[dict], None] | None) -> Callable[[dict], None] | None:
    """The caller's `on_point`, given the study's point under `point` as well as `config`."""
    if on_point is None:
        return None
    return lambda rec: on_point({**rec, "point": rec["config"]})


def _cores_missing(p: PipelinePoint, hw) -> str | None:
    if p.pre_cores and not set(p.pre_cores) <= set(hw.available_cpus):
        return f"pre-processing cores {format_cores(p.pre_cores)} are not available to this process"
    return None


def run_point(model_path, p: PipelinePoint, plan, geometry: dict, inputs: InputOptions,
              timeout_s: float | None = None, cancel: threading.Event | None = None,
              inject: dict | None = None) -> tuple[str, dict, str | None]:
    """Run one arrangement; returns (status, metrics, error). Every process is gone when it returns."""
    from wb_core.pipeline.queue import SlotQueue
    from wb_core.pipeline.source import Geometry, assign_units
    from wb_core.proc.supervisor import StartBarrier, Supervisor

    n = p.pre_workers
    consumers = 1 if n == 0 else p.infer.concurrency
    frame_shape = list(Geometry(**geometry).frame_shape)
    shares = assign_units(plan, max(1, n))
    queue = SlotQueue.create(p.queue_depth + consumers, p.infer.batch_size, frame_shape) if n else None
    common = {"geometry": geometry, "passes": p.passes, "decode_threads": p.decode_threads, "inject": inject or {},
              "queue": queue}
    infer_task = {"task": "wb_core.pipeline.tasks:task_pipeline_infer", "model_path": str(model_path), "group": p.infer.to_dict(),
                  "pre_workers": n, "frame_shape": frame_shape, "inputs": inputs.to_dict(),
                  "queue_depth": p.queue_depth, "units": shares[0] if n == 0 else [], **common}
    results: dict[int, dict] = {}
    try:
        with Supervisor(timeout=timeout_s or LOAD_ALLOWANCE_S, cancel=cancel) as sup:
            children = [sup.start(infer_task, keep_channel_open=True, name=_side(0))]
            for i in range(n):
                children.append(sup.start({"task": "wb_core.pipeline.tasks:task_pipeline_pre", "index": i, "units": shares[i],
                                           "cores": list(p.pre_cores) if p.pre_cores else None, **common},
                                          keep_channel_open=True, name=_side(i + 1)))
            barrier = StartBarrier(children, lead_s=0.1, close_after=True)
            for w, msg in sup.events():
                i = children.index(w)
                if msg is None:
                    if i in results:
                        continue
                    out = w.outcome
                    if sup.cancelled:
                        return "cancelled", {}, None
                    if out.past_deadline:  # the inference side finished; this side never reported
                        late = [_side(j) for j in range(1, len(children)) if j not in results]
                        return "failed", {}, (f"{', '.join(late)} did not report within {REPORT_GRACE_S:g} s of the "
                                              f"inference side finishing.")
                    if out.timed_out:
                        return "failed", {}, f"{_side(i)}: {out.reason()}."
                    return ("failed", {"stderr_tail": out.stderr_tail[-2000:]},
                            f"{_side(i)}: {out.reason()}.{out.last_output()}")
                t = msg.get("type")
                if t == "ready":
                    barrier.ready(w)
                elif t in ("pre_done", "infer_done"):
                    results[i] = msg
                    if t == "infer_done":  # the preprocessing side has a grace period to report
                        for j, other in enumerate(children):
                            if j and j not in results:
                                other.set_deadline(REPORT_GRACE_S)
                elif t == "fatal":
                    return "failed", {}, _side(i) + ": " + str(msg.get("error"))
                if len(results) == len(children):
                    break
            if sup.cancelled:
                return "cancelled", {}, None
    finally:
        if queue is not None:
            SlotQueue.remove(queue)
    metrics = merge(p, plan, results[0], [results[i] for i in range(1, len(children))])
    if not metrics["frames"]:  # every frame failed to decode: a row of zeros would read as a measurement
        return "failed", metrics, (f"No frame of the source could be decoded ({metrics['frames_skipped']} skipped); "
                                   f"nothing was measured.")
    return "ok", metrics, None


def _side(i: int) -> str:
    return "The inference process" if i == 0 else f"Preprocessing process {i - 1}"


def merge(p: PipelinePoint, plan, infer: dict, pres: list[dict]) -> dict:
    """One row from what the processes reported (see PIPELINE_COLUMNS)."""
    wall = max(1e-9, (infer["end_ns"] - infer["start_ns"]) / 1e9)
    frames = int(infer["frames"])
    n, k = p.pre_workers, int(infer["consumers"])
    if n:
        decode = sum(r["decode_s"] for r in pres)
        pre = sum(r["preprocess_s"] for r in pres)
        qwait = sum(r["queue_wait_s"] for r in pres)
        pre_cpu = sum(r["cpu_s"] for r in pres)
        skipped = [s for r in pres for s in r["skipped"]]
        pre_cpus = sorted({c for r in pres for c in r.get("placement_cpus", [])})
    else:
        serial = infer["serial"]
        decode, pre, qwait = serial["decode_s"], serial["preprocess_s"], 0.0
        # One process: its decode/preprocess thread time is the pre side, the rest the inference side.
        pre_cpu = min(serial.get("pre_cpu_s", 0.0), infer["cpu_s"])
        infer = {**infer, "cpu_s": infer["cpu_s"] - pre_cpu}
        skipped = infer["skipped"]
        pre_cpus = []
    infer_s, infer_wait = infer["infer_s"], infer["infer_wait_s"]
    pre_idle = qwait / (n * wall) if n else 0.0
    infer_idle = infer_wait / (k * wall) if n else 0.0
    named: dict[str, str] = {s["path"]: s["reason"] for s in plan.skipped}
    for s in skipped:
        named.setdefault(s["path"], s["reason"])
    m = {
        **infer["latency"],
        "throughput": frames / wall,
        "cpu_util": (pre_cpu + infer["cpu_s"]) / wall,
        "rss_mb": infer["rss_mb"] + sum(r["rss_mb"] for r in pres),
        "frames": frames,
        "frames_expected": plan.frames * p.passes,
        "frames_skipped": int(sum(s.get("frames", 1) for s in skipped)),
        "files_skipped": [{"path": k_, "reason": v} for k_, v in named.items()],
        "wall_s": wall,
        "decode_s": decode, "preprocess_s": pre, "queue_wait_s": qwait, "infer_s": infer_s, "infer_wait_s": infer_wait,
        "stage_ms_decode": 1e3 * decode / max(frames, 1),
        "stage_ms_preprocess": 1e3 * pre / max(frames, 1),
        "stage_ms_infer": 1e3 * infer_s / max(frames, 1),
        "pre_idle_frac": pre_idle, "infer_idle_frac": infer_idle,
        "queue_mean": infer.get("occupancy_mean"), "queue_empty_frac": infer.get("occupancy_empty_frac"),
        "queue_full_frac": infer.get("occupancy_full_frac"),
        "queue_at_take_mean": infer.get("occupancy_at_take_mean"),
        "queue_series": infer.get("occupancy_samples"),
        "bottleneck": bottleneck(n, decode + pre, infer_s, pre_idle, infer_idle),
        "pre_cpu_util": pre_cpu / wall, "infer_cpu_util": infer["cpu_s"] / wall,
        "pre_cpus": format_cores(tuple(pre_cpus)) if pre_cpus else "none",
        "infer_cpus": format_cores(tuple(infer.get("placement_cpus", []))) or "none",
        "pre_processes": n, "infer_threads": k, "infer_process_threads": infer.get("placement_threads"),
        "first_inference_ms": infer["first_inference_ms"], "load_s": infer["load_s"],
        "batches": infer["batches"], "pre_cpu_s": pre_cpu, "infer_cpu_s": infer["cpu_s"],
        "pre_worker_stats": [{k_: v for k_, v in r.items() if k_ not in ("type", "skipped")} for r in pres],
        "n_cores": len(p.infer.cores) if p.infer.cores else None,
        **(infer.get("extra") or {}), **(infer.get("info") or {}),
    }
    return m


def bottleneck(pre_workers: int, pre_busy_s: float, infer_busy_s: float, pre_idle_frac: float,
               infer_idle_frac: float) -> str:
    """Which side limits the pipeline: `preprocess`, `inference` or `balanced`.

    With a queue between them, the side that waits is not the bottleneck: preprocessing
    processes waiting for a free slot (the queue full) mean inference is slower, the inference
    side waiting for a batch (the queue empty) means preprocessing is. In the serial loop the side
    that takes more of the time is.
    """
    if not pre_workers:
        return "preprocess" if pre_busy_s > infer_busy_s else "inference"
    if pre_idle_frac >= IDLE_THRESHOLD and pre_idle_frac >= infer_idle_frac:
        return "inference"
    if infer_idle_frac >= IDLE_THRESHOLD and infer_idle_frac > pre_idle_frac:
        return "preprocess"
    return "balanced"


__all__ = ["PipelineSpec", "PipelinePoint", "run_pipeline", "bottleneck", "PIPELINE_COLUMNS"]
