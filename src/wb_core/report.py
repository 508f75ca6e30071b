"""One self-contained HTML report of a study: hardware, model, recommendation, plots and the runs.

plotly's JavaScript is inlined once, so the file opens offline (and from an email attachment)
with every plot interactive.
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from pathlib import Path

import pandas as pd

from wb_core.analysis.words import MODES, label, plural, rounded, run_name, worded
from wb_core.axes import with_role
from wb_core.errors import WorkbenchError
from wb_core.variants.guard import FAILED, FAILED_WORDS, guard_failed_runs

# The runs table: every setting a comparison shows (wb_core.axes, "compare"), then these measurements.
MEASURED_COLUMNS = ("latency_ms_p50", "latency_ms_p99", "latency_ms_p99_ci_low", "latency_ms_p99_ci_high",
                 "throughput", "throughput_ci_low", "throughput_ci_high", "rounds", "tied_with_best",
                 "throughput_per_core", "pct_peak_flops", "cpu_util", "other_cpu", "steal_pct", "busy", "rss_mb",
                 "executed_precision", "quant_recipe", "accuracy", "accuracy_drop", "accuracy_guard", "oversubscribed",
                 "pareto", "status", "error")
# The runs table's columns that hold words (left-aligned).
TEXT_COLUMNS = ("run", "backend", "precision", "cores", "executed_precision", "quant_recipe", "accuracy_guard",
                "status", "error")

CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; padding: 0 1em; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; }
th { background: #f4f4f4; } td.text, th.text { text-align: left; }
.facts td:first-child { font-weight: 600; text-align: left; } .facts td { text-align: left; }
.best { background: #eef7ee; border-left: 4px solid #3a3; padding: 0.6em 1em; }
.warn { background: #fff6e5; border-left: 4px solid #e90; padding: 0.6em 1em; }
.runs { overflow-x: auto; } .muted { color: #777; } .plot { margin: 1em 0; }
tr.pareto td { background: #f3f9ff; }
"""


def build_report(db: str | Path, study: str, constraints=None, objective: str = "throughput",
                 layer_profile=None, pick: str | None = None, pick_reason: str | None = None) -> str:
    """The report of a study as one HTML string (see write_report).

    The recommendation is the best run under `constraints` for `objective`; `pick` (a run key)
    names the run to present instead, with `pick_reason` (the dashboard passes the run its Export
    tab writes, so both name the same run under the same limits). Runs whose accuracy guard
    failed are never recommended; the report says they were left out.
    """
    from wb_core import plots
    from wb_core.analysis.recommend import (
        NoRunMeetsConstraints,
        Recommendation,
        pareto_mask,
        recommend,
        tied_with_best,
        with_efficiency,
    )
    from wb_core.analysis.study_model import study_flops, study_model_paths
    from wb_core.store import Store

    with Store(db, readonly=True) as store:
        info = store.get_study(study)
        df = store.to_frame(study)
    if df.empty:
        raise WorkbenchError(f"Study '{study}' has no runs yet; profile the model first with `wb profile`.")
    flops = study_flops(info, study_model_paths(info).get("ir_path"))
    df = with_efficiency(df, info.get("hardware"), flops)
    failed = plots.guard_failed(df)
    df["pareto"] = False
    df.loc[~failed, "pareto"] = pareto_mask(df[~failed])
    df["tied_with_best"] = tied_with_best(df)

    sections = [_header(info, df), _hardware(info), _model(info, flops)]
    best = None
    left_out = _left_out(df[failed])
    try:
        rec = recommend(df[~failed], constraints, objective, hardware=info.get("hardware"))
        if pick is not None and pick != rec.key:
            chosen = df[df["key"].astype(str) == str(pick)]
            if chosen.empty:
                raise WorkbenchError(f"The run to report is not in study '{study}'.")
            from wb_core.analysis.pick import unfit_reason

            why = unfit_reason(chosen.iloc[0].to_dict(), hardware=info.get("hardware"))
            if why:  # a guard-failed or oversubscribed run is never the report's headline
                raise WorkbenchError(why)
            rec = Recommendation(best=chosen.iloc[0].to_dict(), reason=pick_reason or "", objective=rec.objective,
                                 constraints=rec.constraints, runners_up=[])
        elif pick_reason:
            rec = Recommendation(best=rec.best, reason=pick_reason, objective=rec.objective,
                                 constraints=rec.constraints, runners_up=rec.runners_up)
        best = rec.best
        sections.append(_recommendation(rec, df, left_out))
    except NoRunMeetsConstraints as e:
        sections.append(f"<h2>Recommendation</h2><p class='warn'>{_e(worded(str(e), df))}</p>{left_out}")
    except WorkbenchError as e:
        sections.append(f"<h2>Recommendation</h2><p class='warn'>{_e(worded(str(e), df))}</p>{left_out}")

    if layer_profile is not None and (best is None or str(layer_profile.key) != str(best.get("key"))):
        layer_profile = None  # only the recommended run's own profile belongs beside its recommendation
    figures = list(plots.study_figures(df).values())
    if "study_kind" in df.columns and (df["study_kind"] == "generation").any():
        figures.insert(0, plots.generation_pareto(df))  # a generation study: tokens/s against p99 TPOT first
    if best is not None:
        figures.append(plots.latency_distribution(best))
    if layer_profile is not None:
        figures += [plots.layer_bars(layer_profile), plots.layer_type_bars(layer_profile)]
    sections.append("<h2>Trade-offs</h2>" + _figures_html(figures))
    if layer_profile is not None:
        sections.append(_layers(layer_profile))
    for extra in (_precision_loss(db, study, df), _guard(df), _busy(df)):
        if extra:
            sections.append(extra)
    sections.append(_runs_table(df))
    title = f"{_e(study)}: CPU inference report"
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{CSS}</style></head>"
            f"<body>{''.join(sections)}</body></html>\n")


