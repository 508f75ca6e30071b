"""Value of tuning: the best configuration the smart search finds against what a user gets without us.

    python benchmarks/value_of_tuning.py [--models lenet-digits,mobilenet-v2,transformer] [--p99-ms X] [--rounds R]
                                         [--quick]

Models: the demos by name, and `transformer`, a transformer-shaped encoder IR built here with
openvino's opset API (benchmarks/synthetic_model.py: 2 BERT-style blocks, 4 heads, hidden 128,
64 tokens; 32 with --quick). It has no SavedModel, so it has no TensorFlow default.

For each model, the smart search looks for the highest fp32 throughput on OpenVINO over
threads 1..N x streams 1..N x requests in flight 1..N x batch 1..32 (N = CPUs available). The
defaults, each measured at batch 1 and at the batch size the search chose:
- TensorFlow with its default threads (the SavedModel as a user would serve it);
- OpenVINO with PERFORMANCE_HINT=LATENCY, one request at a time;
- OpenVINO with PERFORMANCE_HINT=THROUGHPUT and N requests in flight (what the hint is made for).
The tuned configuration is measured again right after the defaults, so that the ratios compare
runs taken under the same machine load. At batch 1 the speed-up includes batching, which only
pays when the application can group requests; at the tuned batch it is threads, streams and
runtime alone.

A second table then confirms the search's pick the way `wb confirm` does: the pick, its
runner-up and the defaults at the pick's batch size are measured again in R interleaved rounds
(fresh workers, shuffled order each round), and it shows each one's median with its 95%
interval side by side, and the tuned pick's gain over the best default with its interval
(paired by round). When the gain's interval includes 1, the default is what gets recommended.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import synthetic_model
from bench_util import print_table

from wb_core.api import confirm
from wb_core.config import MeasureSettings, RunConfig, SweepSpec, available_cpus
from wb_core.demo import demo_model_path
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep
from wb_core.sweep.search import run_search


def defaults(n: int, batches: str, tensorflow: bool = True) -> dict[str, SweepSpec]:
    return {
        **({"TensorFlow, default threads": SweepSpec(backends="tensorflow", batch_sizes=batches)} if tensorflow
           else {}),
        "OpenVINO LATENCY hint": SweepSpec(backends="openvino", batch_sizes=batches, hints="latency"),
        f"OpenVINO THROUGHPUT hint, {n} requests": SweepSpec(backends="openvino", batch_sizes=batches,
                                                             hints="throughput", concurrency=str(n)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="lenet-digits,mobilenet-v2,transformer")
    ap.add_argument("--p99-ms", type=float, default=None, help="p99 target for the search (default: none)")
    ap.add_argument("--max-time", type=float, default=1.5, help="measuring time limit per point, seconds")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the confirmation")
    ap.add_argument("--quick", action="store_true", help="lenet-digits and a shorter transformer, very short "
                    "windows: a smoke test")
    a = ap.parse_args()
    if a.quick:
        a.models, a.max_time = "lenet-digits,transformer", 0.4
    settings = MeasureSettings(warmup_s=a.max_time / 4, window_s=a.max_time / 4, max_time_s=a.max_time,
                               min_windows=3, tolerance=0.05)
    n = len(available_cpus())
    ladder = ",".join(str(v) for v in range(1, n + 1))
    rows, confirmed, verdicts = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "value.db"
        for name in a.models.split(","):
            synthetic = name == "transformer"
            model = (synthetic_model.build_transformer(Path(tmp) / "transformer.xml", seq=32 if a.quick else 64)
                     if synthetic else demo_model_path(name))
            space = SweepSpec(backends="openvino", threads=ladder, streams=ladder, concurrency=ladder,
                              batch_sizes="1,2,4,8,16,32")
            found = run_search(model, space, db, f"{name}-search", search="smart", p99_ms=a.p99_ms, settings=settings)
            if found.best is None:
                rows.append([name, "-", "search found nothing", "-", "-", "-", "-", "-"])
                continue
            tuned = found.best.config
            batches = ",".join(str(b) for b in sorted({1, tuned.batch_size}))
            measured = {}
            for label, spec in defaults(n, batches, tensorflow=not synthetic).items():
                study = f"{name}-{label}"
                run_sweep(model, spec, db, study, settings=settings)
                for r in load_results(db, study).to_dict("records"):
                    measured[(label, int(r["batch_size"]))] = r
            again = f"{name}-tuned-again"
            run_sweep(model, SweepSpec(), db, again, settings=settings, configs=[tuned])
            t = load_results(db, again).iloc[0]
            for (label, b), r in measured.items():
                ok = r["status"] == "ok"
                rows.append([name, label, b, r["throughput"] if ok else r["status"],
                             r["latency_ms_p99"] if ok else "-", t.throughput,
                             f"{t.throughput / r['throughput']:.2f}x" if ok else "-", _short(tuned)])
            rows.append([name, "(search)", "-", f"{found.measured} of {found.candidates} configs", "-",
                         found.best.throughput, "-", _short(tuned)])
            out = confirm(f"{name}-search", db, rounds=a.rounds, settings=settings)
            gain = out["gain"]
            for label, r in [("tuned", out["tuned"])] + list(out["defaults"].items()):
                if r is None:
                    continue
                confirmed.append([name, label, r["throughput"], _ci(r), r["latency_ms_p99"],
                                  gain.percent() if label == "tuned" and gain else "-",
                                  "recommended" if out["recommended"] is not None
                                  and r["key"] == out["recommended"]["key"] else ""])
            verdicts.append(f"{name}: {out['verdict']}")
    print_table(
        f"Value of tuning: fp32, tuned = best of a smart search on OpenVINO "
        f"({f'p99 <= {a.p99_ms:g} ms' if a.p99_ms else 'no p99 target'}), max {a.max_time:g} s per point",
        ["model", "default", "batch", "default samples/s", "default p99 ms", "tuned samples/s", "speed-up",
         "tuned config"], rows,
        ["speed-up = tuned samples/s (measured again beside the defaults) / default samples/s. At batch 1 it "
         "includes batching."])
    print_table(
        f"Confirmation: {a.rounds} interleaved rounds in fresh workers, median and 95% t interval of the mean",
        ["model", "configuration", "median samples/s", "95% CI", "median p99 ms", "tuned vs best default",
         "pick"], confirmed,
        ["tuned vs best default: paired ratio of throughput by round, 95% interval; the default is recommended "
         "unless the whole interval is a gain.", *verdicts])


def _ci(r) -> str:
    lo, hi = r.get("throughput_ci_low"), r.get("throughput_ci_high")
    return f"{lo:,.1f} - {hi:,.1f}" if lo is not None and hi is not None else "-"


def _short(cfg: RunConfig) -> str:
    return f"b{cfg.batch_size} t{cfg.threads or 'auto'} s{cfg.streams or 'auto'} c{cfg.concurrency}"


if __name__ == "__main__":
    main()
