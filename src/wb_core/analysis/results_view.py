"""A study's results as every face shows them: the stored runs plus `vs_fp32` and `tied_with_best`,
and the notes that go with the table (in `df.attrs["notes"]`).

The `wb` command's table, `api.results` and the frame `api.profile` returns all read this one
place, so a notebook sees the same columns and the same notes as the terminal.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from wb_core.analysis.precision import slowdown_notes, vs_fp32
from wb_core.analysis.precision_loss import study_loss_notes
from wb_core.analysis.recommend import tied_with_best
from wb_core.errors import Sentence, counted, setting, were
from wb_core.measure import BUSY_OTHER_CPU, BUSY_STEAL_PCT
from wb_core.store import Store, load_results


def busy_notes(df: pd.DataFrame) -> list[str]:
    """A note naming how many stored points were measured on a busy machine, and how to measure them again."""
    if "busy" not in df.columns:
        return []
    n = int((df["busy"].astype(object).map(lambda v: v is True or v == 1) & (df["status"] == "ok")).sum())
    if not n:
        return []
    return [Sentence(f"{counted(n, 'point')} {were(n)} measured on a busy machine (others used more than "
                     f"{BUSY_OTHER_CPU:g} cores' worth "
            f"of CPU on their cores, or steal above {BUSY_STEAL_PCT:g}%): re-measure them by profiling the same "
            f"study again with {setting('remeasure_busy', 'remeasure_busy=True')}.")]


def annotated_results(db: str | Path, study: str, notes=()) -> pd.DataFrame:
    """The study's runs with `vs_fp32` (throughput over the FP32 point of the same settings) and
    `tied_with_best`; `df.attrs["notes"]` lists `notes` (a sweep's own, e.g. its summary's), then
    lower precisions that ran slower than FP32 (with the CPU's reason, and the layer types that took
    longer where both runs' layer profiles are stored) and points measured busy."""
    df = load_results(db, study)
    out = list(dict.fromkeys(notes))
    if not df.empty:
        df = df.assign(vs_fp32=vs_fp32(df), tied_with_best=tied_with_best(df))
        with Store(db, readonly=True) as s:
            hw = (s.get_study(study) or {}).get("hardware") or {}
        said_busy = any("busy machine" in n for n in out)
        for n in (slowdown_notes(df, hw.get("flags")) + study_loss_notes(db, study, df)
                  + ([] if said_busy else busy_notes(df))):
            if n not in out:
                out.append(n)
    df.attrs["notes"] = out
    return df


def output_figures(df: pd.DataFrame) -> pd.DataFrame:
    """The accuracy guard's figures per output of each judged run, as the report shows them: one row
    per run and output (and per reading: a user's decoding of an output is its own row), with the
    figures in words, the checks that failed, and each figure as a column of its own."""
    import json

    from wb_core.analysis.words import run_name
    from wb_core.variants.agreement import KIND_WORDS
    from wb_core.variants.guard import SHORT, figure_words, short_words

    columns = ["key", "run", "precision", "accuracy_guard", "output", "read_as", "why", "figures", "failed"]
    rows = []
    if "accuracy_outputs" in df.columns:
        for _, r in df.iterrows():
            text = r.get("accuracy_outputs")
            try:
                outputs = json.loads(text) if isinstance(text, str) else []
            except ValueError:
                continue
            for o in outputs:
                if not o.get("figures"):
                    continue  # FP32's own reading of its outputs: nothing compared
                failed = [c for c in o.get("checks") or [] if not c.get("passed")]
                row = {"key": r.get("key"), "run": run_name(r), "precision": r.get("precision"),
                       "accuracy_guard": r.get("accuracy_guard"), "output": o.get("output"),
                       "read_as": KIND_WORDS.get(o.get("kind"), o.get("kind")), "why": o.get("kind_reason"),
                       "figures": figure_words(o), "failed": "; ".join(short_words(c) for c in failed) or None}
                row.update({f: v for f, v in o["figures"].items() if f in SHORT and isinstance(v, (int, float))})
                rows.append(row)
    out = pd.DataFrame(rows)
    return out if not out.empty else pd.DataFrame(columns=columns)
