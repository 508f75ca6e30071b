"""How runs and results are named for people who do not read code: column headers in words with
units, numbers rounded to what measurement noise allows, a run named by its settings, and the
measurement modes a figure comes from.

The dashboard, the HTML report and export comments all name things through `label()`,
`rounded()`, `run_name()`, `worded()` and `MODES`, so one word or one unit is the same everywhere.
"""

from __future__ import annotations

import html
import math
import re

from wb_core.axes import all_axes
from wb_core.errors import noun
from wb_core.metrics import METRICS, metric
from wb_core.naming import name_parts, run_name  # noqa: F401 - every face names runs through these
from wb_core.precisions import PRECISIONS

# Result and config columns as the dashboard names them (units in brackets): every setting as its axis
# heads its column (wb_core.axes: `Axis.header`, else its label), then the measurements.
LABELS = {a.name: a.header or a.label for a in all_axes()}
LABELS.update({m.name: m.label for m in METRICS})
LABELS.update({
    "executed_precision": "Executed as",
    "status": "Status",
    "error": "Problem",
    "key": "Run id",
    "seq_mix": "Sequence-length mix",
    "accuracy_metric": "Accuracy measured as",
    "throughput_ci_low": "Throughput 95% CI low (samples/s)",
    "throughput_ci_high": "Throughput 95% CI high (samples/s)",
    "latency_ms_p99_ci_low": "p99 latency 95% CI low (ms)",
    "latency_ms_p99_ci_high": "p99 latency 95% CI high (ms)",
    "tied_with_best": "Tied with best (within noise)",
    "rounds": "Rounds measured",
    "other_cpu": "Others' CPU on our cores (cores)",
    "steal_pct": "Hypervisor steal (%)",
    "busy": "Measured on a busy machine",
    "accuracy_guard": "Accuracy guard",
    "accuracy_guard_note": "Accuracy guard, in words",
    "quant_recipe": "INT8 recipe",
    "quant_recipe_reason": "Why this INT8 recipe",
    "model_family": "Model family",
})



def label(column: str) -> str:
    """The column's name in words with its unit (the column itself when it has none)."""
    return LABELS.get(column, column.replace("_", " "))


def rounded(value, column: str = "") -> str:
    """`value` as text with as many significant digits as its kind of measurement deserves."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if column in ("executed_precision", "precisions", "precisions_a", "precisions_b") and isinstance(value, str):
        return executed_words(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) or float(value).is_integer() and not column.startswith(("latency", "accuracy")):
        return f"{int(value):,}"
    measured = metric(column)  # the digits its noise allows (a fourth digit of a latency is noise)
    digits = measured.digits if measured else 3
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{round(value, decimals):,.{decimals}f}"


# What the runtime really executed (OpenVINO's runtime precisions) in the words precisions are chosen by.
# The declared precisions by name, and OpenVINO's element types.
EXECUTED = {**{p.name: p.label for p in PRECISIONS}, "f32": "FP32", "f16": "FP16", "fp16": "FP16", "u8": "INT8",
            "i8": "INT8", "i32": "INT32", "i64": "INT64", "u1": "binary"}

# The ways a number is measured, in words: two tabs that show different modes for one run say why.
MODES = {
    "closed": "closed loop in this process (requests sent back to back, each as soon as the last finished)",
    "open": "open loop (requests arriving at random, Poisson, queueing included)",
    "served": "served through a real server (network and server overhead included)",
    "layers": "sum of layer times (the runtime's per-layer counters, without the time between layers)",
}


def p99_limit_words(p99_ms) -> str:
    """A p99 limit as plans and exports say it: `at p99 ≤ 5 ms`, or `without a p99 limit`."""
    return f"at p99 ≤ {rounded(float(p99_ms))} ms" if p99_ms is not None else "without a p99 limit"


def p99_verdict(p99, limit, saturated=False) -> str:
    """A probed point against a p99 limit, in words (the rule: `limits.within_p99`)."""
    from wb_core.limits import within_p99

    if saturated is True or saturated == 1 or p99 is None or p99 != p99:
        return "requests queued up"
    return f"p99 {rounded(p99, 'latency')} ms, " + ("within the limit" if within_p99(p99, limit) else "over the limit")


def plural(n, word: str, many: str | None = None) -> str:
    """`1 thread`, `2 threads` (numbers rounded as counts)."""
    v = float(n)
    return f"{rounded(int(v) if v.is_integer() else v)} {noun(v, word, many)}"


def executed_words(value) -> str:
    """What ran, in precision words: `u8` -> `INT8`, `f32, u8` -> `FP32, INT8`."""

    return re.sub(r"[A-Za-z]+\d*", lambda m: EXECUTED.get(m.group(0).lower(), m.group(0)), str(value))


def worded(text: str, runs) -> str:
    """A message from the analysis with run keys taken out (the runs are named in words already)."""

    text = re.sub(r"\s*\((?:key|run) [0-9a-f]{6,}(?: against [0-9a-f]{6,})?\)", "", text)
    return re.sub(r"\b[0-9a-f]{16}\b", "this run", text)


def results_table(df, columns: list[str], max_rows: int = 200, highlight: set[str] | None = None) -> str:
    """Some columns of a results frame as an HTML table with worded headers and rounded numbers.

    `highlight` names columns whose cells are marked (e.g. the settings that differ between runs).
    """
    cols = [c for c in columns if c in df.columns]
    highlight = highlight or set()
    head = "".join(f"<th>{html.escape(label(c))}</th>" for c in cols)
    rows = []
    for _, row in df[cols].tail(max_rows).iterrows():
        cells = "".join(
            f"<td{' class=wb-diff' if c in highlight else ''}>{html.escape(rounded(row[c], c))}</td>" for c in cols)
        rows.append(f"<tr>{cells}</tr>")
    return f'<table class="wb-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


# Columns of the Compare and Layers tabs.
LABELS.update({
    "run": "Run",
    "study": "Study",
    "model": "Model file",
    "cpu": "CPU",
    "throughput_x": "Throughput vs first (×)",
    "p99_x": "p99 latency vs first (×)",
    "type": "Layer type",
    "name": "Layer",
    "layers": "Layers",
    "time_ms": "Time per inference (ms)",
    "share_pct": "Share of layer time (%)",
    "precisions": "Executed in",
    "exec_type": "Kernel",
    "layers_a": "Layers in first",
    "layers_b": "Layers in second",
    "time_a_ms": "First run (ms)",
    "time_b_ms": "Second run (ms)",
    "speedup": "Second is faster by (×)",
    "precisions_a": "First executed in",
    "precisions_b": "Second executed in",
})
