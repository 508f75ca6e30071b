"""Bundled demo models, built locally (no downloads) and cached.

- `lenet-digits`: LeNet-5 trained for a few seconds on scikit-learn's bundled 8x8 digits
  (upsampled to 32x32 inside the model), test accuracy >= 0.95. Its test split ships beside it
  as `data.npz` (arrays `x`, `y`) for calibration and accuracy.
- `mobilenet-v2`: the Keras MobileNetV2 architecture at 224x224x3 with random weights: the speed
  of a real vision model, not its accuracy.
- `text-encoder`: a small BERT-style sentence encoder (OpenVINO IR built with the opset API,
  random weights) with a WordPiece `tokenizer.json` trained here on the English corpus shipped in
  `wb_core/demo_text/corpus.txt`, and `sample.txt` (one sample per line, a few words to a few
  hundred tokens) to profile it on real text.

Each Keras demo is a directory holding `saved_model/` (what the workbench profiles), `model.keras`
and, where it has labels, `data.npz`; the text demo holds `model.xml` (+ `.bin`), `tokenizer.json`,
`corpus.txt` and `sample.txt`. Building runs in a child process (the Keras demos import TensorFlow).
The facts about the demos (names, descriptions, where each is cached, a path's demo and study
name) are in `demo_catalog`, a foundation that starts nothing; this module builds them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from wb_core.demo_catalog import BUILD_VERSION, DEMOS, MAIN_FILES, demo_dir
from wb_core.errors import ModelError

TEXT_VOCAB = 2000


def ensure_demo(name: str) -> Path:
    """Path of the demo's directory, building it in a child process the first time."""
    if name not in DEMOS:
        raise ModelError(f"Unknown demo model '{name}'; choose from {', '.join(DEMOS)}.")
    out = demo_dir(name)
    if (out / "info.json").exists():  # written last: the demo is complete
        return out
    from wb_core.proc.parent import run_task

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out.parent))
    try:
        run_task({"task": "wb_core.demo:task_demo", "name": name, "out": str(tmp)}, timeout=900,
                 what=f"building demo model {name}")
        if not out.exists():  # another process may have won the race; theirs is as good as ours
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def demo_model_path(name: str) -> Path:
    """The path the workbench profiles for a demo (its SavedModel, or the text demo's IR)."""
    return ensure_demo(name) / MAIN_FILES.get(name, "saved_model")


def write_demo(name: str, out_dir: str | Path) -> Path:
    """Copy a demo (built or cached) into `out_dir/name`; returns that directory."""
    src = ensure_demo(name)
    dest = Path(out_dir) / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)
    return dest


def resolve_model(model: str | Path) -> Path:
    """A demo name becomes its cached SavedModel; anything else is a path as given."""
    from wb_core.paths import given_path

    path = given_path(model, "The model")
    if isinstance(model, str) and model in DEMOS and not path.exists():
        return demo_model_path(model)
    return path


# ---- the builders (run inside a child process: they import TensorFlow) ----

def task_demo(task: dict) -> None:
    """Worker side of ensure_demo: build one demo into `out`."""
    from wb_core.proc.channel import emit

    emit({"type": "result", "info": build_demo(task["name"], task["out"])})


def build_demo(name: str, out: str | Path) -> dict:
    if name == "text-encoder":
        return build_text_demo(out)
    if name == "text-generator":
        return build_generator_demo(out)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    keras.utils.set_random_seed(0)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    info: dict = {"name": name, "description": DEMOS[name], "build_version": BUILD_VERSION}
    if name == "lenet-digits":
        model, acc, data = _build_lenet(keras)
        info["test_accuracy"] = acc
        import numpy as np

        np.savez(out / "data.npz", **data)
    else:
        model = keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3), classes=1000)
    model.save(out / "model.keras")
    model.export(str(out / "saved_model"), verbose=False)
    (out / "info.json").write_text(json.dumps(info, indent=2))
    return info