def _precision_loss(db, study: str, df) -> str:
    """Why a lower precision ran slower than FP32, from the stored layer profiles (empty when none lost)."""
    from wb_core.analysis.precision_loss import study_loss_notes

    notes = study_loss_notes(db, study, df)
    if not notes:
        return ""
    return "<h2>Why a precision ran slower</h2>" + "".join(f"<p>{_e(n)}</p>" for n in notes)


def write_report(db: str | Path, study: str, out: str | Path, **kwargs) -> Path:
    """Write the report of a study to `out` and return its path (`out` checked before the report is built)."""
    from wb_core.paths import check_output_file

    out = check_output_file(out, "The report file")
    text = build_report(db, study, **kwargs)
    try:
        if out.parent and not out.parent.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        raise WorkbenchError(f"Cannot write the report to '{out}': {e.strerror or e}.") from None
    return out


def _figures_html(figures) -> str:
    parts = []
    for i, fig in enumerate(figures):
        # plotly.js goes inline with the first figure only; the others reuse it.
        parts.append("<div class='plot'>" + fig.to_html(full_html=False, include_plotlyjs=(i == 0),
                                                         config={"displaylogo": False}) + "</div>")
    return "".join(parts)


def _header(info: dict, df: pd.DataFrame) -> str:
    counts = df["status"].value_counts().to_dict()
    made = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    return (f"<h1>{_e(info['name'])}</h1><p class='muted'>Study created {_e(info.get('created_at'))}; "
            f"{len(df)} runs ({_e(summary)}); report made {made}.</p>")


def _facts(rows: list[tuple[str, object]]) -> str:
    body = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows if v not in (None, ""))
    return f"<table class='facts'>{body}</table>"


def _hardware(info: dict) -> str:
    hw = info.get("hardware") or {}
    flags = " ".join(k for k, v in (hw.get("flags") or {}).items() if v)
    from wb_core.analysis.words import executed_words
    from wb_core.backends.registry import title

    # Precisions and runtimes by their names (FP32, OpenVINO), not the codes the store keeps.
    peak = ", ".join(f"{executed_words(p)} {v:,.0f}" for p, v in (hw.get("peak_gflops") or {}).items())
    versions = ", ".join(f"{title(k)} {v}" for k, v in (info.get("versions") or {}).items())
    return "<h2>Hardware</h2>" + _facts([
        ("CPU", f"{hw.get('cpu_model')} ({hw.get('vendor')}, {hw.get('architecture')})"),
        ("Cores", f"{hw.get('physical_cores')} physical, {hw.get('logical_cores')} logical, "
                  f"{plural(hw.get('sockets') or 0, 'socket')}, {plural(hw.get('numa_nodes') or 0, 'NUMA node')}"),
        ("Usable CPUs", hw.get("available_cpus")),
        ("Caches", f"L1d {hw.get('l1d_kb')} KiB, L2 {hw.get('l2_kb')} KiB, L3 {hw.get('l3_kb')} KiB"),
        ("Clock / memory", f"{hw.get('base_ghz')} GHz, {hw.get('memory_gb')} GiB"),
        ("Instruction sets", flags), ("Peak GFLOP/s", peak), ("Software", versions)])


