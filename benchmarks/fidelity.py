"""Fidelity: our throughput and median latency against OpenVINO's own benchmark_app, same IR, same
settings, interleaved, with the CPU and the machine's load recorded beside each figure.

    python benchmarks/fidelity.py [--rounds 3] [--seconds 5] [--cases lenet-throughput,...] [--quick]
    python benchmarks/fidelity.py --matrix [--precisions fp32,bf16,int8] [--batches 1,8]

Cases (`--cases`, default all three):
- lenet-throughput: lenet-digits (tens of microseconds an inference), batch 1, the THROUGHPUT hint
  untouched (the runtime picks precision, streams and requests; benchmark_app `-hint throughput`);
- text32-throughput: the text-encoder demo (a BERT-style encoder built here) at 32 tokens, batch 1,
  the THROUGHPUT hint untouched;
- mobilenet-streams: mobilenet-v2, batch 1, N streams x N threads x N requests in flight, FP32
  (benchmark_app `-hint none -nstreams N -nthreads N -api async -nireq N -infer_precision f32`),
  N = the CPUs available.
`--matrix` measures mobilenet-v2 instead at each precision, batch and mode (latency: the LATENCY
hint, one request at a time, benchmark_app `-api sync`; streams as above); INT8 runs the INT8 IR the
workbench built.

Both sides load the same IR and reshape it to the same input shape. Ours measures a fixed time (no
early stop), in a fresh worker each run, after its warm-up; benchmark_app counts from its first
request, so its first tenth of a second or so (threads and memory coming up) is in its figure: at
`-t 2` it reads about 3% below its own `-t 10` on the text encoder here, so the default is 10 s.
Which tool goes first alternates each round, so that drift on a shared machine hits both alike.
The ratio is ours / benchmark_app: the geometric mean over the rounds with a 95% interval
(Student's t on the per-round log ratios); the verdict says "within 3%" only when that whole
interval is. The load column is the 1-minute load average before each pair of runs and ours'
`other_cpu` (cores' worth of others' CPU time on our cores): a busy machine makes any ratio noise.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench_util import fixed_time, fmt_ratio, median_spread, print_table, shape_arg
from bench_util import run_benchmark_app as benchmark_app

from wb_core.api import (
    PrecisionOptions,
    RunConfig,
    SweepSpec,
    available_cpus,
    convert_to_ir,
    hardware_info,
    profile,
    resolve_model,
    results,
)
from wb_core.stats import log_ratio_interval
from wb_core.sweep.local import run_sweep

OV_PRECISION = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}  # int8 lives in the IR, not the hint
TARGET = 0.03


@dataclass(frozen=True)
class Case:
    name: str
    demo: str
    mode: str  # throughput (hint, untouched), streams, latency
    batch: int = 1
    seq_len: int | None = None
    precision: str = "fp32"


CASES = {c.name: c for c in (Case("lenet-throughput", "lenet-digits", "throughput"),
                             Case("text32-throughput", "text-encoder", "throughput", seq_len=32),
                             Case("mobilenet-streams", "mobilenet-v2", "streams"))}


def ir_of(demo: str) -> Path:
    model = resolve_model(demo)
    return model if Path(model).suffix == ".xml" else convert_to_ir(model)


def bench_args(case: Case, xml: Path, n: int, seconds: float) -> list[str]:
    args = ["-shape", shape_arg(xml, case.batch, case.seq_len), "-t", str(max(1, round(seconds)))]
    if case.mode == "throughput":
        return args + ["-hint", "throughput"]  # untouched: the runtime picks precision and requests
    args += ["-infer_precision", OV_PRECISION[case.precision]]
    if case.mode == "latency":
        return args + ["-hint", "latency", "-api", "sync"]
    return args + ["-hint", "none", "-nstreams", str(n), "-nthreads", str(n), "-api", "async", "-nireq", str(n)]


def our_config(case: Case, n: int) -> RunConfig:
    common = {"batch_size": case.batch, "seq_len": case.seq_len}
    if case.mode == "throughput":
        return RunConfig("openvino", hint="throughput", untouched=True, **common)
    if case.mode == "latency":
        return RunConfig("openvino", precision=case.precision, hint="latency", **common)
    return RunConfig("openvino", precision=case.precision, threads=n, streams=n, concurrency=n, **common)


def run_ours(xml: Path, case: Case, n: int, seconds: float, db: Path, study: str) -> dict:
    run_sweep(xml, SweepSpec(), db, study, settings=fixed_time(seconds), configs=[our_config(case, n)],
              precision=PrecisionOptions(accuracy=False))
    row = results(study, db, "stored").iloc[0].to_dict()
    if row["status"] != "ok":
        raise RuntimeError(f"{case.name}: our run failed: {row.get('error')}")
    return row


def int8_ir(db: Path) -> tuple[Path | None, str]:
    """The INT8 IR of mobilenet-v2 the workbench builds (built once here), or None and why not."""
    model = resolve_model("mobilenet-v2")
    try:
        profile(model, spec=SweepSpec(backends="openvino", precisions="int8", batch_sizes="1", hints="latency"), db=db,
                study="int8-probe", settings=fixed_time(0.3, warmup_s=0.1), return_frame=False)
    except Exception as e:
        return None, str(e).splitlines()[0]
    row = results("int8-probe", db, "stored").iloc[0]
    path = row.get("variant_path") if "variant_path" in row else None
    if row["status"] != "ok" or not isinstance(path, str) or not path:
        return None, str(row.get("error") or "the int8 run does not record which IR it loaded")
    return Path(path), ""


def verdict(low: float, high: float) -> str:
    """Within the target when the whole interval is, outside when none of it is, else undecided."""
    if low >= 1 - TARGET and high <= 1 + TARGET:
        return "within 3%"
    if high < 1 - TARGET or low > 1 + TARGET:
        return "outside 3%"
    return "undecided"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10, help="measuring time of every run (benchmark_app -t takes "
                                                             "whole seconds)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--matrix", action="store_true", help="mobilenet-v2 at each precision, batch and mode instead")
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--modes", default="latency,streams")
    ap.add_argument("--quick", action="store_true", help="one round of 1 s: a smoke test, not a verdict")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.seconds = 1, 1
    n = len(available_cpus())
    if a.matrix:
        cases = [Case(f"mobilenet-{p}-b{b}-{mode}", "mobilenet-v2", mode, int(b), precision=p)
                 for p in a.precisions.split(",") for mode in a.modes.split(",") for b in a.batches.split(",")]
    else:
        unknown = [c for c in a.cases.split(",") if c not in CASES]
        if unknown:
            ap.error(f"unknown case(s) {', '.join(unknown)}; the cases are {', '.join(CASES)}")
        cases = [CASES[c] for c in a.cases.split(",")]
    rows, notes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "fidelity.db"
        irs: dict[tuple, Path | None] = {}
        for case in cases:
            key = (case.demo, case.precision == "int8")
            if key not in irs:
                xml, why = int8_ir(db) if case.precision == "int8" else (ir_of(case.demo), "")
                irs[key] = xml
                if xml is None:
                    notes.append(f"{case.name}: not available: {why}")
            xml = irs[key]
            if xml is None:
                rows.append([case.name] + ["-"] * 8 + ["not available"])
                continue
            ours, ref, loads = [], [], []
            for r in range(a.rounds):
                loads.append(os.getloadavg()[0])
                steps = ("ours", "ref") if r % 2 == 0 else ("ref", "ours")
                for step in steps:
                    if step == "ours":
                        ours.append(run_ours(xml, case, n, a.seconds, db, f"{case.name}-{r}"))
                    else:
                        ref.append(benchmark_app(xml, bench_args(case, xml, n, a.seconds)))
            thr = [o["throughput"] / f["throughput"] for o, f in zip(ours, ref)]
            lat = [o["latency_ms_p50"] / f["median_ms"] for o, f in zip(ours, ref)]
            t = log_ratio_interval([math.log(v) for v in thr])
            others = median_spread([float(o.get("other_cpu") or 0.0) for o in ours])[0]
            rows.append([case.name, median_spread([o["throughput"] for o in ours])[0],
                         median_spread([f["throughput"] for f in ref])[0], fmt_ratio(t.ratio, t.low, t.high),
                         median_spread([o["latency_ms_p50"] for o in ours])[0],
                         median_spread([f["median_ms"] for f in ref])[0], fmt_ratio(*median_spread(lat)),
                         f"{ours[0].get('executed_precision')}/"
                         f"{int(ours[0].get('requests_in_flight') or ours[0].get('concurrency') or 1)}",
                         f"{median_spread(loads)[0]:.2f}/{others:.2f}",
                         verdict(t.low, t.high)])
    hw = hardware_info()
    print_table(
        f"Fidelity: ours vs benchmark_app, {a.rounds} interleaved round(s) of {a.seconds:g} s, on {hw.cpu_model} "
        f"({n} CPUs available); streams mode = {n} streams x {n} threads x {n} requests",
        ["case", "ours samples/s", "bench samples/s", "throughput ratio", "ours p50 ms", "bench p50 ms", "p50 ratio",
         "ran as/requests", "load/others", "verdict"], rows,
        notes + ["Throughput ratio: ours / benchmark_app, geometric mean over rounds (95% CI); p50 ratio: the median "
                 "over rounds (min-max). Target: throughput within 3%.",
                 "load/others: the 1-minute load average before the runs / ours' other_cpu; above ~0.25 others the "
                 "machine was busy and the ratio says little."])


if __name__ == "__main__":
    main()
