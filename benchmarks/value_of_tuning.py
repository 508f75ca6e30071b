"""Value of tuning: what `wb tune` finds, how long it takes, and what it is worth against what a user
gets from the runtime untouched.

    python benchmarks/value_of_tuning.py [--models mobilenet-v2,resnet50,text-encoder] [--time 3m]
                                         [--max-time S] [--quick]

Models: the MobileNetV2 and text-encoder demos, and `resnet50`, a Keras ResNet50 built here with
`keras.applications.ResNet50(weights=None)` (random weights: nothing is downloaded; speed does not
depend on the weights) and exported as a SavedModel. `--quick` runs `lenet-digits` alone with very
short windows and a 90 s budget: a smoke test of the script, not figures to quote.

For each model `api.tune` runs within the time budget (search, rounds for the leaders, accuracy,
confirmation, export). The table gives the time to the recommendation, then the confirmation's
figures: the tuned pick and every real default (OpenVINO untouched, its LATENCY and THROUGHPUT
hints with the requests the runtime asks for, TensorFlow's defaults for SavedModels) and the
pick's own variant under the THROUGHPUT hint, each as a median with its 95% interval over the
interleaved rounds, and the ratios with their intervals: tuned vs the best default, what the
precision variant buys, and what tuning buys on top. Say in BENCHMARKS.md whether the machine was
quiet when you take figures: the script prints the CPU and the load average it saw.

`--data` gives each tune calibration data, so INT8 (with its accuracy guard) is in the space: the
demos' own data (MobileNetV2's images, the text encoder's text and tokenizer) and, for resnet50, 64
random images (a speed proxy: the guard compares INT8 with FP32 on them). Then each pick is replayed
with OpenVINO's own `benchmark_app` beside `benchmark_app -hint throughput` on the original model
(the best untouched default users get), interleaved in `--replay-rounds` rounds of 10 s: the pick's
IR (the INT8 variant's file for INT8), batch, precision, threads, streams and requests in flight as
benchmark_app flags, and the ratio with a 95% interval.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench_util import layout_arg, print_table, shape_arg
from bench_util import run_benchmark_app as benchmark_app

from wb_core.api import (
    InputOptions,
    MeasureSettings,
    PrecisionOptions,
    convert_to_ir,
    demo_sample_text,
    describe_hardware,
    inspect_model,
    resolve_model,
    study_info,
    tune,
)
from wb_core.stats import log_ratio_interval


def build_resnet50(folder: Path) -> Path:
    """A ResNet50 SavedModel with random weights, built here (no download)."""
    import keras

    model = keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3))
    out = folder / "resnet50"
    model.export(str(out), verbose=False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mobilenet-v2,resnet50,text-encoder")
    ap.add_argument("--time", default="3m", help="time budget of each `tune` (e.g. 3m, 180)")
    ap.add_argument("--max-time", type=float, default=None, help="measuring time limit per point, seconds "
                    "(default: the workbench's)")
    ap.add_argument("--quick", action="store_true", help="lenet-digits only, short windows, 90 s: a smoke test")
    ap.add_argument("--data", action="store_true", help="give each tune calibration data (INT8 in the space) and "
                    "replay each pick with benchmark_app against its untouched THROUGHPUT hint")
    ap.add_argument("--replay-rounds", type=int, default=3)
    a = ap.parse_args()
    if a.quick:
        a.models, a.time, a.max_time = "lenet-digits", "90", 0.4
    settings = (MeasureSettings(warmup_s=a.max_time / 4, window_s=a.max_time / 4, max_time_s=a.max_time,
                                min_windows=3, tolerance=0.05) if a.max_time else None)
    print(describe_hardware())
    print(f"Load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    rows, ratios, answers, replays = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "value.db"
        for name in a.models.split(","):
            model = build_resnet50(Path(tmp)) if name == "resnet50" else name
            t0 = time.monotonic()
            inputs, prec = calibration(name, model, Path(tmp)) if a.data else (None, None)
            res = tune(model, time_budget=a.time, db=db, study=name, settings=settings, inputs=inputs,
                       precision_options=prec, export_dir=Path(tmp) / f"{name}-deploy",
                       batch_sizes="1,4,8,16" if not a.quick else "1,8")
            took = time.monotonic() - t0
            if a.data and res.recommended:
                try:
                    seq = _dynamic_size(study_info(name, db).get("spec"))
                    replays.append(replay(name, model, {**res.recommended, "seq_len": seq}, a.replay_rounds))
                except RuntimeError as e:  # one model's replay failing keeps the others' figures
                    replays.append([name, "-", "-", "-", "-", f"replay failed: {e}"])
            answers.append(f"{name}: {res.answer}")
            answers += [f"{name}: note: {n}" for n in res.notes]
            conf = res.confirmation
            if not conf:
                rows.append([name, f"{took:.0f} s", "not confirmed", "-", "-", "-", "-"])
                continue
            named = [("tuned", conf["tuned"])] + list(conf["defaults"].items()) + [
                ("pick's variant, THROUGHPUT hint", conf.get("same_variant_hint"))]
            for label, r in named:
                if r is None:
                    continue
                ran = r.get("executed_precision") or "-"
                req = r.get("requests_in_flight")
                rows.append([name, f"{took:.0f} s" if label == "tuned" else "", label, r["throughput"], _ci(r),
                             ran, int(req) if isinstance(req, (int, float)) and req == req else "-"])
            ratios.append([name, _pct(conf["gain"]), _pct(conf["precision_gain"]), _pct(conf["tuning_gain"]),
                           "tuned" if conf["tuned_is_better"] else "a default"])
    print(f"Load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print_table(f"Value of tuning: `wb tune --time {a.time}`, confirmation rounds interleaved in fresh workers",
                ["model", "time to answer", "configuration", "median samples/s", "95% CI", "ran in", "requests"],
                rows, ["requests: in flight, as the runtime asks (OPTIMAL_NUMBER_OF_INFER_REQUESTS) for the hints."])
    print_table("Ratios (paired by round, 95% interval)",
                ["model", "tuned vs best default", "variant under hint vs best default",
                 "tuned vs same variant under hint", "recommended"], ratios, answers)
    if replays:
        print_table(f"Replayed with benchmark_app: the pick against `-hint throughput` untouched, {a.replay_rounds} "
                    "interleaved round(s) of 10 s", ["model", "pick", "benchmark_app flags", "pick samples/s",
                                                     "untouched samples/s", "pick / untouched (95% CI)"], replays)


def calibration(name: str, model, folder: Path):
    """(InputOptions, PrecisionOptions) giving `tune` calibration data for a model of this script."""
    if name == "text-encoder":
        text, tokenizer = demo_sample_text(name)
        return InputOptions(text=str(text), tokenizer=str(tokenizer)), None
    if name == "resnet50":
        import numpy as np

        spec = inspect_model(model).inputs[0]
        shape = [64] + [d if d > 0 else 224 for d in spec.shape[1:]]
        path = folder / "resnet50-calib.npz"
        np.savez(path, x=np.random.default_rng(0).uniform(0, 255, shape).astype(np.float32))
        return None, PrecisionOptions(data=str(path))
    return None, PrecisionOptions(data=f"demo:{name}")


def _ir(model) -> Path:
    path = Path(resolve_model(model))
    return path if path.suffix == ".xml" else convert_to_ir(path)


def _dynamic_size(record) -> int | None:
    """The input options' `dynamic_size` in a study's spec record (the text length tune chose), if any."""
    if isinstance(record, dict):
        if isinstance(record.get("dynamic_size"), int):
            return record["dynamic_size"]
        record = list(record.values())
    if isinstance(record, list):
        return next((v for v in map(_dynamic_size, record) if v is not None), None)
    return None


def _seq(run: dict) -> int | None:
    seq = run.get("seq_len")
    return int(seq) if isinstance(seq, (int, float)) and seq == seq else None


def shape_flag(model: Path, batch: int, seq: int | None) -> list[str]:
    """benchmark_app's `-shape` and, where an input's batch axis is first, `-layout` naming it."""
    layout = layout_arg(model)
    return ["-shape", shape_arg(model, batch, seq)] + (["-layout", layout] if layout else [])


def replay_flags(run: dict, xml: Path) -> tuple[Path, list[str]]:
    """The IR and benchmark_app flags that run `run` (a results row) as the workbench measured it."""
    model = Path(run["variant_path"]) if isinstance(run.get("variant_path"), str) and run["variant_path"] else xml
    flags = shape_flag(model, int(run["batch_size"]), _seq(run))
    hint = run.get("hint") if isinstance(run.get("hint"), str) and run.get("hint") else None
    if bool(run.get("untouched")):
        # No hint: the plugin's own default ("none" leaves it unset; benchmark_app's own default is throughput).
        return model, flags + ["-hint", hint or "none"]
    # The precision the run's compiled model reported (an INT8 IR's unquantized parts included), e.g.
    # "<Type: 'bfloat16'>".
    ran = str(run.get("ov_inference_precision") or "f32").lower()
    flags += ["-infer_precision", "bf16" if "bf" in ran else "f16" if "16" in ran else "f32"]
    requests = int(run.get("concurrency") or 1)
    threads, streams = run.get("threads"), run.get("streams")
    flags += ["-hint", hint or "none", "-nireq", str(requests)]
    if not hint and isinstance(streams, (int, float)) and streams == streams:
        flags += ["-nstreams", str(int(streams))]
    if isinstance(threads, (int, float)) and threads == threads and threads:
        flags += ["-nthreads", str(int(threads))]
    return model, flags


def replay(name: str, model, run: dict, rounds: int) -> list:
    """The pick and `-hint throughput` untouched, both by benchmark_app, interleaved."""
    import math

    xml = _ir(model)
    pick_model, flags = replay_flags(run, xml)
    base = shape_flag(xml, 1, _seq(run)) + ["-hint", "throughput"]
    mine, theirs = [], []
    for r in range(rounds):
        for side in (("pick", "base") if r % 2 == 0 else ("base", "pick")):
            if side == "pick":
                mine.append(benchmark_app(pick_model, flags + ["-t", "10"])["throughput"])
            else:
                theirs.append(benchmark_app(xml, base + ["-t", "10"])["throughput"])
    ratio = log_ratio_interval([math.log(m / t) for m, t in zip(mine, theirs)])
    shown = [f for i, f in enumerate(flags) if f not in ("-shape", "-layout") and flags[i - 1] not in ("-shape", "-layout")]
    return [name, f"{run.get('precision')} batch {int(run['batch_size'])}", " ".join(shown),
            sum(mine) / len(mine), sum(theirs) / len(theirs), f"{ratio.ratio:.3f} ({ratio.low:.3f}-{ratio.high:.3f})"]


def _ci(r) -> str:
    lo, hi = r.get("throughput_ci_low"), r.get("throughput_ci_high")
    return f"{max(lo, 0):,.1f} - {hi:,.1f}" if lo is not None and hi is not None and lo == lo else "-"


def _pct(r) -> str:
    return r.percent() if r is not None else "-"


if __name__ == "__main__":
    main()
