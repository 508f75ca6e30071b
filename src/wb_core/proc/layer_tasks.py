"""Worker side of the per-layer profile: read OpenVINO's performance counters of one configuration.

Runs inside a worker set up like the measured run (see wb_core.analysis.layers for the parent side).
"""

from __future__ import annotations

import re
import time

_PRECISION_IN_KERNEL = re.compile(r"_(f32|fp32|bf16|f16|fp16|i8|u8|i32|u1)$", re.IGNORECASE)


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
    from wb_core.config import InputOptions, RunConfig, with_point_shapes
    from wb_core.models import make_batches, ov_inputs, read_ov_model, resolve_shape

    cfg = RunConfig.from_dict(config)
    opts = with_point_shapes(InputOptions.from_dict(inputs), cfg)
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
