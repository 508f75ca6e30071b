"""Instances x cores side by side: 2 instances x 1 core against 1 instance x 2 cores (and 1 x 1).

    python benchmarks/instances.py [--max-time 3] [--models lenet-digits,mobilenet-v2]

OpenVINO, batch 1 and 8, every instance pinned to its own cores and measured over one common
window; aggregate throughput and the worst instance's p99.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from wb_core.api import MeasureSettings, SweepSpec, hardware_info, profile, resolve_model, results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-time", type=float, default=3.0)
    ap.add_argument("--models", default="lenet-digits,mobilenet-v2")
    ap.add_argument("--batch", default="1,8")
    a = ap.parse_args()
    n = len(hardware_info().available_cpus)
    settings = MeasureSettings(max_time_s=a.max_time)
    print(f"\nInstances x cores on {n} CPUs, OpenVINO fp32, window {a.max_time:g} s")
    print(f"{'model':<14} {'batch':>5} {'layout':<16} {'samples/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'cpu':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "inst.db"
        for model in a.models.split(","):
            path = resolve_model(model)
            layouts = [("1 x 1 core", SweepSpec(threads="1", cores="first1", batch_sizes=a.batch)),
                       (f"1 x {n} cores", SweepSpec(threads=str(n), cores=f"first{n}", batch_sizes=a.batch)),
                       (f"{n} x 1 core", SweepSpec(threads="1", instances=str(n), cores_per_instance="1",
                                                   batch_sizes=a.batch))]
            rows = []
            for name, spec in layouts:
                study = f"{model}-{name}"
                profile(path, spec=spec, db=db, study=study, settings=settings, return_frame=False)
                for _, r in results(study, db, "stored").iterrows():
                    rows.append((r.batch_size, name, r))
            for b, name, r in sorted(rows, key=lambda t: (t[0], t[1])):
                if r.status != "ok":  # a failed layout is a row that says why, not the end of the table
                    print(f"{model:<14} {b:>5} {name:<16} {r.status}: {r.error}")
                    continue
                print(f"{model:<14} {b:>5} {name:<16} {r.throughput:>10.1f} {r.latency_ms_p50:>8.3f} "
                      f"{r.latency_ms_p99:>8.3f} {r.cpu_util:>5.2f}")


if __name__ == "__main__":
    main()
