"""Thread scaling and pinning on all of this machine's cores (OpenVINO only, no TensorFlow needed).

    python benchmarks/scaling.py [--model model.xml] [--max-time 2] [--db scaling.db]

Without --model it builds a synthetic convolutional IR (benchmarks/synthetic_model.py). Tables:
1. threads 1,2,4,...,N pinned to the first k cores vs not pinned, batch 1 and 8;
2. instances x cores per instance that use all N cores, each instance on its own cores, batch 1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_model import build

from wb_core.api import MeasureSettings, SweepSpec, describe_hardware, hardware_info, profile, results
from wb_core.sweep.local import run_sweep


def ladder(n: int) -> list[int]:
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--max-time", type=float, default=2.0)
    ap.add_argument("--db")
    a = ap.parse_args()
    hw = hardware_info()
    n = len(hw.available_cpus)
    tmp = tempfile.mkdtemp()
    model = Path(a.model) if a.model else build(Path(tmp) / "synthetic_conv.xml")
    db = Path(a.db) if a.db else Path(tmp) / "scaling.db"
    settings = MeasureSettings(max_time_s=a.max_time, window_s=min(0.5, a.max_time / 3))
    print(describe_hardware(hw))
    ks = ladder(n)
    print(f"\nThread scaling on {model.name}, OpenVINO fp32, {n} CPUs")
    for cores in ("pinned", "none"):
        spec = SweepSpec(threads=",".join(map(str, ks)), batch_sizes="1,8", cores="none")
        configs = []
        for cfg in spec.expand():
            if cores == "pinned":
                from dataclasses import replace

                cfg = replace(cfg, cores=tuple(hw.available_cpus[: cfg.threads]))
            configs.append(cfg)
        run_sweep(model, spec, db, f"threads-{cores}", settings=settings, configs=configs)
    base = {}
    print(f"{'threads':>7} {'pinning':>8} {'batch':>5} {'samples/s':>10} {'speed-up':>8} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'cpu':>6}")
    for cores in ("pinned", "none"):
        df = results(f"threads-{cores}", db, "stored").sort_values(["batch_size", "threads"])
        for _, r in df.iterrows():
            if r.status != "ok":
                print(f"{r.threads:>7} {cores:>8} {r.batch_size:>5} failed: {r.error}")
                continue
            key = (cores, r.batch_size)
            base.setdefault(key, r.throughput)
            print(f"{int(r.threads):>7} {cores:>8} {r.batch_size:>5} {r.throughput:>10.1f} "
                  f"{r.throughput / base[key]:>8.2f} {r.latency_ms_p50:>8.3f} {r.latency_ms_p99:>8.3f} "
                  f"{r.cpu_util:>6.2f}")
    print(f"\nInstances x cores per instance on {n} CPUs, batch 1 (each instance pinned to its own cores)")
    print(f"{'layout':>10} {'samples/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'cpu':>6}")
    for k in ks:
        inst = n // k
        spec = SweepSpec(instances=str(inst), cores_per_instance=str(k), threads=str(k), batch_sizes="1") \
            if inst > 1 else SweepSpec(threads=str(k), cores=f"first{k}", batch_sizes="1")
        study = f"layout-{inst}x{k}"
        profile(model, spec=spec, db=db, study=study, settings=settings, return_frame=False)
        r = results(study, db, "stored").iloc[0]
        if r.status != "ok":
            print(f"{inst:>4} x {k:<4} failed: {r.error}")
            continue
        print(f"{inst:>4} x {k:<4} {r.throughput:>10.1f} {r.latency_ms_p50:>8.3f} {r.latency_ms_p99:>8.3f} "
              f"{r.cpu_util:>6.2f}")


if __name__ == "__main__":
    main()
