"""A hand-written serial video pipeline, without the workbench: the reference `pipeline.py` compares with.

    python benchmarks/plain_pipeline.py --model model.xml --video clip.mp4 --batch 8 [--threads 2]
        [--cores 0-1] [--size 224x224] [--channels 3] [--scale symmetric] [--decode-threads 1]

Decode with PyAV, resize and convert with FFmpeg's swscale, scale with numpy, fill a batch, run
the OpenVINO model (FP32 explicitly), one after another. The model is compiled and run once
before the clock starts; the clock runs from opening the video to the last result. Prints one
JSON line: {"seconds", "frames"}.
"""

from __future__ import annotations

import argparse
import json
import os
import time

SCALES = {"unit": (1 / 255.0, 0.0), "raw": (1.0, 0.0), "symmetric": (1 / 127.5, -1.0)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--video", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0, help="INFERENCE_NUM_THREADS (0: OpenVINO's default)")
    ap.add_argument("--cores", default="", help="CPU list to pin to, e.g. 0-1")
    ap.add_argument("--size", default="224", help="frame size HxW (or one number for square frames)")
    ap.add_argument("--channels", type=int, default=3, choices=(1, 3))
    ap.add_argument("--scale", default="symmetric", choices=sorted(SCALES))
    ap.add_argument("--decode-threads", type=int, default=1, help="FFmpeg decoder threads (0: FFmpeg's choice)")
    a = ap.parse_args()
    if a.cores:
        cpus = set()
        for part in a.cores.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        os.sched_setaffinity(0, cpus)

    import av
    import numpy as np
    import openvino as ov

    core = ov.Core()
    model = core.read_model(a.model)
    shape = list(model.inputs[0].partial_shape.get_min_shape())
    shape[0] = a.batch
    model.reshape({model.inputs[0].any_name: ov.PartialShape(shape)})
    props = {"INFERENCE_PRECISION_HINT": "f32"}
    if a.threads:
        props["INFERENCE_NUM_THREADS"] = a.threads
    req = core.compile_model(model, "CPU", props).create_infer_request()
    nchw = shape[1] in (1, 3) and shape[3] not in (1, 3)
    h, _, w = a.size.lower().partition("x")
    height, width = int(h), int(w or h)
    fmt = "gray" if a.channels == 1 else "rgb24"
    batch = np.zeros(shape, np.float32)
    req.infer([batch])
    scale, offset = SCALES[a.scale]

    # One swscale thread, as the workbench's processes use (PyAV 17+ has the argument; older ones scale on one).
    scale_kw = {"threads": 1} if int(av.__version__.split(".")[0]) >= 17 else {}
    frames = fill = 0
    t0 = time.perf_counter()
    container = av.open(a.video)
    stream = container.streams.video[0]
    stream.codec_context.thread_count = a.decode_threads
    for frame in container.decode(stream):
        rgb = frame.reformat(width=width, height=height, format=fmt, interpolation="BILINEAR",
                             **scale_kw).to_ndarray()
        if rgb.ndim == 2:
            rgb = rgb[..., None]
        if nchw:
            rgb = rgb.transpose(2, 0, 1)
        np.multiply(rgb, np.float32(scale), out=batch[fill], casting="unsafe")
        batch[fill] += np.float32(offset)
        fill += 1
        frames += 1
        if fill == a.batch:
            req.infer([batch])
            fill = 0
    if fill:
        req.infer([batch])
    container.close()
    print(json.dumps({"seconds": time.perf_counter() - t0, "frames": frames}))


if __name__ == "__main__":
    main()
