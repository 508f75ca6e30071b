"""A model is every file it reads: an ONNX model's external data, an IR's .bin, a SavedModel's folder.
The fingerprint, the conversion cache and the INT8 cache follow the content, not the file names:
rewritten weights give a new conversion (checked against numpy), and two files that convert to the
same network (ONNX twins here, a Keras model and its SavedModel export in the slow test) share one
INT8 build, each with its own port names."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from wb_core.api import results
from wb_core.errors import ConfigError, ModelError
from wb_core.models import fingerprint, model_files
from wb_core.variants import quantize as quantize_module

RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 6)).astype(np.float32)


def linear_onnx(path, w, b, external: str | None = None, output: str = "y", producer: str = "test"):
    """y = x @ w + b, its weights inside the file or in `external` beside it."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    graph = h.make_graph([h.make_node("MatMul", ["x", "W"], ["xw"]), h.make_node("Add", ["xw", "B"], [output])],
                         "linear", [h.make_tensor_value_info("x", T.FLOAT, [-1, 6])],
                         [h.make_tensor_value_info(output, T.FLOAT, [-1, 3])],
                         [nh.from_array(w, "W"), nh.from_array(b, "B")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], producer_name=producer)
    model.ir_version = 8
    if external:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=external,
                        size_threshold=0)
    else:
        onnx.save_model(model, path)
    return path


def _run_ir(xml, x=X, output=None):
    import openvino as ov

    compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = compiled(x)
    return res[output] if output else res[compiled.outputs[0]]


def _fp32_ir(db, study):
    rows = results(study, db, "stored")
    assert (rows["status"] == "ok").all(), rows.get("error")
    return rows.iloc[0]["variant_path"]


