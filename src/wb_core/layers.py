"""Per-layer profile of one run: OpenVINO's performance counters, per layer and per layer type.

This is where a user sees why BF16 or INT8 did or did not help: the time each layer took and the
precision it actually executed in (a layer that fell back to f32 shows it). The counters are read
in a worker process that is set up exactly like the measured run (CPU affinity, threads,
precision hint, batch size), because those settings change which kernels OpenVINO picks.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from wb_core.errors import ConfigError

LAYER_COLUMNS = ("name", "type", "exec_type", "precision", "time_ms", "cpu_time_ms", "share", "status")
_PRECISION_IN_KERNEL = re.compile(r"_(f32|fp32|bf16|f16|fp16|i8|u8|i32|u1)$", re.IGNORECASE)


@dataclass
class LayerProfile:
    """Mean time per inference of each executed layer, and the same summed per layer type."""

    key: str
    label: str
    iterations: int
    batch_size: int
    layers: pd.DataFrame  # one row per executed layer, slowest first (LAYER_COLUMNS)
    properties: dict = field(default_factory=dict)

    @property
    def total_ms(self) -> float:
        return float(self.layers["time_ms"].sum()) if not self.layers.empty else 0.0

    def by_type(self) -> pd.DataFrame:
        """Time per layer type with the precisions it ran in, slowest first."""
        if self.layers.empty:
            return pd.DataFrame(columns=["type", "layers", "time_ms", "share", "precisions"])
        g = self.layers.groupby("type", sort=False)
        out = pd.DataFrame({
            "layers": g.size(),
            "time_ms": g["time_ms"].sum(),
            "precisions": g["precision"].agg(lambda s: ", ".join(sorted(set(s)))),
        }).reset_index()
        total = out["time_ms"].sum()
        out["share"] = out["time_ms"] / total if total > 0 else 0.0
        return out.sort_values("time_ms", ascending=False, ignore_index=True)[
            ["type", "layers", "time_ms", "share", "precisions"]]

    def top(self, n: int = 10) -> pd.DataFrame:
        return self.layers.head(n)


def kernel_precision(exec_type: str) -> str:
    """The precision in a kernel name such as `brgconv_avx512_bf16` (or 'unknown')."""
    m = _PRECISION_IN_KERNEL.search(exec_type or "")
    if not m:
        return "unknown"
    return {"fp32": "f32", "fp16": "f16"}.get(m.group(1).lower(), m.group(1).lower())


def collect_layer_times(model_path: str, config: dict, inputs: dict | None, iterations: int = 100,
                        warmup: int = 10) -> dict:
    """Run one configuration with PERF_COUNT on and average the counters (called inside a worker)."""
    import openvino as ov

    from wb_core.backends.openvino import compile_properties
    from wb_core.config import InputOptions, RunConfig
    from wb_core.models import make_batches, ov_inputs, read_ov_model, resolve_shape

    cfg = RunConfig.from_dict(config)
    opts = InputOptions.from_dict(inputs)
    model = read_ov_model(model_path)
    specs = ov_inputs(model)
    shapes = {s.name: resolve_shape(s, cfg.batch_size, opts) for s in specs}
    if any(tuple(s.shape) != shapes[s.name] for s in specs):
        model.reshape({n: ov.PartialShape(list(sh)) for n, sh in shapes.items()})
    props = {**compile_properties(cfg), "PERF_COUNT": True}
    compiled = ov.Core().compile_model(model, "CPU", props)
    request = compiled.create_infer_request()
    batches = make_batches(specs, cfg.batch_size, opts, pool_size=8, max_batches=2)
    feeds = [[b[s.name] for s in specs] for b in batches]
    for i in range(warmup):
        request.infer(feeds[i % len(feeds)])
    totals: dict[str, dict] = {}
    order: list[str] = []
    t0 = time.perf_counter()
    for i in range(iterations):
        request.infer(feeds[i % len(feeds)])
        for p in request.get_profiling_info():
            rec = totals.get(p.node_name)
            if rec is None:
                rec = totals[p.node_name] = {"name": p.node_name, "type": p.node_type, "exec_type": p.exec_type,
                                             "time_us": 0.0, "cpu_time_us": 0.0, "status": p.status.name}
                order.append(p.node_name)
            rec["time_us"] += p.real_time.total_seconds() * 1e6
            rec["cpu_time_us"] += p.cpu_time.total_seconds() * 1e6
    wall_ms = (time.perf_counter() - t0) * 1e3 / max(1, iterations)
    runtime_precision = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        if "runtimePrecision" in rt:
            runtime_precision[op.get_friendly_name()] = rt["runtimePrecision"].astype(str)
    layers = []
    for name in order:
        rec = totals[name]
        layers.append({
            "name": name, "type": rec["type"], "exec_type": rec["exec_type"],
            "precision": runtime_precision.get(name) or kernel_precision(rec["exec_type"]),
            "time_ms": rec["time_us"] / iterations / 1e3, "cpu_time_ms": rec["cpu_time_us"] / iterations / 1e3,
            "status": rec["status"],
        })
    return {"layers": layers, "iterations": iterations, "wall_ms_per_inference": wall_ms,
            "properties": {k: str(v) for k, v in props.items()}}


def profile_layers(model_path: str | Path, config, inputs: dict | None = None, iterations: int = 100,
                   key: str = "", timeout: float = 600) -> LayerProfile:
    """Per-layer profile of an OpenVINO run configuration, measured in a fresh worker process."""
    from wb_core.analysis import run_label
    from wb_core.child import run_task
    from wb_core.config import RunConfig

    cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(config)
    if cfg.backend != "openvino":
        raise ConfigError(f"A per-layer profile needs OpenVINO's performance counters, and run {key or cfg.key} "
                          f"used {cfg.backend}; pick an openvino run of the study.")
    if not isinstance(iterations, int) or iterations < 1:
        raise ConfigError(f"Iterations for a layer profile must be at least 1; got {iterations!r}.")
    res = run_task({"task": "layers", "model_path": str(model_path), "config": cfg.to_dict(), "inputs": inputs,
                    "iterations": iterations}, timeout=timeout, what="profiling layers")
    df = pd.DataFrame(res["layers"], columns=[c for c in LAYER_COLUMNS if c != "share"])
    df = df[df["status"] == "EXECUTED"].copy()
    total = df["time_ms"].sum()
    df["share"] = df["time_ms"] / total if total > 0 else 0.0
    df = df.sort_values("time_ms", ascending=False, ignore_index=True)[list(LAYER_COLUMNS)]
    return LayerProfile(key=key or cfg.key, label=run_label(cfg.to_dict() | {"cores": _cores_text(cfg)}),
                        iterations=res["iterations"], batch_size=cfg.batch_size, layers=df,
                        properties=res.get("properties") or {})


def study_layer_profile(db: str | Path, study: str, run_key: str, iterations: int = 100) -> LayerProfile:
    """Per-layer profile of one stored run of a study, with that run's settings."""
    from wb_core.analysis import find_run
    from wb_core.config import RunConfig
    from wb_core.store import Store
    from wb_core.variants import ensure_ir

    with Store(db, readonly=True) as store:
        info = store.get_study(study)
        df = store.to_frame(study)
        raw = {r["key"]: r for r in store.runs(study)}
    row = find_run(df, run_key)
    cfg = RunConfig.from_dict(_config_of(raw[row["key"]]))
    # An INT8 run ran its own quantized IR; the others ran the study model's FP32 IR.
    variant = row.get("variant_path")
    if isinstance(variant, str) and variant.endswith(".xml") and Path(variant).exists():
        ir = Path(variant)
    else:
        ir = ensure_ir(info["model_path"], info.get("model_format"), info.get("model_fingerprint"))
    inputs = ((info.get("spec") or {}).get("inputs")) or None
    return profile_layers(ir, cfg, inputs, iterations=iterations, key=row["key"])


def _config_of(run: dict) -> dict:
    # Store.runs flattens cores to text; the raw config list is what RunConfig needs.
    from dataclasses import fields

    from wb_core.config import RunConfig, parse_cores

    names = {f.name for f in fields(RunConfig)}
    cfg = {k: run.get(k) for k in names if k in run}
    text = run.get("cores")
    cfg["cores"] = list(parse_cores(text, cpus=list(range(1 << 12)))) if text and text != "none" else None
    return cfg


def _cores_text(cfg) -> str:
    from wb_core.config import format_cores

    return format_cores(cfg.cores)
