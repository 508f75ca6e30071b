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
    c.update(onnx_cases(out))
    return c


def _onnx(path: Path, nodes, inputs, outputs, opset: int = 17, initializers=()) -> Path:
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, path)
    return path


def onnx_cases(out: Path) -> dict[str, tuple[Path, str]]:
    """ONNX files that read, but that no sweep can measure: each must be refused before a worker starts.

    Built with onnx's helper API only (no TensorFlow), so the default suite can afford them.
    """
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    out.mkdir(parents=True, exist_ok=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    const = numpy_helper.from_array(np.ones((1, 4), np.float32), "c")
    c: dict[str, tuple[Path, str]] = {}
    c["no_inputs.onnx"] = (_onnx(out / "no_inputs.onnx", [helper.make_node("Identity", ["c"], ["y"])], [], [y],
                                 initializers=[const]), "has no inputs")
    c["no_layers.onnx"] = (_onnx(out / "no_layers.onnx", [helper.make_node("Identity", ["x"], ["y"])], [x], [y]),
                           "no layers")
    c["future_opset.onnx"] = (_onnx(out / "future_opset.onnx", [helper.make_node("Relu", ["x"], ["y"])], [x], [y],
                                    opset=9999), "opset 9999")
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [])
    ys = helper.make_tensor_value_info("ys", TensorProto.FLOAT, [])
    c["rank0.onnx"] = (_onnx(out / "rank0.onnx", [helper.make_node("Relu", ["s"], ["ys"])], [s], [ys]),
                       "scalar (rank 0)")
    t = helper.make_tensor_value_info("t", TensorProto.STRING, [1, 2])
    yt = helper.make_tensor_value_info("yt", TensorProto.STRING, [1, 2])
    c["string_input.onnx"] = (_onnx(out / "string_input.onnx", [helper.make_node("Identity", ["t"], ["yt"])], [t],
                                    [yt]), "string_input.onnx")
    return c


def npz_cases(out: Path) -> dict[str, tuple[Path, str]]:
    """Data files that must be refused from their headers, before any array is loaded."""
    import io
    import zipfile

    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    c: dict[str, tuple[Path, str]] = {}
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)})
    with zipfile.ZipFile(out / "huge_header.npz", "w") as z:
        z.writestr("x.npy", buf.getvalue() + b"\0" * 64)
    c["huge_header.npz"] = (out / "huge_header.npz", "truncated or damaged")
    (out / "text.npz").write_text("not a zip")
    c["text.npz"] = (out / "text.npz", "not a readable .npz")
    np.savez(out / "no_x.npz", a=np.zeros(3))
    c["no_x.npz"] = (out / "no_x.npz", "no array named 'x'")
    return c


def foreign_sqlite(path: Path) -> Path:
    """An SQLite file of another application, with a `runs` table of its own."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO runs (name) VALUES ('theirs')")
    conn.commit()
    conn.close()
    return path


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


# ---- the inputs of the newer features: references, text, pipeline sources, training, stores, names ----

def reference_cases(out: Path, n: int = 8, seq: int = 16, vocab: int = 1000) -> dict[str, tuple[Path, str]]:
    """Data for a text encoder (outputs last_hidden_state, sentence_embedding) whose reference outputs are wrong."""
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    base = {"input_ids": rng.integers(1, vocab, size=(n, seq)), "attention_mask": np.ones((n, seq), np.int64),
            "token_type_ids": np.zeros((n, seq), np.int64)}
    good = rng.standard_normal((n, 32)).astype(np.float32)
    nan, inf = good.copy(), good.copy()
    nan[1, 3] = np.nan
    inf[2, 0] = np.inf
    refs = {"ref_nan.npz": ({"ref.sentence_embedding": nan}, "1 NaN or infinite value"),
            "ref_inf.npz": ({"ref.sentence_embedding": inf}, "1 NaN or infinite value"),
            "ref_strings.npz": ({"ref.sentence_embedding": np.array([["a"] * 32] * n)}, "hold text, not numbers"),
            "ref_unknown_output.npz": ({"ref.pooled": good}, "name an output the model does not have"),
            "ref_short.npz": ({"ref.sentence_embedding": good[:n - 3]}, f"has {n} samples but {n - 3} reference"),
            "ids_nan.npz": ({"input_ids": np.full((n, seq), np.nan)}, "input array 'input_ids'")}
    c = {}
    for name, (arrays, needle) in refs.items():
        np.savez(out / name, **{**base, **arrays})
        c[name] = (out / name, needle)
    return c


def truncated_images(out: Path, n: int = 2) -> Path:
    """A folder of PNG files cut in half: their headers read, their pixels do not."""
    import io

    import numpy as np
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        buf = io.BytesIO()
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buf, "PNG")
        (out / f"{i}.png").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    return out


def fifo(path: Path) -> Path:
    """A named pipe nobody writes to: a reader that opens it waits forever."""
    import os

    os.mkfifo(path)
    return path


def dumped_store(src: Path, dest: Path) -> Path:
    """A workbench store passed through `sqlite3 .dump` and back: every table and row, no application id."""
    import sqlite3

    with sqlite3.connect(src) as a:
        script = "\n".join(a.iterdump())
    b = sqlite3.connect(dest)
    b.executescript(script)
    b.close()
    return dest


TRAIN_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, keras
    out = sys.argv[1]
    def small(classes):
        m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(classes, activation="softmax")])
        return m
    m = small(3)
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    m.save(out + "/three_classes.keras")
    f = small(3)
    for layer in f.layers:
        layer.trainable = False
    f.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    f.save(out + "/frozen.keras")
    rng = np.random.default_rng(0)
    np.savez(out + "/labels_0_to_7.npz", x=rng.random((32, 8), dtype=np.float32), y=rng.integers(0, 8, 32))
    np.savez(out + "/labels_ok.npz", x=rng.random((32, 8), dtype=np.float32), y=rng.integers(0, 3, 32))
""")


