"""Text lengths: our throughput of a text encoder at each sequence length, on real text, against
OpenVINO's own benchmark_app on the same IR with the same shape and threads.

    python benchmarks/text_lengths.py [--rounds 3] [--seconds 2] [--lengths 32,128,384] [--threads N] [--quick]

The model is the `text-encoder` demo (a 2-layer BERT-style encoder, IR built locally); ours feeds
its `sample.txt` tokenized by its `tokenizer.json`, padded or truncated to each length. Both sides
reshape the IR to [1, LENGTH] for all three inputs, run FP32 (`-infer_precision f32`), one stream
of N threads and one request at a time (benchmark_app `-hint none -nstreams 1 -nthreads N -api sync`).
benchmark_app fills the inputs with its own values: this encoder does the same work whatever the
token values (attention spans the whole padded length). Runs alternate between the two tools, and
which goes first alternates each round. The ratio is ours / benchmark_app: median over rounds (range).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_util import fixed_time, fmt_ratio, median_spread, print_table
from bench_util import run_benchmark_app as benchmark_app

from wb_core.api import (
    InputOptions,
    PrecisionOptions,
    SweepSpec,
    available_cpus,
    ensure_demo,
    profile,
    resolve_model,
    results,
)

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def run_benchmark_app(xml: Path, length: int, threads: int, seconds: int) -> dict:
    shape = ",".join(f"{name}[1,{length}]" for name in INPUTS)
    return benchmark_app(xml, ["-shape", shape, "-t", str(seconds), "-infer_precision", "f32", "-hint", "none",
                               "-nstreams", "1", "-nthreads", str(threads), "-api", "sync", "-nireq", "1"])


def run_ours(xml: Path, lengths: list[int], threads: int, seconds: float, inputs: InputOptions, db: Path,
             study: str) -> tuple[dict, list[str]]:
    """Every length in one sweep (one worker per length); {length: row} and the sweep's notes."""
    spec = SweepSpec(backends="openvino", precisions="fp32", threads=str(threads), streams="1", concurrency="1",
                     seq_lens=",".join(map(str, lengths)))
    s = profile(xml, spec=spec, db=db, study=study, settings=fixed_time(seconds), inputs=inputs,
                precision_options=PrecisionOptions(accuracy=False), return_frame=False)
    return {int(r["seq_len"]): r for r in results(study, db, "stored").to_dict("records")}, s.notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=2, help="measuring time of every run (benchmark_app -t takes whole "
                                                           "seconds)")
    ap.add_argument("--lengths", default="32,128,384")
    ap.add_argument("--threads", type=int, default=None, help="default: every available CPU")
    ap.add_argument("--quick", action="store_true", help="one round of 1 s at two lengths: a smoke test")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.seconds, a.lengths = 1, 1, "32,128"
    lengths = [int(n) for n in a.lengths.split(",")]
    threads = a.threads or len(available_cpus())
    folder = ensure_demo("text-encoder")
    xml = resolve_model("text-encoder")
    inputs = InputOptions(text=str(folder / "sample.txt"), tokenizer=str(folder / "tokenizer.json"))
    ours = {n: [] for n in lengths}
    ref = {n: [] for n in lengths}
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "text.db"
        for r in range(a.rounds):
            def measure_ours(r=r):
                got, said = run_ours(xml, lengths, threads, a.seconds, inputs, db, f"round-{r}")
                notes.extend(n for n in said if n not in notes)
                for n in lengths:
                    ours[n].append(got[n])

            def measure_ref():
                for n in lengths:
                    ref[n].append(run_benchmark_app(xml, n, threads, a.seconds))

            for step in ((measure_ours, measure_ref) if r % 2 == 0 else (measure_ref, measure_ours)):
                step()
    rows = []
    for n in lengths:
        thr = [o["throughput"] / f["throughput"] for o, f in zip(ours[n], ref[n])]
        lat = [o["latency_ms_p50"] / f["median_ms"] for o, f in zip(ours[n], ref[n])]
        rows.append([n, median_spread([o["throughput"] for o in ours[n]])[0],
                     median_spread([f["throughput"] for f in ref[n]])[0], fmt_ratio(*median_spread(thr)),
                     median_spread([o["latency_ms_p50"] for o in ours[n]])[0],
                     median_spread([f["median_ms"] for f in ref[n]])[0], fmt_ratio(*median_spread(lat)),
                     ours[n][0].get("executed_precision")])
    print_table(
        f"Text lengths: text-encoder IR (FP32, batch 1, 1 stream x {threads} threads, 1 request), ours on real text vs "
        f"benchmark_app, {a.rounds} interleaved round(s) of {a.seconds:g} s",
        ["seq_len", "ours samples/s", "bench samples/s", "throughput ratio", "ours p50 ms", "bench p50 ms",
         "p50 ratio", "ran as"], rows,
        ["Ratios are ours / benchmark_app: the median over rounds (min-max)."] + [f"Ours: {n}" for n in notes])


if __name__ == "__main__":
    main()
