"""A corpus of broken and awkward model files, built from the real demo model."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

TF_SCRIPT = textwrap.dedent("""
    import sys, tensorflow as tf, keras
    out = sys.argv[1]
    class M(tf.Module):
        @tf.function
        def f(self, x):
            return x * 2
    m = M()
    tf.saved_model.save(m, out + "/no_signatures", signatures={})
    inp = keras.Input((4,))
    y = keras.layers.Lambda(lambda t: t * 3)(inp)
    keras.Model(inp, y).save(out + "/lambda_layer.keras")
""")


def build(out: Path, lenet_dir: Path, lenet_ir: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, a phrase the error must contain)."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", TF_SCRIPT, str(out)], check=True, capture_output=True)
    keras_bytes = (lenet_dir / "model.keras").read_bytes()
    pb = (lenet_dir / "saved_model" / "saved_model.pb").read_bytes()
    xml = lenet_ir.read_text()
    weights = lenet_ir.with_suffix(".bin").read_bytes()
    c: dict[str, tuple[Path, str]] = {}

    def put(name: str, data: bytes | str, needle: str) -> Path:
        p = out / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        c[name] = (p, needle)
        return p

    put("truncated.keras", keras_bytes[: len(keras_bytes) // 3], "truncated.keras")
    put("random.keras", bytes(range(256)) * 8, "random.keras")
    put("truncated.onnx", b"\x08\x07\x12\x04onnx" + b"\x00" * 40, "truncated.onnx")
    put("text_as.onnx", "this is not a model\n", "text_as.onnx")
    trunc_sm = out / "truncated_savedmodel"
    shutil.copytree(lenet_dir / "saved_model", trunc_sm)
    (trunc_sm / "saved_model.pb").write_bytes(pb[: len(pb) // 4])
    c["truncated_savedmodel"] = (trunc_sm, "truncated_savedmodel")
    bad_xml = put("garbage_ir/model.xml", "<net><layers><layer id='0' type='Nope'/>", "model.xml")
    bad_xml.with_suffix(".bin").write_bytes(weights)
    short = put("short_bin/model.xml", xml, "model.xml")
    short.with_suffix(".bin").write_bytes(weights[:100])
    put("lonely_ir/model.xml", xml, "no weights file")
    (out / "empty_dir").mkdir(exist_ok=True)
    c["empty_dir"] = (out / "empty_dir", "is empty")
    (out / "not_savedmodel").mkdir(exist_ok=True)
    (out / "not_savedmodel" / "readme.txt").write_text("hello")
    c["not_savedmodel"] = (out / "not_savedmodel", "not a TensorFlow SavedModel")
    put("model.pb", pb, "not a model format")
    put("weights.h5", b"\x89HDF\r\n\x1a\n" + b"\x00" * 64, "legacy HDF5")
    put("model.bin", weights, "not a model format")
    onnx_as_keras = put("onnx_renamed.keras", b"\x08\x07\x12\x04onnx" + b"\x00" * 40, "onnx_renamed.keras")
    assert onnx_as_keras.exists()
    c["no_signatures"] = (out / "no_signatures", "no serving signatures")
    c["lambda_layer.keras"] = (out / "lambda_layer.keras", "lambda_layer.keras")
    c["unsupported_op.onnx"] = (_onnx_unsupported(out / "unsupported_op.onnx"), "unsupported_op.onnx")
    return c


def _onnx_unsupported(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node("FrobnicateTensor", ["x"], ["y"], domain="com.example.nosuchops")
    graph = helper.make_graph([node], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example.nosuchops", 1)])
    onnx.save(model, path)
    return path
