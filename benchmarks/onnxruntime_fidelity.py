"""Fidelity of the ONNX Runtime backend: our throughput and p50 latency against a plain timed loop
of `InferenceSession.run` with the same session options, interleaved.

    python benchmarks/onnxruntime_fidelity.py [--rounds 3] [--seconds 2] [--width 1024] [--layers 4] [--quick]

The model is an MLP written with onnx.helper (`--layers` MatMul+Add+Relu blocks of `--width`), with
a dynamic batch. For batch sizes 1 and 8 and intra-op threads 1 and all CPUs, each round measures
the point once with the workbench (a fresh worker, one request at a time, fixed measuring time)
and once with a plain loop here (one InferenceSession, warm-up, then `run` timed call by call for
the same time); which goes first alternates each round, so drift on a shared machine hits both
alike. The ratios are ours / plain of the throughput and of the p50 latency: the median over the
rounds and the range. Ours runs each request through IO binding (the pool's batches bound once);
the plain loop calls `run` with a dict of arrays, as most code does. The load column is the
1-minute load average before each pair of runs and ours' `other_cpu`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_util import fmt_ratio, median_spread, print_table

from wb_core.api import MeasureSettings, SweepSpec, available_cpus, profile

TARGET = 0.03  # the fidelity target, as for OpenVINO against benchmark_app


def build_mlp(path: Path, width: int, layers: int) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = np.zeros(width, np.float32)
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [prev, f"W{i}"], [f"h{i}"]),
                  helper.make_node("Add", [f"h{i}", f"b{i}"], [f"z{i}"]),
                  helper.make_node("Relu", [f"z{i}"], [f"y{i}"])]
        prev = f"y{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", width])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def plain_loop(model: Path, batch: int, threads: int, width: int, seconds: float, warmup_s: float) -> dict:
    """ONNX Runtime's own loop: one session with the same options, `run` timed call by call; the
    median latency (ms) and the throughput (samples/s)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
    x = {"x": np.random.default_rng(1).standard_normal((batch, width)).astype(np.float32)}
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        sess.run(None, x)
    times, start = [], time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        sess.run(None, x)
        times.append(time.perf_counter() - t0)
    wall = time.perf_counter() - start
    return {"p50": float(np.median(times) * 1e3), "throughput": len(times) * batch / wall}


def ours(model: Path, batch: int, threads: int, seconds: float, warmup_s: float, db: Path, study: str) -> dict:
    settings = MeasureSettings(warmup_s=warmup_s, window_s=seconds / 3, min_windows=3, tolerance=1e-9,
                               max_time_s=seconds)
    spec = SweepSpec(backends="onnxruntime", batch_sizes=str(batch), threads=str(threads), concurrency="1")
    df = profile(model, spec=spec, db=db, study=study, settings=settings)
    return {"p50": float(df.latency_ms_p50.iloc[0]), "throughput": float(df.throughput.iloc[0]),
            "other_cpu": float(df.other_cpu.iloc[0]) if "other_cpu" in df else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="Smallest size: 1 round, 0.3 s, a 64-wide 2-layer MLP.")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.seconds, a.width, a.layers = 1, 0.3, 64, 2
    warmup = min(0.5, a.seconds / 2)
    cpus = len(available_cpus())
    rows, outside = [], []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_mlp(Path(tmp) / "mlp.onnx", a.width, a.layers)
        db = Path(tmp) / "fidelity.db"
        for batch in (1, 8):
            for threads in sorted({1, cpus}):
                mine, plain, loads = [], [], []
                for r in range(a.rounds):
                    loads.append(os.getloadavg()[0])
                    for tool in (("ours", "plain") if r % 2 == 0 else ("plain", "ours")):
                        if tool == "ours":
                            mine.append(ours(model, batch, threads, a.seconds, warmup, db, f"b{batch}-t{threads}-r{r}"))
                        else:
                            plain.append(plain_loop(model, batch, threads, a.width, a.seconds, warmup))
                thr = [o["throughput"] / p["throughput"] for o, p in zip(mine, plain)]
                lat = [o["p50"] / p["p50"] for o, p in zip(mine, plain)]
                med = median_spread(thr)[0]
                if not abs(med - 1) <= TARGET:
                    outside.append(f"batch {batch}, {threads} thread(s): {med:.3f}")
                rows.append([batch, threads, median_spread([o["throughput"] for o in mine])[0],
                             median_spread([p["throughput"] for p in plain])[0], fmt_ratio(*median_spread(thr)),
                             median_spread([o["p50"] for o in mine])[0], median_spread([p["p50"] for p in plain])[0],
                             fmt_ratio(*median_spread(lat)),
                             f"{median_spread(loads)[0]:.2f}/{median_spread([o['other_cpu'] for o in mine])[0]:.2f}"])
    print_table(f"ONNX Runtime: workbench (IO binding) vs a plain InferenceSession.run loop "
                f"({a.layers}x{a.width} MLP, {a.rounds} round(s) of {a.seconds:g} s, interleaved)",
                ["batch", "threads", "ours samples/s", "plain samples/s", "throughput ratio", "ours p50 ms",
                 "plain p50 ms", "p50 ratio", "load/others"], rows,
                [f"Ratios are ours / plain: the median over rounds (range). Target: the throughput ratio within "
                 f"{TARGET:.0%} of 1. "
                 + (f"All {len(rows)} rows are within it." if not outside else
                    f"{len(outside)} of {len(rows)} rows are outside it ({'; '.join(outside)}): read the range "
                    f"first (a wide one is noise of the machine), then rerun with more --rounds and --seconds.")])


if __name__ == "__main__":
    main()
