"""A compute-heavy convolutional IR built with OpenVINO's opset API (random weights, no TensorFlow).

Used where TensorFlow is not installed (for example a many-core machine that only has OpenVINO)
to give thread scaling something to scale on: 8 3x3 convolutions of 64 channels at 56x56.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def build(path: str | Path, size: int = 56, channels: int = 64, depth: int = 8, seed: int = 0) -> Path:
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(seed)
    x = ops.parameter([-1, 3, size, size], ov.Type.f32, name="image")
    h = x
    c_in = 3
    for _ in range(depth):
        w = ops.constant((rng.standard_normal((channels, c_in, 3, 3)) * 0.05).astype(np.float32))
        h = ops.relu(ops.convolution(h, w, [1, 1], [1, 1], [1, 1], [1, 1]))
        c_in = channels
    pooled = ops.reduce_mean(h, ops.constant([2, 3], ov.Type.i64), keep_dims=False)
    fc = ops.constant((rng.standard_normal((channels, 10)) * 0.05).astype(np.float32))
    out = ops.softmax(ops.matmul(pooled, fc, False, False), 1)
    model = ov.Model([out], [x], "synthetic_conv")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path


if __name__ == "__main__":
    import sys

    print(build(sys.argv[1] if len(sys.argv) > 1 else "synthetic_conv.xml"))
