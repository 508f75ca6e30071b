"""Sweep cost: measured points per minute on the demo grid with the default measurement settings.

    python benchmarks/sweep_cost.py [--max-time 10]

Grid: lenet-digits, TensorFlow and OpenVINO, threads 1,2, batch 1,8, cores none,first1 (16 points).
Wall time includes worker start-up (a TensorFlow import costs seconds), model load, compile and
measuring until the windows agree.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from wb_core.api import MeasureSettings, SweepSpec, load_results, profile, resolve_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-time", type=float, default=10.0)
    a = ap.parse_args()
    model = resolve_model("lenet-digits")
    from wb_core.api import convert_to_ir

    convert_to_ir(model)  # conversion is a one-off cost, kept out of the figure
    spec = SweepSpec(backends="tensorflow,openvino", threads="1,2", batch_sizes="1,8", cores="none,first1")
    print(f"\nSweep cost: lenet-digits, {len(spec.expand())} points, max {a.max_time:g} s per point")
    print(f"{'backend':<11} {'points':>6} {'wall s':>7} {'points/min':>10} {'stable':>7} {'mean measure s':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "cost.db"
        for backend in ("tensorflow", "openvino"):
            s = SweepSpec(backends=backend, threads="1,2", batch_sizes="1,8", cores="none,first1")
            t0 = time.perf_counter()
            profile(model, spec=s, db=db, study=backend, settings=MeasureSettings(max_time_s=a.max_time),
                    return_frame=False)
            wall = time.perf_counter() - t0
            df = load_results(db, backend)
            print(f"{backend:<11} {len(df):>6} {wall:>7.1f} {len(df) / wall * 60:>10.1f} "
                  f"{int(df.stable.sum()):>4}/{len(df):<2} {df.measure_s.mean():>15.2f}")


if __name__ == "__main__":
    main()