def _model(info: dict, flops: float | None) -> str:
    from wb_core.models import format_title

    inputs = "; ".join(f"{i['name']}: {'x'.join('?' if d < 0 else str(d) for d in i['shape'])} {i['dtype']}"
                       for i in (info.get("inputs") or []))
    return "<h2>Model</h2>" + _facts([
        ("Model", Path(str(info.get("model_path"))).name),
        ("Format", format_title(str(info.get("model_format") or ""))), ("Inputs", inputs),
        ("FLOPs per sample", f"{flops:,.0f} (convolutions and matrix products)" if flops else "not counted")])


def _left_out(bad: pd.DataFrame) -> str:
    """Runs left out of the recommendation because their accuracy guard failed, in words."""
    if bad.empty:
        return ""
    names = ", ".join(sorted({run_name(r) for _, r in bad.iterrows()}))
    notes = sorted({str(n) for n in bad.get("accuracy_guard_note", []) if isinstance(n, str) and n})
    why = notes[0] if notes else "their accuracy fell below the accuracy guard"
    return f"<p class='warn'>Left out of the recommendation ({_e(names)}): {_e(why)}.</p>"


def _recommendation(rec, df: pd.DataFrame, left_out: str = "") -> str:
    from wb_core.analysis.recommend import OBJECTIVE_WORDS

    rows = "".join(f"<li>{_e(run_name(r))}: p99 latency {_e(rounded(r.get('latency_ms_p99'), 'latency'))} ms, "
                   f"{_e(rounded(r.get('throughput'), 'throughput'))} samples/s</li>" for r in rec.runners_up)
    return (f"<h2>Recommendation</h2><div class='best'><p><b class='pick'>{_e(run_name(rec.best))}</b></p>"
            f"<p>{_e(worded(rec.reason, df))}</p>"
            f"<p class='muted'>Best for {_e(OBJECTIVE_WORDS.get(rec.objective, rec.objective))}, under these limits: "
            f"<span class='limits'>{_e(rec.constraints.describe())}</span>. Throughput and latency here were "
            f"measured {_e(MODES['closed'])}.</p>"
            + (f"<p>Next best:</p><ol>{rows}</ol>" if rows else "") + "</div>" + left_out)


def _layers(profile) -> str:
    t = profile.by_type()
    body = "".join(f"<tr><td class='text'>{_e(r['type'])}</td><td>{r['layers']}</td><td>{r['time_ms']:.4f}</td>"
                   f"<td>{r['share']:.1%}</td><td class='text'>{_e(r['precisions'])}</td></tr>" for _, r in t.iterrows())
    return (f"<h2>Per-layer profile</h2><p>{_e(profile.label)}, mean of {profile.iterations} inferences, "
            f"{profile.total_ms:.4f} ms of layer time per inference.</p><table><tr><th class='text'>type</th>"
            f"<th>layers</th><th>ms</th><th>share</th><th class='text'>executed in</th></tr>{body}</table>")


def _guard(df: pd.DataFrame) -> str:
    """The accuracy guard's verdict on each reduced-precision variant, failed ones first."""
    if "accuracy_guard_note" not in df.columns:
        return ""
    judged = df[df["accuracy_guard_note"].notna()].drop_duplicates(["backend", "precision"])
    if judged.empty:
        return ""
    status = judged["accuracy_guard"] if "accuracy_guard" in judged.columns else pd.Series("", index=judged.index)
    failed = judged[guard_failed_runs(judged.assign(accuracy_guard=status))]
    items = "".join(f"<li>{_e(r['accuracy_guard_note'])}"
                    f"{' ' + _e(r['quant_recipe_reason']) if isinstance(r.get('quant_recipe_reason'), str) else ''}"
                    f"</li>" for _, r in pd.concat([failed, judged.drop(failed.index)]).iterrows())
    head = (f"<p>{plural(len(failed), 'variant')} failed the accuracy guard: their runs are measured and listed below as "
            f"'accuracy failed', and never recommended.</p>" if len(failed) else
            "<p>Every reduced-precision variant passed the accuracy guard.</p>")
    return (f"<h2>Accuracy guard</h2><div class='{'warn' if len(failed) else 'best'}'>{head}<ul>{items}</ul></div>"
            + _output_figures(judged))


