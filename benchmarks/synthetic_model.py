"""Synthetic IRs built with OpenVINO's opset API (random weights, no TensorFlow).

`build`: a compute-heavy convolutional model, used where TensorFlow is not installed (for example a
many-core machine that only has OpenVINO) to give thread scaling something to scale on: 8 3x3
convolutions of 64 channels at 56x56.

`build_transformer`: a transformer-shaped encoder (BERT-style blocks: multi-head self-attention,
GELU feed-forward, layer norms) over already-embedded tokens, input `tokens` [batch, seq, hidden]
float32 with a fixed sequence length, output a pooled [batch, hidden] vector: the matrix products
and softmaxes of a text model without its integer inputs.
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


def build_transformer(path: str | Path, seq: int = 64, hidden: int = 128, heads: int = 4, layers: int = 2,
                      ffn: int = 512, seed: int = 0) -> Path:
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(seed)
    head = hidden // heads

    def const(*shape, scale=None):
        sc = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return ops.constant((rng.standard_normal(shape) * sc).astype(np.float32))

    def i64(*v):
        return ops.constant(np.array(v, np.int64))

    def layer_norm(h):
        return ops.mvn(h, i64(-1), True, 1e-6, "inside_sqrt")

    def split_heads(h):  # [B, S, H] -> [B, heads, S, head]
        return ops.transpose(ops.reshape(h, i64(0, 0, heads, head), True), i64(0, 2, 1, 3))

    x = ops.parameter([-1, seq, hidden], ov.Type.f32, name="tokens")
    h = layer_norm(ops.add(x, const(seq, hidden, scale=0.1)))  # learned positions
    scale = ops.constant(np.float32(1.0 / np.sqrt(head)))
    for _ in range(layers):
        q, k, v = (split_heads(ops.matmul(h, const(hidden, hidden), False, False)) for _ in range(3))
        att = ops.softmax(ops.multiply(ops.matmul(q, k, False, True), scale), -1)
        ctx = ops.reshape(ops.transpose(ops.matmul(att, v, False, False), i64(0, 2, 1, 3)), i64(0, 0, hidden), True)
        h = layer_norm(ops.add(h, ops.matmul(ctx, const(hidden, hidden), False, False)))
        up = ops.gelu(ops.add(ops.matmul(h, const(hidden, ffn), False, False), const(ffn, scale=0.1)), "erf")
        h = layer_norm(ops.add(h, ops.matmul(up, const(ffn, hidden), False, False)))
    pooled = ops.reduce_mean(h, i64(1), keep_dims=False)
    pooled.output(0).get_tensor().set_names({"embedding"})
    x.output(0).get_tensor().set_names({"tokens"})
    model = ov.Model([ops.result(pooled)], [x], "synthetic_transformer")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path


if __name__ == "__main__":
    import sys

    print(build(sys.argv[1] if len(sys.argv) > 1 else "synthetic_conv.xml"))
