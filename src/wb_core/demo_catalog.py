"""The bundled demo models as facts: their names and descriptions, where each is cached, which
file the workbench profiles, and what a model path says about its demo and study name.

A foundation: it reads paths only and starts nothing. Building a demo needs a worker (the Keras
demos import TensorFlow): that is `demo.ensure_demo`, a layer above.
"""

from __future__ import annotations

from pathlib import Path

from wb_core.paths import cache_dir

DEMOS = {
    "lenet-digits": "LeNet-5 trained on scikit-learn's digits (8x8x1 input, 10 classes)",
    "mobilenet-v2": "MobileNetV2 architecture, random weights (224x224x3 input, 1000 classes)",
    "text-encoder": "BERT-style 2-layer encoder, random weights, with a WordPiece tokenizer trained here "
                    "(input_ids, attention_mask, token_type_ids)",
    "text-generator": "Llama-style 2-layer decoder, random weights, with a byte-level BPE tokenizer trained here "
                      "(an OpenVINO GenAI folder: model, tokenizer and detokenizer IRs)",
}
# The file the workbench profiles, inside each demo's directory.
MAIN_FILES = {"text-encoder": "model.xml", "text-generator": ""}  # "": the folder itself
BUILD_VERSION = 1  # bump to rebuild cached demos when the recipe changes


def demo_dir(name: str) -> Path:
    return cache_dir() / "demos" / f"{name}-v{BUILD_VERSION}"


def demo_name_of(path: str | Path) -> str | None:
    p = Path(path).resolve()
    for name in DEMOS:
        if p in (demo_dir(name).resolve(), (demo_dir(name) / MAIN_FILES.get(name, "saved_model")).resolve()):
            return name
    return None


def demo_sample_text(name: str | None) -> tuple[Path, Path] | None:
    """(sample text, tokenizer) of a demo that ships text, else None: its own data, as an image
    demo's is its test split."""
    if name == "text-generator":
        folder = demo_dir(name)
        return folder / "prompts.txt", folder / "tokenizer.json"
    if name != "text-encoder":
        return None
    folder = demo_dir(name)
    return folder / "sample.txt", folder / "tokenizer.json"


# File or folder names that say nothing about the model: the folder above names it instead.
GENERIC_MODEL_NAMES = {"saved_model", "savedmodel", "model", "models", "export", "exported", "serving",
                       "frozen", "openvino", "ir", "onnx", "keras", "tf", "output", "outputs", "unpacked",
                       "uploads"}


def _generic(name: str) -> bool:
    return not name or name.lower() in GENERIC_MODEL_NAMES or name.isdigit() or name.lower().startswith("upload-")


def default_study_name(model: str | Path) -> str:
    """`lenet-digits` for a demo, else the model's file or folder name, or the name of the nearest
    folder above it when that name is generic: `resnet/saved_model` and `resnet/1/model.xml` give `resnet`."""
    p = Path(model)
    demo = demo_name_of(p)
    if demo:
        return demo
    name = p.stem if p.suffix and not p.is_dir() else p.name
    if not _generic(name):
        return name
    for parent in list(p.absolute().parents)[:3]:
        if not _generic(parent.name):
            return parent.name
    return name or "model"