def training_cases(out: Path) -> Path:
    """Keras files (3 classes; every layer frozen) and label sets built in a TensorFlow child process."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", TRAIN_SCRIPT, str(out)], check=True, capture_output=True)
    return out


# ---- checks before the work: models a backend asked for cannot open, stores, addresses ----

def matmul_onnx(path: Path, ir_version: int = 8) -> Path:
    """y = relu(x @ I) on [1, 4] inputs, written with the IR version given (one ONNX Runtime does not
    know, e.g. 99, is read by OpenVINO but refused by ONNX Runtime)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                              "g", [x], [y], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


def store_with_schema_version(src: Path, dest: Path, value: str) -> Path:
    """A copy of a workbench store whose meta table records `value` as its schema version."""
    import sqlite3

    with sqlite3.connect(src) as a:  # a consistent copy, WAL included
        b = sqlite3.connect(dest)
        a.backup(b)
        b.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (value,))
        b.commit()
        b.execute("PRAGMA journal_mode=DELETE")
        b.close()
    return dest


def uncompilable_ir(path: Path) -> Path:
    """An OpenVINO IR that reads (its graph is valid) but that the CPU plugin cannot compile: a
    float-to-string Convert, an operation the CPU has no kernel for."""
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops

    x = ops.parameter([2, 3], np.float32, name="x")
    y = ops.convert(x, ov.Type.string)
    path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov.Model([y], [x], "strings"), str(path), compress_to_fp16=False)
    return path


# ---- the inputs of text generation: folders and prompt files ----

def generation_cases(out: Path, generator: Path) -> dict[str, Path]:
    """A folder that is not a generation model, a copy of the demo generator whose tokenizer.json knows more
    tokens than the model has embeddings, and prompt files that are empty, binary or missing."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    big = out / "bigger_tokenizer"
    if not big.exists():
        shutil.copytree(generator, big, ignore=shutil.ignore_patterns("hf"))
        tok = json.loads((big / "tokenizer.json").read_text())
        vocab = json.loads((big / "config.json").read_text())["vocab_size"]
        tok["added_tokens"] += [{"id": vocab + i, "content": f"<extra_{i}>", "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": True} for i in range(8)]
        (big / "tokenizer.json").write_text(json.dumps(tok))
    (out / "config_only").mkdir(exist_ok=True)
    (out / "config_only" / "config.json").write_text("{}")
    (out / "empty.txt").write_text("")
    (out / "binary.txt").write_bytes(bytes(range(128, 256)) * 4)
    return {"config_only": out / "config_only", "bigger_tokenizer": big, "empty.txt": out / "empty.txt",
            "binary.txt": out / "binary.txt",
            "missing.txt": out / "missing.txt"}


USER_FUNCTIONS = textwrap.dedent("""
    def decode_raises(outputs):
        raise RuntimeError("the decoder broke")
    def decode_int(outputs):
        return 42
    def metric_raises(outputs, labels):
        raise RuntimeError("the metric broke")
    def metric_text(outputs, labels):
        return "good"
    def metric_nan(outputs, labels):
        return float("nan")
""")


def user_functions(out: Path, module: str = "wb_bad_user_functions") -> Path:
    """A module of decodings and metrics that raise or return the wrong thing; `out` goes on the path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{module}.py").write_text(USER_FUNCTIONS)
    return out
