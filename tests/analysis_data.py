"""Hand-made result tables and studies for the analysis, plot, export and report tests (no measuring)."""

from __future__ import annotations

import pandas as pd

from wb_core.config import RunConfig

HARDWARE = {"cpu_model": "Test CPU", "vendor": "GenuineIntel", "architecture": "x86_64", "physical_cores": 4,
            "logical_cores": 4, "available_cpus": [0, 1, 2, 3], "sockets": 1, "numa_nodes": 1,
            "numa_cpus": {"node0": "0-3"}, "l1d_kb": 48, "l2_kb": 2048, "l3_kb": 32768, "base_ghz": 2.0,
            "flags": {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_bf16": False}, "memory_gb": 16.0,
            "fma_units": 2, "ops_per_cycle": {"fp32": 64, "bf16": 128, "int8": 256},
            "peak_gflops": {"fp32": 512.0, "bf16": 1024.0, "int8": 2048.0}}


def run(backend="openvino", precision="fp32", batch=1, threads=1, cores=None, p99=1.0, thr=1000.0, rss=100.0,
        status="ok", **extra) -> dict:
    cfg = RunConfig(backend=backend, precision=precision, batch_size=batch, threads=threads,
                    cores=tuple(cores) if cores else None)
    d = cfg.to_dict()
    d.update(key=cfg.key, study="t", cores="none" if not cores else "+".join(map(str, cores)),
             n_cores=len(cores) if cores else None, latency_ms_p50=p99 / 2, latency_ms_p90=p99 * 0.8,
             latency_ms_p95=p99 * 0.9, latency_ms_p99=p99, latency_ms_mean=p99 / 2, throughput=thr,
             cpu_util=float(threads or 1), rss_mb=rss, status=status, error=None if status == "ok" else "boom",
             created_at="2026-01-01T00:00:00+00:00", executed_precision="f32" if precision == "fp32" else precision)
    d.update(extra)
    return d


def frame(runs: list[dict]) -> pd.DataFrame:
    return pd.DataFrame.from_records(runs)


def sample_frame() -> pd.DataFrame:
    """Six runs: a clear Pareto front of three, one dominated, one failed, one oversubscribed."""
    return frame([
        run(batch=1, threads=1, cores=[0], p99=0.5, thr=2000),  # front: fastest
        run(batch=8, threads=2, cores=[0, 1], p99=2.0, thr=9000),  # front
        run(batch=32, threads=4, p99=8.0, thr=15000, rss=400),  # front: most throughput, unpinned
        run(batch=8, threads=1, cores=[0], p99=3.0, thr=5000),  # dominated by the b8 t2 run
        run(batch=64, threads=4, p99=float("nan"), thr=float("nan"), status="failed"),
        run(backend="tensorflow", batch=4, threads=4, cores=[0, 1], p99=2.5, thr=7000, rss=600),  # 4 threads on 2
    ])


def make_study_db(path, runs: list[dict], name: str = "t", model_path: str = "/nonexistent/t",
                  inputs=None) -> None:
    """A results database holding `runs` as if a sweep had stored them."""
    from pathlib import Path

    from wb_core.models import fingerprint
    from wb_core.store import Store

    # A model on disk is stored with its content's fingerprint, as a sweep stores it: what reads the
    # study later checks that the model is still the one measured.
    fp = fingerprint(model_path) if Path(model_path).exists() else "fp0"
    with Store(path) as s:
        s.ensure_study(name, model_path, "openvino", fp, HARDWARE, "hw0", {"openvino": "2026.4.1"},
                       {"sweep": {}, "settings": {}, "inputs": {}},
                       inputs if inputs is not None else [{"name": "image", "shape": [-1, 8, 8, 1],
                                                           "dtype": "float32"}])
        for r in runs:
            cfg = {k: r.get(k) for k in ("backend", "precision", "batch_size", "threads", "inter_op_threads",
                                         "streams", "instances", "concurrency", "hint", "onednn", "cpu_pinning")}
            cfg["cores"] = [int(c) for c in r["cores"].split("+")] if r.get("cores") not in (None, "none") else None
            metrics = {k: v for k, v in r.items() if k.startswith(("latency_", "throughput", "cpu_util", "rss_mb",
                                                                   "executed_", "ov_", "accuracy", "busy"))}
            s.add_run(name, r["key"], cfg, r["status"], metrics, r.get("error"))
