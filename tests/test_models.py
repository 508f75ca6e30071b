import shutil
import subprocess
import sys

import numpy as np
import pytest

from wb_core.config import InputOptions
from wb_core.errors import ConfigError, ModelError
from wb_core.models import InputSpec, detect_format, fingerprint, make_batches, resolve_shape
from wb_core.variants.description import describe_model


def test_detects_each_format(lenet_dir, lenet_ir):
    assert detect_format(lenet_dir / "saved_model") == "savedmodel"
    assert detect_format(lenet_dir / "model.keras") == "keras"
    assert detect_format(lenet_ir) == "openvino"


@pytest.mark.parametrize("make,needle", [
    (lambda d: d / "missing.onnx", "does not exist"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "is empty"),
    (lambda d: (d / "notes.txt").write_text("hi") and d / "notes.txt", "not a model format"),
    (lambda d: (d / "zero.onnx").touch() or d / "zero.onnx", "is empty"),
])
def test_bad_paths_name_the_problem(tmp_path, make, needle):
    with pytest.raises(ModelError, match=needle):
        detect_format(make(tmp_path))


def test_ir_without_bin(tmp_path, lenet_ir):
    shutil.copy(lenet_ir, tmp_path / "m.xml")
    with pytest.raises(ModelError, match="no weights file"):
        detect_format(tmp_path / "m.xml")


def test_fingerprint_follows_content(tmp_path, lenet_ir_copy):
    a = fingerprint(lenet_ir_copy)
    assert a == fingerprint(lenet_ir_copy)
    data = bytearray(lenet_ir_copy.with_suffix(".bin").read_bytes())
    data[100] ^= 0xFF
    lenet_ir_copy.with_suffix(".bin").write_bytes(bytes(data))
    assert fingerprint(lenet_ir_copy) != a
    data[100] ^= 0xFF
    lenet_ir_copy.with_suffix(".bin").write_bytes(bytes(data))


def test_inspect_ir_inputs(lenet_ir):
    (spec,) = describe_model(lenet_ir).inputs
    assert spec.shape[1:] == (8, 8, 1) and spec.dtype == "float32"


def test_truncated_onnx_is_a_clear_error(tmp_path):
    p = tmp_path / "broken.onnx"
    p.write_bytes(b"\x08\x07\x12\x07garbage" * 10)
    with pytest.raises(Exception) as e:
        describe_model(p)
    assert "broken.onnx" in str(e.value)


def test_dynamic_dims_need_a_size():
    spec = InputSpec("input_ids", (-1, -1), "int64")
    with pytest.raises(ConfigError, match="dynamic"):
        resolve_shape(spec, 4, InputOptions())
    assert resolve_shape(spec, 4, InputOptions(dynamic_size=128)) == (4, 128)


def test_text_model_batches_respect_int_range():
    specs = [InputSpec("input_ids", (-1, -1), "int64"), InputSpec("attention_mask", (-1, -1), "int64"),
             InputSpec("token_type_ids", (-1, -1), "int64")]
    opts = InputOptions(dynamic_size=128, int_range=(0, 30522), int_ranges={"attention_mask": (0, 2),
                                                                           "token_type_ids": (0, 2)})
    batches = make_batches(specs, 8, opts, pool_size=16, seed=1)
    b = batches[0]
    assert b["input_ids"].shape == (8, 128) and b["input_ids"].dtype == np.int64
    assert b["input_ids"].max() < 30522 and b["attention_mask"].max() <= 1
    # Distinct samples inside a batch and across batches.
    assert len({row.tobytes() for row in b["input_ids"]}) == 8
    assert not np.array_equal(batches[0]["input_ids"], batches[1]["input_ids"])
    # Seeded: the same seed gives the same inputs.
    again = make_batches(specs, 8, opts, pool_size=16, seed=1)
    assert np.array_equal(again[0]["input_ids"], b["input_ids"])


def test_batch_of_any_size_from_small_pool():
    spec = InputSpec("x", (-1, 3), "float32")
    (b, *_) = make_batches([spec], 100, InputOptions(), pool_size=7)
    assert b["x"].shape == (100, 3)


def test_demo_model_command_writes_model(tmp_path, lenet_dir):
    out = subprocess.run([sys.executable, "-m", "wb_core.cli", "demo-model", "lenet-digits", "--out", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "lenet-digits" / "saved_model" / "saved_model.pb").exists()
    assert (tmp_path / "lenet-digits" / "data.npz").exists()


def test_lenet_demo_is_accurate(lenet_dir):
    import json

    assert json.loads((lenet_dir / "info.json").read_text())["test_accuracy"] >= 0.95


def _broken_irs(src, d):
    """A good IR (`src`) broken in the ways people break them: cut short, weights lost, edited."""
    import re as _re

    xml, weights = src.read_text(), src.with_suffix(".bin").read_bytes()
    cases = {"short": (xml, weights[:10]), "truncated": (xml[: len(xml) // 2], weights),
             "unknown_op": (_re.sub(r'type="(Convolution|MatMul)"', 'type="FancyOp"', xml, count=1), weights),
             "new_opset": (xml.replace('version="opset1"', 'version="opset99"', 1), weights)}
    for name, (x, b) in cases.items():
        (d / f"{name}.xml").write_text(x)
        (d / f"{name}.bin").write_bytes(b)
    return cases


@pytest.mark.parametrize("case,needle", [("short", "weights file 'short.bin' does not match"),
                                         ("truncated", "not a complete IR file"),
                                         ("unknown_op", "operation 'FancyOp'"),
                                         ("new_opset", "operation set 'opset99'")])
def test_broken_ir_gets_one_plain_sentence(tmp_path, lenet_ir, case, needle):
    from wb_core.api import inspect_model

    _broken_irs(lenet_ir, tmp_path)
    with pytest.raises(ModelError) as err:
        inspect_model(tmp_path / f"{case}.xml")
    text = str(err.value)
    assert needle in text and f"{case}.xml" in text
    # OpenVINO's own source paths and check expressions stay out of it.
    assert "src/" not in text and ".cpp" not in text and "Check '" not in text and "\n" not in text


@pytest.mark.parametrize("parts, expected", [
    (("resnet50", "saved_model"), "resnet50"),  # a SavedModel folder called saved_model
    (("resnet50", "1"), "resnet50"),  # a TF Serving version folder
    (("bert", "3", "model.xml"), "bert"),  # a version folder holding a generic file name
    (("classifier", "model.onnx"), "classifier"),
    (("mobilenet_v3.onnx",), "mobilenet_v3"),  # a meaningful name stays
    (("zoo", "efficientnet"), "efficientnet"),
])
def test_default_study_name_skips_generic_names(tmp_path, parts, expected):
    from wb_core.faces import default_study_name

    path = tmp_path.joinpath(*parts)
    if path.suffix:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    else:
        path.mkdir(parents=True)
    assert default_study_name(path) == expected
    assert default_study_name(str(path)) == expected
