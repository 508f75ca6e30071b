"""Text models: several named integer inputs, data by input name, accuracy against the FP32
outputs, sequence length as a sweep axis, input ranges by name, a model quantized beforehand."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from wb_core.cli import app
from wb_core.config import InputOptions, SweepSpec
from wb_core.errors import ConfigError
from wb_core.models import InputSpec, make_batches, resolve_int_ranges
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep
from wb_core.variants.planner import PrecisionOptions

VOCAB = 1000
SPECS = [InputSpec("input_ids", (-1, -1), "int64"), InputSpec("attention_mask", (-1, -1), "int64"),
         InputSpec("token_type_ids", (-1, -1), "int64")]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    from wb_core.demo import build_text_encoder

    return build_text_encoder(tmp_path_factory.mktemp("enc") / "encoder.xml", vocab=VOCAB)


def _text_data(path, n=48, seq=16, labels=False):
    rng = np.random.default_rng(0)
    lengths = rng.integers(4, seq + 1, size=n)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    ids = rng.integers(1, VOCAB, size=(n, seq)) * mask
    arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros((n, seq), np.int64)}
    if labels:
        arrays["y"] = rng.integers(0, 2, size=n)
    np.savez(path, **arrays)
    return path


def test_int_ranges_merge_and_defaults_follow_the_names():
    opts = InputOptions.parse(int_range=["input_ids=0:500", "5:9"])
    assert opts.int_ranges == {"input_ids": (0, 500)} and opts.int_range == (5, 9)
    resolved, notes = resolve_int_ranges(SPECS, InputOptions.parse(int_range=["input_ids=0:500"]), {"input_ids": VOCAB})
    assert resolved.int_ranges == {"input_ids": (0, 500), "attention_mask": (1, 2), "token_type_ids": (0, 1)}
    assert len(notes) == 2 and "attention_mask" in notes[0] and "token_type_ids" in notes[1]
    resolved, notes = resolve_int_ranges(SPECS, InputOptions(), {"input_ids": VOCAB})
    assert resolved.int_ranges["input_ids"] == (0, VOCAB) and "vocabulary" in notes[0]
    b = make_batches(SPECS, 4, InputOptions(dynamic_size=8, int_ranges=resolved.int_ranges))[0]
    assert (b["attention_mask"] == 1).all() and (b["token_type_ids"] == 0).all() and b["input_ids"].max() < VOCAB
    with pytest.raises(ConfigError, match="reaches past the model's embedding table of 1000 rows; valid values are 0:1000"):
        resolve_int_ranges(SPECS, InputOptions.parse(int_range="0:30522"), {"input_ids": VOCAB})
    with pytest.raises(ConfigError, match="names input 'mask'.*its inputs: input_ids"):
        resolve_int_ranges(SPECS, InputOptions.parse(int_range="mask=0:2"))


def test_text_model_fp32_int8_over_sequence_lengths(encoder, db, fast, tmp_path):
    data = _text_data(tmp_path / "text.npz")
    s = run_sweep(encoder, SweepSpec(precisions="fp32,int8", seq_lens="8,16"), db, "text", settings=fast,
                  precision=PrecisionOptions(data=str(data), output="sentence_embedding", subset_size=32))
    assert s.ok == 4, s.errors
    df = load_results(db, "text")
    assert sorted(df["seq_len"]) == [8, 8, 16, 16]
    int8 = df[df["precision"] == "int8"].iloc[0]
    fp32 = df[df["precision"] == "fp32"].iloc[0]
    assert int8["executed_precision"] in ("u8", "i8") and int8["accuracy_metric"] == "cosine vs fp32"
    assert fp32["accuracy"] == pytest.approx(1.0) and 0.5 < int8["accuracy"] < 1.0
    assert int8["accuracy_output"] == "sentence_embedding"
    # Each note said once: the vocabulary read from the model, the label-free accuracy.
    assert sum("'input_ids' gets values 0:1000" in n for n in s.notes) == 1
    assert sum("no labels" in n for n in s.notes) == 1


def test_cosine_on_another_output_and_accuracy_aware_int8_without_labels(encoder, db, fast, tmp_path):
    data = _text_data(tmp_path / "text.npz", n=32)
    s = run_sweep(encoder, SweepSpec(precisions="int8"), db, "aac", settings=fast, inputs=InputOptions(dynamic_size=8),
                  precision=PrecisionOptions(data=str(data), max_accuracy_drop=0.001, subset_size=16))
    assert s.ok == 1, s.errors
    row = load_results(db, "aac").iloc[0]
    assert row["variant"] == "int8-aac" and row["accuracy_metric"] == "cosine vs fp32"
    assert row["accuracy_drop"] <= 0.001 + 1e-6
    # Without --output, accuracy reads the first output and says which, once.
    assert sum("first output 'last_hidden_state'" in n for n in s.notes) == 1


def test_data_missing_an_input_is_filled_or_one_sentence(encoder, db, fast, tmp_path):
    path = tmp_path / "partial.npz"
    np.savez(path, input_ids=np.ones((4, 8), np.int64), attention_mask=np.ones((4, 8), np.int64))
    # The token type ids the data leaves out are zeros, as a tokenizer makes them for one sentence: said so.
    s = run_sweep(encoder, SweepSpec(precisions="fp32"), db, "filled", settings=fast,
                  inputs=InputOptions(dynamic_size=8), precision=PrecisionOptions(data=str(path)))
    assert s.ok == 1, s.errors
    assert any("no array for input 'token_type_ids'" in n and "filled with zeros" in n for n in s.notes)
    # Without a size for its dynamic dimensions, a left-out input cannot be made: one sentence.
    from wb_core.data import Dataset, complete_inputs

    with pytest.raises(ConfigError, match="no array for input 'token_type_ids'.*dynamic dimensions leave its size open"):
        complete_inputs(Dataset(x={"input_ids": np.ones((4, 8), np.int64)}), SPECS[:1] + [
            InputSpec("token_type_ids", (-1, -1, -1), "int64")], opts=InputOptions())
    # A mask left out takes the length of the token ids the data holds.
    done, notes = complete_inputs(Dataset(x={"input_ids": np.ones((4, 8), np.int64)}), SPECS, opts=InputOptions())
    assert done.x["attention_mask"].shape == (4, 8) and (done.x["attention_mask"] == 1).all()
    assert done.x["token_type_ids"].shape == (4, 8) and (done.x["token_type_ids"] == 0).all() and len(notes) == 2
    # A mapping names arrays called otherwise.
    np.savez(path, ids=np.ones((4, 8), np.int64), attention_mask=np.ones((4, 8), np.int64),
             token_type_ids=np.zeros((4, 8), np.int64))
    with pytest.raises(ConfigError, match="no output 'pooled' \\(its outputs: last_hidden_state, sentence_embedding\\)"):
        run_sweep(encoder, SweepSpec(precisions="fp32"), db, "bad", inputs=InputOptions(dynamic_size=8),
                  precision=PrecisionOptions(data=str(path), input_map={"input_ids": "ids"}, output="pooled"))


def test_a_model_quantized_beforehand_runs_as_int8_beside_its_float_graph(encoder, db, fast, tmp_path):
    run_sweep(encoder, SweepSpec(precisions="int8"), db, "q", settings=fast, inputs=InputOptions(dynamic_size=8),
              precision=PrecisionOptions(data=str(_text_data(tmp_path / "t.npz", n=16)), subset_size=16))
    int8_ir = load_results(db, "q").iloc[0]["variant_path"]
    s = run_sweep(int8_ir, SweepSpec(precisions="fp32"), db, "pre", settings=fast, inputs=InputOptions(dynamic_size=8))
    assert s.ok == 2, s.errors
    rows = load_results(db, "pre").set_index("precision")
    assert rows.loc["int8", "variant"] == "int8-ir" and rows.loc["int8", "variant_path"] == str(int8_ir)
    assert rows.loc["fp32", "variant"] == "fp32-ir" and "quantizer(s) removed" in rows.loc["fp32", "variant_note"]
    assert any("quantized beforehand" in n for n in s.notes)


def test_cli_sequence_lengths_ranges_and_output(encoder, db, tmp_path):
    data = _text_data(tmp_path / "text.npz", n=16)
    res = CliRunner().invoke(app, ["profile", str(encoder), "--dynamic-size", "8,16", "--int-range", "input_ids=0:500",
                                   "--int-range", "attention_mask=1:2", "--data", str(data), "--output",
                                   "sentence_embedding", "--db", str(db), "--study", "cli", "--max-time", "0.6",
                                   "--warmup", "0.1", "--window", "0.1", "--tolerance", "0.5"])
    assert res.exit_code == 0, res.output
    df = load_results(db, "cli")
    assert sorted(df["seq_len"]) == [8, 16] and (df["status"] == "ok").all()
    assert re.search(r"backend\s+precision\s+seq_len", res.output)
    assert "token_type_ids" in res.output and "input_ids' gets" not in res.output  # given: no note
    bad = subprocess.run([sys.executable, "-m", "wb_core", "profile", str(encoder), "--dynamic-size", "8",
                          "--int-range", "0:30522", "--db", str(db), "--study", "bad"], capture_output=True, text=True)
    assert bad.returncode != 0 and "valid values are 0:1000" in bad.stderr and "Traceback" not in bad.stderr


def test_a_slower_int8_is_said_plainly_with_the_cpu_reason():
    import pandas as pd

    from wb_core.analysis.precision import slowdown_notes, vs_fp32

    df = pd.DataFrame({"backend": ["openvino"] * 4, "precision": ["fp32", "int8", "fp32", "int8"],
                       "batch_size": [1, 1, 8, 8], "throughput": [100.0, 78.0, 400.0, 800.0], "status": ["ok"] * 4})
    assert list(vs_fp32(df).round(2)) == [1.0, 0.78, 1.0, 2.0]
    (note,) = slowdown_notes(df, {"avx2": True})
    assert "1 of 2" in note and "0.78x" in note and "no VNNI" in note
    (note,) = slowdown_notes(df, {"avx2": True, "avx_vnni": True})
    assert "VNNI" not in note


# ---- real text through a local tokenizer ----

LINES = ["The train was late again, so she read on the platform.", "A processor runs many threads at once.",
         "Rain fell softly on the roof while the children slept upstairs, and the river rose in the night.",
         "Good software measures before it optimises.", "He bought bread, butter and honey at the market."] * 8


@pytest.fixture(scope="module")
def text_setup(tmp_path_factory):
    """A WordPiece tokenizer trained here, an encoder sized to its vocabulary, and a text file."""
    from wb_core.demo import build_text_encoder, train_tokenizer

    d = tmp_path_factory.mktemp("text")
    tok = train_tokenizer(LINES, d / "tokenizer.json", vocab_size=200)
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(str(tok)).get_vocab_size()
    model = build_text_encoder(d / "enc.xml", vocab=vocab)
    (d / "text.txt").write_text("\n".join(LINES) + "\n\n")
    return model, tok, d / "text.txt"


def test_text_is_tokenized_per_sequence_length_and_measured(text_setup, db, fast):
    from tokenizers import Tokenizer

    from wb_core.models import make_batches
    from wb_core.text import prepare_text

    model, tok, text = text_setup
    s = run_sweep(model, SweepSpec(precisions="fp32,int8", seq_lens="8,32"), db, "txt", settings=fast,
                  inputs=InputOptions(text=str(text), tokenizer=str(tok)),
                  precision=PrecisionOptions(output="sentence_embedding", subset_size=16))
    assert s.ok == 4, s.errors
    df = load_results(db, "txt")
    assert sorted(df["seq_len"]) == [8, 8, 32, 32]
    assert (df["data_source"] == f"'{text}'").all() and (df["accuracy_metric"] == "cosine vs fp32").all()
    assert 0.5 < df[df["precision"] == "int8"]["accuracy"].iloc[0] < 1.0
    (note,) = [n for n in s.notes if "lines of text" in n]
    assert "40 lines" in note and "8, 32 tokens" in note and "at 32 tokens" in note
    assert not any("gets values" in n for n in s.notes)  # text fills the inputs: no random ranges
    # The workers' batches are the text, tokenized to the point's length ([CLS] ... [SEP], padded).
    ts = prepare_text(text, tok, SPECS, [8, 32])
    b = make_batches(SPECS, 4, InputOptions(dynamic_size=8, samples=str(ts.path)))[0]
    want = Tokenizer.from_file(str(tok)).encode(LINES[0]).ids
    assert b["input_ids"].shape == (4, 8) and b["input_ids"][0, 0] == want[0] and b["input_ids"][0, -1] == want[-1]
    long = make_batches(SPECS, 4, InputOptions(dynamic_size=32, samples=str(ts.path)))[0]
    assert long["input_ids"][0, :len(want)].tolist() == want and long["attention_mask"][0].sum() == len(want)
    assert (long["input_ids"][0, len(want):] == 0).all()  # [PAD]


def test_bad_text_inputs_are_one_sentence(text_setup, db, tmp_path):
    import openvino as ov
    import openvino.opset13 as ops

    from wb_core.errors import ModelError

    model, tok, text = text_setup
    fake = tmp_path / "tokenizer.json"
    fake.write_text('{"hello": 1}')
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    run = lambda m, **kw: run_sweep(m, SweepSpec(), db, "bad", inputs=InputOptions(dynamic_size=8, **kw))  # noqa: E731
    with pytest.raises(ConfigError, match="is not a tokenizer file the tokenizers package can read"):
        run(model, text=str(text), tokenizer=str(fake))
    with pytest.raises(ConfigError, match="holds no lines of text"):
        run(model, text=str(empty), tokenizer=str(tok))
    x = ops.parameter([-1, 4], ov.Type.f32, name="features")
    plain = tmp_path / "plain.xml"
    ov.save_model(ov.Model([ops.relu(x)], [x], "plain"), str(plain))
    with pytest.raises(ModelError, match="no token-ids input \\(its inputs: features\\)"):
        run(plain, text=str(text), tokenizer=str(tok))
    with pytest.raises(ConfigError, match="Text and a tokenizer go together") as caught:
        InputOptions(text=str(text))
    from wb_core.axes import word_for_cli

    assert "give both the text (--text) and its tokenizer.json (--tokenizer)" in word_for_cli(caught.value.template)
    assert not db.exists()  # refused before anything was stored
    bad = subprocess.run([sys.executable, "-m", "wb_core", "profile", str(model), "--dynamic-size", "8", "--text",
                          str(text), "--tokenizer", str(fake), "--db", str(db)], capture_output=True, text=True)
    assert bad.returncode != 0 and "not a tokenizer file" in bad.stderr and "Traceback" not in bad.stderr


def test_reference_outputs_in_the_data_are_the_accuracy_reference(encoder, db, fast, tmp_path):
    import openvino as ov

    path = _text_data(tmp_path / "t.npz", n=16, seq=8)
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    compiled = ov.Core().compile_model(str(encoder), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    out = compiled(arrays)[compiled.output("sentence_embedding")]
    ref = out + np.random.default_rng(1).normal(0, 0.3, out.shape).astype(np.float32)  # another model's outputs
    np.savez(path, **arrays, **{"ref.sentence_embedding": ref})
    s = run_sweep(encoder, SweepSpec(precisions="fp32"), db, "ref", settings=fast, inputs=InputOptions(dynamic_size=8),
                  precision=PrecisionOptions(data=str(path), output="sentence_embedding"))
    assert s.ok == 1, s.errors
    row = load_results(db, "ref").iloc[0]
    assert row["accuracy_metric"] == "cosine vs reference"
    a, b = out.reshape(len(out), -1).astype(np.float64), ref.reshape(len(ref), -1).astype(np.float64)
    expected = float(np.mean((a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))
    assert row["accuracy"] == pytest.approx(expected, abs=1e-4) and row["accuracy"] < 0.99
    assert any("'ref.sentence_embedding'" in n for n in s.notes)
    np.savez(path, **arrays, **{"ref.sentence_embedding": ref[:, :5]})
    with pytest.raises(ConfigError, match="reference outputs 'sentence_embedding'.*shape \\(5,\\).*gives \\(32,\\)"):
        run_sweep(encoder, SweepSpec(precisions="fp32"), db, "ref2", settings=fast, inputs=InputOptions(dynamic_size=8),
                  precision=PrecisionOptions(data=str(path), output="sentence_embedding"))


def test_shapes_are_a_sweep_axis(db, fast, tmp_path):
    import openvino as ov
    import openvino.opset13 as ops

    from wb_core.config import RunConfig, parse_shape_axis

    x = ops.parameter([-1, 3, -1, -1], ov.Type.f32, name="image")
    pooled = ops.reduce_mean(ops.relu(x), ops.constant(np.array([2, 3], np.int64)), False)
    model = tmp_path / "conv.xml"
    ov.save_model(ov.Model([pooled], [x], "pool"), str(model))
    assert parse_shape_axis(["image=1x3x8x8,1x3x16x16", "other=1x4"]) == (["other=1x4"],
                                                                            ["image=1x3x8x8", "image=1x3x16x16"])
    with pytest.raises(ConfigError, match="as many shapes each"):
        parse_shape_axis(["a=1x2,1x3", "b=1x2,1x3,1x4"])
    with pytest.raises(ConfigError, match="must look like NAME=1x3x224x224"):
        SweepSpec(shapes=["1x3x8x8"])
    # A run without a shape keeps the key it always had.
    assert RunConfig("openvino").key == RunConfig("openvino", shape=None).key
    s = run_sweep(model, SweepSpec(shapes=["image=1x3x8x8", "image=1x3x16x16"], batch_sizes="1,2"), db, "shapes",
                  settings=fast)
    assert s.ok == 4, s.errors
    df = load_results(db, "shapes")
    assert sorted(zip(df["shape"], df["batch_size"])) == [("image=1x3x16x16", 1), ("image=1x3x16x16", 2),
                                                           ("image=1x3x8x8", 1), ("image=1x3x8x8", 2)]
    res = CliRunner().invoke(app, ["profile", str(model), "--shape", "image=1x3x8x8,1x3x12x12", "--db", str(db),
                                   "--study", "cli-shapes", "--max-time", "0.5", "--warmup", "0.1", "--window", "0.1",
                                   "--tolerance", "0.5"])
    assert res.exit_code == 0, res.output
    assert sorted(load_results(db, "cli-shapes")["shape"]) == ["image=1x3x12x12", "image=1x3x8x8"]
    assert re.search(r"precision\s+shape\s+batch_size", res.output), res.output


def test_text_encoder_demo_is_built_here_with_its_tokenizer(tmp_path):
    from tokenizers import Tokenizer

    from wb_core.variants.description import describe_model

    res = CliRunner().invoke(app, ["demo-model", "text-encoder", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    d = tmp_path / "text-encoder"
    assert "tokenizer" in res.output and (d / "model.xml").exists() and (d / "corpus.txt").exists()
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    enc = tok.encode("The river flows past the old mill.")
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]" and "[UNK]" not in enc.tokens
    described = describe_model(d / "model.xml")
    assert described.embedding_rows["input_ids"] == tok.get_vocab_size()
    # what a tokenizer fills, read from the input names the demo's builder gives
    assert described.text_roles == {"input_ids": "ids", "attention_mask": "attention_mask",
                                    "token_type_ids": "type_ids"}
    assert described.family == "transformer", described.family_reason
    lines = (d / "sample.txt").read_text().splitlines()
    lengths = [len(e.ids) for e in tok.encode_batch(lines)]
    assert len(lines) >= 64 and min(lengths) < 32 and max(lengths) > 128  # short questions and long documents


def test_the_text_demo_measures_its_own_text_by_default(db, fast):
    """Profiling `text-encoder` with no data reads its sample text through its tokenizer, not random ids."""
    from wb_core.api import profile
    from wb_core.demo_catalog import demo_sample_text

    summary = profile("text-encoder", db=db, study="demo-text", seq_lens="16", settings=fast, return_frame=False,
                      accuracy=False)
    assert summary.ok == 1, summary.errors
    sample, tokenizer = demo_sample_text("text-encoder")
    assert sample.exists() and tokenizer.exists()
    assert any("lines of text" in n for n in summary.notes), summary.notes
    assert not any("gets values" in n for n in summary.notes)  # no random token ranges


def test_a_tokenizer_folder_reads_its_tokenizer_json(text_setup, tmp_path):
    """A folder saved with save_pretrained holds tokenizer.json: it tokenizes as the file does; a folder
    without one is one sentence."""
    import shutil

    from tokenizers import Tokenizer

    from wb_core.text import prepare_text

    model, tok, text = text_setup
    folder = tmp_path / "tok"
    folder.mkdir()
    shutil.copy(tok, folder / "tokenizer.json")
    ts = prepare_text(text, folder, SPECS, [16])
    with np.load(ts.path) as f:
        ids = f["16.input_ids"]
    want = Tokenizer.from_file(str(tok)).encode(LINES[0]).ids
    assert ids[0, :len(want)].tolist() == want
    with pytest.raises(ConfigError, match="holds no tokenizer.json"):
        prepare_text(text, tmp_path, SPECS, [16])
