"""A plain `model.fit`, without the workbench: the reference `training.py` compares with.

    python benchmarks/plain_fit.py --model lenet5.keras --data fashion.npz --batch 64 --epochs 2
        [--intra 2 --inter 1 --omp 2]

Thread variables are set only when given (none: TensorFlow's default threading). A few warm-up
steps run first (tracing the training function), then `epochs` epochs of `model.fit` on whole
batches, each epoch timed from its start to its end (an epoch-level callback). Prints one JSON line: {"epoch_s": [...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, help=".npz with x_train and y_train")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--warmup-steps", type=int, default=5)
    ap.add_argument("--intra", type=int, default=0)
    ap.add_argument("--inter", type=int, default=0)
    ap.add_argument("--omp", type=int, default=0)
    a = ap.parse_args()
    for var, v in (("TF_NUM_INTRAOP_THREADS", a.intra), ("TF_NUM_INTEROP_THREADS", a.inter), ("OMP_NUM_THREADS", a.omp)):
        if v:
            os.environ[var] = str(v)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np

    with np.load(a.data) as f:
        x, y = f["x_train"], f["y_train"]
    n = len(x) // a.batch * a.batch
    x, y = x[:n], y[:n]
    model = keras.models.load_model(a.model)
    w = a.warmup_steps * a.batch
    model.fit(x[:w], y[:w], batch_size=a.batch, epochs=1, verbose=0, shuffle=False)
    times, start = [], [0.0]
    clock = keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: start.__setitem__(0, time.perf_counter()),
                                           on_epoch_end=lambda e, logs: times.append(time.perf_counter() - start[0]))
    model.fit(x, y, batch_size=a.batch, epochs=a.epochs, verbose=0, shuffle=True, callbacks=[clock])
    print(json.dumps({"epoch_s": times}))


if __name__ == "__main__":
    main()
