"""INT8 recipes side by side: accuracy against FP32 and speed against FP32, per model family.

    python benchmarks/int8_recipes.py [--rounds 3] [--seconds 5] [--quick]

For each model, NNCF's plain recipe and the recipe the workbench picks for the model's family are
built through the workbench's own cache (the same calls a sweep makes). Accuracy is computed here
with numpy from OpenVINO outputs on the same inputs: cosine similarity to FP32 (top-1 against the
labels for LeNet). Speed is OpenVINO's own `benchmark_app` with the THROUGHPUT hint on the FP32 IR
(run as f32) and on each INT8 IR, in interleaved rounds; the table gives the median and the ratio.

Models (all built here, nothing downloaded): the text demo on its sample text at 128 tokens; a
2-layer encoder with activation outliers (two channels 30x the others after every normalisation,
as trained transformers have) on padded random tokens; LeNet on scikit-learn's digits.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_util import print_table, run_benchmark_app

SEQ = 128


def machine_block() -> str:
    """The CPU (model and the ISA flags that decide INT8 and BF16 speed) and the load, for the table."""
    import os

    from wb_core.api import hardware_info

    hw = hardware_info()
    flags = ", ".join(k for k, v in hw.flags.items() if v) or "none of note"
    return f"CPU: {hw.cpu_model} ({hw.logical_cores} CPUs); flags: {flags}; load average " + \
        ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _cosine(a, b) -> float:
    a, b = a.reshape(len(a), -1).astype(np.float64), b.reshape(len(b), -1).astype(np.float64)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).mean())


def _text_feeds(n: int) -> dict:
    from tokenizers import Tokenizer

    from wb_core.api import demo_sample_text

    sample, tokenizer = demo_sample_text("text-encoder")
    tok = Tokenizer.from_file(str(tokenizer))
    tok.enable_truncation(SEQ)
    tok.enable_padding(length=SEQ)
    enc = tok.encode_batch([line for line in sample.read_text().splitlines() if line.strip()][:n])
    return {"input_ids": np.array([e.ids for e in enc], np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], np.int64)}


def _token_feeds(n: int, vocab: int) -> dict:
    rng = np.random.default_rng(0)
    mask = (np.arange(SEQ)[None, :] < rng.integers(8, SEQ + 1, size=n)[:, None]).astype(np.int64)
    return {"input_ids": rng.integers(1, vocab, size=(n, SEQ)) * mask, "attention_mask": mask,
            "token_type_ids": np.zeros((n, SEQ), np.int64)}


def models(work: Path, quick: bool) -> list[dict]:
    from wb_core.api import ensure_demo, resolve_model
    from wb_core.demo import build_text_encoder

    n = 32 if quick else 96
    out = [{"name": "text demo (sample text)", "path": resolve_model("text-encoder"), "feeds": _text_feeds(n),
            "output": "sentence_embedding"}]
    enc = build_text_encoder(work / "outliers.xml", vocab=1000, hidden=64, layers=2, ffn=256, outlier_scale=30.0)
    out.append({"name": "encoder with outliers", "path": enc, "feeds": _token_feeds(n, 1000),
                "output": "sentence_embedding"})
    with np.load(ensure_demo("lenet-digits") / "data.npz") as f:
        out.append({"name": "LeNet (digits)", "path": resolve_model("lenet-digits"), "feeds": f["x"][:300],
                    "labels": f["y"][:300], "output": None})
    return out


def build(model: dict, recipe: str, work: Path):
    from wb_core.api import convert_to_ir
    from wb_core.data import Dataset
    from wb_core.models import detect_format, fingerprint
    from wb_core.variants.quantize import QuantizeSettings, ensure_int8_ir

    path = Path(model["path"])
    fmt, fp = detect_format(path), fingerprint(path)
    data_path, data_fp = Dataset(x=model["feeds"]).save()
    int8, info = ensure_int8_ir(path, fmt, fp, data_path, data_fp,
                                QuantizeSettings(recipe=recipe, output=model["output"]))
    return convert_to_ir(path), int8, info


def accuracy(model: dict, fp32_xml: Path, int8_xml: Path) -> str:
    import openvino as ov

    core = ov.Core()

    def run(xml):
        compiled = core.compile_model(core.read_model(str(xml)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        feeds = model["feeds"]
        if isinstance(feeds, dict):
            res = compiled(feeds)
            return res[model["output"]]
        return np.concatenate([compiled(feeds[i:i + 1])[0] for i in range(len(feeds))])

    ref, out = run(fp32_xml), run(int8_xml)
    if "labels" in model:
        y = model["labels"]
        return f"top-1 {np.mean(out.argmax(1) == y):.1%} (FP32 {np.mean(ref.argmax(1) == y):.1%})"
    return f"cosine {_cosine(out, ref):.4f}"


def speed_args(model: dict, xml: Path, seconds: int, fp32: bool) -> list[str]:
    """benchmark_app's arguments: the THROUGHPUT hint, batch 1 at the data's sample shape."""
    import openvino as ov

    args = ["-hint", "throughput", "-t", str(max(1, round(seconds)))]  # benchmark_app takes whole seconds
    if fp32:
        args += ["-infer_precision", "f32"]
    feeds = model["feeds"]
    names = [port.get_any_name() for port in ov.Core().read_model(str(xml)).inputs]
    shapes = {n: feeds[n].shape[1:] for n in names} if isinstance(feeds, dict) else {names[0]: feeds.shape[1:]}
    args += ["-shape", ",".join(f"{n}[{','.join(str(d) for d in (1, *shape))}]" for n, shape in shapes.items())]
    return args


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1 round of 1 s, fewer samples: checks the script")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.seconds = 1, 1
    print(machine_block())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for model in models(work, args.quick):
            built = {}
            for recipe in ("default", "auto"):
                fp32_xml, int8_xml, info = build(model, recipe, work)
                built[info.get("quant_recipe") or recipe] = (int8_xml, info)
            fp32_xml = build(model, "default", work)[0]
            samples: dict[str, list[float]] = {"fp32": [], **{r: [] for r in built}}
            for _ in range(args.rounds):  # interleaved: each round times every variant once
                samples["fp32"].append(run_benchmark_app(fp32_xml, speed_args(model, fp32_xml, args.seconds, True))["throughput"])
                for recipe, (xml, _) in built.items():
                    samples[recipe].append(run_benchmark_app(xml, speed_args(model, xml, args.seconds, False))["throughput"])
            fp32 = statistics.median(samples["fp32"])
            for recipe, (xml, info) in built.items():
                tput = statistics.median(samples[recipe])
                family = info.get("model_family")
                rows.append([model["name"], family, recipe + (" (picked)" if recipe != "default" else ""),
                             accuracy(model, fp32_xml, xml), f"{fp32:,.0f}", f"{tput:,.0f}", f"{tput / fp32:.2f}x"])
    print_table("INT8 recipes: accuracy and throughput against FP32 (benchmark_app, THROUGHPUT hint)",
                ["model", "family", "recipe", "INT8 vs FP32", "FP32 samples/s", "INT8 samples/s", "INT8 / FP32"],
                rows, notes=[f"{args.rounds} interleaved round(s) of {args.seconds:g} s each; medians. FP32 runs as "
                             f"f32 (-infer_precision f32); INT8 IRs as built by the workbench's cache."])


if __name__ == "__main__":
    main()
