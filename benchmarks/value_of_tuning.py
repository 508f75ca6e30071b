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
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench_util import print_table

from wb_core.api import MeasureSettings, describe_hardware, tune


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
    a = ap.parse_args()
    if a.quick:
        a.models, a.time, a.max_time = "lenet-digits", "90", 0.4
    settings = (MeasureSettings(warmup_s=a.max_time / 4, window_s=a.max_time / 4, max_time_s=a.max_time,
                                min_windows=3, tolerance=0.05) if a.max_time else None)
    print(describe_hardware())
    print(f"Load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    rows, ratios, answers = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "value.db"
        for name in a.models.split(","):
            model = build_resnet50(Path(tmp)) if name == "resnet50" else name
            t0 = time.monotonic()
            res = tune(model, time_budget=a.time, db=db, study=name, settings=settings,
                       export_dir=Path(tmp) / f"{name}-deploy", batch_sizes="1,4,8,16" if not a.quick else "1,8")
            took = time.monotonic() - t0
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


def _ci(r) -> str:
    lo, hi = r.get("throughput_ci_low"), r.get("throughput_ci_high")
    return f"{max(lo, 0):,.1f} - {hi:,.1f}" if lo is not None and hi is not None and lo == lo else "-"


def _pct(r) -> str:
    return r.percent() if r is not None else "-"


if __name__ == "__main__":
    main()
