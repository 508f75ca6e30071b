"""Where a pipeline's frames come from, and how one frame becomes a model input.

A source is a video file, or a folder holding images and/or videos (searched recursively, in
sorted order). The parent scans it once (`scan_source`): images are listed with their headers
checked, videos are demuxed without decoding to count their frames and find their keyframes. The
work is cut into units: one image, or one segment of a video that starts at a keyframe, so that
several processes can decode one video at once (a decoder cannot start between keyframes).

A worker turns units into frames (`FrameReader.frames`) and each frame into the model's input
(`FrameReader.preprocess`), writing straight into a batch buffer: resize (bilinear), grey or RGB,
scale (as `--image-scale` for image folders) and layout (NHWC or NCHW). Files that cannot be
read are skipped, counted and named; the study goes on.

Videos are read with PyAV, which bundles FFmpeg's decoders; images with Pillow.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from wb_core.data import IMAGE_SUFFIXES, SCALES, ImageOptions, _image_geometry
from wb_core.errors import ConfigError, setting

VIDEO_SUFFIXES = (".mp4", ".mkv", ".avi", ".mov", ".webm", ".m4v", ".mpg", ".mpeg", ".ts", ".y4m", ".flv")
MAX_FILES = 1_000_000


@dataclass(frozen=True)
class Geometry:
    """What preprocessing makes of a frame: size, channels, layout and pixel scaling."""

    height: int
    width: int
    channels: int  # 1 (grey) or 3 (RGB)
    layout: str  # nhwc or nchw
    scale: str  # a key of wb_core.data.SCALES

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        if self.layout == "nchw":
            return (self.channels, self.height, self.width)
        return (self.height, self.width, self.channels)

    def describe(self) -> str:
        return f"{'x'.join(map(str, self.frame_shape))} ({self.layout.upper()}, {self.scale} scale)"

    def to_dict(self) -> dict:
        return asdict(self)


def frame_geometry(opts: ImageOptions, spec) -> Geometry:
    """The geometry that feeds the model input `spec` (an InputSpec), or one sentence naming both shapes."""
    shape = tuple(spec.shape)
    if len(shape) != 4:
        raise ConfigError(f"A pipeline feeds images, but the model's input is {spec.describe()}; it needs one "
                          f"4-dimensional image input (NHWC or NCHW).")
    layout, size, channels = _image_geometry(opts, shape)
    if size is None:
        raise ConfigError(f"The model's input {spec.describe()} has no fixed height and width; give the size "
                          f"frames are resized to ({setting('image_size', 'Image size')}, HxW).")
    geo = Geometry(height=size[0], width=size[1], channels=channels, layout=layout, scale=opts.scale)
    want = shape[1:]
    if any(w > 0 and w != g for w, g in zip(want, geo.frame_shape)):
        raise ConfigError(f"Preprocessing makes frames of {geo.describe()} but the model expects input "
                          f"{spec.describe()}; change {setting('image_size', 'the image size')}, "
                          f"{setting('channels', 'the channels')} or {setting('layout', 'the layout')} to match.")
    if np.dtype("float32" if spec.dtype == "bfloat16" else spec.dtype).kind != "f":
        raise ConfigError(f"Preprocessing makes float32 frames but the model expects input {spec.describe()}.")
    return geo


@dataclass
class SourcePlan:
    """A scanned source: units of work, how many frames they hold, and what was skipped."""

    source: str
    units: list[dict] = field(default_factory=list)
    frames: int = 0  # frames in the readable files (a video's by its packets; an image is one)
    images: int = 0
    videos: int = 0
    skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}
    fingerprint: str = ""

    def describe(self) -> str:
        parts = [f"{self.frames} frames from {self.images} image(s) and {self.videos} video(s)"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} file(s) skipped")
        return ", ".join(parts)


def scan_source(source: str | Path) -> SourcePlan:
    """List the frames of a video file or a folder of images/videos; unreadable files are skipped."""
    from wb_core.streams import kind_of

    path = Path(source)
    if not path.exists():
        raise ConfigError(f"Pipeline source '{path}' does not exist.")
    special = kind_of(path)
    if special:  # reading one would wait for a writer, or never end
        raise ConfigError(f"Pipeline source '{path}' is {special}, not a video file or a folder of images; record "
                          f"the stream to a file first.")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not any(
            part.startswith(".") for part in p.relative_to(path).parts))[:MAX_FILES]
        media = [p for p in files if p.suffix.lower() in IMAGE_SUFFIXES + VIDEO_SUFFIXES]
        if not media:
            raise ConfigError(f"Pipeline source '{path}' holds no images ({', '.join(IMAGE_SUFFIXES)}) or videos "
                              f"({', '.join(VIDEO_SUFFIXES)}).")
    else:
        media = [path]
    plan = SourcePlan(source=str(path))
    h = hashlib.sha256()
    for f in media:
        st = f.stat()
        h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}".encode())
        if f.suffix.lower() in IMAGE_SUFFIXES:
            why = _check_image(f)
            if why:
                plan.skipped.append({"path": str(f), "reason": why})
                continue
            plan.units.append({"kind": "image", "path": str(f), "frames": 1})
            plan.images += 1
            plan.frames += 1
        else:
            try:
                info = probe_video(f)
            except _Unreadable as e:
                plan.skipped.append({"path": str(f), "reason": str(e)})
                continue
            plan.units.append({"kind": "video", "path": str(f), "frames": info["frames"], "start": 0,
                               "end": info["frames"], "start_pts": None, "end_pts": None,
                               "keyframes": info["keyframes"]})
            plan.videos += 1
            plan.frames += info["frames"]
    plan.fingerprint = h.hexdigest()[:16]
    if not plan.units:
        named = "; ".join(f"{s['path']}: {s['reason']}" for s in plan.skipped[:3])
        raise ConfigError(f"Pipeline source '{path}' has no readable frames ({named}).")
    return plan


class _Unreadable(Exception):
    pass


def _check_image(path: Path) -> str | None:
    """Why an image cannot be used, or None. Its pixels are decoded, not only its header: a
    truncated file has a sound header and fails only when decoded."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im.load()
    except Exception as e:
        why = str(e).strip().splitlines()[0][:80] if str(e).strip() else type(e).__name__
        return f"not a readable image ({why})"
    return None


