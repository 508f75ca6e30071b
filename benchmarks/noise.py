"""Noise: what repeating a measurement buys (interval width) and what it costs (wall time).

    python benchmarks/noise.py [--repeats 1,3,5,10] [--ci 5] [--quick]

Two configurations, each profiled as a fresh study with `--repeats R` for every R given (each round
in a fresh worker process, as `wb profile --repeats R` does), the two models alternating:
- lenet-digits (the demo), OpenVINO fp32, batch 1, one thread pinned to the first CPU: a tiny
  model, the worst case for timer and scheduler noise;
- a transformer-shaped encoder built here with openvino's opset API (benchmarks/synthetic_model.py:
  2 BERT-style blocks, 4 heads, hidden 128, 64 tokens), OpenVINO fp32, batch 1, LATENCY hint.
The first table gives, per R and model side by side: the 95% t interval's half-width as a % of the
median throughput (R = 1 has no interval), and the wall time the study took (worker starts,
warm-ups and windows of every round, preflight included). The second table runs each model once
with an interval target (`wb profile --ci X%`): the rounds it needed and whether it got there.
Rounds measured while other processes used the point's cores are counted in `busy rounds`.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import synthetic_model
from bench_util import print_table

from wb_core.api import MeasureSettings, SweepSpec, profile, resolve_model, results
from wb_core.store import Store

Z95 = 1.96


def models(tmp: Path, quick: bool) -> dict[str, tuple[Path, dict]]:
    seq = 32 if quick else 64
    encoder = synthetic_model.build_transformer(tmp / "transformer.xml", seq=seq)
    return {
        "lenet b1 t1 pinned": (resolve_model("lenet-digits"), dict(backends="openvino", threads="1",
                                                                     cores="first1")),
        f"transformer s{seq} b1 LATENCY": (encoder, dict(backends="openvino", hints="latency")),
    }


def measure(model, spec: dict, db: Path, study: str, settings: MeasureSettings, **kw) -> tuple[dict, float, int]:
    """Profile one study; (its one row, wall seconds, rounds flagged busy)."""
    t0 = time.perf_counter()
    summary = profile(model, spec=SweepSpec(**spec, **({"repeats": kw.pop("repeats")} if "repeats" in kw else {})),
                      db=db, study=study, settings=settings, **kw, return_frame=False)
    wall = time.perf_counter() - t0
    row = results(study, db, "stored").iloc[0].to_dict()
    with Store(db) as s:
        rounds = [r for r in s.rounds(study) if r["status"] == "ok"]
    busy = sum(bool(r["metrics"].get("busy")) for r in rounds) if rounds else int(row.get("busy") is True)
    row["_summary"] = summary
    return row, wall, busy


def half_width(row: dict) -> float:
    lo, hi, med = row.get("throughput_ci_low"), row.get("throughput_ci_high"), row.get("throughput")
    if lo is None or hi is None or not med or any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
        return math.nan
    return (hi - lo) / 2 / med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", default="1,3,5,10", help="comma-separated numbers of rounds to compare")
    ap.add_argument("--ci", type=float, default=5.0, help="interval target of the second table, in %% of the median")
    ap.add_argument("--max-rounds", type=int, default=10, help="extra rounds the interval target may add")
    ap.add_argument("--quick", action="store_true", help="repeats 1,2,3, short windows, a shorter sequence: a smoke "
                    "test")
    a = ap.parse_args()
    settings = MeasureSettings()  # the defaults: a 0.5 s warm-up, 0.5 s windows until three agree within 5%
    if a.quick:
        a.repeats, a.max_rounds = "1,2,3", 2
        settings = MeasureSettings(warmup_s=0.1, window_s=0.1, max_time_s=0.5)
    repeats = [int(r) for r in a.repeats.split(",")]
    results: dict[tuple[str, int], tuple[dict, float, int]] = {}
    ci_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        chosen = models(tmp, a.quick)
        db = tmp / "noise.db"
        for r in repeats:
            for name, (model, spec) in chosen.items():  # alternating, so drift falls on both
                results[(name, r)] = measure(model, spec, db, f"{name}-r{r}", settings, repeats=r)
        for name, (model, spec) in chosen.items():
            row, wall, busy = measure(model, spec, db, f"{name}-ci", settings, ci_target=a.ci / 100,
                                      max_rounds=a.max_rounds)
            ci = row["_summary"].ci
            ci_rows.append([name, f"+-{a.ci:g}%", int(row.get("rounds") or 1), ci.extra_rounds,
                            f"+-{100 * half_width(row):.1f}%", "yes" if ci.reached else "no", wall, busy])
    names = list(chosen)
    rows = []
    for r in repeats:
        line = [r]
        for name in names:
            row, wall, busy = results[(name, r)]
            hw = half_width(row)
            line += ["-" if math.isnan(hw) else f"+-{100 * hw:.1f}%", row["throughput"], wall, busy]
        rows.append(line)
    header = ["repeats"]
    for name in names:
        short = name.split()[0]
        header += [f"{short} 95% CI", f"{short} median/s", f"{short} wall s", f"{short} busy rounds"]
    notes = [f"models: {'; '.join(names)}. Each cell is its own study, measured with `wb profile --repeats R`.",
             "95% CI: half-width of the 95% t interval of the mean throughput, as a % of the median; it shrinks "
             "about as t(R-1)/sqrt(R) times the round-to-round spread, so R = 3 pays for a t of 4.30 and R = 10 "
             "for 2.26."]
    last = max(repeats)
    for name in names:
        row = results[(name, last)][0]
        cv = row.get("throughput_cv")
        if cv is not None and not (isinstance(cv, float) and math.isnan(cv)) and cv > 0:
            need = max(2, math.ceil((Z95 * cv / 0.03) ** 2))
            notes.append(f"{name}: round-to-round CV {100 * cv:.1f}% over {last} rounds; +-3% needs about {need} "
                         f"rounds (normal approximation).")
    print_table(f"Noise: repeats -> interval width and wall time, {'quick' if a.quick else 'default'} measurement "
                f"settings", header, rows, notes)
    print_table(f"Interval target: `wb profile --ci {a.ci:g}% --max-rounds {a.max_rounds}` (3 first rounds, then "
                f"extra rounds for the leader until its interval is within the target)",
                ["configuration", "target", "rounds", "extra rounds", "95% CI reached", "target met", "wall s",
                 "busy rounds"], ci_rows,
                ["rounds: all rounds of the point; one configuration per study, so it is the leader."])


if __name__ == "__main__":
    main()
