"""Throughput of FP32, BF16 and INT8 for MobileNetV2 on OpenVINO, and the ratios to FP32.

    python benchmarks/precision_throughput.py [--rounds 5] [--seconds 2] [--batch 1,8] [--threads N]

All configurations are compiled in one process and measured in interleaved rounds (each round
times every configuration once, in a rotated order), so drift and noise from other work on the
machine hit them alike; the table shows the median over rounds and the spread (min-max).
The variants are the workbench's own: the FP32 IR (BF16 is that IR with
INFERENCE_PRECISION_HINT=bf16) and the cached NNCF INT8 IR, calibrated on the demo's inputs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def variants(model: str) -> dict[str, tuple[str, str]]:
    """precision -> (IR path, INFERENCE_PRECISION_HINT)."""
    from wb_core.api import convert_to_ir, resolve_model
    from wb_core.data import demo_dataset
    from wb_core.models import fingerprint
    from wb_core.variants.quantize import QuantizeSettings, ensure_int8_ir

    path = resolve_model(model)
    fp = fingerprint(path)
    fp32 = convert_to_ir(path)
    data_path, data_fp = demo_dataset(model).save()
    int8, _ = ensure_int8_ir(path, "savedmodel", fp, data_path, data_fp, QuantizeSettings())
    return {"fp32": (str(fp32), "f32"), "bf16": (str(fp32), "bf16"), "int8": (str(int8), "f32")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mobilenet-v2")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per configuration per round")
    ap.add_argument("--threads", type=int, default=0, help="INFERENCE_NUM_THREADS (0: runtime default)")
    a = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import openvino as ov

    from wb_core.backends.openvino import executed_precision

    batches = [int(b) for b in a.batch.split(",")]
    precisions = a.precisions.split(",")
    paths = variants(a.model)
    core = ov.Core()
    configs = []
    for b in batches:
        for p in precisions:
            model = core.read_model(paths[p][0])
            shape = list(model.inputs[0].get_partial_shape().get_min_shape())
            shape[0] = b
            model.reshape({model.inputs[0].get_any_name(): ov.PartialShape(shape)})
            props = {"INFERENCE_PRECISION_HINT": paths[p][1], "PERFORMANCE_HINT": "LATENCY"}
            if a.threads:
                props["INFERENCE_NUM_THREADS"] = a.threads
            compiled = core.compile_model(model, "CPU", props)
            req = compiled.create_infer_request()
            x = np.random.default_rng(0).uniform(-1, 1, size=shape).astype(np.float32)
            for _ in range(3):  # warm-up
                req.infer([x])
            configs.append({"batch": b, "precision": p, "req": req, "x": x, "runs": [],
                            "executed": executed_precision(compiled)[0]})
    for r in range(a.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for c in order:
            n, t0 = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - t0) < a.seconds:
                c["req"].infer([c["x"]])
                n += 1
            c["runs"].append(n * c["batch"] / elapsed)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)

    print(f"{a.model}: throughput (samples/s), median of {a.rounds} interleaved rounds of {a.seconds:g} s; "
          f"spread = (max-min)/median")
    print(f"{'batch':>5} {'precision':>9} {'executed':>8} {'throughput':>11} {'spread':>7} {'vs fp32':>8}")
    for b in batches:
        rows = [c for c in configs if c["batch"] == b]
        base = next((statistics.median(c["runs"]) for c in rows if c["precision"] == "fp32"), None)
        for c in rows:
            med = statistics.median(c["runs"])
            spread = (max(c["runs"]) - min(c["runs"])) / med
            ratio = f"{med / base:7.2f}x" if base else "      -"
            print(f"{b:>5} {c['precision']:>9} {c['executed']:>8} {med:>11.1f} {spread:>6.0%} {ratio:>8}")


if __name__ == "__main__":
    main()
