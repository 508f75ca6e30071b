"""Fidelity of text generation: our TTFT and TPOT beside openvino_genai's own benchmark, interleaved.

    python benchmarks/genai_fidelity.py [--rounds 10] [--quick] [--requests 8] [--prompt-len 32]
        [--output-len 32] [--threads 1] [--precision f32|default] [--weights none|int8_asym|int4_sym|...]
        [--concurrency 1] [--hidden 768] [--layers 4]

The model: a Qwen2-architecture decoder (not one the workbench ships), `--layers` layers of
`--hidden` width, random weights, the demo generator's tokenizer and vocabulary, saved with
`save_pretrained` and exported by `optimum-cli export openvino`, as users export a Hugging Face
model. Built once, offline, and cached; big enough that a token takes several milliseconds.

Ours: `generate_profile` (a fresh worker process per round). Theirs: the `benchmark_genai`
sample's way in a fresh process (with `--concurrency` above 1, the continuous-batching pipeline given
a batch of that many prompts per call, as llm_bench gives a batch): LLMPipeline with its scheduler config (prefix caching off,
prefill never split), one prompt given as text, `--num_warmup 1`, the iterations' PerfMetrics
added up, `get_ttft().mean` and `get_tpot().mean`. Both get the same properties: `--precision f32`
passes INFERENCE_PRECISION_HINT f32 to both; `--precision default` passes none to theirs (the
sample's own default) and the CPU plugin's default precision to ours. `--weights` measures the
weight-compressed variant: ours compresses it as a study does (`weight_formats`), theirs is given the
folder that compression wrote (the same files). The output length is forced
on both (`ignore_eos`: the random weights would otherwise stop at an end-of-sequence token).

Each round runs both, the order alternating. The table gives each side's mean over the rounds and
the ratio ours / theirs with a 95% interval (paired by round, on the log scale), over all rounds
and over the quiet ones (both sides' CPU time within 10% of their threads' wall time).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_util import print_table

from wb_core.api import ensure_demo, generate_profile, hardware_info
from wb_core.axes import WEIGHT_FORMATS
from wb_core.paths import cache_dir
from wb_core.stats import log_ratio_interval

BUILD = r"""
import json, sys
from pathlib import Path
import torch
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from wb_core.optimum_export import export_to_openvino_genai