def test_rewritten_external_weights_give_a_new_conversion_and_confirm_names_the_file(tmp_path, db, fast):
    from wb_core.api import confirm, profile

    w1, b1 = RNG.standard_normal((6, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    w2, b2 = -w1[::-1].copy(), b1 + 1
    model = linear_onnx(tmp_path / "model.onnx", w1, b1, external="weights.data")
    assert [label for label, _ in model_files(model)] == [".", "weights.data"]
    onnx_bytes = model.read_bytes()
    before = fingerprint(model)

    profile(model, db=db, study="old", batch_sizes="1", threads="1", settings=fast, accuracy=False)
    old_ir = _fp32_ir(db, "old")
    np.testing.assert_allclose(_run_ir(old_ir), X @ w1 + b1, rtol=1e-5, atol=1e-5)

    # Only the weights file is rewritten (the same layout, other numbers): the .onnx bytes stay as they were.
    other = tmp_path / "other"
    other.mkdir()
    linear_onnx(other / "model.onnx", w2, b2, external="weights.data")
    shutil.copy(other / "weights.data", tmp_path / "weights.data")
    assert model.read_bytes() == onnx_bytes and fingerprint(model) != before

    profile(model, db=db, study="new", batch_sizes="1", threads="1", settings=fast, accuracy=False)
    new_ir = _fp32_ir(db, "new")
    assert new_ir != old_ir
    np.testing.assert_allclose(_run_ir(new_ir), X @ w2 + b2, rtol=1e-5, atol=1e-5)

    with pytest.raises(ConfigError, match=r"has changed since study 'old' measured it: its file 'weights.data' "
                                          r"differs; profile it again"):
        confirm("old", db, rounds=2, settings=fast)
    (tmp_path / "weights.data").unlink()
    with pytest.raises(ModelError, match="keeps its weights in 'weights.data', which is not beside it"):
        fingerprint(model)


def test_every_file_a_model_reads_is_in_its_fingerprint_and_names_are_not(tmp_path, lenet_ir):
    w, b = np.ones((6, 3), np.float32), np.zeros(3, np.float32)
    a = linear_onnx(tmp_path / "a.onnx", w, b)
    moved = tmp_path / "elsewhere" / "renamed.onnx"
    moved.parent.mkdir()
    shutil.copy(a, moved)
    assert fingerprint(moved) == fingerprint(a)  # a moved, renamed identical copy is the same model
    ir = tmp_path / "copy.xml"
    shutil.copy(lenet_ir, ir)
    shutil.copy(lenet_ir.with_suffix(".bin"), ir.with_suffix(".bin"))
    assert fingerprint(ir) == fingerprint(lenet_ir)
    data = bytearray(ir.with_suffix(".bin").read_bytes())
    data[100] ^= 0xFF
    ir.with_suffix(".bin").write_bytes(bytes(data))
    assert fingerprint(ir) != fingerprint(lenet_ir)
    sm = tmp_path / "sm"
    (sm / "variables").mkdir(parents=True)
    (sm / "saved_model.pb").write_bytes(b"graph")
    (sm / "variables" / "variables.data-00000-of-00001").write_bytes(b"weights")
    first = fingerprint(sm)
    (sm / "variables" / "variables.data-00000-of-00001").write_bytes(b"other weights")
    assert fingerprint(sm) != first
    outside = linear_onnx(tmp_path / "o.onnx", w, b, external="o.data")
    import onnx

    proto = onnx.load(str(outside), load_external_data=False)
    for t in proto.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../o.data"
    onnx.save(proto, outside)
    with pytest.raises(ModelError, match="outside its own folder"):
        fingerprint(outside)


def _count_quantizing(monkeypatch, cache) -> list:
    """The quantizing workers started from now on, with an empty cache of variants."""
    monkeypatch.setenv("WB_CACHE_DIR", str(cache))
    started = []
    real = quantize_module.run_task

    def counting(task, **kw):
        if task["task"].endswith(":task_quantize"):
            started.append(task)
        return real(task, **kw)

    monkeypatch.setattr(quantize_module, "run_task", counting)
    return started


def test_two_files_of_one_network_build_int8_once(tmp_path, db, fast, monkeypatch):
    """The same network in two ONNX files (other names, other producer, another output name): one NNCF
    run; the second model gets the INT8 IR with its own output name, and the same numbers."""
    from wb_core.api import profile

    w, b = RNG.standard_normal((6, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    a = linear_onnx(tmp_path / "a.onnx", w, b, output="y", producer="one")
    twin = linear_onnx(tmp_path / "twin.onnx", w, b, output="logits", producer="another")
    assert fingerprint(a) != fingerprint(twin)
    data = tmp_path / "data.npz"
    np.savez(data, x=RNG.standard_normal((32, 6)).astype(np.float32))
    started = _count_quantizing(monkeypatch, tmp_path / "cache")
    for model, study in ((a, "a"), (twin, "twin")):
        profile(model, db=db, study=study, precisions="int8", batch_sizes="1", threads="1", settings=fast,
                data=str(data), subset_size=32)
    assert len(started) == 1, [t["ir"] for t in started]
    ir_a, ir_twin = _fp32_ir(db, "a"), _fp32_ir(db, "twin")
    import openvino as ov

    names = [sorted(p.get_names()) for p in ov.Core().read_model(ir_twin).outputs]
    assert names == [["logits"]]
    np.testing.assert_array_equal(_run_ir(ir_twin, output="logits"), _run_ir(ir_a, output="y"))
    got, want = _run_ir(ir_a, output="y").ravel(), (X @ w + b).ravel()
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) > 0.99  # INT8 of this network
    # a third study of the twin reuses its named copy: still one NNCF run
    profile(twin, db=db, study="again", precisions="int8", batch_sizes="1", threads="1", settings=fast,
            data=str(data), subset_size=32)
    assert len(started) == 1 and _fp32_ir(db, "again") == ir_twin


@pytest.mark.slow
def test_a_keras_model_and_its_savedmodel_share_their_int8_build(tmp_path, db, fast, monkeypatch):
    from wb_core.api import profile

    script = ("import sys, keras\n"
              "x = keras.Input((8, 8, 3), name='image')\n"
              "h = keras.layers.Conv2D(4, 3, activation='relu')(x)\n"
              "y = keras.layers.Dense(3)(keras.layers.Flatten()(h))\n"
              "m = keras.Model(x, y)\n"
              "m.save(sys.argv[1] + '/m.keras'); m.export(sys.argv[1] + '/sm', verbose=False)\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, capture_output=True)
    data = tmp_path / "data.npz"
    np.savez(data, x=RNG.standard_normal((16, 8, 8, 3)).astype(np.float32))
    started = _count_quantizing(monkeypatch, tmp_path / "cache")
    said = {}
    for model, study in ((tmp_path / "m.keras", "keras"), (tmp_path / "sm", "savedmodel")):
        df = profile(model, db=db, study=study, backends="openvino", precisions="int8", batch_sizes="1", threads="1",
                     settings=fast, data=str(data), subset_size=16)
        said[study] = " ".join(map(str, df.attrs["notes"]))
    assert len(started) == 1
    # The twin's study says where its INT8 variant came from; the one that built it does not.
    assert "INT8 variant (cnn recipe) was reused from the cache" in said["savedmodel"], said["savedmodel"]
    assert "reused from the cache" not in said["keras"], said["keras"]
    from wb_core.variants.description import describe_model

    # both read from the IR they convert to: one convolution, the same family in both descriptions
    assert {describe_model(tmp_path / n).family_reason for n in ("m.keras", "sm")} == {"1 convolution, no attention blocks"}
    x = RNG.standard_normal((2, 8, 8, 3)).astype(np.float32)
    np.testing.assert_array_equal(_run_ir(_fp32_ir(db, "keras"), x), _run_ir(_fp32_ir(db, "savedmodel"), x))


def test_a_model_rewritten_after_its_study_is_never_used_under_the_studys_name(tmp_path, db, fast, monkeypatch):
    """After the study, the user's files are rewritten: a conversion the cache no longer holds is refused
    rather than made from the new content and kept under the old fingerprint; a layer profile of the
    user's own IR is refused; a bundle leaves out the files it cannot vouch for, saying why."""
    from wb_core.api import deployment_for_study, export, layer_profile, profile
    from wb_core.variants.convert import ensure_ir

    monkeypatch.setenv("WB_CACHE_DIR", str(tmp_path / "cache"))
    w, b = RNG.standard_normal((6, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    onnx_model = linear_onnx(tmp_path / "model.onnx", w, b, external="weights.data")
    old_fp = fingerprint(onnx_model)
    profile(onnx_model, db=db, study="onnx", backends="onnxruntime", batch_sizes="1", threads="1", settings=fast,
            accuracy=False)
    ir = ensure_ir(onnx_model)
    shutil.copy(ir, tmp_path / "own.xml")
    shutil.copy(ir.with_suffix(".bin"), tmp_path / "own.bin")
    own = tmp_path / "own.xml"
    profile(own, db=db, study="ir", batch_sizes="1", threads="1", settings=fast, accuracy=False)
    shutil.rmtree(tmp_path / "cache" / "ir")  # the cache forgot the conversion (cleared, or another machine's)

    linear_onnx(tmp_path / "other.onnx", w + 1, b, external="other.data")
    shutil.copy(tmp_path / "other.data", tmp_path / "weights.data")
    data = bytearray(own.with_suffix(".bin").read_bytes())
    data[-1] ^= 0xFF
    own.with_suffix(".bin").write_bytes(bytes(data))

    with pytest.raises(ModelError, match="has changed since it was measured"):
        ensure_ir(onnx_model, "onnx", old_fp)
    assert not (tmp_path / "cache" / "ir" / old_fp).exists()  # nothing kept under the name of what was measured
    with pytest.raises(ModelError, match=r"The model at '.*own.xml' has changed since it was measured"):
        layer_profile("ir", results("ir", db, "stored").key.iloc[0], db, iterations=2)
    for study, fmt in (("onnx", "triton"), ("ir", "ovms")):
        exported = export(deployment_for_study(db, study), fmt, tmp_path / f"out-{study}", bundle=True)
        assert exported[fmt].model_files == [], study
        assert any("has no model files" in n and "has changed since it was measured" in n for n in exported[fmt].notes)
    assert not list((tmp_path / "out-onnx").rglob("*.data")) and not list((tmp_path / "out-ir").rglob("*.bin"))
