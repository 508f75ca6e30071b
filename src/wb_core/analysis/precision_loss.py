"""Why a reduced precision ran slower than FP32, in words, from the two runs' layer profiles.

The rule: a BF16 or INT8 point whose throughput is below its FP32 twin's (same settings but
precision) by more than the equivalence band (3%: within it the two ran as fast) is explained by
comparing the layer profiles of the two runs: the layer types whose
time grew beyond noise (types only the reduced run has, such as the Reorder and FakeQuantize
layers quantization adds, count in full), and the precision each layer type of the reduced run
executed in (a layer type that stayed in f32 gains nothing from the variant). Where the layers
only the reduced run has (FakeQuantize, Reorder, Convert) cost at least what its faster layers
saved, the sentence says so: the conversions between precisions outweigh the work they speed up,
as in a model too small for the precision to pay off; where its layers took less in all, the time
it lost went outside them (the runtime's overhead per request). One pair per precision is
explained, the one that lost most.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from wb_core.analysis.precision import match_columns, vs_fp32
from wb_core.analysis.recommend import EQUIVALENCE
from wb_core.errors import Sentence, one_line, setting
from wb_core.precisions import baseline, precision, reduced

NAMED_TYPES = 3  # layer types a sentence names (the biggest losses)


@dataclass(frozen=True)
class SlowPair:
    """A reduced-precision run slower than its FP32 twin."""

    precision: str
    key: str  # the reduced-precision run
    fp32_key: str  # its FP32 twin
    ratio: float  # throughput of the reduced run over the FP32 run's (< 1)
    backend: str


def slow_pairs(df: pd.DataFrame) -> list[SlowPair]:
    """For each reduced precision, the run that lost most against its FP32 twin (ratio below 1)."""
    if df.empty or "precision" not in df or "throughput" not in df:
        return []
    ratio = vs_fp32(df)
    cols = [c for c in match_columns() if c in df.columns]
    keyed = pd.Series(["|".join(str(v) for v in row) for row in df[cols].itertuples(index=False)], index=df.index)
    ok = df["status"].eq("ok") if "status" in df else pd.Series(True, index=df.index)
    fp32 = df[ok & df["precision"].eq(baseline())]
    twin = dict(zip(keyed[fp32.index], fp32["key"].astype(str)))
    out = []
    for prec in reduced():
        r = ratio[df["precision"].eq(prec)].dropna()
        r = r[r < 1.0 - EQUIVALENCE]  # within the equivalence band it did not run slower: nothing to explain
        if r.empty:
            continue
        i = r.idxmin()
        out.append(SlowPair(prec, str(df.at[i, "key"]), twin[keyed[i]], float(r[i]), str(df.at[i, "backend"])))
    return out


def _ms(v: float) -> str:
    return f"{v:.3g} ms"


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def why_slower(pair: SlowPair, reduced_profile, fp32_profile) -> Sentence:
    """The sentence for one slow pair from the two runs' layer profiles (`LayerProfile`s)."""
    from wb_core.analysis.compare import NOISE, layer_diff

    diff = layer_diff(fp32_profile, reduced_profile)
    name = pair.precision.upper()
    unit = "ms per sample" if diff.per_sample else "ms per inference"
    t = diff.by_type
    longer = t[t["time_b_ms"] > t["time_a_ms"] * NOISE]
    longer = longer.assign(lost=longer["time_b_ms"] - longer["time_a_ms"]).sort_values("lost", ascending=False)
    head = (f"{name} ran at {pair.ratio:.2f}x the throughput of FP32 (run {pair.key} against {pair.fp32_key}); "
            f"its layers took {diff.total_b_ms:.3g} {unit} against {diff.total_a_ms:.3g}")
    if longer.empty:
        why = (f", yet no layer type took longer beyond noise ({NOISE - 1:.0%}): the time went outside the layers "
               f"(copies between requests, the runtime's own overhead)")
    else:
        parts = []
        for r in longer.head(NAMED_TYPES).itertuples():
            ran = f"ran in {r.precisions_b}" if r.precisions_b else "precision unknown"
            if r.layers_a == 0:
                parts.append(f"{r.type} (added by {name}: {_ms(r.time_b_ms)}, {ran})")
            else:
                parts.append(f"{r.type} ({_ms(r.time_a_ms)} -> {_ms(r.time_b_ms)}, {ran})")
        why = f"; the layer types that took longer were {_join(parts)}"
        if diff.total_b_ms * NOISE < diff.total_a_ms:  # the layers gained in all: the loss is elsewhere
            why = (f", less in all, so what {name} lost went outside the layers (copies between requests, the "
                   f"runtime's own overhead){why}")
    return Sentence(head + why + ". " + added_layers(diff, pair.precision) + ran_in(reduced_profile, name) + ".")


