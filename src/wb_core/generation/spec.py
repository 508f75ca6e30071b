"""The sweep of a generation study: the values of each axis of `axes.GENERATION`, and its points."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field

from wb_core.axes import GENERATION
from wb_core.parsing import format_cores

AXES = {a.name: a for a in GENERATION}


@dataclass(frozen=True)
class GenPoint:
    """One configuration of a generation study (a field per axis of `axes.GENERATION`)."""

    weight_format: str = "none"
    group_size: int = 32
    ratio: float = 1.0
    inference_precision: str = "fp32"
    kv_cache_precision: str | None = None
    cores: tuple[int, ...] | None = None
    threads: int | None = None
    cache_size_gb: int | None = None
    prompt_len: int = 32
    output_len: int = 32
    concurrency: int = 1
    rate: float | None = None  # Poisson arrivals per second (None: the next request as soon as one ends)

    def canonical(self) -> dict:
        """The settings that differ from their defaults (a run key hashes these)."""
        out = {}
        for name, axis in AXES.items():
            v = getattr(self, name)
            default = 1 if name == "concurrency" else axis.default
            if v != default:
                out[name] = axis.canonical(v) if axis.canonical else v
        return out

    def key_for(self, prompts_fp: str) -> str:
        blob = json.dumps({"kind": "generation", **self.canonical(), "prompts": prompts_fp}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def variant(self) -> tuple:
        return (self.weight_format, self.group_size, self.ratio)

    def variant_name(self) -> str:
        if self.weight_format == "none":
            return "none"
        if self.weight_format.startswith("int4"):
            return f"{self.weight_format}-g{self.group_size}-r{self.ratio:g}"
        return self.weight_format

    def to_dict(self) -> dict:
        d = {name: getattr(self, name) for name in AXES}
        d["cores"] = list(self.cores) if self.cores else None
        d.update(backend="openvino-genai", precision=self.inference_precision, batch_size=1, instances=1,
                 study_kind="generation", variant=self.variant_name())
        return d

    def label(self) -> str:
        def v(x):
            return "auto" if x is None else x

        return (f"{self.variant_name()} {self.inference_precision} kv {v(self.kv_cache_precision)} "
                f"threads {v(self.threads)} cores={format_cores(self.cores)} c{self.concurrency} "
                f"in {self.prompt_len} out {self.output_len}" + (f" at {self.rate:g} req/s" if self.rate else ""))


@dataclass
class GenerationSpec:
    """The values swept on each axis (text as typed, or lists); parsed by the axes table."""

    values: dict = field(default_factory=dict)

    def __post_init__(self):
        unknown = set(self.values) - {a.spec for a in GENERATION}
        if unknown:
            from wb_core.errors import ConfigError

            raise ConfigError(f"Unknown generation setting {', '.join(sorted(unknown))}; known: "
                              f"{', '.join(a.spec for a in GENERATION)}.")
        self.parsed = {a.name: a.values(self.values.get(a.spec)) for a in GENERATION}
        self.parsed["concurrency"] = [1 if c is None else c for c in self.parsed["concurrency"]]

    def expand(self) -> list[GenPoint]:
        names = list(self.parsed)
        out: list[GenPoint] = []
        for combo in itertools.product(*(self.parsed[n] for n in names)):
            d = dict(zip(names, combo))
            for a in GENERATION:  # an axis that does not apply here (INT4's group size and ratio) stays at its default
                if not a.applies(d.get):
                    d[a.name] = a.default
            p = GenPoint(**d)
            if p not in out:
                out.append(p)
        return out

    def to_dict(self) -> dict:
        def show(name, v):
            return format_cores(v) if name == "cores" else v

        return {name: [show(name, v) for v in vals] for name, vals in self.parsed.items()}
