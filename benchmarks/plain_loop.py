"""Reference: a plain timed loop of the same runtime call, with nothing of the workbench around it.

    python benchmarks/plain_loop.py --backend openvino --model model.xml --batch 1 --threads 1 --cores 0

Prints one JSON line: median and p99 latency (ms) and throughput over `--seconds` of calls.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["openvino", "tensorflow"], required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cores", default="0")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=0.5)
    a = ap.parse_args()
    os.sched_setaffinity(0, [int(c) for c in a.cores.split("+")])  # pin before the runtime loads
    os.environ["TF_NUM_INTRAOP_THREADS"] = str(a.threads)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import numpy as np

    if a.backend == "openvino":
        import openvino as ov

        core = ov.Core()
        model = core.read_model(a.model)
        shape = list(model.inputs[0].get_partial_shape().get_min_shape())
        shape[0] = a.batch
        model.reshape({model.inputs[0].get_any_name(): ov.PartialShape(shape)})
        compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": a.threads,
                                                     "INFERENCE_PRECISION_HINT": "f32"})
        req = compiled.create_infer_request()
        xs = [np.random.default_rng(i).random(shape, dtype=np.float32) for i in range(8)]

        def call(x):
            req.infer([x], share_inputs=True)
    else:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(a.threads)
        fn = tf.saved_model.load(a.model).signatures["serving_default"]
        (name, spec), = fn.structured_input_signature[1].items()
        shape = [a.batch] + [int(d) for d in spec.shape[1:]]
        xs = [tf.constant(np.random.default_rng(i).random(shape, dtype=np.float32)) for i in range(8)]

        def call(x):
            fn(**{name: x})

    end = time.perf_counter() + a.warmup
    i = 0
    while time.perf_counter() < end:
        call(xs[i % 8])
        i += 1
    lat = []
    t0 = time.perf_counter()
    end = t0 + a.seconds
    while time.perf_counter() < end:
        s = time.perf_counter_ns()
        call(xs[i % 8])
        lat.append(time.perf_counter_ns() - s)
        i += 1
    wall = time.perf_counter() - t0
    arr = np.array(lat) / 1e6
    print(json.dumps({"median_ms": float(np.median(arr)), "p99_ms": float(np.percentile(arr, 99)),
                      "throughput": len(arr) * a.batch / wall}))


if __name__ == "__main__":
    main()
