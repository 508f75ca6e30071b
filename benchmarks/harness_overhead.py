"""Harness overhead: the workbench's measured latency and throughput against a plain timed loop of
the same call, and for OpenVINO against benchmark_app too.

    python benchmarks/harness_overhead.py [--rounds 3] [--seconds 3] [--backends openvino,tensorflow]

For `lenet-digits` (a tiny model, tens of microseconds an inference, so the worst case for
overhead), batch 1, one thread pinned to CPU 0, FP32: each round runs the workbench, the plain loop
(benchmarks/plain_loop.py) and, for OpenVINO, benchmark_app (`-hint none -nstreams 1 -nthreads 1
-api sync`, pinned to CPU 0) one after the other, in an order that rotates each round, in fresh
processes. Prints the median latency and throughput of each, and the ratios to the plain loop.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_util import run_benchmark_app

from wb_core.api import MeasureSettings, SweepSpec, convert_to_ir, inspect_model, profile, resolve_model, results

HERE = Path(__file__).resolve().parent


def plain(backend: str, model: Path, seconds: float) -> dict:
    out = subprocess.run([sys.executable, str(HERE / "plain_loop.py"), "--backend", backend, "--model", str(model),
                          "--batch", "1", "--threads", "1", "--cores", "0", "--seconds", str(seconds)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def workbench(backend: str, model: Path, seconds: float, db: Path, study: str) -> dict:
    settings = MeasureSettings(warmup_s=0.5, window_s=seconds / 3, max_time_s=seconds, tolerance=1e-9)
    profile(model, spec=SweepSpec(backends=backend, threads="1", cores="0", precisions="fp32"), db=db, study=study,
            settings=settings, return_frame=False)
    row = results(study, db, "stored").iloc[0]
    return {"median_ms": float(row.latency_ms_p50), "p99_ms": float(row.latency_ms_p99),
            "throughput": float(row.throughput)}


def bench(model: Path, seconds: float) -> dict:
    spec = inspect_model(model).inputs[0]
    dims = [1 if d <= 0 else d for d in spec.shape]
    got = run_benchmark_app(model, ["-shape", f"{spec.name}[{','.join(map(str, dims))}]", "-t",
                                    str(max(1, round(seconds))), "-infer_precision", "f32", "-hint", "none",
                                    "-nstreams", "1", "-nthreads", "1", "-api", "sync", "-nireq", "1"], cpus=[0])
    return {"median_ms": got["median_ms"], "throughput": got["throughput"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--backends", default="openvino,tensorflow")
    a = ap.parse_args()
    sm = resolve_model("lenet-digits")
    models = {"tensorflow": sm, "openvino": convert_to_ir(sm)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        for backend in a.backends.split(","):
            model = models[backend]
            tools = {"wb": lambda r, b=backend, m=model: workbench(b, m, a.seconds, db, f"{b}-{r}"),
                     "plain": lambda r, b=backend, m=model: plain(b, m, a.seconds)}
            if backend == "openvino":
                tools["bench"] = lambda r, m=model: bench(m, a.seconds)
            got: dict[str, list[dict]] = {name: [] for name in tools}
            for r in range(a.rounds):
                names = list(tools)
                for name in names[r % len(names):] + names[:r % len(names)]:
                    got[name].append(tools[name](r))

            def med(name, k, got=got):
                return statistics.median(x[k] for x in got[name]) if got.get(name) else float("nan")

            w, p = med("wb", "median_ms"), med("plain", "median_ms")
            rows.append((backend, w, p, w / p, (w - p) * 1000, med("wb", "throughput"), med("plain", "throughput"),
                         med("wb", "throughput") / med("plain", "throughput"), med("bench", "throughput")))
    print("\nHarness overhead: lenet-digits, batch 1, 1 thread pinned to CPU 0, FP32, medians over "
          f"{a.rounds} interleaved rounds of {a.seconds:g} s")
    print(f"{'backend':<11} {'wb p50 ms':>10} {'plain ms':>9} {'ratio':>6} {'diff us':>8} {'wb samples/s':>13} "
          f"{'plain samples/s':>16} {'ratio':>6} {'benchmark_app samples/s':>24}")
    for b, w, p, ratio, diff, wt, pt, tr, bt in rows:
        print(f"{b:<11} {w:>10.4f} {p:>9.4f} {ratio:>6.3f} {diff:>8.1f} {wt:>13.0f} {pt:>16.0f} {tr:>6.3f} "
              f"{bt:>24.0f}")


if __name__ == "__main__":
    main()
