"""Generation studies, parent side: check everything that can be known before a worker runs,
build each weight-compressed variant once (cached by content hash), check each against the
uncompressed model (the quality guard), then measure every point in a fresh pinned worker and
store it the moment it arrives.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wb_core.errors import ConfigError
from wb_core.generation import folder as gfolder
from wb_core.generation.quality import DEFAULT_MIN_TOP1, verdict
from wb_core.generation.spec import GenerationSpec, GenPoint
from wb_core.paths import cache_dir
from wb_core.precisions import precision
from wb_core.sweep.context import LOAD_ALLOWANCE_S, SweepContext, SweepSummary

DESCRIBE = "wb_core.generation.tasks:task_describe"
COMPRESS = "wb_core.generation.tasks:task_compress"
GENERATE = "wb_core.generation.tasks:task_generate"
QUALITY = "wb_core.generation.tasks:task_quality"
GENERATOR_DEMO = "text-generator"


@dataclass
class GeneratorDescription:
    """A text-generation folder as `wb inspect` shows it."""

    path: Path
    fingerprint: str
    inputs: list
    vocab_size: int | None
    layers: int | None
    context: int | None
    hidden_size: int | None
    kv_cache: dict
    weights: dict
    tokenizer_vocab: int | None
    kv_cache_accepted: dict

    format = "openvino-genai"

    def weight_precision(self) -> str:
        total = sum(self.weights.values()) or 1
        return ", ".join(f"{t} {n / total:.0%}" for t, n in sorted(self.weights.items(), key=lambda kv: -kv[1]))

    def facts(self) -> list[tuple[str, str]]:
        kv = self.kv_cache
        layout = (f"{kv.get('states')} states {kv.get('layout', '')}, {kv.get('kv_heads')} KV heads x {kv.get('head_size')}, "
                  f"{kv.get('dtype')}" if kv.get("stateful") else "not stateful")
        return [("path", str(self.path)), ("format", "OpenVINO GenAI text-generation folder"),
                ("inputs", ", ".join(f"{i['name']} {i['dtype']} {i['shape']}" for i in self.inputs)),
                ("vocabulary", str(self.vocab_size)), ("tokenizer", f"{self.tokenizer_vocab} tokens"),
                ("layers", str(self.layers)), ("hidden", str(self.hidden_size)), ("context", str(self.context)),
                ("KV cache", layout), ("weights", self.weight_precision()), ("fingerprint", self.fingerprint)]


def _fingerprint(folder: Path) -> str:
    h = hashlib.sha256()
    for name in (*gfolder.REQUIRED, *(n.replace(".xml", ".bin") for n in gfolder.REQUIRED)):
        f = folder / name
        h.update(name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def resolve_generator(model: str | Path, timeout_s: float | None = None) -> Path:
    """A GenAI folder for `model`: the demo generator by name, a GenAI folder as it is, a Hugging
    Face folder converted by optimum-intel (once, cached by content hash)."""
    if isinstance(model, str) and model == GENERATOR_DEMO and not Path(model).exists():
        from wb_core.demo import ensure_demo

        gfolder.require_extra(gfolder.HF_EXTRA, "Building the demo text generator")
        return ensure_demo(GENERATOR_DEMO)
    p = Path(model)
    if gfolder.is_hf_folder(p):
        return convert_hf_folder(p, timeout_s)
    return gfolder.check_generation_folder(p)


def convert_hf_folder(path: Path, timeout_s: float | None = None) -> Path:
    gfolder.require_extra(gfolder.HF_EXTRA, f"Converting the Hugging Face folder '{path}'")
    h = hashlib.sha256()
    for f in sorted(x for x in path.rglob("*") if x.is_file()):
        h.update(str(f.relative_to(path)).encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    out = cache_dir() / "genai" / f"hf-{h.hexdigest()[:16]}"
    if (out / gfolder.MODEL_XML).is_file():
        return out
    from wb_core.proc.parent import run_task

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".hf-", dir=out.parent))
    try:
        run_task({"task": "wb_core.generation.tasks:task_convert_hf", "folder": str(path), "out": str(tmp / "m")},
                 timeout=timeout_s or 1800, what=f"converting '{path}' with optimum-intel")
        if not out.exists():
            (tmp / "m").rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def describe_generator(model: str | Path, timeout_s: float | None = None, kv_cache_precisions=()) -> GeneratorDescription:
    """Read a generation folder once (in a worker): inputs, vocabulary, layers, KV-cache layout and
    weight precision; a tokenizer that does not match the vocabulary is refused in one sentence."""
    from wb_core.proc.parent import run_task

    gfolder.require_extra(gfolder.GENAI_EXTRA, "Measuring a text-generation model")
    folder = resolve_generator(model, timeout_s)
    info = run_task({"task": DESCRIBE, "folder": str(folder), "kv_cache_precisions": list(kv_cache_precisions)},
                    timeout=timeout_s or LOAD_ALLOWANCE_S, what=f"reading '{folder}'")
    cfg = gfolder.hf_config(folder)
    vocab = info.get("vocab_size") or cfg.get("vocab_size")
    gfolder.check_tokenizer_matches(folder, vocab)
    layers = gfolder.config_value(cfg, "layers") or (info["kv_cache"]["states"] // 2 if info["kv_cache"].get("states")
                                                     else None)
    return GeneratorDescription(path=folder, fingerprint=_fingerprint(folder), inputs=info["inputs"], vocab_size=vocab,
                                layers=layers, context=gfolder.config_value(cfg, "context"),
                                hidden_size=gfolder.config_value(cfg, "hidden_size"), kv_cache=info["kv_cache"],
                                weights=info["weights"], tokenizer_vocab=gfolder.tokenizer_vocab(folder),
                                kv_cache_accepted=info.get("kv_cache_accepted") or {})


def prompt_lines(text: str | Path | None, folder: Path) -> list[str]:
    """The user's prompt text (one per line), else the demo's prompts, else the shipped corpus."""
    from wb_core.text import read_lines

    if text is not None:
        return read_lines(text)
    own = folder / "prompts.txt"
    if own.is_file():
        return read_lines(own)
    from wb_core.demo import demo_corpus

    return [line.strip() for line in demo_corpus().splitlines() if line.strip()]


def check_points(desc: GeneratorDescription, points: list[GenPoint]) -> None:
    """Everything that can be known before a worker runs, one sentence each."""
    for p in points:
        if desc.context and p.prompt_len + p.output_len > desc.context:
            raise ConfigError(f"Prompts of {p.prompt_len} tokens with {p.output_len} output tokens need "
                              f"{p.prompt_len + p.output_len} positions, more than the model's context of {desc.context}.")
        if p.weight_format.startswith("int4") and desc.hidden_size and desc.hidden_size % p.group_size:
            raise ConfigError(f"INT4 group size {p.group_size} does not divide the model's hidden size "
                              f"{desc.hidden_size}; choose a divisor of it (e.g. 32 or 64 where they divide it).")
    for kv, said in desc.kv_cache_accepted.items():
        if said.startswith("refused"):
            raise ConfigError(f"The CPU plugin refuses KV-cache precision {kv} ({said[len('refused: '):]}).")


def variant_folder(base: Path, fp: str, p: GenPoint, timeout_s: float | None = None) -> Path:
    """The weight-compressed copy of `base` for `p`'s variant, built once by NNCF, cached by content hash."""
    if p.weight_format == "none":
        return base
    out = cache_dir() / "genai" / f"{fp}-{p.variant_name()}"
    if (out / gfolder.MODEL_XML).is_file() and (out / "done").exists():
        return out
    from wb_core.proc.parent import run_task

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{p.variant_name()}-", dir=out.parent))
    try:
        run_task({"task": COMPRESS, "folder": str(base), "out": str(tmp), "weight_format": p.weight_format,
                  "group_size": p.group_size, "ratio": p.ratio}, timeout=timeout_s or 1800,
                 what=f"compressing the weights to {p.variant_name()}")
        (tmp / "done").write_text("ok")
        if not out.exists():
            tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def check_quality(reference: Path, candidates: dict[str, Path], lines: list[str], prompt_len: int = 32,
                  output_len: int = 16, prompts: int = 4, timeout_s: float | None = None) -> dict[str, dict]:
    """Each candidate folder against the reference on the prompts (see `quality`), in one worker."""
    from wb_core.proc.parent import run_task

    res = run_task({"task": QUALITY, "reference": str(reference), "candidates": {k: str(v) for k, v in candidates.items()},
                    "lines": lines, "prompt_len": prompt_len, "output_len": output_len, "prompts": prompts},
                   timeout=timeout_s or 1800, what="checking the variants' quality")
    return res["quality"]


