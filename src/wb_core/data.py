"""Datasets for calibration and accuracy: `.npz` files, image folders, demo data and in-memory data.

A dataset is one input array `x` (samples on axis 0), or for a model with several inputs a dict
of arrays named after them, with optional labels `y` (class ids, or reference outputs to compare
against), plus optional separate calibration inputs (`x_calib`). Whatever the source, it is materialised once into an
`.npz` in the cache, named by the hash of its content: child processes load that file, and the
hash keys the INT8 variant cache.

Sources:
- `path/to/data.npz`: arrays `x` and optional `y`; `x_calib` (or `x_train`) if present is used for
  calibration, else calibration draws from `x`. For a model with several inputs: one array per
  input, named after it (`input_ids`, `attention_mask`, ...), optional `y`, and optional
  calibration arrays named `calib.NAME`. Either kind may carry reference outputs, one array per
  model output named `ref.OUTPUT` (e.g. `ref.sentence_embedding`): accuracy then compares every
  variant with them (instead of the FP32 variant's outputs) when there are no labels.
- `path/to/folder/`: one subfolder per class holding images; labels are the sorted class names'
  indices. Images are resized to `image_size` and scaled by `scale`.
- `demo:NAME` (or nothing, when profiling a demo model): the demo's bundled data.
- In the API: a Dataset, `(x, y)`, a dict `{"x":..., "y":...}` or `{"input_ids":..., "attention_mask":
  ..., "y":...}`, an array, an iterable of samples, of dicts of named inputs or of `(sample, label)`
  pairs, or a callable returning any of these; `preprocess` (a callable on one sample) runs on
  every sample first.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wb_core.errors import ConfigError, setting
from wb_core.paths import cache_dir

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
# How image pixels (0..255) become model input values.
SCALES = {"unit": (1 / 255.0, 0.0), "raw": (1.0, 0.0), "symmetric": (1 / 127.5, -1.0)}
MAX_SAMPLES = 100_000


@dataclass(frozen=True)
class ImageOptions:
    """How a folder of images becomes an array: size (height, width), scale, channels, layout."""

    size: tuple[int, int] | None = None  # None: the model's own spatial size
    scale: str = "unit"  # unit: 0..1, raw: 0..255, symmetric: -1..1
    channels: int | None = None  # 1 (grey) or 3 (RGB); None: from the model input
    layout: str = "auto"  # nhwc, nchw, or auto (from the model input)

    def __post_init__(self):
        if self.scale not in SCALES:
            raise ConfigError(f"Unknown image scale '{self.scale}'; choose from {', '.join(SCALES)}.")
        if self.layout not in ("auto", "nhwc", "nchw"):
            raise ConfigError(f"Unknown image layout '{self.layout}'; choose from auto, nhwc, nchw.")
        if self.channels not in (None, 1, 3):
            raise ConfigError(f"Images can have 1 or 3 channels; got {self.channels}.")
        if self.size is not None and (len(self.size) != 2 or min(self.size) < 1):
            raise ConfigError(f"Image size must be two positive numbers HxW; got {self.size}.")

    @staticmethod
    def parse_size(text: str | None) -> tuple[int, int] | None:
        """`224` or `224x224` into (height, width)."""
        if not text:
            return None
        parts = text.lower().replace(",", "x").split("x")
        try:
            dims = [int(p) for p in parts]
        except ValueError:
            raise ConfigError(f"Image size '{text}' must look like 224 or 224x224.") from None
        if len(dims) == 1:
            dims = dims * 2
        if len(dims) != 2 or min(dims) < 1:
            raise ConfigError(f"Image size '{text}' must look like 224 or 224x224.")
        return dims[0], dims[1]


RESERVED = ("y", "x", "x_calib", "x_train", "y_train")
CALIB_PREFIX = "calib."
REF_PREFIX = "ref."


@dataclass
class Dataset:
    """Validation inputs `x` (an array, or a dict of arrays named after the model's inputs) with
    optional labels `y`, and the calibration inputs."""

    x: Any
    y: np.ndarray | None = None
    x_calib: Any = None
    source: str = "arrays"
    meta: dict = field(default_factory=dict)
    refs: dict = field(default_factory=dict)  # model output name -> reference outputs, one row per sample

    def __post_init__(self):
        self.x = _as_inputs(self.x, "x", self.source)
        if self.size == 0:
            raise ConfigError(f"The data from {self.source} holds no samples.")
        for name, arr in (self.x.items() if isinstance(self.x, dict) else [("x", self.x)]):
            _check_numbers(arr, f"input array '{name}'", self.source)
        if self.y is not None:
            self.y = _as_array(self.y, "y")
            _check_numbers(self.y, "labels 'y'", self.source)
            if len(self.y) != self.size:
                raise ConfigError(f"The data from {self.source} has {self.size} samples but {len(self.y)} labels.")
        if self.x_calib is not None:
            self.x_calib = _as_inputs(self.x_calib, "x_calib", self.source)
        self.refs = {str(k): _as_array(v, REF_PREFIX + str(k)) for k, v in (self.refs or {}).items()}
        for k, v in self.refs.items():
            _check_numbers(v, f"reference outputs '{REF_PREFIX}{k}'", self.source)
            if len(v) != self.size:
                raise ConfigError(f"The data from {self.source} has {self.size} samples but {len(v)} reference "
                                  f"outputs in '{REF_PREFIX}{k}'.")

    @property
    def named(self) -> bool:
        """Inputs given by name (a dict), as models with several inputs need."""
        return isinstance(self.x, dict)

    @property
    def size(self) -> int:
        return _size(self.x)

    @property
    def has_labels(self) -> bool:
        return self.y is not None

    @property
    def calibration(self):
        return self.x_calib if self.x_calib is not None else self.x

    @property
    def calibration_size(self) -> int:
        return _size(self.calibration)

    def head(self, n: int) -> Dataset:
        return Dataset(x=_take(self.x, slice(0, n)), y=None if self.y is None else self.y[:n], x_calib=self.x_calib,
                       source=self.source, meta=self.meta, refs={k: v[:n] for k, v in self.refs.items()})

    def renamed(self, mapping: dict[str, str]) -> Dataset:
        """Arrays renamed to model inputs: `mapping` is model input -> array name in the data."""
        if not mapping:
            return self
        if not self.named:
            raise ConfigError("An input mapping needs data with named arrays (one per model input).")

        def rename(x):
            if x is None:
                return None
            missing = [a for a in mapping.values() if a not in x]
            if missing:
                raise ConfigError(f"The input mapping names array '{missing[0]}', which the data from {self.source} "
                                  f"does not have (it has: {', '.join(x)}).")
            taken = set(mapping.values())
            out = {k: v for k, v in x.items() if k not in taken}
            out.update({inp: x[arr] for inp, arr in mapping.items()})
            return out

        calib = self.x_calib if self.x_calib is None or all(a in self.x_calib for a in mapping.values()) else None
        return Dataset(x=rename(self.x), y=self.y, x_calib=rename(calib), source=self.source, meta=self.meta,
                       refs=self.refs)

    def arrays(self) -> dict[str, np.ndarray]:
        """Flat named arrays, as `save` writes them and `load_npz` reads them back."""
        out = {}
        if self.named:
            out.update({k: v for k, v in self.x.items()})
        else:
            out["x"] = self.x
        if self.y is not None:
            out["y"] = self.y
        if self.x_calib is not None:
            if isinstance(self.x_calib, dict):
                out.update({CALIB_PREFIX + k: v for k, v in self.x_calib.items()})
            else:
                out["x_calib"] = self.x_calib
        out.update({REF_PREFIX + k: v for k, v in self.refs.items()})
        return out

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for name, arr in sorted(self.arrays().items()):
            a = np.ascontiguousarray(arr)
            h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
            h.update(a.tobytes())
        return h.hexdigest()[:16]

    def save(self) -> tuple[Path, str]:
        """Write to the cache (once per content) and return (path, fingerprint)."""
        fp = self.fingerprint()
        root = cache_dir() / "data"
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{fp}.npz"
        if not path.exists():
            tmp = root / f".{fp}.tmp.npz"
            np.savez(tmp, **self.arrays())
            tmp.replace(path)
        return path, fp


def _as_array(value, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except Exception as e:  # ragged lists and the like
        raise ConfigError(f"The data's '{name}' cannot be made into one array: {e}.") from None
    if arr.dtype == object:
        raise ConfigError(f"The data's '{name}' has samples of different shapes; give arrays of one shape.")
    if arr.ndim == 0:
        raise ConfigError(f"The data's '{name}' is a single value, not an array of samples.")
    return arr


def _check_numbers(arr: np.ndarray, what: str, source: str) -> None:
    """Arrays the models and metrics read hold numbers, and finite ones: text, NaN or inf would
    fail deep inside a worker or quietly empty the accuracy."""
    if arr.dtype.kind not in "biuf":
        kind = {"U": "text", "S": "bytes", "O": "Python objects", "M": "dates", "m": "durations",
                "c": "complex numbers", "V": "records"}.get(arr.dtype.kind, str(arr.dtype))
        raise ConfigError(f"The {what} in the data from {source} hold {kind}, not numbers; give a numeric array.")
    if arr.dtype.kind == "f":
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        if bad:
            raise ConfigError(f"The {what} in the data from {source} hold {bad:,} NaN or infinite value(s); give "
                              f"finite numbers.")


def check_references(ds: Dataset, outputs: list[str] | None) -> None:
    """Reference outputs must be named for an output the model has (one reference for a model with
    one output may carry any name)."""
    if not ds.refs or not outputs or (len(ds.refs) == 1 and len(outputs) == 1):
        return
    for name in ds.refs:
        if name not in outputs:
            raise ConfigError(f"The reference outputs '{REF_PREFIX}{name}' in the data from {ds.source} name an "
                              f"output the model does not have; its outputs are {', '.join(outputs)}: rename the "
                              f"array to ref.OUTPUT.")


def _size(x) -> int:
    return len(next(iter(x.values()))) if isinstance(x, dict) else len(x)


def _take(x, index):
    return {k: v[index] for k, v in x.items()} if isinstance(x, dict) else x[index]


def _as_inputs(value, name: str, source: str):
    if not isinstance(value, dict):
        return _as_array(value, name)
    if not value:
        raise ConfigError(f"The data from {source} names no input arrays.")
    out = {str(k): _as_array(v, str(k)) for k, v in value.items()}
    sizes = {k: len(v) for k, v in out.items()}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{k}: {n}" for k, n in sizes.items())
        raise ConfigError(f"The input arrays in the data from {source} hold different numbers of samples ({listed}).")
    return out


# ---- loading ----

def load_dataset(source: Any, *, preprocess: Callable | None = None, image: ImageOptions | None = None,
                 input_shape: tuple[int, ...] | None = None, limit: int | None = None) -> Dataset:
    """Turn any supported source into a Dataset (see the module docstring).

    `input_shape` is the model input's shape (batch first, -1 for dynamic): image folders take
    their size, channels and layout from it unless `image` says otherwise.
    """
    if isinstance(source, Dataset):
        ds = source
    elif isinstance(source, (str, Path)):
        text = str(source)
        if text.startswith("demo:"):
            ds = demo_dataset(text[len("demo:"):])
        else:
            from wb_core.streams import refuse_special

            path = Path(text)
            if not path.exists():
                raise ConfigError(f"Data path '{path}' does not exist.")
            refuse_special(path, "Data path")
            if path.is_dir():
                ds = load_image_folder(path, image or ImageOptions(), input_shape, preprocess)
                preprocess = None  # already applied per image
            elif path.suffix.lower() == ".npz":
                ds = load_npz(path)
            else:
                raise ConfigError(f"Data file '{path}' is not an .npz file or a folder of class subfolders.")
    elif isinstance(source, dict):
        ds = _from_arrays(source, "a dict")
    elif isinstance(source, tuple) and len(source) == 2:
        ds = Dataset(x=source[0], y=source[1], source="an (x, y) pair")
    elif isinstance(source, np.ndarray):
        ds = Dataset(x=source, source="an array")
    elif callable(source):
        try:
            made = source()
        except Exception as e:
            raise ConfigError(f"The data function failed: {type(e).__name__}: {e}.") from None
        if callable(made) and not isinstance(made, (Dataset, dict, np.ndarray, Iterable)):
            raise ConfigError("The data function returned another function; return arrays, a dict or samples.")
        return load_dataset(made, preprocess=preprocess, image=image, input_shape=input_shape, limit=limit)
    elif isinstance(source, Iterable):
        ds = _from_iterable(source, preprocess)
        preprocess = None
    else:
        raise ConfigError(f"Cannot use a {type(source).__name__} as data; give a path, arrays or an iterable.")
    if preprocess is not None and ds.named:
        raise ConfigError("A preprocessing function works on single-input data; prepare named input arrays "
                          "before passing them.")
    if preprocess is not None:
        ds = Dataset(x=_apply(preprocess, ds.x), y=ds.y,
                     x_calib=None if ds.x_calib is None else _apply(preprocess, ds.x_calib),
                     source=ds.source, meta=ds.meta, refs=ds.refs)
    if limit:
        ds = ds.head(limit)
    return ds


def _from_arrays(arrays: dict, source: str) -> Dataset:
    """`x` (+ `y`, `x_calib` / `x_train`), or one array per model input named after it (+ `y`,
    `calib.NAME` for calibration)."""
    refs = {k[len(REF_PREFIX):]: v for k, v in arrays.items() if k.startswith(REF_PREFIX)}
    if "x" in arrays:
        calib = arrays.get("x_calib", arrays.get("x_train"))
        return Dataset(x=arrays["x"], y=arrays.get("y"), x_calib=calib, source=source, refs=refs)
    named = {k: v for k, v in arrays.items()
             if k not in RESERVED and not k.startswith((CALIB_PREFIX, REF_PREFIX))}
    if not named:
        raise ConfigError(f"The data from {source} has no input arrays: give 'x', or one array per model input "
                          f"named after it (it has: {', '.join(arrays) or 'nothing'}).")
    calib = {k[len(CALIB_PREFIX):]: v for k, v in arrays.items() if k.startswith(CALIB_PREFIX)}
    return Dataset(x=named, y=arrays.get("y"), x_calib=calib or None, source=source, refs=refs)


def _apply(fn: Callable, x: np.ndarray) -> np.ndarray:
    try:
        return np.stack([np.asarray(fn(s)) for s in x])
    except Exception as e:
        raise ConfigError(f"The preprocessing function failed on a sample: {type(e).__name__}: {e}.") from None


def _from_iterable(items: Iterable, preprocess: Callable | None) -> Dataset:
    xs, ys = [], []
    items = iter(items)  # a dict sample hands the rest of this same iterator on
    for i, item in enumerate(items):
        if isinstance(item, dict) or (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], dict)):
            if i:
                raise ConfigError("The data iterable mixes dicts of named inputs and bare samples.")
            return _from_named_iterable(items, item)
        if i >= MAX_SAMPLES:
            break
        if isinstance(item, tuple) and len(item) == 2:
            sample, label = item
            ys.append(label)
        else:
            sample = item
        if preprocess is not None:
            try:
                sample = preprocess(sample)
            except Exception as e:
                raise ConfigError(f"The preprocessing function failed on sample {i}: {type(e).__name__}: {e}.") from None
        xs.append(np.asarray(sample))
    if not xs:
        raise ConfigError("The data iterable yielded no samples.")
    if ys and len(ys) != len(xs):
        raise ConfigError("The data iterable mixes (sample, label) pairs and bare samples.")
    if len({a.shape for a in xs}) > 1:
        raise ConfigError("The data iterable yielded samples of different shapes; give samples of one shape.")
    return Dataset(x=np.stack(xs), y=np.asarray(ys) if ys else None, source="an iterable")


def _from_named_iterable(items, first) -> Dataset:
    """Samples that are dicts of named inputs (or `(dict, label)` pairs): one array per name."""
    import itertools

    cols: dict[str, list] = {}
    ys = []
    for i, item in enumerate(itertools.chain([first], items)):
        if i >= MAX_SAMPLES:
            break
        sample, label = item if isinstance(item, tuple) else (item, None)
        if not isinstance(sample, dict):
            raise ConfigError("The data iterable mixes dicts of named inputs and bare samples.")
        if cols and set(sample) != set(cols):
            raise ConfigError(f"Sample {i} of the data iterable names inputs {', '.join(sample)}, not "
                              f"{', '.join(cols)} like the first.")
        for k, v in sample.items():
            cols.setdefault(k, []).append(np.asarray(v))
        if label is not None:
            ys.append(label)
    for k, vals in cols.items():
        if len({a.shape for a in vals}) > 1:
            raise ConfigError(f"The data iterable yielded '{k}' arrays of different shapes; pad them to one length.")
    if ys and len(ys) != len(next(iter(cols.values()))):
        raise ConfigError("The data iterable mixes (inputs, label) pairs and bare inputs.")
    return Dataset(x={k: np.stack(v) for k, v in cols.items()}, y=np.asarray(ys) if ys else None,
                   source="an iterable")


MAX_DATA_BYTES = 4 << 30  # all arrays of one data file, as their headers declare them


def check_npz_headers(path: Path, limit: int = MAX_DATA_BYTES) -> dict[str, tuple[tuple[int, ...], str]]:
    """Each array's shape and dtype read from its header, before anything is loaded.

    Refuses a file whose headers cannot be read, declare object arrays, declare more data than the
    member holds (a truncated or forged file), or more than `limit` bytes in all.
    """
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    total = 0
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                name = info.filename[:-4]
                with z.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    read = {(1, 0): np.lib.format.read_array_header_1_0,
                            (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                    if read is None:
                        raise ValueError(f"npy format version {version}")
                    shape, _fortran, dtype = read(f, max_header_size=10000)
                    header_len = f.tell()
                if dtype.hasobject:
                    raise ConfigError(f"Data file '{path}' holds Python objects in array '{name}'; only numeric "
                                      f"arrays are read.")
                n = dtype.itemsize
                for d in shape:
                    n *= int(d)
                if n > info.file_size - header_len:
                    raise ConfigError(f"Data file '{path}': array '{name}' declares {tuple(shape)} {dtype} "
                                      f"({n:,} bytes) but holds only {max(0, info.file_size - header_len):,}; the "
                                      f"file is truncated or damaged.")
                total += n
                out[name] = (tuple(int(d) for d in shape), str(dtype))
    except ConfigError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, SyntaxError, TypeError) as e:
        raise ConfigError(f"Data file '{path}' is not a readable .npz archive ({type(e).__name__}).") from None
    if total > limit:
        raise ConfigError(f"Data file '{path}' declares {total / 2**30:,.1f} GiB of arrays; the limit is "
                          f"{limit / 2**30:g} GiB.")
    check_parent_memory(total, f"Data file '{path}'")
    return out


PARENT_MEMORY_SHARE = 0.9  # of the memory available (or left under the process's address-space limit)


def parent_memory_room() -> tuple[int, str]:
    """Bytes this process may still take before the system (or its own limit) stops it, and whence."""
    import resource

    import psutil

    room, why = int(psutil.virtual_memory().available * PARENT_MEMORY_SHARE), "the memory this machine has free"
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        left = int((soft - psutil.Process().memory_info().vms) * PARENT_MEMORY_SHARE)
        if left < room:
            room, why = max(0, left), f"what is left of this process's address-space limit ({soft / 2**30:.1f} GiB)"
    return room, why


def check_parent_memory(needed: int, what: str) -> None:
    """A ConfigError, before anything loads, when `needed` bytes would not fit in this process: the
    system would kill it without a word (or numpy would fail half-way) otherwise."""
    room, why = parent_memory_room()
    if needed > room:
        raise ConfigError(f"{what} needs {_gib(needed)} of memory to load, more than this process can take "
                          f"({_gib(room)}: {why}); give fewer samples, or run where more memory is free.")


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def load_npz(path: Path) -> Dataset:
    """An `.npz` with `x`, optional `y` and optional `x_calib` / `x_train`; or one array per model
    input named after it. Headers are checked before anything loads."""
    check_npz_headers(path)
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, io.UnsupportedOperation, MemoryError) as e:
        raise ConfigError(f"Data file '{path}' is not a readable .npz archive ({type(e).__name__}).") from None
    return _from_arrays(arrays, f"'{path}'")


def demo_dataset(name: str) -> Dataset:
    """The data that belongs to a demo model: its test split, or random images when it has none."""
    from wb_core.demo import ensure_demo
    from wb_core.demo_catalog import DEMOS

    if name not in DEMOS:
        raise ConfigError(f"Unknown demo dataset '{name}'; choose from {', '.join(DEMOS)}.")
    folder = ensure_demo(name)
    if (folder / "data.npz").exists():
        ds = load_npz(folder / "data.npz")
        ds.source = f"demo:{name}"
        return ds
    # MobileNetV2 has random weights, so real images would say nothing about accuracy; random
    # inputs in its [-1, 1] range are enough to calibrate it for speed.
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, size=(64, 224, 224, 3)).astype(np.float32)
    return Dataset(x=x, source=f"demo:{name}", meta={"synthetic": True})


def load_image_folder(root: Path, opts: ImageOptions, input_shape: tuple[int, ...] | None,
                      preprocess: Callable | None = None) -> Dataset:
    """One subfolder per class; labels are the indices of the sorted class names."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow is a dependency
        raise ConfigError("Reading an image folder needs Pillow (pip install pillow).") from None

    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    files = [(f, i) for i, c in enumerate(classes) for f in sorted((root / c).iterdir())
             if f.suffix.lower() in IMAGE_SUFFIXES]
    if not files:
        where = f"its {len(classes)} class subfolders" if classes else "it has no class subfolders"
        raise ConfigError(f"Image folder '{root}' holds no images ({where}); expected one subfolder of images per class.")
    layout, size, channels = _image_geometry(opts, input_shape)
    if size:  # float32 pixels, held once as images and once stacked: refused before a file is decoded
        n = min(len(files), MAX_SAMPLES)
        check_parent_memory(2 * n * size[0] * size[1] * (channels or 3) * 4,
                            f"Image folder '{root}' ({n} images at {size[0]}x{size[1]})")
    scale, offset = SCALES[opts.scale]
    xs = []
    for f, _ in files[:MAX_SAMPLES]:
        try:
            with Image.open(f) as im:
                im = im.convert("L" if channels == 1 else "RGB")
                if size:
                    im = im.resize((size[1], size[0]), Image.BILINEAR)
                a = np.asarray(im, dtype=np.float32)
        except Exception as e:
            raise ConfigError(f"Image '{f}' cannot be read: {type(e).__name__}.") from None
        a = a[..., None] if a.ndim == 2 else a
        a = a * scale + offset
        if layout == "nchw":
            a = np.transpose(a, (2, 0, 1))
        xs.append(preprocess(a) if preprocess else a)
    if len({a.shape for a in xs}) > 1:
        raise ConfigError(f"Images in '{root}' have different sizes; give an image size to resize them to.")
    y = np.array([i for _, i in files[:MAX_SAMPLES]], dtype=np.int64)
    return Dataset(x=np.stack(xs).astype(np.float32), y=y, source=f"'{root}'", meta={"classes": classes})


def _image_geometry(opts: ImageOptions, shape: tuple[int, ...] | None):
    """Layout, (height, width) and channels for images, from the options or the model input."""
    layout, size, channels = opts.layout, opts.size, opts.channels
    if shape is not None and len(shape) == 4:
        if layout == "auto":
            layout = "nchw" if shape[1] in (1, 3) and shape[3] not in (1, 3) else "nhwc"
        h, w, c = (shape[2], shape[3], shape[1]) if layout == "nchw" else (shape[1], shape[2], shape[3])
        if size is None and h > 0 and w > 0:
            size = (h, w)
        if channels is None and c in (1, 3):
            channels = c
    return ("nhwc" if layout == "auto" else layout), size, channels or 3


# ---- checking data against a model input ----

def check_input(x: np.ndarray, spec, what: str = "data") -> np.ndarray:
    """Return `x` fit for the model input `spec` (an InputSpec), or raise a ConfigError naming it.

    Samples are on the data's first axis, whatever the input's batch axis: one sample of an input
    whose batch is on axis 1 (a state [layers, batch, hidden]) is [layers, hidden], or [layers, 1,
    hidden] as the model holds one. A scalar input (a sample rate) takes one value per sample.
    Floats are cast to the input's float type and integers to its integer type; a change of
    kind (integers into a float input, say) is refused, since it usually means unscaled pixels.
    """
    expected = spec.describe()
    shape = tuple(spec.shape)
    axis = getattr(spec, "batch_axis", 0)
    want = tuple(d for i, d in enumerate(shape) if i != axis)
    if axis and x.ndim == len(shape) + 1 and x.shape[1 + axis] == 1:  # samples with the model's batch of 1 kept
        x = x.reshape(x.shape[:1 + axis] + x.shape[2 + axis:])
    sample = "x".join("?" if d < 0 else str(d) for d in want) or "one value"
    where = f"batch on axis {axis}: one sample is {sample}" if axis else "batch first"
    if axis:  # the sentence for the data says where the batch is; describe() says it for the model
        expected = expected.replace(f" (batch on axis {axis})", "")
    if shape != (-1,) and x.ndim != len(want) + 1:
        raise ConfigError(f"The {what} has samples of shape {tuple(x.shape[1:])} but the model expects "
                          f"input {expected} ({where}).")
    for i, (got, dim) in enumerate(zip(x.shape[1:], want if shape != (-1,) else ()), start=1):
        if dim > 0 and got != dim:
            which = f"{where}; sample dimension {i}" if axis else f"dimension {i}"
            raise ConfigError(f"The {what} has samples of shape {tuple(x.shape[1:])} but the model expects "
                              f"input {expected} ({which} should be {dim}).")
    want_dtype = np.dtype("float32" if spec.dtype == "bfloat16" else spec.dtype)
    if x.dtype.kind != want_dtype.kind and not (x.dtype.kind in "iu" and want_dtype.kind in "iu"):
        raise ConfigError(f"The {what} is {x.dtype} but the model expects input {expected}; "
                          f"convert (and scale) it to {want_dtype} first.")
    return x.astype(want_dtype, copy=False)


def check_inputs(x, specs: list, what: str = "data") -> dict[str, np.ndarray]:
    """Arrays for every model input (`specs`), checked and cast; one sentence per mismatch.

    `x` is an array (a model with one input) or a dict of arrays named after the inputs (a name
    may drop a ':0' suffix). Extra arrays are ignored.
    """
    if not isinstance(x, dict):
        if len(specs) != 1:
            listed = ", ".join(s.describe() for s in specs)
            raise ConfigError(f"The model has {len(specs)} inputs ({listed}); give the {what} as one array per input, "
                              f"named after it (in an .npz: arrays input_ids, attention_mask, ...).")
        return {specs[0].name: check_input(x, specs[0], what)}
    if len(specs) == 1 and len(x) == 1:
        (arr,) = x.values()
        return {specs[0].name: check_input(arr, specs[0], what)}
    out = {}
    for spec in specs:
        arr = x.get(spec.name)
        if arr is None:
            arr = x.get(spec.name.split(":")[0])
        if arr is None:
            raise ConfigError(f"The {what} has no array for input '{spec.name}' (it has: {', '.join(x)}); name an "
                              f"array after each input, or map them with {setting('data_inputs', 'an input mapping')} "
                              f"{spec.name}=ARRAY.")
        out[spec.name] = check_input(arr, spec, f"{what} for input '{spec.name}'")
    return out


def describe_data_source(source: str | Path) -> str:
    """Check a data path a user typed (an .npz, an image folder or `demo:NAME`) without loading
    it, and say in a few words what it holds; raises ConfigError with one sentence when it is unusable."""
    text = str(source).strip()
    if not text:
        raise ConfigError("Give the path of an .npz file or of a folder of class subfolders.")
    if text.startswith("demo:"):
        from wb_core.demo_catalog import DEMOS

        name = text[len("demo:"):]
        if name not in DEMOS:
            raise ConfigError(f"Unknown demo dataset '{name}'; choose from {', '.join(DEMOS)}.")
        return f"the {name} demo's data"
    path = Path(text).expanduser()
    if not path.exists():
        raise ConfigError(f"Data path '{path}' does not exist on the server.")
    if path.is_dir():
        classes = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
        images = sum(1 for c in classes for f in c.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
        if not images:
            where = f"its {len(classes)} class subfolders hold none" if classes else "it has no class subfolders"
            raise ConfigError(f"Folder '{path}' holds no images ({where}); expected one subfolder of images per class.")
        return f"{images:,} images in {len(classes)} classes"
    if path.suffix.lower() != ".npz":
        raise ConfigError(f"Data file '{path}' is not an .npz file or a folder of class subfolders.")
    arrays = check_npz_headers(path)
    if not arrays:
        raise ConfigError(f"Data file '{path}' holds no arrays.")
    inputs = {k: v for k, v in arrays.items() if k not in ("y", "x_calib", "x_train", "y_train")
              and not k.startswith("calib.")}
    if not inputs:
        raise ConfigError(f"Data file '{path}' has no input array: name it 'x' (or after the model's inputs).")
    first = inputs.get("x", next(iter(inputs.values())))
    n = first[0][0] if first[0] else 1
    labels = "with labels" if "y" in arrays else "without labels (accuracy compares with FP32)"
    return f"{n:,} samples, {labels}"



# ---- inputs the data does not name ----

def complete_inputs(ds: Dataset, specs: list, declared: dict | None = None, opts=None) -> tuple[Dataset, list]:
    """The data with an array for every model input, and a note for each one filled in.

    When the data names only the main input (audio, an image, token ids) of a model that takes
    more, the others get a documented default, one value per sample: the value the model's graph
    names (a sample rate of 16000; `declared`: input name -> [value, why]); ones for a mask (every
    position attended); zeros otherwise (a recurrent state starts at zeros). `opts` (InputOptions)
    sizes their dynamic dimensions. Data that names none of the inputs, or all of them, is returned
    as it is (`check_inputs` then says what is wrong).
    """
    if len(specs) < 2:
        return ds, []
    x = ds.x
    if not ds.named:  # one array: the input it fits is the main one
        fits = [s for s in specs if _fits(x, s)]
        if len(fits) != 1:
            return ds, []
        x = {fits[0].name: x}
    present = [s for s in specs if _array_for(x, s) is not None]
    missing = [s for s in specs if _array_for(x, s) is None]
    if not present or not missing:
        return (ds, []) if x is ds.x else (_with_inputs(ds, x, ds.x_calib), [])
    declared = declared or {}
    filled, notes = {}, []
    for s in missing:
        value, why = _default_value(s, declared)
        filled[s.name] = (_sample_shape(s, opts, [_array_for(x, p).shape[1:] for p in present]), value)
        notes.append(f"The data has no array for input '{s.name}' ({s.describe()}): it is filled with {why}, in every "
                     f"sample; give an array named '{s.name}' in the data to feed it yourself.")

    def fill(inputs, n: int) -> dict:
        out = dict(inputs)
        for s in missing:
            shape, value = filled[s.name]
            out[s.name] = np.full((n, *shape), value, dtype=np.dtype("float32" if s.dtype == "bfloat16" else s.dtype))
        return out

    calib = ds.x_calib
    if calib is not None:
        calib = fill(calib if isinstance(calib, dict) else {next(iter(x)): calib}, _size(calib))
    return _with_inputs(ds, fill(x, ds.size), calib), notes


def _with_inputs(ds: Dataset, x: dict, calib) -> Dataset:
    return Dataset(x=x, y=ds.y, x_calib=calib, source=ds.source, meta=ds.meta, refs=ds.refs)


def _array_for(x: dict, spec):
    arr = x.get(spec.name)
    return arr if arr is not None else x.get(spec.name.split(":")[0])


def _fits(x: np.ndarray, spec) -> bool:
    try:
        check_input(x, spec)
    except ConfigError:
        return False
    return True


def _default_value(spec, declared: dict) -> tuple[float, str]:
    given = declared.get(spec.name) or declared.get(spec.name.split(":")[0])
    if given:
        return given[0], str(given[1])
    if "mask" in spec.name.lower():
        return 1, "ones (a mask with every position attended)"
    return 0, "zeros (a recurrent state starts at zeros; other inputs take their neutral value)"


def _sample_shape(spec, opts, given: list) -> tuple[int, ...]:
    """One sample's shape for an input the data does not hold: its dynamic dimensions from the options,
    else from a sample of the data's own of as many dimensions (a mask as long as the token ids)."""
    from wb_core.model_inputs import resolve_shape

    dims = spec.sample_shape()
    if all(d >= 0 for d in dims):
        return dims
    like = [g for g in given if len(g) == len(dims) and all(d < 0 or d == e for d, e in zip(dims, g))]
    if like and (opts is None or opts.dynamic_size is None):
        return tuple(like[0])
    try:
        if opts is None:
            raise ConfigError("no sizes")
        shape = list(resolve_shape(spec, 1, opts))
    except ConfigError:
        raise ConfigError(f"The data has no array for input '{spec.name}' ({spec.describe()}), and its dynamic "
                          f"dimensions leave its size open; give an array named '{spec.name}' in the data, or its "
                          f"{setting('shapes', 'shape')}.") from None
    del shape[spec.batch_axis]
    return tuple(shape)
