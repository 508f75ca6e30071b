"""Serving: what a real server delivers at the exported settings, against the in-process prediction.

    python benchmarks/serving.py [--rounds 3] [--seconds 2] [--models lenet-digits,mobilenet-v2] [--batches 1,8]

For each model and batch size, the point is OpenVINO fp32, 1 thread, pinned to the first CPU (so
the load generator has the other CPUs to itself). Each round measures the point in-process (the
prediction a study stores) and right after it serves that run with `serve_check`: a real
tritonserver 2.51 (Python backend running OpenVINO with the run's properties, instance and
pinning), driven over gRPC at the run's requests in flight. The points take turns within a round,
in an order that rotates every round, so that drift on a shared machine hits them alike.

The ratios are served / predicted: the median over the rounds (min-max). A throughput ratio under
1 and a p99 ratio over 1 are the cost of serving (RPC, Triton's scheduler, the Python backend's
hand-off), which the in-process prediction does not include.

Needs a tritonserver: `pip install --no-deps nvidia-pytriton==0.7.0`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_util import fixed_time, fmt_ratio, median_spread, print_table

from wb_core.api import ConfigError, SweepSpec, available_cpus, profile, resolve_model, results, serve_check
from wb_core.export.tritonserver import find_tritonserver


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0, help="measuring time of every point, in-process and served")
    ap.add_argument("--models", default="lenet-digits,mobilenet-v2")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--quick", action="store_true", help="one round of 1 s on lenet-digits: a smoke test")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.seconds, a.models = 1, 1.0, "lenet-digits"
    try:
        install = find_tritonserver()
    except ConfigError as e:
        raise SystemExit(str(e)) from None
    cpus = available_cpus()
    core = cpus[0]
    points = [(m, int(b)) for m in a.models.split(",") for b in a.batches.split(",")]
    paths = {m: resolve_model(m) for m in a.models.split(",")}
    got: dict = {p: [] for p in points}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "serving.db"
        for r in range(a.rounds):
            order = points[r % len(points):] + points[:r % len(points)]
            for model, batch in order:
                study = f"{model}-b{batch}-r{r}"
                spec = SweepSpec(backends="openvino", precisions="fp32", batch_sizes=str(batch), threads="1",
                                 cores=str(core))
                profile(paths[model], spec=spec, db=db, study=study, settings=fixed_time(a.seconds),
                        return_frame=False)
                row = results(study, db, "stored").iloc[0]
                if row["status"] != "ok":
                    raise SystemExit(f"{study}: the in-process point failed: {row['error']}")
                res = serve_check(study, row["key"], db, max_time=a.seconds)
                got[(model, batch)].append(res)
    rows = []
    for (model, batch), checks in got.items():
        pred_t = [x.predicted["throughput"] for x in checks]
        serv_t = [x.served["throughput"] for x in checks]
        pred_p99 = [x.predicted["latency_ms_p99"] for x in checks]
        serv_p99 = [x.served["latency_ms_p99"] for x in checks]
        t_ratio = median_spread([x.ratio["throughput"] for x in results])
        p_ratio = median_spread([x.ratio["latency_ms_p99"] for x in results])
        rows.append([model, batch, median_spread(pred_t)[0], median_spread(serv_t)[0], fmt_ratio(*t_ratio),
                     median_spread(pred_p99)[0], median_spread(serv_p99)[0], fmt_ratio(*p_ratio),
                     median_spread([x.served.get("server_cpu_util") for x in results])[0]])
    shared = any(x.client_shared_cpus for rs in got.values() for x in rs)
    print_table(
        f"Serving: OpenVINO fp32, 1 thread on CPU {core}, 1 request in flight; in-process vs tritonserver "
        f"{results[0].server.get('version', '')} (Python backend), {a.rounds} interleaved round(s) of {a.seconds:g} s",
        ["model", "batch", "predicted samples/s", "served samples/s", "throughput served/predicted",
         "predicted p99 ms", "served p99 ms", "p99 served/predicted", "server cores busy"], rows,
        [f"Ratios are served / predicted: the median over rounds (min-max). tritonserver: {install.binary}.",
         "The load generator ran on " + ("the same CPUs as the server (no other CPU was free)." if shared
                                         else f"CPUs {[c for c in cpus if c != core]}, the server on CPU {core}.")])


if __name__ == "__main__":
    main()
