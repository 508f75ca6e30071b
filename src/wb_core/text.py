"""Real text as a model's inputs: one sample per line of a text file, tokenized by a local
`tokenizer.json` (the `tokenizers` package; nothing is fetched).

The tokenizer fills the model's inputs by their names: token ids (`input_ids`, ...), the
attention mask and token type ids when the model has them. Each sequence length of a sweep gets
the text padded or truncated to it; those arrays are written once into the cache (one `.npz`,
arrays named `LENGTH.INPUT`, keyed by the hash of the text, the tokenizer and the lengths) and
the workers measure on them instead of random tokens. Calibration and accuracy use the text at
the longest length.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wb_core.errors import ConfigError, ModelError, setting
from wb_core.paths import cache_dir

MAX_LINES = 100_000
ROLES = ("ids", "attention_mask", "type_ids")
PAD_TOKENS = ("[PAD]", "<pad>", "<PAD>", "[pad]")


def input_role(name: str) -> str | None:
    """What a tokenizer puts into an input named `name`: ids, attention_mask, type_ids, or None."""
    n = name.split(":")[0].lower()
    if "token_type" in n or "segment" in n or n == "type_ids":
        return "type_ids"
    if "mask" in n:
        return "attention_mask"
    if "position" in n:
        return None
    if n.endswith("ids") or n in ("input", "tokens", "input_word_ids"):
        return "ids"
    return None


def text_roles(specs) -> dict[str, str]:
    """Each model input's role; a model without a token-ids input, or with an input a tokenizer
    does not fill, is refused in one sentence."""
    roles = {s.name: input_role(s.name) for s in specs}
    names = ", ".join(s.name for s in specs)
    if "ids" not in roles.values():
        raise ModelError(f"The model has no token-ids input (its inputs: {names}); text needs an integer input named "
                         f"like input_ids.")
    for s in specs:
        if roles[s.name] is None:
            raise ConfigError(f"Input '{s.name}' is not one a tokenizer fills (token ids, attention mask, token type "
                              f"ids); text can feed only models whose inputs are those.")
        if s.dtype not in ("int64", "int32"):
            raise ModelError(f"Input '{s.name}' is {s.dtype}; token inputs must be int64 or int32.")
    return roles


def tokenizer_file(path: str | Path) -> Path:
    """The tokenizer.json that `path` names: the file itself, or the one in a folder (a model saved with
    `save_pretrained` keeps it there)."""
    p = Path(path)
    if p.is_dir():
        if not (p / "tokenizer.json").is_file():
            raise ConfigError(f"Tokenizer folder '{p}' holds no tokenizer.json; give the tokenizer.json of the "
                              f"model's tokenizer (a fast tokenizer's save_pretrained writes one).")
        return p / "tokenizer.json"
    return p


def load_tokenizer(path: str | Path):
    """A `tokenizers.Tokenizer` from a local tokenizer.json, or a folder holding one."""
    from wb_core.streams import refuse_special

    p = tokenizer_file(path)
    refuse_special(p, "Tokenizer file")
    if not p.is_file():
        raise ConfigError(f"Tokenizer file '{p}' does not exist.")
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - a dependency
        raise ConfigError("Tokenizing text needs the tokenizers package (pip install tokenizers).") from None
    try:
        return Tokenizer.from_file(str(p))
    except Exception as e:  # the Rust side raises plain Exceptions with parser messages
        why = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise ConfigError(f"'{p}' is not a tokenizer file the tokenizers package can read ({why}); give a "
                          f"tokenizer.json.") from None


def read_lines(path: str | Path, limit: int = MAX_LINES) -> list[str]:
    """The non-blank lines of a UTF-8 text file, one sample each."""
    from wb_core.streams import kind_of, stream_to_file

    p = stream_to_file(path, "The text")  # standard input or a pipe: read once, into the cache
    if not p.is_file():
        special = kind_of(p)
        raise ConfigError(f"Text file '{p}' is {special}, not a text file." if special else
                          f"Text file '{p}' does not exist." if not p.exists() else
                          f"Text file '{p}' is a folder; give a file with one sample per line.")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"Text file '{p}' is not UTF-8 text.") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()][:limit]
    if not lines:
        raise ConfigError(f"Text file '{p}' holds no lines of text; give one sample per line.")
    return lines


def _pad(tok) -> tuple[int, str]:
    for t in PAD_TOKENS:
        i = tok.token_to_id(t)
        if i is not None:
            return i, t
    return 0, "[PAD]"


def tokenize(tok, lines: list[str], length: int, specs) -> dict[str, np.ndarray]:
    """Every line padded or truncated to `length` tokens, as one array per model input."""
    roles = text_roles(specs)
    pad_id, pad_token = _pad(tok)
    tok.enable_truncation(max_length=length)
    tok.enable_padding(length=length, pad_id=pad_id, pad_token=pad_token)
    try:
        encodings = tok.encode_batch(lines)
    finally:
        tok.no_truncation()
        tok.no_padding()
    out = {}
    for s in specs:
        field = roles[s.name]
        out[s.name] = np.array([getattr(e, field) for e in encodings], dtype=s.dtype)
    return out


@dataclass
class TextSamples:
    """Text tokenized for a sweep: the cached arrays the workers read, the data for calibration and
    accuracy, and what to tell the user."""

    path: Path  # .npz with arrays LENGTH.INPUT
    data: dict[str, np.ndarray]  # at the longest length: calibration and accuracy inputs
    lengths: list[int]
    notes: list[str]
    source: str


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


def prepare_text(text: str | Path, tokenizer: str | Path, specs, lengths: list[int],
                 embedding_rows: dict[str, int] | None = None) -> TextSamples:
    """Tokenize `text` at each length for the model inputs `specs`, cached by content."""
    roles = text_roles(specs)
    tok = load_tokenizer(tokenizer)
    lines = read_lines(text)
    lengths = sorted({int(n) for n in lengths})
    if not lengths:
        raise ConfigError(f"Text needs a sequence length: give {setting('seq_lens', 'a sequence length')} N (or several, "
                          f"a sweep axis).")
    names = ",".join(f"{s.name}:{s.dtype}" for s in specs)
    key = _digest("\n".join(lines).encode(), tokenizer_file(tokenizer).read_bytes(), names.encode(),
                  ",".join(map(str, lengths)).encode())
    path = cache_dir() / "text" / f"{key}.npz"
    arrays = {}
    for n in lengths:
        for name, arr in tokenize(tok, lines, n, specs).items():
            arrays[f"{n}.{name}"] = arr
    ids_name = next(name for name, r in roles.items() if r == "ids")
    rows = (embedding_rows or {}).get(ids_name) or (embedding_rows or {}).get(ids_name.split(":")[0])
    top = max(int(arrays[f"{n}.{ids_name}"].max()) for n in lengths)
    if rows and top >= rows:
        raise ConfigError(f"The tokenizer '{tokenizer}' gives token id {top}, past the model's embedding table of "
                          f"{rows} rows; use the tokenizer the model was trained with.")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{key}.tmp.npz")
        np.savez(tmp, **arrays)
        tmp.replace(path)
    natural = [len(e.ids) for e in tok.encode_batch(lines)]
    longest = lengths[-1]
    cut = {n: sum(m > n for m in natural) for n in lengths}
    notes = [f"{len(lines)} lines of text from '{text}' tokenized by '{tokenizer}' (median {int(np.median(natural))} "
             f"tokens, longest {max(natural)}), padded or truncated to {', '.join(map(str, lengths))} tokens"
             + (f"; truncated at {longest}: {cut[longest]} lines" if cut[longest] else "")
             + f". Calibration and accuracy use the text at {longest} tokens."]
    data = {name: arrays[f"{longest}.{name}"] for name in roles}
    return TextSamples(path=path, data=data, lengths=lengths, notes=notes, source=f"'{text}'")


_LOADED: dict[str, dict[str, np.ndarray]] = {}


def sample_arrays(path: str | Path, length: int) -> dict[str, np.ndarray] | None:
    """The tokenized arrays of one length from a samples file (None when it has no such length)."""
    key = str(path)
    if key not in _LOADED:
        with np.load(key, allow_pickle=False) as f:
            _LOADED[key] = {k: f[k] for k in f.files}
    prefix = f"{length}."
    found = {k[len(prefix):]: v for k, v in _LOADED[key].items() if k.startswith(prefix)}
    return found or None


def describe_text_source(text: str | Path, tokenizer: str | Path) -> str:
    """Check a text file and its tokenizer without a model: what they hold, in words, or one
    ConfigError sentence naming what is wrong."""
    tok = load_tokenizer(tokenizer)
    lines = read_lines(text)
    lengths = sorted(len(e.ids) for e in tok.encode_batch(lines[:2000]))
    median = lengths[len(lengths) // 2]
    return (f"{len(lines):,} lines of text, {median} tokens at the median and {lengths[-1]} at most, "
            f"with a vocabulary of {tok.get_vocab_size():,} tokens")
