"""Sources made on the spot (nothing is downloaded): an H.264 video and folders of images.

The pictures move (a gradient that drifts, bars and a square that travel) so that the encoder
does real work and the decoder has real work to undo, as with a camera stream.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


class _Pictures:
    """Frames of a moving test picture; the gradients are made once and shifted per frame."""

    def __init__(self, width: int, height: int):
        self.w, self.h = width, height
        yy, xx = np.mgrid[0:height, 0:width]
        self.red = (xx * 255 // max(1, width)).astype(np.uint8)
        self.green = (yy * 255 // max(1, height)).astype(np.uint8)
        self.blue = (((xx // 16 + yy // 16) % 2) * 90).astype(np.uint8)
        self.size = max(4, min(width, height) // 5)

    def __call__(self, i: int) -> np.ndarray:
        a = np.empty((self.h, self.w, 3), np.uint8)
        a[..., 0] = np.roll(self.red, 3 * i, axis=1)
        a[..., 1] = np.roll(self.green, 2 * i, axis=0)
        a[..., 2] = self.blue if i % 2 == 0 else 90 - self.blue
        s = self.size
        x0 = (7 * i) % max(1, self.w - s)
        y0 = (5 * i) % max(1, self.h - s)
        a[y0:y0 + s, x0:x0 + s] = (255, 255, 255)
        return a


def _picture(i: int, width: int, height: int) -> np.ndarray:
    return _Pictures(width, height)(i)


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
        pictures = _Pictures(width, height)
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(pictures(i), format="rgb24")
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


def sample_video(frames: int = 720, width: int = 1280, height: int = 720, fps: int = 30, gop: int = 30) -> Path:
    """`write_video` once per set of parameters, kept in the workbench cache ($WB_CACHE_DIR/samples)."""
    import os

    from wb_core.paths import cache_dir

    path = cache_dir() / "samples" / f"video-{frames}f-{width}x{height}-{fps}fps-gop{gop}.mp4"
    if not path.exists():
        tmp = path.with_name(f".{os.getpid()}-{path.name}")
        write_video(tmp, frames=frames, width=width, height=height, fps=fps, gop=gop)
        tmp.replace(path)
    return path