def _output_figures(judged: pd.DataFrame) -> str:
    """Each judged variant's outputs: what each was read as, and its figures against FP32."""
    import json

    from wb_core.variants.agreement import KIND_WORDS
    from wb_core.variants.guard import figure_words

    if "accuracy_outputs" not in judged.columns:
        return ""
    rows = []
    for _, r in judged.iterrows():
        try:
            outputs = json.loads(r["accuracy_outputs"]) if isinstance(r.get("accuracy_outputs"), str) else []
        except ValueError:
            continue
        for o in outputs:
            rows.append(f"<tr><td class='text'>{_e(run_name(r))}</td><td class='text'>{_e(o.get('output'))}</td>"
                        f"<td class='text'>{_e(KIND_WORDS.get(o.get('kind'), o.get('kind')))} "
                        f"<span class='muted'>({_e(o.get('kind_reason'))})</span></td>"
                        f"<td class='text'>{_e(figure_words(o))}</td></tr>")
    if not rows:
        return ""
    return ("<p>Each output against FP32 on the same inputs:</p><table><tr><th class='text'>variant</th>"
            "<th class='text'>output</th><th class='text'>read as</th><th class='text'>figures</th></tr>"
            + "".join(rows) + "</table>")


def _busy(df: pd.DataFrame) -> str:
    """A warning naming the points measured while other processes used their cores (or steal was high)."""
    from wb_core.measure import BUSY_OTHER_CPU, BUSY_STEAL_PCT

    if "busy" not in df.columns:
        return ""
    busy = df[(df["status"] == "ok") & df["busy"].astype(object).map(lambda v: v is True or v == 1)]
    if busy.empty:
        return ""
    items = "".join(f"<li>{_e(run_name(r))}: other programs used {_e(rounded(r.get('other_cpu'), 'cpu_util'))} "
                    f"cores, the hypervisor took {_e(rounded(r.get('steal_pct')))}%</li>" for _, r in busy.iterrows())
    n = len(busy)
    return (f"<h2>Busy machine</h2><div class='warn'><p>{n} run{'s were' if n != 1 else ' was'} measured while other "
            f"programs used more than {BUSY_OTHER_CPU:g} cores' worth of CPU on the same cores, or the hypervisor "
            f"took more than {BUSY_STEAL_PCT:g}% of their time; their figures may be low. Measure them again on a "
            f"quiet machine (the dashboard's Sweep tab has a “Measure busy points again” button).</p>"
            f"<ul>{items}</ul></div>")


REPORT_LABELS = {"run": "Run", "pareto": "On the Pareto front", "oversubscribed": "More threads than cores",
                 "accuracy_guard": "Accuracy guard", "pct_peak_flops": "Share of peak compute (%)",
                 "inter_op_threads": "Inter-op threads"}


def _runs_table(df: pd.DataFrame) -> str:
    cols = ["run"] + [c for c in (*with_role("compare"), *MEASURED_COLUMNS) if c in df.columns and not df[c].isna().all()]
    head = "".join(f"<th class='text'>{_e(REPORT_LABELS.get(c) or label(c))}</th>" if c in TEXT_COLUMNS
                   else f"<th>{_e(REPORT_LABELS.get(c) or label(c))}</th>" for c in cols)
    rows = []
    for _, r in df.sort_values(["status", "throughput"], ascending=[True, False]).iterrows():
        cls = " class='pareto'" if r.get("pareto") else ""
        values = {c: (run_name(r) if c == "run" else r[c]) for c in cols}
        if values.get("accuracy_guard") == FAILED:
            values["accuracy_guard"] = FAILED_WORDS
        cells = "".join(f"<td class='text'>{_e(_cell(values[c], c))}</td>" if c in TEXT_COLUMNS
                        else f"<td>{_e(_cell(values[c], c))}</td>" for c in cols)
        rows.append(f"<tr{cls}>{cells}</tr>")
    return (f"<h2>All runs</h2><p class='muted'>Shaded rows are on the Pareto front (no other run is both faster "
            f"and does more per second{', at the same accuracy' if 'accuracy' in cols else ''}). Throughput and "
            f"latency were measured {_e(MODES['closed'])}.</p>"
            f"<div class='runs'><table><tr>{head}</tr>{''.join(rows)}</table></div>")


def _cell(v, column: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, bool):
        return "yes" if v else ""
    if hasattr(v, "item") and not isinstance(v, str):  # numpy scalars
        v = v.item()
    if column == "backend":
        from wb_core.backends.registry import title

        return title(str(v))
    if column == "precision":
        return str(v).upper()
    if isinstance(v, (int, float)) or column == "executed_precision":
        return rounded(v, column)
    return str(v)


def _e(v) -> str:
    return html.escape(str(v), quote=True)
