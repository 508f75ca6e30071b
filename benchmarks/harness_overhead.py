"""Harness overhead: the workbench's measured latency against a plain timed loop of the same call.

    python benchmarks/harness_overhead.py [--rounds 3] [--seconds 3]

For `lenet-digits` (a tiny model, so the worst case for overhead), batch 1, one thread pinned to
CPU 0, TensorFlow and OpenVINO: each round runs the workbench and the plain loop (benchmarks/
plain_loop.py) one after the other, alternating which goes first, in fresh processes. Prints the
median latency of each, the ratio and the difference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from wb_core.api import MeasureSettings, SweepSpec, convert_to_ir, load_results, profile, resolve_model

HERE = Path(__file__).resolve().parent


def plain(backend: str, model: Path, seconds: float) -> dict:
    out = subprocess.run([sys.executable, str(HERE / "plain_loop.py"), "--backend", backend, "--model", str(model),
                          "--batch", "1", "--threads", "1", "--cores", "0", "--seconds", str(seconds)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def workbench(backend: str, model: Path, seconds: float, db: Path, study: str) -> dict:
    settings = MeasureSettings(warmup_s=0.5, window_s=seconds / 3, max_time_s=seconds, tolerance=1e-9)
    profile(model, spec=SweepSpec(backends=backend, threads="1", cores="0"), db=db, study=study, settings=settings,
            return_frame=False)
    row = load_results(db, study).iloc[0]
    return {"median_ms": row.latency_ms_p50, "p99_ms": row.latency_ms_p99, "throughput": row.throughput}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    sm = resolve_model("lenet-digits")
    models = {"tensorflow": sm, "openvino": convert_to_ir(sm)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        for backend, model in models.items():
            wb, pl = [], []
            for r in range(a.rounds):
                order = [("wb", workbench), ("plain", None)] if r % 2 == 0 else [("plain", None), ("wb", workbench)]
                for name, _ in order:
                    if name == "wb":
                        wb.append(workbench(backend, model, a.seconds, db, f"{backend}-{r}")["median_ms"])
                    else:
                        pl.append(plain(backend, model, a.seconds)["median_ms"])
            w, p = statistics.median(wb), statistics.median(pl)
            rows.append((backend, w, p, w / p, (w - p) * 1000, min(wb), max(wb), min(pl), max(pl)))
    print("\nHarness overhead: lenet-digits, batch 1, 1 thread pinned to CPU 0, median latency over "
          f"{a.rounds} interleaved rounds of {a.seconds:g} s")
    print(f"{'backend':<11} {'workbench ms':>12} {'plain ms':>9} {'ratio':>6} {'diff us':>8}   spread wb / plain")
    for b, w, p, ratio, diff, wl, wh, pl_, ph in rows:
        print(f"{b:<11} {w:>12.4f} {p:>9.4f} {ratio:>6.3f} {diff:>8.1f}   "
              f"{wl:.4f}-{wh:.4f} / {pl_:.4f}-{ph:.4f}")


if __name__ == "__main__":
    main()