def added_layers(diff, prec: str) -> str:
    """What the layers only the reduced-precision run has cost against what its faster layers saved
    (a sentence ending in a space), or "" when it adds none."""
    t = diff.by_type
    added = t[(t["layers_a"] == 0) & (t["layers_b"] > 0)].sort_values("time_b_ms", ascending=False)
    if added.empty:
        return ""
    name = prec.upper()
    cost = float(added["time_b_ms"].sum())
    saved = float(diff.faster(len(t))["saved"].sum())
    n = int(added["layers_b"].sum())
    text = (f"The {f'{n} layers' if n != 1 else 'layer'} only {name} runs ({_join(list(added['type'].astype(str)))}) "
            f"took {_ms(cost)}")
    text += f" against the {_ms(saved)} its faster layers saved" if saved > 0 else \
        ", and no layer it shares with FP32 ran faster"
    if cost >= saved:
        work = "quantizing and dequantizing" if precision(prec).needs_data else f"converting to and from {name}"
        text += (f": {work} costs more than {name} saves here, as in a model whose layers do too little work "
                 f"for {name} to pay off")
    return text + ". "


def ran_in(profile, name: str) -> str:
    """What ran in which precision in a profile: each precision with its layer types, most time first."""
    from wb_core.analysis.compare import base_type

    layers = profile.layers.assign(base=profile.layers["type"].map(base_type))
    total = float(layers["time_ms"].sum()) or 1.0
    parts = []
    for prec, g in sorted(layers.groupby("precision"), key=lambda kv: -kv[1]["time_ms"].sum()):
        types = g.groupby("base")["time_ms"].sum().sort_values(ascending=False)
        shown = ", ".join(types.index[:4]) + (f" and {len(types) - 4} more" if len(types) > 4 else "")
        parts.append(f"{prec} {g['time_ms'].sum() / total:.0%} of the time ({shown})")
    return f"In {name} the layers ran in " + _join(parts)


def loss_notes(df: pd.DataFrame, profile_of: Callable[[str], object | None]) -> list[Sentence]:
    """One sentence per reduced precision slower than FP32: why, where `profile_of(key)` gives both
    runs' layer profiles; otherwise which two profiles would say it."""
    from wb_core.analysis.words import run_name
    from wb_core.backends.registry import get

    notes = []
    for pair in slow_pairs(df):
        a, b = profile_of(pair.key), profile_of(pair.fp32_key)
        if a is not None and b is not None and not a.layers.empty and not b.layers.empty:
            notes.append(why_slower(pair, a, b))
        elif get(pair.backend).layer_profiling:
            named = {k: run_name(df.loc[df["key"].astype(str) == k].iloc[0]) for k in (pair.key, pair.fp32_key)}
            notes.append(Sentence(
                f"Why {pair.precision.upper()} ran slower than FP32 ({pair.ratio:.2f}x) shows in the layer profiles "
                f"of {named[pair.key]} (run {pair.key}) and of its FP32 twin {named[pair.fp32_key]} "
                f"(run {pair.fp32_key}): "
                f"profile both runs ({setting('precision_layers', 'the Layers tab')}) to see the layer types that "
                f"took longer."))
    return notes


def study_loss_notes(db: str | Path, study: str, df: pd.DataFrame | None = None,
                     measure: bool = False, iterations: int = 100) -> list[Sentence]:
    """`loss_notes` for a stored study, from the layer profiles stored with its runs; `measure`
    profiles (and stores) the missing ones of runs on a backend with per-layer counters."""
    from wb_core.analysis.layers import LayerProfile, study_layer_profile
    from wb_core.backends.registry import get
    from wb_core.store import Store

    if df is None:
        with Store(db, readonly=True) as s:
            df = s.to_frame(study)
    pairs = slow_pairs(df)
    if not pairs:  # asked to measure, say there was nothing to explain rather than nothing at all
        return [Sentence(f"{setting('precision_layers', 'Layer profiling')} found nothing to explain: no INT8 or "
                         f"BF16 run of study '{one_line(study)}' ran slower than its FP32 twin.")] if measure else []
    wanted = {k for p in pairs for k in (p.key, p.fp32_key)}
    with Store(db, readonly=True) as s:
        stored = {k: s.layer_profile(study, k) for k in wanted}
    profiles = {k: LayerProfile.from_dict(d) for k, d in stored.items() if d is not None}
    if measure:
        for p in pairs:
            if get(p.backend).layer_profiling:
                for k in (p.key, p.fp32_key):
                    if k not in profiles:
                        profiles[k] = study_layer_profile(db, study, k, iterations=iterations, reuse=True)
    notes = loss_notes(df, profiles.get)
    if measure:
        for backend in sorted({p.backend for p in pairs if not get(p.backend).layer_profiling}):
            notes.append(Sentence(f"{setting('precision_layers', 'Layer profiling')} cannot say why runs on "
                                  f"{backend} were slower: {backend} keeps no per-layer timings (OpenVINO runs do)."))
    return notes
