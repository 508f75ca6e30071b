"""Sweep cost: measured points per minute on the demo grid with the default measurement settings,
the code of another checkout ("before") and this one ("after"), interleaved.

    python benchmarks/sweep_cost.py [--before /path/to/other/checkout] [--rounds 2] [--backends openvino]
                                    [--max-time 10]

Grid: lenet-digits, threads 1,2, batch 1,8, cores none,first1 (8 points a backend). Each run is a
fresh process with PYTHONPATH set to one checkout's `src`, so the two codes never share an import;
which goes first alternates each round, so drift on a shared machine hits both alike. Wall time
includes worker start-up (a TensorFlow import costs seconds), model load, compile and measuring
until the windows agree; the IR conversion is done once beforehand and kept out of the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
GRID = {"threads": "1,2", "batch_sizes": "1,8", "cores": "none,first1"}


def child(backend: str, max_time: float, db: str) -> None:
    """One sweep in this process, with whichever wb_core PYTHONPATH names; prints one JSON line."""
    from wb_core.api import MeasureSettings, SweepSpec, convert_to_ir, load_results, profile, resolve_model

    model = resolve_model("lenet-digits")
    convert_to_ir(model)  # cached: a one-off cost, kept out of the figure
    spec = SweepSpec(backends=backend, **GRID)
    t0 = time.perf_counter()
    profile(model, spec=spec, db=db, study=backend, settings=MeasureSettings(max_time_s=max_time),
            return_frame=False)
    wall = time.perf_counter() - t0
    df = load_results(db, backend)
    ok = df[df.status == "ok"]
    print(json.dumps({"points": len(ok), "wall_s": wall, "stable": int(ok.stable.sum()),
                      "measure_s": float(ok.measure_s.mean()), "throughput": ok.throughput.tolist()}))


def run_tree(src: Path, backend: str, max_time: float, tmp: Path, tag: str) -> dict:
    db = tmp / f"{tag}.db"
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, str(HERE), "--child", backend, "--max-time", str(max_time),
                          "--db", str(db)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"the sweep with {src} failed: {(out.stdout + out.stderr).strip().splitlines()[-3:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, default=None,
                    help="checkout whose code gives the 'before' figure (default: none, only this one)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backends", default="openvino")
    ap.add_argument("--max-time", type=float, default=10.0)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--db", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.max_time, a.db)
        return
    trees = {"after": HERE.parent.parent / "src"}
    if a.before is not None:
        trees = {"before": a.before.resolve() / "src", **trees}
    print(f"\nSweep cost: lenet-digits, grid {GRID}, default measuring settings (max {a.max_time:g} s a point), "
          f"{a.rounds} interleaved round(s)")
    print(f"{'backend':<11} {'code':<7} {'points':>6} {'wall s':>7} {'points/min':>10} {'stable':>7} "
          f"{'mean measure s':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for backend in a.backends.split(","):
            got: dict[str, list[dict]] = {name: [] for name in trees}
            for r in range(a.rounds):
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for name in order:
                    got[name].append(run_tree(trees[name], backend, a.max_time, Path(tmp), f"{backend}-{name}-{r}"))
            rates = {}
            for name, runs in got.items():
                rates[name] = statistics.median(x["points"] / x["wall_s"] * 60 for x in runs)
                print(f"{backend:<11} {name:<7} {runs[0]['points']:>6} "
                      f"{statistics.median(x['wall_s'] for x in runs):>7.1f} {rates[name]:>10.1f} "
                      f"{sum(x['stable'] for x in runs):>4}/{sum(x['points'] for x in runs):<2} "
                      f"{statistics.median(x['measure_s'] for x in runs):>15.2f}")
            if "before" in rates and rates["before"] > 0:
                print(f"{backend:<11} after / before points per minute: {rates['after'] / rates['before']:.2f}x "
                      f"(median over rounds)")


if __name__ == "__main__":
    main()