def run_generation(model: str | Path, spec: GenerationSpec, db: str | Path, study: str, *, text=None,
                   requests: int = 8, warmup: int = 1, quality_guard: bool = True, min_top1: float = DEFAULT_MIN_TOP1,
                   on_point: Callable[[dict], None] | None = None, progress: bool = False,
                   cancel: threading.Event | None = None, timeout_s: float | None = None,
                   memory_limit_mb: int | None = None) -> SweepSummary:
    """Measure every point of `spec` not yet stored in `study` (one fresh worker each)."""
    from wb_core import hardware
    from wb_core.models import InputSpec
    from wb_core.proc.parent import run_child

    if not isinstance(requests, int) or requests < 1:
        raise ConfigError(f"Requests per point must be a whole number of at least 1; got {requests!r}.")
    points = spec.expand()
    kvs = sorted({p.kv_cache_precision for p in points if p.kv_cache_precision})
    desc = describe_generator(model, timeout_s, kvs)
    check_points(desc, points)
    hw = hardware.detect()
    for c in spec.parsed["cores"]:
        if c and not set(c) <= set(hw.available_cpus):
            raise ConfigError(f"Cores {','.join(map(str, c))} are not available to this process.")
    lines = prompt_lines(text, desc.path)
    prompts_fp = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    folders = {p.variant: variant_folder(desc.path, desc.fingerprint, p, timeout_s) for p in points}
    checks: dict[tuple, dict] = {}
    compressed = {v: f for v, f in folders.items() if v[0] != "none"}
    if quality_guard and compressed:
        names = {next(p.variant_name() for p in points if p.variant == v): v for v in compressed}
        q = check_quality(desc.path, {n: folders[v] for n, v in names.items()}, lines, timeout_s=timeout_s)
        checks = {names[n]: r for n, r in q.items()}
    ctx = SweepContext(desc.path / gfolder.MODEL_XML, db, study, [], on_point=on_point, progress=progress,
                       progress_label="generating", cancel=cancel, memory_limit_mb=memory_limit_mb, timeout_s=timeout_s,
                       input_specs=[InputSpec("input_ids", (1, -1), "int64")], random_inputs=False)

    def key(p: GenPoint) -> str:
        return p.key_for(prompts_fp)

    record = {"kind": "generation", "generation": spec.to_dict(), "requests": requests, "warmup": warmup,
              "text": str(text) if text else None, "quality_guard": quality_guard, "min_top1": min_top1,
              "model": {k: v for k, v in desc.facts()}}
    with ctx.open(record, model_path=str(desc.path)):
        for p in ctx.points_to_measure(points, key=key):
            extra: dict = {"study_kind": "generation", "variant": p.variant_name(), "model_folder": str(folders[p.variant])}
            if p.variant in checks:
                guard, note = verdict(checks[p.variant], min_top1)
                extra.update({f"quality_{k}": v for k, v in checks[p.variant].items()}, accuracy_guard=guard)
                if note:
                    extra["accuracy_guard_note"] = note
            if precision(p.inference_precision).cpu_flags:
                ok, why = hw.supports(p.inference_precision)
                if not ok:
                    ctx.record(p, "skipped", extra, f"bf16 skipped: {why}", key=key(p))
                    continue
            task = {"task": GENERATE, "folder": str(folders[p.variant]), **p.to_dict(), "lines": lines,
                    "requests": requests, "warmup": warmup}
            outcome = run_child(task, timeout=timeout_s or LOAD_ALLOWANCE_S, cancel=cancel, memory_limit_mb=memory_limit_mb)
            if outcome.cancelled:
                ctx.summary.cancelled = True  # the point stays unstored: a rerun measures it
                break
            got = [m for m in outcome.messages if m.get("type") == "point"]
            if got:
                status, metrics, error = "ok", got[-1]["metrics"], None
            else:
                fatal = [m for m in outcome.messages if m.get("type") == "fatal"]
                status, metrics = "failed", {"stderr_tail": outcome.stderr_tail[-2000:]}
                error = str(fatal[-1].get("error")) if fatal else outcome.sentence()
            ctx.record(p, status, {**metrics, **extra}, error, key=key(p))
    return ctx.summary

