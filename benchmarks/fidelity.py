"""Fidelity: our measurement of mobilenet-v2 against OpenVINO's own benchmark_app, same settings.

    python benchmarks/fidelity.py [--rounds 3] [--seconds 2] [--precisions fp32,bf16,int8] [--quick]

Both load the same IR file. Two modes, batch 1 and 8, each precision:
- latency: PERFORMANCE_HINT=LATENCY, one request at a time (benchmark_app `-hint latency -api sync`,
  which is what our closed loop with one request does);
- streams: NUM_STREAMS=N, INFERENCE_NUM_THREADS=N, N requests in flight (benchmark_app
  `-hint none -nstreams N -nthreads N -api async -nireq N`), N = the CPUs available.
Precision is explicit on both sides (`-infer_precision f32|bf16`); INT8 runs the INT8 IR that the
workbench built, at f32 for the layers left unquantized. Runs alternate between the two tools,
and which goes first alternates each round, so that drift on a shared machine hits both alike.
The ratio is ours / benchmark_app: its median over the rounds and its range.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_util import fixed_time, fmt_ratio, median_spread, print_table
from bench_util import run_benchmark_app as benchmark_app

from wb_core.api import SweepSpec, available_cpus, convert_to_ir, load_results, profile, resolve_model

OV_PRECISION = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}  # int8 lives in the IR, not the hint
TARGET = 0.05


def run_benchmark_app(xml: Path, batch: int, precision: str, mode: str, n: int, seconds: float) -> dict:
    """One benchmark_app run in `mode` (latency or streams); throughput and median latency."""
    args = ["-b", str(batch), "-t", str(seconds), "-infer_precision", OV_PRECISION[precision]]
    if mode == "latency":
        args += ["-hint", "latency", "-api", "sync"]
    else:
        args += ["-hint", "none", "-nstreams", str(n), "-nthreads", str(n), "-api", "async", "-nireq", str(n)]
    return benchmark_app(xml, args)


def spec_for(precision: str, mode: str, n: int, batches: str) -> SweepSpec:
    if mode == "latency":
        return SweepSpec(backends="openvino", precisions=precision, batch_sizes=batches, hints="latency")
    return SweepSpec(backends="openvino", precisions=precision, batch_sizes=batches, threads=str(n), streams=str(n),
                     concurrency=str(n))


def run_ours(model: Path, precision: str, mode: str, n: int, batches: str, seconds: float, db: Path,
             study: str) -> dict:
    """All batch sizes of one mode in one worker; {batch: row}."""
    profile(model, spec=spec_for(precision, mode, n, batches), db=db, study=study, settings=fixed_time(seconds),
            return_frame=False)
    return {int(r["batch_size"]): r for r in load_results(db, study).to_dict("records")}


def variant_file(model: Path, precision: str, db: Path, batches: str) -> tuple[Path | None, str]:
    """The IR file our runs load for a precision (built once here), or None and why not."""
    if precision != "int8":
        return convert_to_ir(model), ""
    try:
        profile(model, spec=spec_for("int8", "latency", 1, batches.split(",")[0]), db=db, study="int8-probe",
                settings=fixed_time(0.3, warmup_s=0.1), return_frame=False)
    except Exception as e:
        return None, str(e).splitlines()[0]
    row = load_results(db, "int8-probe").iloc[0]
    if row["status"] != "ok":
        return None, str(row.get("error") or row["status"])
    path = row.get("variant_path") if "variant_path" in row else None
    if not isinstance(path, str) or not path:
        return None, "the int8 run does not record which IR it loaded"
    return Path(path), ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=2, help="measuring time of every run (benchmark_app -t takes whole seconds)")
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--modes", default="latency,streams")
    ap.add_argument("--quick", action="store_true", help="one round of 1 s: a smoke test, not a verdict")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.seconds = 1, 1
    n = len(available_cpus())
    model = resolve_model("mobilenet-v2")
    batches = [int(b) for b in a.batches.split(",")]
    rows, notes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "fidelity.db"
        for precision in a.precisions.split(","):
            xml, why = variant_file(model, precision, db, a.batches)
            if xml is None:
                for mode in a.modes.split(","):
                    rows.append([precision, "-", mode] + ["-"] * 6 + ["not available"])
                notes.append(f"{precision}: not available: {why}")
                continue
            for mode in a.modes.split(","):
                ours = {b: [] for b in batches}
                ref = {b: [] for b in batches}
                ran_as = {}
                for r in range(a.rounds):
                    def measure_ours():
                        got = run_ours(model, precision, mode, n, a.batches, a.seconds, db, f"{precision}-{mode}-{r}")
                        for b in batches:
                            ours[b].append(got[b])
                            ran_as[b] = got[b].get("executed_precision")

                    def measure_ref():
                        for b in batches:
                            ref[b].append(run_benchmark_app(xml, b, precision, mode, n, a.seconds))

                    for step in ((measure_ours, measure_ref) if r % 2 == 0 else (measure_ref, measure_ours)):
                        step()
                for b in batches:
                    thr = [o["throughput"] / f["throughput"] for o, f in zip(ours[b], ref[b])]
                    lat = [o["latency_ms_p50"] / f["median_ms"] for o, f in zip(ours[b], ref[b])]
                    t_med, t_lo, t_hi = median_spread(thr)
                    l_med, l_lo, l_hi = median_spread(lat)
                    within = abs(t_med - 1) <= TARGET and abs(l_med - 1) <= TARGET
                    rows.append([precision, b, mode,
                                 median_spread([o["throughput"] for o in ours[b]])[0],
                                 median_spread([f["throughput"] for f in ref[b]])[0], fmt_ratio(t_med, t_lo, t_hi),
                                 median_spread([o["latency_ms_p50"] for o in ours[b]])[0],
                                 median_spread([f["median_ms"] for f in ref[b]])[0], fmt_ratio(l_med, l_lo, l_hi),
                                 f"{ran_as.get(b)}; {'within 5%' if within else 'outside 5%'}"])
    print_table(
        f"Fidelity: mobilenet-v2 IR, ours vs benchmark_app, {a.rounds} interleaved round(s) of {a.seconds:g} s, "
        f"streams mode = {n} streams x {n} threads x {n} requests",
        ["precision", "batch", "mode", "ours samples/s", "bench samples/s", "throughput ratio",
         "ours p50 ms", "bench p50 ms", "p50 ratio", "ran as; verdict"], rows,
        notes + ["Ratios are ours / benchmark_app: the median over rounds (min-max). Target: within 5%."])


if __name__ == "__main__":
    main()
