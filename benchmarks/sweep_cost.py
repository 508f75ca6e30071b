"""Sweep cost: measured points per minute on the demo grid with the default measurement settings,
the code of another checkout ("before") and this one ("after"), interleaved.

    python benchmarks/sweep_cost.py [--before /path/to/other/checkout] [--rounds 2] [--backends openvino]
                                    [--max-time 10] [--tolerance 0.05]

Grid: lenet-digits, threads 1,2, batch 1,8, cores none,first1 (8 points a backend). Each run is a
fresh process with PYTHONPATH set to one checkout's `src`, so the two codes never share an import;
which goes first alternates each round, so drift on a shared machine hits both alike. Wall time
includes worker start-up (a TensorFlow import costs seconds), model load, compile and measuring
until the windows agree; the IR conversion is done once beforehand and kept out of the figure, and
OpenVINO sweeps the IR (the file it runs). `marginal points/min` leaves out what every sweep costs
whatever its size (reading the model, its accuracy on the demo's data): the grid's points beyond
the first over the grid's time beyond a 1-point sweep of the same code.
On a busy machine the windows rarely agree within the default 5% and every point runs to
`--max-time` with either code; `--tolerance 0.5` shows what the points cost when they do agree
(as on a quiet machine), for both codes alike.
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


def child(backend: str, max_time: float, tolerance: float, db: str) -> None:
    """One sweep of the grid in this process, with whichever wb_core PYTHONPATH names, after a sweep of
    its first point alone (what a sweep costs whatever its size: reading the model, its accuracy);
    prints one JSON line."""
    from wb_core.api import MeasureSettings, SweepSpec, convert_to_ir, profile, resolve_model, results

    model = resolve_model("lenet-digits")
    ir = convert_to_ir(model)  # cached: a one-off cost, kept out of the figure
    if backend == "openvino":
        model = ir  # what this backend runs: no SavedModel to read through TensorFlow first
    settings = MeasureSettings(max_time_s=max_time, tolerance=tolerance)
    walls = {}
    for name, spec in (("one", SweepSpec(backends=backend, threads="1", batch_sizes="1")),
                       ("grid", SweepSpec(backends=backend, **GRID))):
        t0 = time.perf_counter()
        profile(model, spec=spec, db=db, study=f"{backend}-{name}", settings=settings, return_frame=False)
        walls[name] = time.perf_counter() - t0
    df = results(f"{backend}-grid", db, "stored")
    ok = df[df.status == "ok"]
    print(json.dumps({"points": len(ok), "wall_s": walls["grid"], "one_s": walls["one"], "stable": int(ok.stable.sum()),
                      "measure_s": float(ok.measure_s.mean()), "throughput": ok.throughput.tolist()}))


def run_tree(src: Path, backend: str, max_time: float, tolerance: float, tmp: Path, tag: str) -> dict:
    db = tmp / f"{tag}.db"
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, str(HERE), "--child", backend, "--max-time", str(max_time),
                          "--tolerance", str(tolerance), "--db", str(db)], env=env, capture_output=True, text=True)
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
    ap.add_argument("--tolerance", type=float, default=0.05, help="windows agree within this (the default setting)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--db", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.max_time, a.tolerance, a.db)
        return
    trees = {"after": HERE.parent.parent / "src"}
    if a.before is not None:
        trees = {"before": a.before.resolve() / "src", **trees}
    print(f"\nSweep cost: lenet-digits, grid {GRID}, default measuring settings but max {a.max_time:g} s a point and "
          f"tolerance {a.tolerance:g}, "
          f"{a.rounds} interleaved round(s)")
    print(f"{'backend':<11} {'code':<7} {'points':>6} {'wall s':>7} {'points/min':>10} {'1-point s':>9} "
          f"{'marginal points/min':>19} {'stable':>7} {'mean measure s':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for backend in a.backends.split(","):
            got: dict[str, list[dict]] = {name: [] for name in trees}
            for r in range(a.rounds):
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for name in order:
                    got[name].append(run_tree(trees[name], backend, a.max_time, a.tolerance, Path(tmp), f"{backend}-{name}-{r}"))
            rates, marginal = {}, {}
            for name, runs in got.items():
                rates[name] = statistics.median(x["points"] / x["wall_s"] * 60 for x in runs)
                # The grid's points beyond the first, over the time the grid took beyond a 1-point sweep.
                marginal[name] = statistics.median((x["points"] - 1) / max(x["wall_s"] - x["one_s"], 1e-9) * 60
                                                   for x in runs)
                print(f"{backend:<11} {name:<7} {runs[0]['points']:>6} "
                      f"{statistics.median(x['wall_s'] for x in runs):>7.1f} {rates[name]:>10.1f} "
                      f"{statistics.median(x['one_s'] for x in runs):>9.1f} {marginal[name]:>19.1f} "
                      f"{sum(x['stable'] for x in runs):>4}/{sum(x['points'] for x in runs):<2} "
                      f"{statistics.median(x['measure_s'] for x in runs):>15.2f}")
            if "before" in rates and rates["before"] > 0:
                print(f"{backend:<11} after / before points per minute: {rates['after'] / rates['before']:.2f}x, "
                      f"marginal: {marginal['after'] / marginal['before']:.2f}x (medians over rounds)")


if __name__ == "__main__":
    main()