def digits_split():
    """scikit-learn's digits as (x_train, y_train, x_test, y_test), x scaled to [0,1], NHWC."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    y = d.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    return xtr, ytr, xte, yte


def _build_lenet(keras):
    xtr, ytr, xte, yte = digits_split()
    layers = keras.layers
    model = keras.Sequential([
        keras.Input(shape=(8, 8, 1), name="image"),
        layers.UpSampling2D(4),  # 8x8 -> 32x32, LeNet-5's input size
        layers.Conv2D(6, 5, activation="relu"),
        layers.AveragePooling2D(2),
        layers.Conv2D(16, 5, activation="relu"),
        layers.AveragePooling2D(2),
        layers.Flatten(),
        layers.Dense(120, activation="relu"),
        layers.Dense(84, activation="relu"),
        layers.Dense(10, activation="softmax"),
    ], name="lenet5")
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.fit(xtr, ytr, epochs=30, batch_size=32, verbose=0)
    acc = float(model.evaluate(xte, yte, verbose=0)[1])
    return model, acc, {"x": xte, "y": yte, "x_train": xtr, "y_train": ytr}


def build_text_encoder(path: str | Path, vocab: int = 1000, hidden: int = 32, layers: int = 2,
                       ffn: int = 64, seed: int = 0, outlier_scale: float = 1.0) -> Path:
    """A small BERT-style sentence encoder as an OpenVINO IR, built with the opset API (no TensorFlow).

    Inputs `input_ids`, `attention_mask`, `token_type_ids` (int64, [batch, sequence]); outputs
    `last_hidden_state` [batch, sequence, hidden] and `sentence_embedding` [batch, hidden] (the
    masked mean of the last hidden state). Random weights: the speed and the shape of a text
    model, and outputs that precision changes measurably. `outlier_scale` above 1 gives two hidden
    channels that scale after every normalisation, as trained transformers have (their activation
    outliers): plain per-tensor INT8 then loses the other channels' detail.
    """
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(seed)

    def const(*shape, scale=None):
        s = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return ops.constant((rng.standard_normal(shape) * s).astype(np.float32))

    gamma = np.ones(hidden, np.float32)
    gamma[[3 % hidden, 17 % hidden]] = outlier_scale

    def layer_norm(h):
        normed = ops.mvn(h, ops.constant(np.array([-1], np.int64)), True, 1e-6, "inside_sqrt")
        return normed if outlier_scale == 1.0 else ops.multiply(normed, ops.constant(gamma))

    ids = ops.parameter([-1, -1], ov.Type.i64, name="input_ids")
    mask = ops.parameter([-1, -1], ov.Type.i64, name="attention_mask")
    types = ops.parameter([-1, -1], ov.Type.i64, name="token_type_ids")
    axis0 = ops.constant(np.int64(0))
    h = ops.add(ops.gather(const(vocab, hidden, scale=1.0), ids, axis0),
                ops.gather(const(2, hidden, scale=0.5), types, axis0))
    h = layer_norm(h)
    maskf = ops.convert(mask, ov.Type.f32)  # [B, S]
    bias = ops.multiply(ops.subtract(ops.constant(np.float32(1.0)), maskf), ops.constant(np.float32(-1e4)))
    bias = ops.unsqueeze(bias, ops.constant(np.array([1], np.int64)))  # [B, 1, S]
    scale = ops.constant(np.float32(1.0 / np.sqrt(hidden)))
    for _ in range(layers):
        q = ops.matmul(h, const(hidden, hidden), False, False)
        k = ops.matmul(h, const(hidden, hidden), False, False)
        v = ops.matmul(h, const(hidden, hidden), False, False)
        scores = ops.add(ops.multiply(ops.matmul(q, k, False, True), scale), bias)
        ctx = ops.matmul(ops.softmax(scores, -1), v, False, False)
        h = layer_norm(ops.add(h, ops.matmul(ctx, const(hidden, hidden), False, False)))
        up = ops.gelu(ops.add(ops.matmul(h, const(hidden, ffn), False, False), const(ffn, scale=0.1)), "erf")
        h = layer_norm(ops.add(h, ops.matmul(up, const(ffn, hidden), False, False)))
    m3 = ops.unsqueeze(maskf, ops.constant(np.array([2], np.int64)))  # [B, S, 1]
    summed = ops.reduce_sum(ops.multiply(h, m3), ops.constant(np.array([1], np.int64)), False)
    count = ops.maximum(ops.reduce_sum(m3, ops.constant(np.array([1], np.int64)), False),
                        ops.constant(np.float32(1e-9)))
    pooled = ops.divide(summed, count)
    h.output(0).get_tensor().set_names({"last_hidden_state"})
    pooled.output(0).get_tensor().set_names({"sentence_embedding"})
    for p, n in ((ids, "input_ids"), (mask, "attention_mask"), (types, "token_type_ids")):
        p.output(0).get_tensor().set_names({n})
    model = ov.Model([ops.result(h), ops.result(pooled)], [ids, mask, types], "text_encoder")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path


def demo_corpus() -> str:
    """The plain English text shipped with the workbench (written for it), one sentence per line."""
    from importlib import resources

    return resources.files("wb_core").joinpath("demo_text/corpus.txt").read_text(encoding="utf-8")


def train_tokenizer(lines, path: str | Path, vocab_size: int = TEXT_VOCAB) -> Path:
    """A BERT-style WordPiece tokenizer (lower case, [CLS] ... [SEP]) trained on `lines`, saved as JSON."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(list(lines), trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    from tokenizers import decoders

    tok.decoder = decoders.WordPiece()
    path = Path(path)
    tok.save(str(path))
    return path


