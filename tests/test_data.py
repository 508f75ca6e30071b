"""Datasets and metrics: every source a user may give, and the errors for bad ones."""

from __future__ import annotations

import numpy as np
import pytest

from wb_core.accuracy import BUILTIN, resolve_metric
from wb_core.data import Dataset, ImageOptions, check_input, load_dataset
from wb_core.errors import ConfigError
from wb_core.models import InputSpec

SPEC = InputSpec(name="image", shape=(-1, 8, 8, 1), dtype="float32")


def _png_folder(root, classes, size=(10, 12), mode="RGB", per_class=3):
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in classes:
        (root / c).mkdir(parents=True)
        for i in range(per_class):
            shape = (size[0], size[1], 3) if mode == "RGB" else size
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode=mode).save(root / c / f"{i}.png")
    return root


def test_npz_with_labels_and_calibration(tmp_path):
    p = tmp_path / "d.npz"
    np.savez(p, x=np.ones((5, 8, 8, 1), np.float32), y=np.arange(5), x_train=np.zeros((7, 8, 8, 1), np.float32))
    ds = load_dataset(str(p))
    assert ds.has_labels and len(ds.x) == 5 and len(ds.calibration) == 7


def test_npz_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"\x00garbage")
    with pytest.raises(ConfigError, match="not a readable .npz"):
        load_dataset(str(bad))
    nox = tmp_path / "nox.npz"
    np.savez(nox, y=np.zeros(2))
    with pytest.raises(ConfigError, match="no input arrays.*it has: y"):
        load_dataset(str(nox))
    mism = tmp_path / "mism.npz"
    np.savez(mism, x=np.zeros((4, 3)), y=np.zeros(3))
    with pytest.raises(ConfigError, match="4 samples but 3 labels"):
        load_dataset(str(mism))
    with pytest.raises(ConfigError, match="does not exist"):
        load_dataset(str(tmp_path / "missing.npz"))
    (tmp_path / "d.csv").write_text("1,2")
    with pytest.raises(ConfigError, match="not an .npz"):
        load_dataset(str(tmp_path / "d.csv"))


def test_image_folder_takes_model_geometry(tmp_path):
    root = _png_folder(tmp_path / "imgs", ["cat", "dog"])
    ds = load_dataset(str(root), input_shape=(-1, 8, 8, 1))
    assert ds.x.shape == (6, 8, 8, 1) and ds.x.dtype == np.float32
    assert ds.x.min() >= 0.0 and ds.x.max() <= 1.0
    assert list(ds.y) == [0, 0, 0, 1, 1, 1] and ds.meta["classes"] == ["cat", "dog"]
    nchw = load_dataset(str(root), input_shape=(1, 3, 6, 6), image=ImageOptions(scale="symmetric"))
    assert nchw.x.shape == (6, 3, 6, 6) and nchw.x.min() >= -1.0
    raw = load_dataset(str(root), image=ImageOptions(size=(4, 5), scale="raw"))
    assert raw.x.shape == (6, 4, 5, 3) and raw.x.max() > 1.0


def test_empty_image_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no images.*no class subfolders"):
        load_dataset(str(tmp_path / "empty"))
    (tmp_path / "classes" / "a").mkdir(parents=True)
    (tmp_path / "classes" / "a" / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="no images"):
        load_dataset(str(tmp_path / "classes"))


def test_unreadable_image(tmp_path):
    root = _png_folder(tmp_path / "imgs", ["a"], per_class=1)
    (root / "a" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(ConfigError, match="broken.png' cannot be read"):
        load_dataset(str(root), input_shape=(-1, 8, 8, 3))


def test_api_sources_and_preprocess():
    x = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)
    assert load_dataset((x, np.arange(4))).has_labels
    assert not load_dataset(x).has_labels
    assert load_dataset({"x": x, "y": np.arange(4)}).has_labels
    it = load_dataset(((row, i) for i, row in enumerate(x)), preprocess=lambda s: s * 2)
    assert it.y.tolist() == [0, 1, 2, 3] and np.allclose(it.x, x * 2)
    pre = load_dataset(x, preprocess=lambda s: s[:2])
    assert pre.x.shape == (4, 2)
    with pytest.raises(ConfigError, match="preprocessing function failed"):
        load_dataset(x, preprocess=lambda s: 1 / 0)
    with pytest.raises(ConfigError, match="different shapes"):
        load_dataset([np.zeros(2), np.zeros(3)])
    with pytest.raises(ConfigError, match="no samples"):
        load_dataset(iter([]))
    with pytest.raises(ConfigError, match="holds no samples"):
        Dataset(x=np.zeros((0, 3)))


def test_fingerprint_follows_content(tmp_path, monkeypatch):
    monkeypatch.setenv("WB_CACHE_DIR", str(tmp_path))
    a = Dataset(x=np.zeros((3, 2), np.float32))
    b = Dataset(x=np.zeros((3, 2), np.float32), y=np.arange(3))
    assert a.fingerprint() != b.fingerprint()
    path, fp = b.save()
    assert path.exists() and fp == b.fingerprint() and b.save()[0] == path
    assert load_dataset(str(path)).has_labels


def test_check_input_names_the_expected_input():
    assert check_input(np.zeros((2, 8, 8, 1), np.float64), SPEC).dtype == np.float32
    for bad in (np.zeros((2, 8, 8, 3), np.float32), np.zeros((2, 8, 8), np.float32), np.zeros((2, 8, 8, 1), np.uint8)):
        with pytest.raises(ConfigError, match=r"image: \?x8x8x1 float32"):
            check_input(bad, SPEC, "calibration data")
    ids = InputSpec(name="ids", shape=(-1, -1), dtype="int64")
    assert check_input(np.zeros((2, 5), np.int32), ids).dtype == np.int64


def test_builtin_metrics():
    out = np.array([[0.1, 0.7, 0.2], [0.5, 0.1, 0.4], [0.2, 0.3, 0.5]])
    y = np.array([1, 2, 2])
    assert BUILTIN["top1"](out, y) == pytest.approx(2 / 3)
    with pytest.raises(ConfigError, match="at least 5 outputs"):
        BUILTIN["top5"](out, y)
    wide = np.tile(np.arange(10.0), (2, 1))
    assert BUILTIN["top5"](wide, np.array([9, 0])) == 0.5
    assert BUILTIN["mse"](out, out) == 0.0
    assert BUILTIN["cosine"](out, out * 3) == pytest.approx(1.0)
    assert BUILTIN["mse"].drop(0.1, 0.3) == pytest.approx(0.2)  # more error is a positive drop
    assert BUILTIN["top1"].drop(0.9, 0.8) == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="do not match"):
        BUILTIN["mse"](out, np.zeros((3, 2)))


def test_resolve_metric():
    assert resolve_metric("auto", np.arange(3)).name == "top1"
    assert resolve_metric("auto", np.zeros((3, 4))).name == "mse"
    m = resolve_metric(lambda o, y: float((o == y).mean()))
    assert m(np.ones(3), np.ones(3)) == 1.0 and m.higher_is_better
    with pytest.raises(ConfigError, match="Unknown metric"):
        resolve_metric("f1")
