"""Runs side by side: their settings (the ones that differ flagged), what they measured, and how
each compares with the first run (the baseline); the best run of several studies; and the
per-layer difference of two layer profiles ("where INT8 helped and where it did not").

Nothing here measures: it reads results frames and LayerProfiles.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from wb_core.axes import with_role
from wb_core.errors import ConfigError, WorkbenchError

# Where a run comes from, shown before its settings when runs come from several studies.
ORIGIN_COLUMNS = ("study", "model", "cpu")


def setting_columns() -> tuple[str, ...]:
    """A run's columns in a comparison: its origin, then every axis with the "compare" role (wb_core.axes),
    a backend's own settings included, in the order a run's name says them."""
    return (*ORIGIN_COLUMNS, *with_role("compare"))


# What a comparison shows of each run's measurements.
METRIC_COLUMNS = ("throughput", "latency_ms_p50", "latency_ms_p99", "cpu_util", "rss_mb", "accuracy",
                  "executed_precision", "status")
# Ratios against the baseline: throughput (higher is better) and p99 latency (lower is better).
RATIO_COLUMNS = ("throughput_x", "p99_x")


def _missing(v) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _same(a, b) -> bool:
    if _missing(a) and _missing(b):
        return True
    if _missing(a) or _missing(b):
        return False
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def compare_runs(df: pd.DataFrame, keys: list[str] | None = None) -> tuple[pd.DataFrame, set[str]]:
    """Two or more runs side by side, the first being the baseline.

    `keys` picks runs of `df` by key (or unique key prefix), in that order; None takes every row of
    `df` in order (e.g. the frame `best_runs` returns, whose keys may repeat across studies).
    Returns one row per run (key, label, the settings, the metrics, `throughput_x` and `p99_x`:
    the run's throughput and p99 latency over the baseline's) and the set of setting columns whose
    values differ between the runs.
    """
    from wb_core.analysis.recommend import find_run
    from wb_core.analysis.words import run_name

    if df is None or df.empty:
        raise WorkbenchError("There are no runs to compare yet; profile a model first.")
    if keys is None:
        rows = [r for _, r in df.iterrows()]
    else:
        keys = [str(k) for k in keys]
        if len(set(keys)) != len(keys):
            raise ConfigError("Pick each run once; the same run was chosen twice.")
        rows = [find_run(df, k) for k in keys]
    if len(rows) < 2:
        raise ConfigError(f"Comparing needs at least two runs; got {len(rows)}.")
    frame = pd.DataFrame([r.to_dict() for r in rows]).reset_index(drop=True)
    settings = setting_columns()
    for col in (*settings, *METRIC_COLUMNS):
        if col not in frame.columns:
            frame[col] = None
    frame["label"] = [run_name(r) for _, r in frame.iterrows()]
    differing = {c for c in settings
                 if any(not _same(frame[c].iloc[0], v) for v in frame[c].iloc[1:])}
    base = frame.iloc[0]
    frame["throughput_x"] = [_ratio(v, base["throughput"]) for v in frame["throughput"]]
    frame["p99_x"] = [_ratio(v, base["latency_ms_p99"]) for v in frame["latency_ms_p99"]]
    cols = ["key", "label", *settings, *METRIC_COLUMNS, *RATIO_COLUMNS]
    out = frame[cols]
    out.attrs["settings"] = settings  # which columns are settings, for a face that shows them
    return out, differing


def _ratio(value, base) -> float:
    try:
        v, b = float(value), float(base)
    except (TypeError, ValueError):
        return math.nan
    if math.isnan(v) or math.isnan(b) or b <= 0:
        return math.nan
    return v / b


def _times(x: float) -> str:
    if x >= 10:
        return f"{x:.0f}×"
    return f"{x:.1f}×" if x >= 1 else f"{x:.2g}×"


def ratio_sentences(frame: pd.DataFrame, names: list[str] | None = None) -> list[str]:
    """One plain sentence per run after the first: its throughput and p99 latency against the first.

    `names` are how to call the runs (default: their labels).
    """
    names = names or list(frame["label"])
    out = []
    for i in range(1, len(frame)):
        row = frame.iloc[i]
        tx, px = row.get("throughput_x"), row.get("p99_x")
        if _missing(tx) or _missing(px):
            out.append(f"{names[i]}: no measurement to compare with the first run ({row.get('status')}).")
            continue
        out.append(f"{names[i]}: {_times(tx)} the throughput of the first run, and {_times(px)} its p99 latency "
                   f"({'faster' if px < 1 else 'slower' if px > 1 else 'the same'}).")
    return out


def best_runs(db: str | Path, studies: list[str], objective: str = "throughput", constraints=None) -> pd.DataFrame:
    """The best ok run of each study (as `recommend` picks it), one row per study, in that order.

    Rows carry the study's name, its model's file name (`model`) and its CPU (`cpu`), so two studies
    (before and after, two machines, INT8 and FP32) can go to `compare_runs(frame)`.
    """
    from wb_core.analysis.recommend import recommend, with_efficiency
    from wb_core.store import Store

    studies = [str(s) for s in studies]
    if len(studies) < 2:
        raise ConfigError(f"Comparing studies needs at least two; got {len(studies)}.")
    if len(set(studies)) != len(studies):
        raise ConfigError("Pick each study once; the same study was chosen twice.")
    rows = []
    with Store(db, readonly=True) as store:
        for name in studies:
            df = store.to_frame(name)  # a StoreError names the studies there
            info = store.get_study(name) or {}
            hw = info.get("hardware") or {}
            try:
                rec = recommend(with_efficiency(df, hw), constraints, objective, runners_up=0, hardware=hw,
                                allow_unmeasured_accuracy=True)
            except WorkbenchError as e:
                raise WorkbenchError(f"Study '{name}': {e}") from None
            best = df[df["key"] == rec.key].iloc[0].to_dict()
            best["study"] = name
            best["model"] = Path(str(info.get("model_path") or "")).name or None
            best["cpu"] = hw.get("cpu_model")
            rows.append(best)
    return pd.DataFrame(rows).reset_index(drop=True)


# ---------------------------------------------------------------- layers

# A layer type counts as faster or slower in B when its time changed by more than this factor:
# counters of a few microseconds move by several percent from one profile to the next.
NOISE = 1.1
# Suffixes a quantized or compressed model adds to the type of a layer that does the same work.
_TYPE_SUFFIXES = re.compile(r"(QuantizedLegacy|Quantized|Compressed|Decompression)$")


def base_type(layer_type: str) -> str:
    """The layer type without the suffix a quantized variant adds (`FullyConnectedQuantizedLegacy` ->
    `FullyConnected`), so the same work is compared across precisions."""
    return _TYPE_SUFFIXES.sub("", str(layer_type)) or str(layer_type)


@dataclass
class LayerDiff:
    """Per layer type (and per layer where names agree) time in A and in B, and how B compares."""

    label_a: str
    label_b: str
    by_type: pd.DataFrame  # type, layers_a, layers_b, time_a_ms, time_b_ms, speedup, precisions_a, precisions_b
    by_layer: pd.DataFrame  # name, type, time_a_ms, time_b_ms, speedup, precision_a, precision_b
    only_a: list[str] = field(default_factory=list)  # layer names of A with no layer of that name in B
    only_b: list[str] = field(default_factory=list)
    per_sample: bool = False  # times were divided by each run's batch size (their batches differ)

    @property
    def total_a_ms(self) -> float:
        return float(self.by_type["time_a_ms"].sum())

    @property
    def total_b_ms(self) -> float:
        return float(self.by_type["time_b_ms"].sum())

    def faster(self, n: int = 3) -> pd.DataFrame:
        """Layer types present in both where B took less time (beyond NOISE), by time saved."""
        both = self._both()
        both = both[both["time_b_ms"] * NOISE < both["time_a_ms"]]
        return both.assign(saved=both["time_a_ms"] - both["time_b_ms"]).sort_values(
            "saved", ascending=False).head(n)

    def slower(self, n: int = 3) -> pd.DataFrame:
        """Layer types where B took more time (beyond NOISE; types only B has included), by time lost."""
        t = self.by_type
        worse = t[t["time_b_ms"] > t["time_a_ms"] * NOISE]
        return worse.assign(lost=worse["time_b_ms"] - worse["time_a_ms"]).sort_values(
            "lost", ascending=False).head(n)

    def _both(self) -> pd.DataFrame:
        t = self.by_type
        return t[(t["layers_a"] > 0) & (t["layers_b"] > 0)]

    def summary(self, name_b: str | None = None, name_a: str | None = None) -> str:
        """Where B helped most and where it did not, in plain sentences."""
        a, b = name_a or self.label_a, name_b or self.label_b
        big_b = b[:1].upper() + b[1:]
        unit = "ms per sample" if self.per_sample else "ms per inference"
        ta, tb = self.total_a_ms, self.total_b_ms
        out = [f"The layers of {b} took {tb:.3g} {unit} in all, against {ta:.3g} for {a}"
               + (f" ({_times(ta / tb)} faster)." if 0 < tb < ta else f" ({_times(tb / ta)} slower)." if 0 < ta < tb
                  else ".")]
        fast = self.faster(3)
        if not fast.empty:
            out.append(f"{big_b} helped most in " + _join(
                f"{r.type} ({_times(r.speedup)} faster, {_ms(r.time_a_ms)} → {_ms(r.time_b_ms)}"
                + (f", in {r.precisions_b} in both" if r.precisions_a == r.precisions_b else "") + ")"
                for r in fast.itertuples()) + ".")
        else:
            out.append(f"{big_b} was faster in no layer type beyond noise (10%).")
        slow = self.slower(3)
        if not slow.empty:
            parts = []
            for r in slow.itertuples():
                if r.layers_a == 0:
                    parts.append(f"{r.type} (added: {_ms(r.time_b_ms)})")
                else:
                    parts.append(f"{r.type} ({_times(r.time_b_ms / r.time_a_ms) if r.time_a_ms > 0 else 'more'} "
                                 f"slower, {_ms(r.time_a_ms)} → {_ms(r.time_b_ms)})")
            out.append("It did not help in " + _join(parts) + ".")
        if self.only_a or self.only_b:
            n = len(self.only_a)
            out.append(f"{n} layer{'s' if n != 1 else ''} of {a} and {len(self.only_b)} of {b} have no layer of the "
                       f"same name in the other (fused or added by the conversion); they are compared by type only.")
        if self.per_sample:
            out.append("The runs' batch sizes differ, so times are per sample.")
        return " ".join(out)


def _ms(v: float) -> str:
    return f"{v:.2g} ms"


def _join(parts) -> str:
    parts = list(parts)
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def layer_diff(profile_a, profile_b) -> LayerDiff:
    """How two layer profiles differ: per layer type, and per layer where the names agree.

    Types are matched after dropping the suffix a quantized variant adds; layers whose names have no
    counterpart (INT8 adds FakeQuantize and reorder layers, fusions rename) are listed in `only_a` /
    `only_b` and still count in their type. When the runs' batch sizes differ, times are per sample.
    """
    la, lb = _layers(profile_a), _layers(profile_b)
    if la.empty or lb.empty:
        which = profile_a if la.empty else profile_b
        raise WorkbenchError(f"The layer profile of {which.label} holds no executed layers; nothing to compare.")
    per_sample = int(profile_a.batch_size or 1) != int(profile_b.batch_size or 1)
    if per_sample:
        la["time_ms"] = la["time_ms"] / max(1, int(profile_a.batch_size or 1))
        lb["time_ms"] = lb["time_ms"] / max(1, int(profile_b.batch_size or 1))
    ta, tb = _per_type(la), _per_type(lb)
    t = ta.add_suffix("_a").join(tb.add_suffix("_b"), how="outer")
    for side in ("a", "b"):
        t[f"layers_{side}"] = t[f"layers_{side}"].fillna(0).astype(int)
        t[f"time_{side}_ms"] = t[f"time_ms_{side}"].fillna(0.0)
        t[f"precisions_{side}"] = t[f"precisions_{side}"].fillna("")
    t["speedup"] = [a / b if a > 0 and b > 0 else math.nan for a, b in zip(t["time_a_ms"], t["time_b_ms"])]
    t["total"] = t["time_a_ms"] + t["time_b_ms"]
    by_type = t.rename_axis("type").reset_index().sort_values("total", ascending=False,
                                                                          ignore_index=True)
    by_type = by_type[["type", "layers_a", "layers_b", "time_a_ms", "time_b_ms", "speedup", "precisions_a",
                       "precisions_b"]]
    m = la.drop_duplicates("name").merge(lb.drop_duplicates("name"), on="name", suffixes=("_a", "_b"))
    by_layer = pd.DataFrame({"name": m["name"], "type": m["base_a"], "time_a_ms": m["time_ms_a"],
                             "time_b_ms": m["time_ms_b"], "precision_a": m["precision_a"],
                             "precision_b": m["precision_b"]})
    by_layer["speedup"] = [a / b if b > 0 else math.nan for a, b in zip(by_layer["time_a_ms"], by_layer["time_b_ms"])]
    by_layer = by_layer.sort_values("time_a_ms", ascending=False, ignore_index=True)[
        ["name", "type", "time_a_ms", "time_b_ms", "speedup", "precision_a", "precision_b"]]
    matched = set(m["name"])
    only_a = [n for n in la["name"] if n not in matched]
    only_b = [n for n in lb["name"] if n not in matched]
    return LayerDiff(label_a=profile_a.label, label_b=profile_b.label, by_type=by_type, by_layer=by_layer,
                     only_a=only_a, only_b=only_b, per_sample=per_sample)


def _layers(profile) -> pd.DataFrame:
    df = profile.layers.copy()
    df["base"] = df["type"].map(base_type)
    return df


def _per_type(df: pd.DataFrame) -> pd.DataFrame:
    g = df.groupby("base", sort=False)
    return pd.DataFrame({"layers": g.size(), "time_ms": g["time_ms"].sum(),
                         "precisions": g["precision"].agg(lambda s: ", ".join(sorted(set(map(str, s)))))})
