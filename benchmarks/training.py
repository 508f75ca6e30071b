"""Training case study: LeNet-5 on a Fashion-MNIST-shaped set, default threading vs tuned, and cores per job.

    python benchmarks/training.py [--samples 12000] [--batch 64] [--epochs 2] [--rounds 3] [--quick]

The published case study (a Xeon server): about 160 s per epoch with TensorFlow's default
threading, 4.55 s with OMP_NUM_THREADS=2, intra-op 2 and inter-op 1 (35x); then the cores per
user were chosen by measuring epoch time and CPU use against the cores given: more cores than a
small model can use gave about 6 s per epoch, less efficient per core.

Here, on this machine (built on the spot, nothing downloaded: LeNet-5 and `--samples` images of
Fashion-MNIST's shape, 28x28x1, 10 classes; Fashion-MNIST has 60,000):
1. Rounds of, interleaved (the order rotates each round), each in a fresh process: a plain
   `model.fit` with default threading (benchmarks/plain_fit.py, no workbench), the workbench's
   default point, the case study's tuned setting (OMP 2, intra 2, inter 1), and pools sized for
   32 cores on the cores this machine has (what default threading does when TensorFlow sees more
   cores than the job really gets, as in a container limited by a CPU quota). Seconds per epoch:
   median (min-max) over rounds and epochs; the speed-up against the plain default.
2. The tuned setting given 1, 2, ... cores (psutil affinity): seconds per epoch, CPU use of the
   cores given, samples/s per core, and the workbench's recommendation of cores per job.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_util import median_spread, print_table

from wb_core.api import available_cpus, recommend_training, results, train_profile, write_fashion_npz, write_lenet5

HERE = Path(__file__).resolve().parent
PUBLISHED = {"default_s": 160.0, "tuned_s": 4.55, "more_cores_s": 6.0}
TUNED = {"omp_threads": 2, "threads": 2, "inter_op_threads": 1}
SIZED_32 = {"omp_threads": 32, "threads": 32, "inter_op_threads": 32}


def plain(model: Path, data: Path, batch: int, epochs: int) -> list[float]:
    out = subprocess.run([sys.executable, str(HERE / "plain_fit.py"), "--model", str(model), "--data", str(data),
                          "--batch", str(batch), "--epochs", str(epochs)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["epoch_s"]


def workbench(model: Path, data: Path, batch: int, epochs: int, db: Path, study: str, cores="none", **threads) -> dict:
    s = train_profile(model, data=str(data), db=db, study=study, batch_sizes=str(batch), epochs=epochs, cores=cores,
                      return_frame=False, **{k: str(v) for k, v in threads.items()})
    if s.failed:
        raise SystemExit(f"training point failed: {s.errors}")
    return results(study, db, "stored").iloc[-1].to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=12_000, help="training images (Fashion-MNIST has 60,000)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2, help="epochs timed per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2,000 samples, one round")
    a = ap.parse_args()
    if a.quick:
        a.samples, a.rounds = 2_000, 1
    tmp = Path(tempfile.mkdtemp(prefix="wb-bench-training-"))
    model = write_lenet5(tmp / "lenet5.keras")
    data = write_fashion_npz(tmp / "fashion.npz", a.samples)
    db = tmp / "bench.db"
    arms = {"plain": None, "default": {}, "tuned": TUNED, "sized32": SIZED_32}
    secs: dict[str, list[float]] = {k: [] for k in arms}
    rows: dict[str, dict] = {}
    names = list(arms)
    for r in range(a.rounds):
        for arm in names[r % len(names):] + names[: r % len(names)]:
            if arm == "plain":
                secs[arm].extend(plain(model, data, a.batch, a.epochs))
            else:
                row = workbench(model, data, a.batch, a.epochs, db, f"{arm}-r{r}", **arms[arm])
                secs[arm].extend(row["epoch_s_all"])
                rows[arm] = row
        print(f"round {r + 1}/{a.rounds}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in secs.items()), flush=True)
    base = median_spread(secs["plain"])[0]
    label = {"plain": "plain model.fit, default threading", "default": "workbench: default threading",
             "tuned": "workbench: OMP 2, intra 2, inter 1 (published tuning)",
             "sized32": "workbench: pools sized for 32 cores (OMP/intra/inter 32)"}
    table = []
    for arm in names:
        med, lo, hi = median_spread(secs[arm])
        row = rows.get(arm, {})
        table.append([label[arm], f"{med:.3f} ({lo:.3f}-{hi:.3f})", a.samples // a.batch * a.batch / med,
                      f"{base / med:.2f}x", f"{row['cpu_util_pct']:.0f}%" if row else "-"])
    p = PUBLISHED
    table.append(["published: default threading (Xeon)", f"{p['default_s']:.2f}", None, "1.00x", "-"])
    table.append(["published: OMP 2, intra 2, inter 1", f"{p['tuned_s']:.2f}", None,
                  f"{p['default_s'] / p['tuned_s']:.1f}x", "-"])
    cpus = available_cpus()
    print_table(f"Training: LeNet-5, {a.samples} Fashion-MNIST-shaped samples, batch {a.batch}, {a.epochs} epoch(s) "
                f"x {a.rounds} interleaved round(s), {len(cpus)} CPU(s)",
                ["arrangement", "s/epoch", "samples/s", "speed-up", "CPU use"], table,
                ["s/epoch: median (min-max) over every timed epoch of every round. Speed-up against the plain "
                 "default of this run (published rows: against the published default). CPU use: of the cores the "
                 "process may use, from the last round.",
                 f"The published 35x came from default thread pools sized for a many-core Xeon; with {len(cpus)} "
                 f"CPU(s) here, TensorFlow's default pools already match the cores, so the gap is small unless the "
                 f"pools are sized for more cores than the job gets (the 'sized for 32 cores' row)."])

    per_cores = []
    for k in range(1, len(cpus) + 1):
        per_cores.append(workbench(model, data, a.batch, a.epochs, db, "cores", cores=f"first{k}", **TUNED))
    df = results("cores", db, "stored")
    rec = recommend_training(df)
    print_table("Cores given to the tuned setting (OMP 2, intra 2, inter 1)",
                ["cores", "s/epoch", "samples/s", "CPU use of cores given", "samples/s per core"],
                [[int(r["cores_given"]), r["epoch_s"], r["throughput"], f"{r['cpu_util_pct']:.0f}%",
                  r["throughput_per_core"]] for r in per_cores],
                [f"Recommendation: {rec['text']}",
                 f"Published: {p['tuned_s']} s per epoch with the cores the tuning fits, about {p['more_cores_s']:.0f} s "
                 f"with more cores than a small model can use (less efficient per core)."])


if __name__ == "__main__":
    main()
