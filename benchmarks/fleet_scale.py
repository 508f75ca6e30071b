"""A fleet at scale on one machine: N Dask workers, four hardware types, one study, with faults.

    python benchmarks/fleet_scale.py --workers 50 [--points 1000] [--kills 10] [--db URL] [--no-faults]

Starts a Dask scheduler and N worker processes on 127.0.0.1 (one thread each, labelled as four
hardware types), and runs one study of at least --points points through the workbench's own
coordinator, event stream, store, leases and retries; the measurement is the stand-in backend of
tests/standin (a calibrated sleep whose figures are known), so that fifty workers fit on a small
machine and every stored figure can be checked exactly. Faults, at seeded random moments: --kills
workers SIGKILLed, one worker hung (SIGSTOP), one answering garbage, the coordinator's connection
to the scheduler cut for 3 s, and the coordinator killed and started again.

Prints the figures (points per second the coordinator sustained, event latency from a worker to
the store, the store's writes per second, the coordinator's peak memory, time to notice a dead
worker) and ends with the line `points expected E, stored S, lost L, duplicated D, orphans O`.
Exits 1 when anything was lost, duplicated, left behind or stored wrong. The method is in
docs/fleet.md ("A fleet at scale").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bench_util import print_table

from fleet_rehearsal import Faults, rehearse


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=50)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--kills", type=int, default=None, help="workers killed (default: one in five)")
    ap.add_argument("--db", default=None, help="a SQLite path or a PostgreSQL URL (default: a SQLite file in a "
                                               "temporary folder)")
    ap.add_argument("--no-faults", action="store_true", help="no kills, hang, garbage, drop or restart")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=Path, default=None, help="keep the logs in this folder")
    args = ap.parse_args(argv)
    if args.workers < 8:
        ap.error("--workers must be at least 8 (four hardware types, each keeping a sound worker through the faults)")
    kills = 0 if args.no_faults else (args.kills if args.kills is not None else args.workers // 5)
    faults = Faults() if args.no_faults else Faults(kills=kills, hang=True, garbage=True, drop_s=3.0, restart=True)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="wb-fleet-scale-"))
    t0 = time.time()

    def log(msg):
        print(f"{time.time() - t0:7.1f} s  {msg}", flush=True)

    load = os.getloadavg()
    o = rehearse(folder, args.workers, args.points, faults, db=args.db, seed=args.seed, log=log)
    f = o.figures

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    happened = sorted({what for _, what, _ in o.faults_done} | ({"garbage"} if faults.garbage else set()))
    print_table(f"Fleet at scale: {args.workers} workers, 4 hardware types, {o.expected} points; faults: "
                f"{', '.join(happened) or 'none'}",
                ["figure", "value"],
                [["points/s the coordinator sustained (middle 80% of the points)", fmt(f.get("points_per_s"), ".1f")],
                 ["event latency worker -> store, p50 (ms)", fmt(f.get("latency_p50_ms"), ".1f")],
                 ["event latency worker -> store, p99 (ms)", fmt(f.get("latency_p99_ms"), ".1f")],
                 ["store writes/s (one transaction per point)", fmt(f.get("store_writes_per_s"), ".0f")],
                 ["coordinator peak memory (MiB RSS)", fmt(f.get("coordinator_peak_rss_mb"), ".0f")],
                 ["time to notice a dead worker, median (s)", fmt(f.get("notice_dead_s_median"), ".2f")],
                 ["time to notice a dead worker, max (s)", fmt(f.get("notice_dead_s_max"), ".2f")],
                 ["wall time of the whole rehearsal (s)", fmt(time.time() - t0, ".0f")]],
                [f"Load average when it started: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}. Logs: {folder}"])
    problems = {"stored from a host of another type": o.wrong_hardware, "figures not the stand-in's": o.wrong_values,
                "stored from the garbage host": o.from_bad_hosts, "compare-hosts disagrees": o.compare_mismatch,
                "orphan processes": o.orphans}
    for what, items in problems.items():
        if items:
            print(f"{what}: {len(items)}, e.g. {items[:3]}")
    if o.coordinator_rc and o.coordinator_rc[-1] != 0:
        print(f"The coordinator ended with {o.coordinator_rc[-1]}:\n{o.summary.get('output', '')}")
    print(o.line())
    bad = o.lost or o.duplicated or any(problems.values()) or o.stored != o.expected
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