def probe_video(path: Path) -> dict:
    """Frames (packets) of a video's first video stream, and keyframes as (index, pts), without decoding."""
    import av

    try:
        container = av.open(str(path))
    except Exception as e:
        raise _Unreadable(f"not a readable video ({type(e).__name__})") from None
    try:
        if not container.streams.video:
            raise _Unreadable("has no video stream")
        stream = container.streams.video[0]
        pts, keys, unknown = [], set(), False
        try:
            for packet in container.demux(stream):
                if not packet.size:
                    continue
                if packet.pts is None:
                    unknown = True
                else:
                    pts.append(packet.pts)
                    if packet.is_keyframe:
                        keys.add(packet.pts)
                if len(pts) > 10_000_000:
                    break
        except Exception as e:
            if not pts:
                raise _Unreadable(f"not a readable video ({type(e).__name__})") from None
        if not pts and not unknown:
            raise _Unreadable("holds no video frames")
    finally:
        container.close()
    if unknown:  # no timestamps to seek by: one unit, read from the start
        return {"frames": max(len(pts), 1), "keyframes": []}
    order = sorted(pts)
    index = {p: i for i, p in enumerate(order)}
    return {"frames": len(order), "keyframes": sorted((index[p], p) for p in keys)}


def assign_units(plan: SourcePlan, workers: int) -> list[list[dict]]:
    """Split the units among `workers` processes, balancing frames; videos are cut at keyframes.

    Each video is cut into segments of about a quarter of a worker's share, each starting at a
    keyframe (a video with one keyframe stays whole). Units go to the least-loaded worker.
    """
    workers = max(1, workers)
    units: list[dict] = []
    share = max(1, plan.frames // (workers * 4))
    for u in plan.units:
        if u["kind"] != "video" or workers == 1 or len(u["keyframes"]) < 2:
            units.append(_unit(u))
            continue
        cuts = [0]
        for idx, _pts in u["keyframes"]:
            if idx - cuts[-1] >= share:
                cuts.append(idx)
        pts_at = dict(u["keyframes"])
        bounds = cuts + [u["frames"]]
        for a, b in zip(bounds[:-1], bounds[1:]):
            if b > a:
                units.append({"kind": "video", "path": u["path"], "start": a, "end": b, "frames": b - a,
                              "start_pts": pts_at.get(a) if a else None, "end_pts": pts_at.get(b)})
    loads = [0] * workers
    out: list[list[dict]] = [[] for _ in range(workers)]
    for u in sorted(units, key=lambda u: -u["frames"]):
        w = loads.index(min(loads))
        out[w].append(u)
        loads[w] += u["frames"]
    for lst in out:  # read each worker's units in source order
        lst.sort(key=lambda u: (u["path"], u.get("start", 0)))
    return out


def _unit(u: dict) -> dict:
    return {k: v for k, v in u.items() if k != "keyframes"}


class FrameReader:
    """Decodes units into frames and writes preprocessed frames into batch buffers (in a worker)."""

    def __init__(self, geometry: dict | Geometry, decode_threads: int = 1):
        self.geo = geometry if isinstance(geometry, Geometry) else Geometry(**geometry)
        self.decode_threads = max(0, int(decode_threads))
        self.scale, self.offset = SCALES[self.geo.scale]
        self.skipped: list[dict] = []  # {"path", "reason", "frames"}
        self._reformatter = None

    # ---- decoding ----
    def frames(self, unit: dict):
        """Yield decoded frames of one unit (a PIL image or an av.VideoFrame); failures are recorded."""
        if unit["kind"] == "image":
            im = self._decode_image(unit["path"])
            if im is not None:
                yield im
            return
        yield from self._decode_video(unit)

    def _decode_image(self, path: str):
        from PIL import Image

        try:
            with Image.open(path) as im:
                return im.convert("L" if self.geo.channels == 1 else "RGB")  # convert() decodes
        except Exception as e:
            self.skipped.append({"path": path, "reason": f"cannot be decoded ({type(e).__name__})", "frames": 1})
            return None

    def _decode_video(self, unit: dict):
        import av

        expected = int(unit["end"]) - int(unit["start"])
        got = 0
        start_pts, end_pts = unit.get("start_pts"), unit.get("end_pts")
        errors = 0
        try:
            container = av.open(unit["path"])
        except Exception as e:
            self.skipped.append({"path": unit["path"], "reason": f"cannot be opened ({type(e).__name__})",
                                 "frames": expected})
            return
        try:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO" if self.decode_threads != 1 else "SLICE"
            stream.codec_context.thread_count = self.decode_threads
            if start_pts is not None:
                container.seek(int(start_pts), stream=stream, backward=True, any_frame=False)
            done = False
            packets = container.demux(stream)
            while not done:
                try:
                    packet = next(packets)
                except StopIteration:
                    break
                except Exception:
                    errors += 1
                    break
                try:
                    decoded = packet.decode()
                except Exception:
                    errors += 1
                    continue
                for frame in decoded:
                    if frame.pts is not None:
                        if start_pts is not None and frame.pts < start_pts:
                            continue  # leading frames of an open GOP belong to the previous unit
                        if end_pts is not None and frame.pts >= end_pts:
                            done = True
                            break
                    if got >= expected:
                        done = True
                        break
                    got += 1
                    yield frame
        finally:
            container.close()
        if got < expected:
            why = f"{expected - got} of {expected} frames could not be decoded"
            if errors:
                why += f" ({errors} damaged packet(s))"
            self.skipped.append({"path": unit["path"], "reason": why, "frames": expected - got})

    # ---- preprocessing ----
    def preprocess(self, frame, out: np.ndarray) -> None:
        """Resize, convert, scale and lay out one decoded frame into `out` (one sample of a batch)."""
        g = self.geo
        if hasattr(frame, "reformat"):  # an av.VideoFrame: swscale resizes and converts in one pass
            if self._reformatter is None:
                from av.video.reformatter import VideoReformatter

                self._reformatter = VideoReformatter()  # keeps its scaling context from frame to frame
            kw = {"width": g.width, "height": g.height, "format": "gray" if g.channels == 1 else "rgb24",
                  "interpolation": "BILINEAR"}
            try:  # one scaling thread: the process count is what runs in parallel (PyAV 17+ would use all cores)
                a = self._reformatter.reformat(frame, threads=1, **kw).to_ndarray()
            except TypeError:  # PyAV before 17 scales on one thread and has no `threads`
                a = self._reformatter.reformat(frame, **kw).to_ndarray()
        else:
            from PIL import Image

            im = frame if frame.size == (g.width, g.height) else frame.resize((g.width, g.height), Image.BILINEAR)
            a = np.asarray(im)
        if a.ndim == 2:
            a = a[..., None]
        if g.layout == "nchw":
            a = a.transpose(2, 0, 1)
        np.multiply(a, np.float32(self.scale), out=out, casting="unsafe")
        if self.offset:
            out += np.float32(self.offset)


def run_serial(reader: FrameReader, units: list[dict], passes: int, batch: np.ndarray, on_batch,
               clock=time.perf_counter_ns) -> dict:
    """Decode, preprocess and hand over batches in one loop (the serial pipeline and a plain reference).

    `on_batch(n, starts_ns)` runs the model on the first n frames of `batch`. Returns stage totals
    and the CPU time this thread spent decoding and preprocessing (the serial loop's "pre side").
    """
    b = batch.shape[0]
    starts = np.zeros(b, dtype=np.int64)
    fill = 0
    decode_ns = pre_ns = cpu_ns = 0
    frames = 0
    thread_cpu = time.thread_time_ns  # decoding and scaling run on this thread (one decoder/scaler thread)
    for _ in range(passes):
        for unit in units:
            it = reader.frames(unit)
            while True:
                c0 = thread_cpu()
                t0 = clock()
                try:
                    frame = next(it)
                except StopIteration:
                    break
                t1 = clock()
                reader.preprocess(frame, batch[fill])
                t2 = clock()
                cpu_ns += thread_cpu() - c0
                decode_ns += t1 - t0
                pre_ns += t2 - t1
                starts[fill] = t0
                fill += 1
                frames += 1
                if fill == b:
                    on_batch(fill, starts)
                    fill = 0
    if fill:
        on_batch(fill, starts)
    return {"frames": frames, "decode_s": decode_ns / 1e9, "preprocess_s": pre_ns / 1e9, "pre_cpu_s": cpu_ns / 1e9}

