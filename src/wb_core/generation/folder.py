"""What a text-generation model folder is, read from its files (no runtime is loaded here).

An OpenVINO GenAI folder, as `optimum-cli export openvino` writes it, holds `openvino_model.xml`
(+ `.bin`), `openvino_tokenizer.xml` and `openvino_detokenizer.xml`, and usually the Hugging Face
`config.json` and `tokenizer.json` it came from. A Hugging Face folder (`config.json` and weights,
no `openvino_model.xml`) is converted through optimum-intel, when the `hf` extra is installed.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from wb_core.errors import ConfigError, ModelError

MODEL_XML = "openvino_model.xml"
TOKENIZER_XML = "openvino_tokenizer.xml"
DETOKENIZER_XML = "openvino_detokenizer.xml"
REQUIRED = (MODEL_XML, TOKENIZER_XML, DETOKENIZER_XML)
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
HF_EXTRA = "hf"
GENAI_EXTRA = "genai"


def is_generation_folder(path: str | Path) -> bool:
    """Whether `path` is a folder holding an OpenVINO GenAI model (model, tokenizer, detokenizer IRs)."""
    p = Path(path)
    return p.is_dir() and all((p / name).is_file() for name in REQUIRED)


def is_hf_folder(path: str | Path) -> bool:
    """Whether `path` is a Hugging Face model folder (config.json and weights) not yet converted."""
    p = Path(path)
    return (p.is_dir() and (p / "config.json").is_file() and not (p / MODEL_XML).exists()
            and any((p / name).is_file() for name in HF_WEIGHTS))


def looks_like_generation(path: str | Path) -> bool:
    p = Path(path)
    return is_generation_folder(p) or is_hf_folder(p) or (p.is_dir() and (p / MODEL_XML).is_file())


def check_generation_folder(path: str | Path) -> Path:
    """The folder, or one sentence saying why it is not a text-generation model."""
    p = Path(path)
    if not p.exists():
        raise ModelError(f"Model path '{p}' does not exist.")
    if not p.is_dir():
        raise ModelError(f"'{p}' is a file; a text-generation model is a folder holding {', '.join(REQUIRED)}.")
    missing = [name for name in REQUIRED if not (p / name).is_file()]
    if missing:
        raise ModelError(f"'{p}' is not a text-generation model folder: it has no {' or '.join(missing)} "
                         f"(export one with optimum-intel's text-generation-with-past task).")
    for name in REQUIRED:
        if not (p / name).with_suffix(".bin").is_file():
            raise ModelError(f"'{p / name}' has no weights file '{Path(name).with_suffix('.bin').name}' beside it.")
    return p


def hf_config(path: str | Path) -> dict:
    """The Hugging Face `config.json` beside the model, or {} when there is none or it is unreadable."""
    f = Path(path) / "config.json"
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# The names architectures give the same figure in their config.json: the first is transformers'
# common name, the rest the older ones its configs map to it (GPT-2's n_embd, n_positions, n_layer;
# T5's d_model, num_layers; MPT's max_seq_len).
CONFIG_NAMES = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "context": ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length"),
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
}


def config_value(cfg: dict, figure: str) -> int | None:
    """One figure of a model's config (`hidden_size`, `context`, `layers`) under whichever of its
    names the architecture uses; None when it names none of them as a positive whole number."""
    for name in CONFIG_NAMES[figure]:
        v = cfg.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def tokenizer_vocab(path: str | Path) -> int | None:
    """The vocabulary size of the folder's `tokenizer.json` (added tokens included), or None without one."""
    f = Path(path) / "tokenizer.json"
    if not f.is_file():
        return None
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(f)).get_vocab_size(with_added_tokens=True)
    except Exception:  # a tokenizer.json the tokenizers package cannot read: the IRs are what runs
        return None


def check_tokenizer_matches(path: str | Path, model_vocab: int | None) -> None:
    """A tokenizer whose ids run past the model's embedding rows is refused in one sentence."""
    vocab = tokenizer_vocab(path)
    if vocab is not None and model_vocab is not None and vocab > model_vocab:
        raise ModelError(f"The tokenizer in '{path}' has {vocab} tokens but the model's vocabulary has {model_vocab}: "
                         f"they do not belong together (ids past {model_vocab - 1} have no embedding).")


def extra_installed(extra: str) -> bool:
    """Whether an optional extra's packages can be imported (looked up, not imported)."""
    modules = {GENAI_EXTRA: ("openvino_genai", "openvino_tokenizers"), HF_EXTRA: ("optimum.intel", "transformers", "torch")}
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules[extra])
    except (ImportError, ValueError):  # a parent package missing: find_spec of a submodule raises
        return False


# optimum-intel goes in on its own, without its dependencies (pyproject.toml's `hf` extra says why).
EXTRA_STEPS = {HF_EXTRA: ", then optimum-intel 2.2.0 without its dependencies, as make install does"}


def require_extra(extra: str, what: str) -> None:
    if not extra_installed(extra):
        raise ConfigError(f"{what} needs the {extra} extra, which is not installed "
                          f"(pip install 'cpu-inference-workbench[{extra}]'{EXTRA_STEPS.get(extra, '')}).")
