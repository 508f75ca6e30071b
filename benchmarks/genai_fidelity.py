"""Fidelity of text generation: our TTFT and TPOT on the demo generator beside openvino_genai's own.

    python benchmarks/genai_fidelity.py [--rounds 3] [--requests 8] [--prompt-len 32] [--output-len 32] [--threads 1]

Ours: `generate_profile` (a fresh worker process, LLMPipeline, TTFT and TPOT from each result's raw
token timestamps, e2e from our clock). Theirs: a `benchmark_genai`-style loop in its own process (LLMPipeline with the same
properties, one warm-up, the same number of requests of the same prompt length, greedy, the
output length forced), its figures read from the pipeline's PerfMetrics. Both read the same
folder and prompt text. Rounds alternate which goes first, so that drift on a shared machine hits
both alike. The table gives each side's median over the rounds and the ratio ours / theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_util import fmt_ratio, median_spread, print_table

from wb_core.api import ensure_demo, generate_profile, hardware_info

REFERENCE = r"""
import json, sys
import numpy as np
import openvino as ov
import openvino_genai as og

folder, text, prompt_len, output_len, requests, threads = sys.argv[1:7]
prompt_len, output_len, requests = int(prompt_len), int(output_len), int(requests)
props = {"INFERENCE_PRECISION_HINT": "f32"}
if threads != "auto":
    props["INFERENCE_NUM_THREADS"] = int(threads)
pipe = og.LLMPipeline(folder, "CPU", **props)
tok = pipe.get_tokenizer()
ids = []
for line in open(text, encoding="utf-8").read().splitlines():
    if line.strip():
        ids += [int(x) for x in np.asarray(tok.encode(line, add_special_tokens=False).input_ids.data).ravel()]
while len(ids) < prompt_len * (requests + 1):
    ids += ids
cfg = og.GenerationConfig()
cfg.max_new_tokens = cfg.min_new_tokens = output_len
cfg.do_sample = False
cfg.ignore_eos = True
prompts = [ids[i * prompt_len:(i + 1) * prompt_len] for i in range(requests + 1)]
pipe.generate(ov.Tensor(np.array([prompts[0]], np.int64)), cfg)  # warm-up, not counted
ttft, tpot = [], []
for p in prompts[1:]:
    pm = pipe.generate(ov.Tensor(np.array([p], np.int64)), cfg).perf_metrics
    ttft.append(pm.get_ttft().mean)
    tpot.append(pm.get_tpot().mean)
print(json.dumps({"ttft_ms": sum(ttft) / len(ttft), "tpot_ms": sum(tpot) / len(tpot)}))
"""


def theirs(folder: Path, text: Path, args) -> dict:
    done = subprocess.run([sys.executable, "-c", REFERENCE, str(folder), str(text), str(args.prompt_len),
                           str(args.output_len), str(args.requests), args.threads],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours(folder: Path, args, db: Path, round_no: int) -> dict:
    df = generate_profile(folder, db=db, study=f"fidelity-{round_no}", threads=args.threads,
                          prompt_lens=str(args.prompt_len), output_lens=str(args.output_len), requests=args.requests)
    row = df.iloc[0]
    return {"ttft_ms": float(row["ttft_ms_mean"]), "tpot_ms": float(row["tpot_ms_mean"]),
            "genai_ttft_ms": float(row["genai_ttft_ms"]), "genai_tpot_ms": float(row["genai_tpot_ms"])}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--threads", default="1")
    args = parser.parse_args(argv)
    folder = ensure_demo("text-generator")
    text = folder / "prompts.txt"
    mine, ref = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            steps = [lambda: mine.append(ours(folder, args, Path(tmp) / "f.db", len(mine))),
                     lambda: ref.append(theirs(folder, text, args))]
            for step in steps if i % 2 == 0 else steps[::-1]:
                step()
    rows = []
    for metric in ("ttft_ms", "tpot_ms"):
        a = median_spread([m[metric] for m in mine])
        b = median_spread([r[metric] for r in ref])
        ratios = [m[metric] / r[metric] for m, r in zip(mine, ref)]
        rows.append([metric, a[0], b[0], fmt_ratio(*median_spread(ratios))])
    hw = hardware_info()
    load = os.getloadavg()
    print_table(f"Text generation fidelity: demo generator, prompt {args.prompt_len}, output {args.output_len}, "
                f"{args.requests} requests, threads {args.threads}, {args.rounds} round(s)",
                ["metric", "ours (median)", "openvino_genai (median)", "ours / theirs"], rows,
                [f"CPU: {hw.cpu_model} ({len(hw.available_cpus)} CPUs available)",
                 f"Load average while measuring (1, 5, 15 min): {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}",
                 "Ours: each request's raw token timestamps in a measurement worker; theirs: PerfMetrics' mean TTFT and TPOT "
                 "in a plain loop."])


if __name__ == "__main__":
    main()
