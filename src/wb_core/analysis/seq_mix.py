"""A mix of sequence lengths ("80% at 128, 20% at 384"): each configuration's figures weighed
over the lengths a service really sees.

A configuration is every setting of a run but its sequence length. For a mix {L: w} (weights
normalised to sum to 1) its mixed row has:
- mean and p50 latency: the expected time per request, sum of w * t(L);
- throughput: samples per second when requests come in that mix, 1 / sum of w / throughput(L)
  (the expected time per sample, inverted);
- p99 latency: the largest p99 among the mix's lengths, an upper bound on the mix's p99
  (a length with at least 1% of requests sets the tail);
- everything else (accuracy, memory, variant) from its longest length's run.
A configuration not measured at every length of the mix is not eligible, and a note says how
many were left out and which length they lack.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from wb_core.config import RunConfig
from wb_core.errors import ConfigError, setting

CONFIG_COLUMNS = [f for f in RunConfig.__dataclass_fields__ if f != "seq_len"]


def parse_seq_mix(mix) -> dict[int, float]:
    """`"128:0.8,384:0.2"` (or a dict {128: 0.8, 384: 0.2}) as {length: weight}, weights summing to 1."""
    if mix is None:
        return {}
    items = list(mix.items()) if isinstance(mix, dict) else []
    if not isinstance(mix, dict):
        for part in str(mix).replace(";", ",").split(","):
            if not part.strip():
                continue
            length, colon, weight = part.strip().partition(":")
            if not colon:
                raise ConfigError(f"Sequence-length mix entry '{part.strip()}' must look like LENGTH:WEIGHT, e.g. "
                                  f"128:0.8,384:0.2.")
            items.append((length.strip(), weight.strip()))
    out: dict[int, float] = {}
    for length, weight in items:
        try:
            n, w = int(length), float(weight)
        except (TypeError, ValueError):
            raise ConfigError(f"Sequence-length mix entry '{length}:{weight}' must be a whole length and a weight, "
                              f"e.g. 128:0.8.") from None
        if n < 1 or not math.isfinite(w) or w < 0:
            raise ConfigError(f"Sequence-length mix entry '{length}:{weight}' needs a length of at least 1 and a "
                              f"weight of at least 0.")
        out[n] = out.get(n, 0.0) + w
    total = sum(out.values())
    if not out or total <= 0:
        raise ConfigError("The sequence-length mix needs at least one length with a weight above 0, e.g. "
                          "128:0.8,384:0.2.")
    return {n: w / total for n, w in sorted(out.items()) if w > 0}


def describe_mix(mix: dict[int, float]) -> str:
    return ", ".join(f"{w:.0%} at {n}" for n, w in mix.items())


def mix_lengths(df: pd.DataFrame, mix: dict[int, float]) -> tuple[pd.DataFrame, list[str]]:
    """One row per configuration measured at every length of `mix` (successful runs only), with the
    mixed figures; and the notes on configurations left out."""
    if "seq_len" not in df.columns or df["seq_len"].dropna().empty:
        raise ConfigError(f"This study has no sequence-length axis (seq_len); profile with several sequence "
                          f"lengths ({setting('seq_lens', 'Sequence length')}) to weigh a mix.")
    ok = df[(df["status"] == "ok") & df["throughput"].notna() & df["latency_ms_p99"].notna()] \
        if "status" in df.columns else df
    ok = ok[ok["seq_len"].notna()]
    have = sorted({int(v) for v in ok["seq_len"]})
    cols = [c for c in CONFIG_COLUMNS if c in ok.columns]
    groups = ok.groupby([ok[c].astype(str) for c in cols], sort=False, dropna=False)
    rows, lacking = [], {}
    for _, part in groups:
        by_len = {int(r["seq_len"]): r for _, r in part.iterrows()}
        missing = [n for n in mix if n not in by_len]
        if missing:
            lacking[missing[0]] = lacking.get(missing[0], 0) + 1
            continue
        runs = [by_len[n] for n in mix]
        w = np.array(list(mix.values()))
        row = runs[-1].copy()  # the longest length: accuracy, memory, variant
        for col in ("latency_ms_p50", "latency_ms_mean", "latency_ms_p90", "latency_ms_p95"):
            if col in row.index:
                vals = np.array([float(r[col]) if r[col] is not None else np.nan for r in runs])
                row[col] = float(np.dot(w, vals)) if not np.isnan(vals).any() else np.nan
        row["latency_ms_p99"] = max(float(r["latency_ms_p99"]) for r in runs)
        row["throughput"] = 1.0 / float(sum(wi / float(r["throughput"]) for wi, r in zip(w, runs)))
        if "cpu_util" in row.index:
            vals = [float(r["cpu_util"]) for r in runs if r["cpu_util"] is not None and not pd.isna(r["cpu_util"])]
            row["cpu_util"] = float(np.dot(w, vals)) if len(vals) == len(runs) else np.nan
        if "rss_mb" in row.index:
            row["rss_mb"] = max((float(r["rss_mb"]) for r in runs if not pd.isna(r["rss_mb"])), default=np.nan)
        for c in row.index:
            if str(c).endswith(("_ci_low", "_ci_high", "_cv")) or str(c).startswith("round_"):
                row[c] = np.nan  # intervals of single lengths say nothing about the mix
        row["seq_len"] = np.nan
        row["seq_mix"] = ",".join(f"{n}:{wi:g}" for n, wi in mix.items())
        row["mix_keys"] = ",".join(str(r["key"]) for r in runs)
        rows.append(row)
    notes = []
    for n, count in sorted(lacking.items()):
        notes.append(f"{count} configuration{'s were' if count > 1 else ' was'} not measured at sequence length {n} "
                     f"and {'are' if count > 1 else 'is'} not eligible for the mix.")
    if not rows:
        raise ConfigError(f"No configuration of this study was measured at every length of the mix "
                          f"({', '.join(map(str, mix))}); its lengths are {', '.join(map(str, have)) or 'none'}.")
    out = pd.DataFrame(rows).reset_index(drop=True)
    for c in ("throughput_per_core",):
        if c in out.columns and "cores_used" in out.columns:
            out[c] = out["throughput"] / out["cores_used"]
    return out, notes
