"""Per-layer profile of one run: OpenVINO's performance counters, per layer and per layer type.

This is where a user sees why BF16 or INT8 did or did not help: the time each layer took and the
precision it actually executed in (a layer that fell back to f32 shows it). The counters are read
in a worker process that is set up exactly like the measured run (CPU affinity, threads,
precision hint, batch size), because those settings change which kernels OpenVINO picks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from wb_core.errors import ConfigError, setting

MAX_ITERATIONS = 100_000  # inferences a layer profile averages over: more says nothing new and takes hours


def check_iterations(iterations) -> int:
    """The inferences a layer profile averages over: a whole number in [1, MAX_ITERATIONS]."""
    from wb_core.parsing import check_number

    return int(check_number(iterations, setting("iterations", "Iterations for a layer profile"), 1, MAX_ITERATIONS,
                            integer=True))


LAYER_COLUMNS = ("name", "type", "exec_type", "precision", "time_ms", "cpu_time_ms", "share", "status")


@dataclass
class LayerProfile:
    """Mean time per inference of each executed layer, and the same summed per layer type."""

    key: str
    label: str
    iterations: int
    batch_size: int
    layers: pd.DataFrame  # one row per executed layer, slowest first (LAYER_COLUMNS)
    properties: dict = field(default_factory=dict)

    @property
    def total_ms(self) -> float:
        return float(self.layers["time_ms"].sum()) if not self.layers.empty else 0.0

    def by_type(self) -> pd.DataFrame:
        """Time per layer type with the precisions it ran in, slowest first."""
        if self.layers.empty:
            return pd.DataFrame(columns=["type", "layers", "time_ms", "share", "precisions"])
        g = self.layers.groupby("type", sort=False)
        out = pd.DataFrame({
            "layers": g.size(),
            "time_ms": g["time_ms"].sum(),
            "precisions": g["precision"].agg(lambda s: ", ".join(sorted(set(s)))),
        }).reset_index()
        total = out["time_ms"].sum()
        out["share"] = out["time_ms"] / total if total > 0 else 0.0
        return out.sort_values("time_ms", ascending=False, ignore_index=True)[
            ["type", "layers", "time_ms", "share", "precisions"]]

    def top(self, n: int = 10) -> pd.DataFrame:
        return self.layers.head(n)

    def to_dict(self) -> dict:
        """Plain data (JSON-safe) to store the profile; `from_dict` reads it back."""
        return {"key": self.key, "label": self.label, "iterations": int(self.iterations),
                "batch_size": int(self.batch_size), "layers": self.layers.to_dict(orient="records"),
                "properties": {str(k): str(v) for k, v in (self.properties or {}).items()}}

    @classmethod
    def from_dict(cls, d: dict) -> LayerProfile:
        layers = pd.DataFrame(d.get("layers") or [], columns=list(LAYER_COLUMNS))
        return cls(key=d["key"], label=d["label"], iterations=int(d["iterations"]), batch_size=int(d["batch_size"]),
                   layers=layers, properties=dict(d.get("properties") or {}))


def check_layer_profiling(backend: str, key: str) -> None:
    """A ConfigError unless `backend` declares per-layer profiles (`layer_profiling` in the registry)."""
    from wb_core.backends.registry import get, names, title

    if not get(backend).layer_profiling:
        able = [n for n in names() if get(n).layer_profiling]
        raise ConfigError(f"A per-layer profile needs the runtime's performance counters "
                          f"({', '.join(map(title, able))}), and run {key} used {backend}; pick a run of the "
                          f"study on {' or '.join(able)}.")


def profile_layers(model_path: str | Path, config, inputs: dict | None = None, iterations: int = 100,
                   key: str = "", timeout: float = 600) -> LayerProfile:
    """Per-layer profile of an OpenVINO run configuration, measured in a fresh worker process."""
    from wb_core.analysis.words import run_name
    from wb_core.config import RunConfig
    from wb_core.proc.parent import run_task

    cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(config)
    check_layer_profiling(cfg.backend, key or cfg.key)
    iterations = check_iterations(iterations)
    res = run_task({"task": "layers", "model_path": str(model_path), "config": cfg.to_dict(), "inputs": inputs,
                    "iterations": iterations}, timeout=timeout, what="profiling layers")
    df = pd.DataFrame(res["layers"], columns=[c for c in LAYER_COLUMNS if c != "share"])
    df = df[df["status"] == "EXECUTED"].copy()
    total = df["time_ms"].sum()
    df["share"] = df["time_ms"] / total if total > 0 else 0.0
    df = df.sort_values("time_ms", ascending=False, ignore_index=True)[list(LAYER_COLUMNS)]
    return LayerProfile(key=key or cfg.key, label=run_name(cfg.to_dict() | {"cores": _cores_text(cfg)}),
                        iterations=res["iterations"], batch_size=cfg.batch_size, layers=df,
                        properties=res.get("properties") or {})


def study_layer_profile(db: str | Path, study: str, run_key: str, iterations: int = 100,
                        reuse: bool = False) -> LayerProfile:
    """Per-layer profile of one stored run of a study, with that run's settings.

    `reuse`: return the profile stored for this run when there is one, and store the one measured
    (so a dashboard profiles each run once).
    """
    from wb_core.analysis.recommend import find_run
    from wb_core.models import check_measured
    from wb_core.store import Store
    from wb_core.variants.convert import ensure_ir

    iterations = check_iterations(iterations)  # before the store is read or anything converted
    with Store(db, readonly=True) as store:
        info = store.get_study(study)
        df = store.to_frame(study)
        row = find_run(df, run_key)
        cfg = store.run_config(study, row["key"])
        stored = store.layer_profile(study, row["key"]) if reuse else None
    if stored is not None:
        return LayerProfile.from_dict(stored)
    check_layer_profiling(cfg.backend, row["key"])  # before converting anything: say so at once
    # An INT8 run ran its own quantized IR; the others ran the study model's FP32 IR.
    variant = row.get("variant_path")
    if isinstance(variant, str) and variant.endswith(".xml") and Path(variant).exists():
        ir = Path(variant)
        if ir.resolve() == Path(info["model_path"]).resolve():  # the user's own IR: still what was measured?
            check_measured(ir, info.get("model_fingerprint"))
    else:
        ir = ensure_ir(info["model_path"], info.get("model_format"), info.get("model_fingerprint"))
    inputs = ((info.get("spec") or {}).get("inputs")) or None
    profile = profile_layers(ir, cfg, inputs, iterations=iterations, key=row["key"])
    if reuse:
        with Store(db) as store:
            store.save_layer_profile(study, row["key"], profile.to_dict())
    return profile


def stored_layer_profile(db: str | Path, study: str, run_key: str) -> LayerProfile | None:
    """The layer profile stored for a run (measured earlier with `reuse`), or None."""
    from wb_core.store import Store

    with Store(db, readonly=True) as store:
        d = store.layer_profile(study, run_key)
    return LayerProfile.from_dict(d) if d is not None else None


def _cores_text(cfg) -> str:
    from wb_core.config import format_cores

    return format_cores(cfg.cores)
