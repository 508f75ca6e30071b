"""Sources made on the spot (nothing is downloaded): an H.264 video and folders of images.

The pictures move (a gradient that drifts, bars and a square that travel) so that the encoder
does real work and the decoder has real work to undo, as with a camera stream.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _picture(i: int, width: int, height: int) -> np.ndarray:
    yy, xx = np.mgrid[0:height, 0:width]
    a = np.empty((height, width, 3), np.uint8)
    a[..., 0] = ((xx + 3 * i) * 255 // max(1, width)) % 256
    a[..., 1] = ((yy + 2 * i) * 255 // max(1, height)) % 256
    a[..., 2] = ((xx // 16 + yy // 16 + i) % 2) * 90
    s = max(4, min(width, height) // 5)
    x0 = (7 * i) % max(1, width - s)
    y0 = (5 * i) % max(1, height - s)
    a[y0:y0 + s, x0:x0 + s] = (255, 255, 255)
    return a


def write_video(path: str | Path, frames: int = 720, width: int = 1280, height: int = 720, fps: int = 30,
                gop: int = 30, codec: str = "libx264", bframes: int = 2) -> Path:
    """An H.264 (yuv420p) video of `frames` frames with a keyframe at least every `gop` frames."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        if codec == "libx264":
            stream.options = {"bf": str(bframes), "preset": "veryfast"}
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(_picture(i, width, height), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def write_images(folder: str | Path, count: int, width: int = 64, height: int = 48, suffix: str = ".png",
                 subfolders: int = 1) -> list[Path]:
    """`count` images spread over `subfolders` subfolders of `folder`."""
    from PIL import Image

    folder = Path(folder)
    out = []
    for i in range(count):
        sub = folder / f"part{i % subfolders}"
        sub.mkdir(parents=True, exist_ok=True)
        p = sub / f"img{i:05d}{suffix}"
        Image.fromarray(_picture(i, width, height)).save(p)
        out.append(p)
    return out
