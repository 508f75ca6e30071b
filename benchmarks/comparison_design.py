"""How sure is a ratio of two configurations, per second of measuring, under each comparison design?

    python benchmarks/comparison_design.py [--models lenet-digits,mobilenet-v2,text-encoder] [--budget 30]
    python benchmarks/comparison_design.py --quick      # a few seconds per design: proves it runs

For each model, the same two OpenVINO configurations (batch A against batch B, one thread each) are
compared, quiet and with one CPU kept busy by a spinning process, by:

- fresh rounds: the workbench's interleaved rounds, one fresh worker per round (its default design
  for configurations that need a process of their own), in as many rounds as the budget holds;
- short fresh rounds: the same with windows a fifth as long, so five times the rounds;
- side by side: both loaded in one worker and run in alternating blocks (balanced random order, the
  start of each block left out), one paired ratio per cycle, for the same budget, no early stop;
  its figure three ways: wall-clock samples/s, samples per second of the worker's own CPU time
  (blind to time others take from it), and the trimmed mean of each block's four windows;
  and the side-by-side ratio of the cycles that ran A first against those that ran B first (a
  carry-over from one block to the next would part them).

Each row gives B over A with its 95% interval (paired t on log ratios), its half width and the
seconds the design took. An unbiased design's ratio lies within the fresh rounds' interval. The
models: the LeNet demo, MobileNetV2 (Keras applications, random weights, built locally) and the
text-encoder demo fed its own sample text.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_util import print_table

from wb_core.api import InputOptions, MeasureSettings, SweepSpec, demo_sample_text, profile, resolve_model, results
from wb_core.stats import log_ratio_interval, ratio
from wb_core.sweep.paired import log_ratios, run_paired

BATCHES = {"lenet-digits": (1, 8), "mobilenet-v2": (1, 4), "text-encoder": (1, 4)}


def inputs_for(model: str, seq: int) -> InputOptions:
    text = demo_sample_text(model)
    if text:
        return InputOptions(text=str(text[0]), tokenizer=str(text[1]), dynamic_size=seq)
    return InputOptions()


def spinner(cpu: int) -> subprocess.Popen:
    """A process that keeps one CPU busy until it is killed."""
    code = f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    return subprocess.Popen([sys.executable, "-c", code])


def fresh_rounds(model, spec: SweepSpec, inputs: InputOptions, settings: MeasureSettings, db: Path, study: str,
                 a_key: str, b_key: str):
    t0 = time.perf_counter()
    profile(model, spec=spec, db=db, study=study, settings=settings, inputs=inputs, accuracy=False,
            return_frame=False)
    wall = time.perf_counter() - t0
    rows = results(study, db, "stored").set_index("key")
    a, b = rows.loc[a_key], rows.loc[b_key]
    r = ratio(a["round_throughput"], b["round_throughput"], a["round_ids"], b["round_ids"])
    return r, wall


def order_split(cycles: list[dict]) -> tuple:
    """The side-by-side ratio over the cycles that ran A first, and over those that ran B first."""
    ab = [c for c in cycles if c["order"][0] == 0]
    ba = [c for c in cycles if c["order"][0] == 1]
    return (log_ratio_interval(log_ratios(ab, 0, 1, "throughput")),
            log_ratio_interval(log_ratios(ba, 0, 1, "throughput")))


def row(model, load, design, r, seconds, note=""):
    if r is None:
        return [model, load, design, "-", "-", "-", f"{seconds:.0f}", note]
    half = (r.high - r.low) / 2 / r.ratio * 100 if r.n > 1 else math.nan
    return [model, load, design, f"{r.ratio:.3f}", f"{r.low:.3f}-{r.high:.3f}", f"+-{half:.1f}%", f"{seconds:.0f}",
            note]


def compare(model_name: str, budget: float, load: str, tmp: Path, seq: int) -> list[list]:
    model = resolve_model(model_name)
    a_b, b_b = BATCHES.get(model_name, (1, 4))
    spec_kw = dict(backends="openvino", threads="1", batch_sizes=f"{a_b},{b_b}", precisions="fp32")
    configs = SweepSpec(**spec_kw).expand()
    by_batch = {c.batch_size: c for c in configs}
    a, b = by_batch[a_b], by_batch[b_b]
    inputs = inputs_for(model_name, seq)
    rows = []
    db = tmp / f"{model_name}-{load}.db"
    # Fresh rounds: a worker start (about 1.5 s) and two points each; as many rounds as the budget holds.
    window = max(0.3, min(5.0, budget / 8))
    n = max(2, int(budget / (2 * window + 1.5)))
    settings = MeasureSettings(warmup_s=0.2, window_s=window / 3, max_time_s=window, min_windows=3, tolerance=1e-9)
    r, wall = fresh_rounds(model, SweepSpec(**spec_kw, repeats=n), inputs, settings, db, "rounds", a.key, b.key)
    rows.append(row(model_name, load, f"fresh rounds ({n} x {window:.1f} s)", r, wall))
    short = max(0.1, window / 5)
    n_short = max(2, int(budget / (2 * short + 1.5)))
    settings_short = MeasureSettings(warmup_s=0.1, window_s=short / 3, max_time_s=short, min_windows=3,
                                     tolerance=1e-9)
    r, wall = fresh_rounds(model, SweepSpec(**spec_kw, repeats=n_short), inputs, settings_short, db, "short",
                           a.key, b.key)
    rows.append(row(model_name, load, f"short fresh rounds ({n_short} x {short:.1f} s)", r, wall))
    t0 = time.perf_counter()
    out = run_paired(model, db, "paired", [a, b], [(0, 1)], settings=MeasureSettings(warmup_s=0.3), inputs=inputs,
                     max_s=budget, margin=1e-6, precision=None)  # a band no pair can fall in: measures all of it
    wall = time.perf_counter() - t0
    if out.fallback or out.failed:
        rows.append(row(model_name, load, "side by side", None, wall, out.fallback or out.failed))
        return rows
    busy = f"{out.busy_cycles}/{len(out.cycles)} cycles busy"
    for metric, what in (("throughput", "wall samples/s"), ("cpu_throughput", "samples per CPU s"),
                         ("trimmed_throughput", "trimmed windows")):
        rows.append(row(model_name, load, f"side by side, {what}", log_ratio_interval(log_ratios(out.cycles, 0, 1,
                                                                                                  metric)),
                        wall, busy if metric == "throughput" else ""))
    ab, ba = order_split(out.cycles)
    rows.append(row(model_name, load, "side by side, A first", ab, wall, ""))
    rows.append(row(model_name, load, "side by side, B first", ba, wall, ""))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="lenet-digits,mobilenet-v2,text-encoder")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds of measuring per design and model")
    ap.add_argument("--loads", default="quiet,busy", help="quiet, busy (one CPU kept busy by a spinning process)")
    ap.add_argument("--seq", type=int, default=64, help="sequence length of the text encoder")
    ap.add_argument("--quick", action="store_true", help="4 s per design: proves the script runs")
    args = ap.parse_args()
    budget = 4.0 if args.quick else args.budget
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in [m for m in args.models.split(",") if m]:
            for load in [x for x in args.loads.split(",") if x]:
                spin = spinner(min(os.sched_getaffinity(0))) if load == "busy" else None
                try:
                    rows += compare(name, budget, load, Path(d), args.seq)
                finally:
                    if spin is not None:
                        spin.kill()
                        spin.wait()
    print_table(f"B over A (samples/s), 95% interval, {budget:g} s of measuring per design",
                ["model", "load", "design", "ratio", "95% CI", "half", "s", "note"], rows,
                ["An unbiased design's ratio lies within the fresh rounds' interval; side by side, the A-first and "
                 "B-first ratios agree unless one block carries over into the next."])


if __name__ == "__main__":
    main()