tokenizer_dir, out, hidden, layers = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tok = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
hf = out / "hf"
tok.save_pretrained(hf)
torch.manual_seed(0)
shape = dict(hidden_size=hidden, intermediate_size=hidden * 8 // 3 // 64 * 64, num_hidden_layers=layers,
             num_attention_heads=hidden // 64, num_key_value_heads=max(1, hidden // 256), max_position_embeddings=2048)
# Room past the tokenizer's tokens, as real checkpoints have: the export adds Qwen2's pad token.
vocab = (len(tok) // 64 + 1) * 64
cfg = Qwen2Config(vocab_size=vocab, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                  tie_word_embeddings=False, **shape)
Qwen2ForCausalLM(cfg).eval().save_pretrained(hf)
export_to_openvino_genai(hf, out / "ov")
(out / "info.json").write_text(json.dumps({"architecture": "Qwen2ForCausalLM", "vocab_size": vocab, **shape}))
"""

# benchmark_genai's measuring loop (samples/python/text_generation/benchmark_genai.py), with the
# workbench's prompt length and forced output length; its printing left out, its figures as JSON.
REFERENCE = r"""
import json, sys, time
import openvino_genai as ov_genai

models_path, prompt_file, max_new_tokens, num_iter, threads, precision, concurrency = sys.argv[1:8]
concurrency = int(concurrency)
props = {}
if precision != "default":
    props["INFERENCE_PRECISION_HINT"] = precision
if threads != "auto":
    props["INFERENCE_NUM_THREADS"] = int(threads)
prompts = json.load(open(prompt_file, encoding="utf-8"))
config = ov_genai.GenerationConfig()
config.max_new_tokens = int(max_new_tokens)
config.apply_chat_template = False
config.ignore_eos = True
if concurrency == 1:
    scheduler_config = ov_genai.SchedulerConfig()
    scheduler_config.enable_prefix_caching = False
    scheduler_config.max_num_batched_tokens = sys.maxsize
    pipe = ov_genai.LLMPipeline(models_path, "CPU", scheduler_config=scheduler_config, **props)
    prompt = prompts[:1]
    generate = lambda: [pipe.generate(prompt, config)]
    iterations = int(num_iter)
else:
    # Requests in flight: the continuous-batching pipeline given `concurrency` prompts at once, as
    # llm_bench gives a batch, with the scheduler's own defaults (room for every sequence).
    scheduler_config = ov_genai.SchedulerConfig()
    scheduler_config.max_num_seqs = max(scheduler_config.max_num_seqs, concurrency)
    pipe = ov_genai.ContinuousBatchingPipeline(models_path, scheduler_config, "CPU", props)
    generate = lambda: pipe.generate(prompts, [config] * concurrency)
    iterations = max(1, int(num_iter) // concurrency)
prompt_tokens = int(pipe.get_tokenizer().encode(prompts[0]).input_ids.get_shape()[1])
generate()  # num_warmup 1
cpu0, t0 = time.process_time(), time.perf_counter()  # not the sample's: the share of a CPU the loop got
perf_metrics, gaps = None, []
for _ in range(iterations):
    # A batch's results share one PerfMetrics (the batch's), so one per call is added.
    pm = generate()[0].perf_metrics
    perf_metrics = pm if perf_metrics is None else perf_metrics + pm
    times = [float(t) for t in pm.raw_metrics.m_new_token_times]  # ms, one per step of the batch
    gaps += [b - a for a, b in zip(times, times[1:])]
cpu_util = (time.process_time() - cpu0) / (time.perf_counter() - t0)
# One request at a time, PerfMetrics' TPOT is the time between a request's tokens. With a batch it
# divides each step by the batch's size (time per generated token of the batch); a request's own
# time per output token is then the step's time, read from the raw token times.
tpot = perf_metrics.get_tpot().mean if concurrency == 1 else sum(gaps) / len(gaps)
print(json.dumps({"ttft_ms": perf_metrics.get_ttft().mean, "tpot_ms": tpot,
                  "genai_tpot_ms": perf_metrics.get_tpot().mean, "prompt_tokens": prompt_tokens,
                  "output_tokens": int(pm.get_num_generated_tokens()) // concurrency, "cpu_util": cpu_util}))
"""

# The reference's prompts, as text made by our own prompt functions (so both sides prefill the same
# number of tokens of the same text): one, or with requests in flight the first wave ours measures.
PROMPT = r"""
import sys
import numpy as np
import openvino_genai as og
from wb_core.generation.tasks import prompt_ids, prompt_texts
from wb_core.text import read_lines

import json
folder, text, prompt_len, concurrency, out = sys.argv[1:6]
c = int(concurrency)
tok = og.Tokenizer(folder)
texts = prompt_texts(tok, prompt_ids(tok, read_lines(text), int(prompt_len), 1 if c == 1 else 2 * c))
if texts is None:
    sys.exit("A prompt's text does not tokenize back to its own tokens; choose another prompt length.")
json.dump(texts[:1] if c == 1 else texts[c:], open(out, "w", encoding="utf-8"))
"""


def build_decoder(hidden: int, layers: int) -> Path:
    """The benchmark's decoder as an OpenVINO GenAI folder, built once (offline) in a child process."""
    out = cache_dir() / "genai" / f"fidelity-qwen2-h{hidden}-l{layers}"
    if not (out / "info.json").is_file():
        tokenizer = ensure_demo("text-generator") / "hf"
        out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        subprocess.run([sys.executable, "-c", BUILD, str(tokenizer), str(out), str(hidden), str(layers)], check=True,
                       env=env, stdout=subprocess.DEVNULL)
    return out


def _child(code: str, *args) -> str:
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise SystemExit(f"The reference process failed ({tail[:300]}).")
    return done.stdout


def theirs(folder: Path, prompt_file: Path, args) -> dict:
    ref = "default" if args.precision == "default" else "f32"
    return json.loads(_child(REFERENCE, folder, prompt_file, args.output_len, args.requests, args.threads,
                             ref, args.concurrency).strip().splitlines()[-1])


def ours(folder: Path, text: Path, args, db: Path, round_no: int, precision: str) -> dict:
    threads = {} if args.threads == "auto" else {"threads": args.threads}
    df = generate_profile(folder, db=db, study=f"fidelity-{round_no}", text=text, inference_precisions=precision,
                          prompt_lens=str(args.prompt_len), output_lens=str(args.output_len), requests=args.requests,
                          weight_formats=args.weights, group_sizes=str(args.group_size),
                          concurrency=str(args.concurrency), **threads)
    row = df.iloc[0]
    if row["status"] != "ok":
        raise SystemExit(f"Our measurement failed: {row.get('error')}")
    return {"ttft_ms": float(row["ttft_ms_mean"]), "tpot_ms": float(row["tpot_ms_mean"]),
            "prompt_tokens": int(row["input_tokens_max"]), "prompt_input": row["prompt_input"],
            "ran_precision": row["ran_inference_precision"], "output_tokens": int(row["output_tokens"]) // args.requests,
            "cpu_util": float(row["cpu_util"])}


def their_folder(folder: Path, args) -> Path:
    """The folder theirs loads: the model, or the weight-compressed copy a study of ours makes and caches."""
    if args.weights == "none":
        return folder
    from wb_core.generation.spec import GenPoint
    from wb_core.generation.study import describe_generator, variant_folder

    return variant_folder(folder, describe_generator(folder).fingerprint,
                          GenPoint(weight_format=args.weights, group_size=args.group_size))


def our_precision(choice: str) -> str:
    """Our precision name for `--precision`: f32, or what the CPU plugin runs when given no hint."""
    if choice != "default":
        return "fp32"
    import openvino as ov

    hint = str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT"))
    return "bf16" if "bfloat16" in hint else "fp16" if "float16" in hint else "fp32"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="4 rounds of 4 requests: a check that it runs, not figures")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=32)
    parser.add_argument("--threads", default="1", help="a number, or auto (the plugin's own choice)")
    parser.add_argument("--precision", choices=("f32", "default"), default="f32",
                        help="f32 on both, or no hint to theirs and the plugin's default precision to ours")
    parser.add_argument("--weights", choices=WEIGHT_FORMATS, default="none",
                        help="weight compression of the measured model (NNCF), the same files on both sides")
    parser.add_argument("--group-size", type=int, default=32, help="INT4 group size")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="requests in flight; above 1 both sides run the continuous-batching pipeline")
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.requests = min(args.rounds, 4), min(args.requests, 4)
    if args.concurrency < 1 or args.requests % args.concurrency:
        parser.error("--requests must be a multiple of --concurrency (whole waves of requests in flight)")
    if args.rounds < 2:
        parser.error("--rounds needs at least 2 for an interval")
    folder = build_decoder(args.hidden, args.layers) / "ov"
    text = ensure_demo("text-generator") / "prompts.txt"
    precision = our_precision(args.precision)
    hw = hardware_info()
    load0 = os.getloadavg()
    mine, ref = [], []
    with tempfile.TemporaryDirectory() as tmp:
        prompt_file = Path(tmp) / "prompts.json"
        _child(PROMPT, folder, text, args.prompt_len, args.concurrency, prompt_file)
        ref_folder = their_folder(folder, args)
        for i in range(args.rounds):
            steps = [lambda: mine.append(ours(folder, text, args, Path(tmp) / "f.db", len(mine), precision)),
                     lambda: ref.append(theirs(ref_folder, prompt_file, args))]
            for step in steps if i % 2 == 0 else steps[::-1]:
                step()
            print(f"round {i + 1}/{args.rounds}: TTFT {mine[-1]['ttft_ms']:.2f} / {ref[-1]['ttft_ms']:.2f} ms, "
                  f"TPOT {mine[-1]['tpot_ms']:.3f} / {ref[-1]['tpot_ms']:.3f} ms, CPU share "
                  f"{mine[-1]['cpu_util']:.2f} / {ref[-1]['cpu_util']:.2f} (ours / theirs)", flush=True)
    load1 = os.getloadavg()
    for side, runs in (("ours", mine), ("theirs", ref)):
        bad = [r for r in runs if r["prompt_tokens"] != args.prompt_len or r["output_tokens"] != args.output_len]
        if bad:
            raise SystemExit(f"{side} ran {bad[0]['prompt_tokens']} prompt and {bad[0]['output_tokens']} output "
                             f"tokens, not {args.prompt_len} and {args.output_len}.")
    # Rounds in which both sides had their CPUs to themselves (CPU share within 10% of the threads
    # they ran): on a busy machine the rest say more about the load than about either side.
    threads = len(hw.available_cpus) if args.threads == "auto" else int(args.threads)
    quiet = [i for i in range(args.rounds) if min(mine[i]["cpu_util"], ref[i]["cpu_util"]) >= 0.9 * threads]
    rows = []
    for label, picked in (("all rounds", list(range(args.rounds))), (f"{len(quiet)} quiet rounds", quiet)):
        for metric in ("ttft_ms", "tpot_ms"):
            r = log_ratio_interval([math.log(mine[i][metric] / ref[i][metric]) for i in picked])
            if r is None or r.n < 2:
                rows.append([metric, label, None, None, "too few rounds", "-"])
                continue
            within = r.low >= 0.95 and r.high <= 1.05
            rows.append([metric, label, sum(mine[i][metric] for i in picked) / len(picked),
                         sum(ref[i][metric] for i in picked) / len(picked),
                         f"{r.ratio:.3f} ({r.low:.3f}-{r.high:.3f})", "yes" if within else "no"])
    share = {side: sum(r["cpu_util"] for r in runs) / len(runs) for side, runs in (("ours", mine), ("theirs", ref))}
    cfg = json.loads((folder.parent / "info.json").read_text())
    print_table(f"Text generation fidelity: Qwen2 decoder {cfg['num_hidden_layers']} layers x {cfg['hidden_size']}, "
                f"vocab {cfg['vocab_size']}; prompt {args.prompt_len}, output {args.output_len}, {args.requests} requests, "
                f"threads {args.threads}, precision {args.precision} (ours ran {mine[0]['ran_precision']}), "
                f"weights {args.weights}, {args.concurrency} in flight, "
                f"{args.rounds} rounds",
                ["metric", "rounds", "ours (mean ms)", "benchmark_genai (mean ms)", "ours / theirs (95% CI)",
                 "CI within 5%"], rows,
                [f"CPU: {hw.cpu_model} ({len(hw.available_cpus)} CPUs available)",
                 f"Load average (1, 5, 15 min) before: {load0[0]:.2f}, {load0[1]:.2f}, {load0[2]:.2f}; "
                 f"after: {load1[0]:.2f}, {load1[1]:.2f}, {load1[2]:.2f}",
                 f"CPU time over wall time while measuring, mean over rounds: ours {share['ours']:.2f}, theirs "
                 f"{share['theirs']:.2f} (near the thread count when the CPUs were free; less: others ran beside; "
                 f"a quiet round: both at least 90% of {threads})",
                 f"Ours: prompts given as {mine[0]['prompt_input']}, TTFT and TPOT from each request's raw token "
                 "timestamps in a measurement worker; theirs: benchmark_genai's loop, PerfMetrics added over the iterations."]
                + ([f"{args.concurrency} in flight: TPOT is each request's time per output token on both sides (theirs: "
                    f"the steps of the batch, from its raw token times); PerfMetrics' own TPOT divides a step by the "
                    f"batch: theirs {sum(r['genai_tpot_ms'] for r in ref) / len(ref):.3f} ms per generated token."]
                   if args.concurrency > 1 else []))


if __name__ == "__main__":
    main()
