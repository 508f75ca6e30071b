"""Precision against the baseline (FP32, `precisions.baseline`): each point's throughput relative to
the baseline point of the same settings, and a plain note when a reduced precision runs slower (with
the CPU's reason when it has one)."""

from __future__ import annotations

import pandas as pd

from wb_core.axes import run_settings
from wb_core.hardware import int8_speed_note
from wb_core.precisions import baseline, precision, reduced


def match_columns() -> tuple[str, ...]:
    """What a point is matched on with its FP32 point: every setting of the axes table but precision
    (a backend's own among them), and the host of a fleet study."""
    return (*(s for s in run_settings() if s != "precision"), "host")


def vs_fp32(df: pd.DataFrame) -> pd.Series:
    """Throughput over the FP32 point with the same settings (NaN where there is none)."""
    if df.empty or "precision" not in df or "throughput" not in df:
        return pd.Series(float("nan"), index=df.index, dtype=float)
    cols = [c for c in match_columns() if c in df.columns]
    keyed = pd.Series(["|".join(str(v) for v in row) for row in df[cols].itertuples(index=False)], index=df.index)
    ok = df["status"].eq("ok") if "status" in df else pd.Series(True, index=df.index)
    fp32 = df[ok & df["precision"].eq(baseline())]
    base = dict(zip(keyed[fp32.index], fp32["throughput"].astype(float)))
    return pd.Series([float(t) / base[k] if k in base and base[k] and ok[i] else float("nan")
                      for i, k, t in zip(df.index, keyed, df["throughput"])], index=df.index, dtype=float)


def slowdown_notes(df: pd.DataFrame, flags: dict | None = None) -> list[str]:
    """One note per precision that ran slower than FP32 somewhere, with the CPU's reason for INT8."""
    ratio = vs_fp32(df)
    notes = []
    for prec in reduced():
        r = ratio[df["precision"].eq(prec)].dropna() if "precision" in df else ratio.iloc[0:0]
        slow = r[r < 1.0]
        if slow.empty:
            continue
        text = (f"{prec} ran slower than {baseline()} in {len(slow)} of {len(r)} matching points "
                f"(as low as {slow.min():.2f}x)")
        why = int8_speed_note(flags or {}) if precision(prec).needs_data else None  # the quantized variant
        notes.append(text + (f": {why}." if why else "."))
    return notes
