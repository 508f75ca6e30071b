"""Whether a run may be recommended, exported or reported, and if not, why, in one sentence.

One rule for every face: a run is fit to hand to a server only when it belongs to the study the
user has open, succeeded, passed the accuracy guard, was not measured oversubscribed (more threads,
or instances x threads, than the CPUs it was given: that measures contention, not the model), and
the study is not being measured right now (its pick may change with the next point).

A run measured while other programs used the machine's cores is not refused (on a shared machine
every run may be): `export_caution` says so in a sentence shown beside every export of it.

`unfit_reason` answers for one run; `pickable` keeps the runs a recommendation may choose from
and says in words which were left out.
"""

from __future__ import annotations

import pandas as pd

from wb_core.analysis.recommend import with_efficiency
from wb_core.variants.guard import FAILED as GUARD_FAILED  # the guard's own verdict
from wb_core.variants.guard import guard_failed_runs


def _flag(v) -> bool:
    return v is True or (not isinstance(v, str) and v == 1)


def _number(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else f


def guard_failed(run) -> bool:
    return run.get("accuracy_guard") == GUARD_FAILED


def oversubscription(run, hardware: dict | None) -> str:
    """How the run oversubscribed its CPUs, in words ("4 threads on 2 CPUs"), or "" when it did not."""
    row = with_efficiency(pd.DataFrame([dict(run)]), hardware).iloc[0]
    if not bool(row.get("oversubscribed")):
        return ""
    threads = _number(row.get("threads")) or _number(row.get("ov_threads")) or _number(row.get("tf_intra_op")) or 0
    instances = int(_number(row.get("instances")) or 1)
    cpus = int(_number(row.get("cores_given")) or 0)
    asked = f"{instances} instances × {int(threads)} threads" if instances > 1 else f"{int(threads)} threads"
    return f"{asked} on {cpus} CPU{'s' if cpus != 1 else ''}"


def unfit_reason(run, *, study: str | None = None, open_study: str | None = None, hardware: dict | None = None,
                 measuring: bool = False) -> str:
    """Why `run` (a dict or Series of a results row) must not be exported or reported; "" when it may.

    `study` is the study the run came from and `open_study` the one the user has open; `measuring`
    says a sweep or tune is adding runs to the open study now.
    """
    from wb_core.analysis.words import run_name

    if run is None:
        return "No run is chosen yet: run a sweep or a tune, or open a study."
    name = run.get("name") if isinstance(run.get("name"), str) else run_name(run)
    if study is not None and open_study is not None and study != open_study:
        return (f"{name} belongs to study '{study}', not to the open study '{open_study}': choose a run of "
                f"'{open_study}'.")
    if measuring:
        return "The open study is being measured now: export or report it when the measuring has finished."
    if run.get("status") not in (None, "ok"):
        return f"{name} did not succeed ({run.get('status')}), so it cannot be exported."
    if guard_failed(run):
        note = run.get("accuracy_guard_note")
        why = f" ({str(note).rstrip('.')})" if isinstance(note, str) and note else ""
        return f"{name} failed the accuracy guard{why}: a run that lost too much accuracy is never exported."
    over = oversubscription(run, hardware)
    if over:
        return (f"{name} was measured with {over}, so its figures measure contention, not the model: it is never "
                f"exported; measure it with at most as many threads as CPUs.")
    return ""


def export_caution(run) -> str:
    """What to keep in mind before exporting `run` although it may be exported ("" when nothing)."""
    from wb_core.analysis.words import run_name

    if run is not None and _flag(run.get("busy")):
        return (f"{run_name(run)} was measured while other programs used this machine's cores, so its figures "
                f"may be low: measure it again when the machine is quieter (Sweep: “Measure busy points again”).")
    return ""


def pickable(df: pd.DataFrame, hardware: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The runs a recommendation may choose from (not guard-failed, not oversubscribed), and a
    sentence per kind of run left out."""
    from wb_core.analysis.words import run_name

    if df is None or df.empty:
        return df, []
    marked = with_efficiency(df, hardware)
    failed = guard_failed_runs(marked)
    over = marked["oversubscribed"].fillna(False).astype(bool) & ~failed
    notes = []
    for mask, why in ((failed, _guard_words(marked[failed])),
                      (over, "measured with more threads than CPUs, which measures contention, not the model")):
        bad = marked[mask & (marked.get("status", "ok") == "ok")]
        if bad.empty:
            continue
        names = ", ".join(sorted({run_name(r) for _, r in bad.head(3).iterrows()}))
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        notes.append(f"{len(bad)} run{'s' if len(bad) != 1 else ''} left out ({names}{more}): {why}.")
    return df[~(failed | over).to_numpy()], notes


def _guard_words(bad: pd.DataFrame) -> str:
    found = sorted({str(n).rstrip(".") for n in bad.get("accuracy_guard_note", [])
                    if isinstance(n, str) and n})
    return found[0] if found else "their accuracy fell below the accuracy guard"