def sample_lines(corpus_lines: list[str], n: int = 96, seed: int = 0) -> list[str]:
    """Samples of mixed length from the corpus: mostly one sentence, some short paragraphs, a few
    long ones (past 128 tokens), as questions and documents reaching a text service would be."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = 1 if i % 4 else (3 if i % 16 else 16)
        start = int(rng.integers(0, len(corpus_lines) - k))
        out.append(" ".join(corpus_lines[start:start + k]))
    return out


def build_text_demo(out: str | Path) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = demo_corpus()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    (out / "corpus.txt").write_text(text, encoding="utf-8")
    tok_path = train_tokenizer(lines, out / "tokenizer.json")
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(str(tok_path)).get_vocab_size()
    (out / "sample.txt").write_text("\n".join(sample_lines(lines)) + "\n", encoding="utf-8")
    build_text_encoder(out / "model.xml", vocab=vocab, hidden=64, layers=2, ffn=256)
    info = {"name": "text-encoder", "description": DEMOS["text-encoder"], "build_version": BUILD_VERSION,
            "vocab_size": vocab, "corpus_lines": len(lines)}
    (out / "info.json").write_text(json.dumps(info, indent=2))
    return info


# ---- the text generator (needs the `hf` extra: torch, transformers, optimum-intel) ----

GENERATOR_VOCAB = 1024
GENERATOR_SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "max_position_embeddings": 1024}


def train_bpe_tokenizer(lines, vocab_size: int = GENERATOR_VOCAB):
    """A byte-level BPE tokenizer (as GPT-2 and Llama 3 use) trained on `lines`, with <s>, </s>, <unk>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(list(lines), trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>", "<unk>"],
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def build_generator_demo(out: str | Path) -> dict:
    """A tiny Llama decoder with random weights and a BPE tokenizer trained on the shipped corpus,
    saved as a Hugging Face folder and exported by optimum-intel as an OpenVINO GenAI folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [line.strip() for line in demo_corpus().splitlines() if line.strip()]
    tok = train_bpe_tokenizer(lines)
    torch.manual_seed(0)
    hf_dir = out / "hf"
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    hf_tok.save_pretrained(hf_dir)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), bos_token_id=tok.token_to_id("<s>"),
                      eos_token_id=tok.token_to_id("</s>"), tie_word_embeddings=False, **GENERATOR_SHAPE)
    LlamaForCausalLM(cfg).eval().save_pretrained(hf_dir)
    from wb_core.optimum_export import export_to_openvino_genai

    export_to_openvino_genai(hf_dir, out)
    (out / "prompts.txt").write_text("\n".join(sample_lines(lines, n=32)) + "\n", encoding="utf-8")
    info = {"name": "text-generator", "description": DEMOS["text-generator"], "build_version": BUILD_VERSION,
            "vocab_size": tok.get_vocab_size(), **GENERATOR_SHAPE}
    (out / "info.json").write_text(json.dumps(info, indent=2))
    return info
