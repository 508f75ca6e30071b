"""`wb generate`, `wb generate-recommend`, `wb generate-export`: text-generation studies (thin; the work is in the API)."""

from __future__ import annotations

import inspect as _inspect
import json
from pathlib import Path
from typing import Optional

import typer

from wb_core.cli.app import app, echo, report_summary
from wb_core.cli.app import fail as _fail
from wb_core.faces import generation_axes

GENERATION_TABLE = [("variant", "weights"), ("inference_precision", "prec"), ("kv_cache_precision", "kv"),
                    ("threads", "threads"), ("cores", "cores"), ("concurrency", "in flight"), ("rate", "arrivals/s"),
                    ("prompt_len", "in"),
                    ("output_len", "out"), ("ttft_p50_ms", "TTFT p50"), ("ttft_p99_ms", "TTFT p99"),
                    ("tpot_p50_ms", "TPOT p50"), ("tpot_p99_ms", "TPOT p99"), ("e2e_p99_ms", "latency p99"),
                    ("output_tokens_per_s", "tokens/s"), ("requests_per_s", "req/s"), ("peak_rss_mb", "peak MB"),
                    ("cpu_util", "CPUs busy"), ("quality_top1_agreement", "top-1"), ("accuracy_guard", "quality"),
                    ("status", "status")]


def generation_table(df) -> str:
    if df.empty:
        return "(no runs)"
    cols = [(c, h) for c, h in GENERATION_TABLE if c in df.columns]
    view = df[[c for c, _ in cols]].copy().astype(object)
    for c in view.columns:
        view[c] = [("-" if v is None or v != v else (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}")
                    if isinstance(v, float) else v) for v in view[c]]
    view.columns = [h for _, h in cols]
    return view.to_string(index=False)


def with_generation_axes(command):
    """One option per axis of the generation table (its flag, default and help)."""
    sig = _inspect.signature(command)
    params = [p for p in sig.parameters.values() if p.kind is not _inspect.Parameter.VAR_KEYWORD]
    for a in generation_axes():
        params.append(_inspect.Parameter(a.spec, _inspect.Parameter.KEYWORD_ONLY, annotation=str,
                                         default=typer.Option(a.text_default, a.flag, help=a.help)))
    command.__signature__ = sig.replace(parameters=params)
    return command


@app.command("generate")
@with_generation_axes
def generate(
    model: str = typer.Argument(..., help="An OpenVINO GenAI folder, a Hugging Face model folder, or text-generator."),
    text: Optional[Path] = typer.Option(None, "--text", help="Prompt text, one per line (default: the demo's prompts)."),
    requests: int = typer.Option(8, "--requests", help="Requests measured per point (after the warm-up)."),
    warmup: int = typer.Option(1, "--warmup", help="Warm-up requests per request in flight, not counted."),
    no_quality_guard: bool = typer.Option(False, "--no-quality-guard", help="Skip the check of compressed variants "
                                          "against the uncompressed model."),
    min_top1: Optional[float] = typer.Option(None, "--min-top1", help="Quality limit: teacher-forced top-1 agreement "
                                             "with the uncompressed model (default 0.90)."),
    study: Optional[str] = typer.Option(None, "--study", help="Study name (default: the model's name + -generation)."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default: ./wb.db)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds a silent worker is given."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the tokens/s vs p99 TPOT plot to this HTML file."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or table."),
    **axes_given,
):
    """Profile text generation: TTFT, TPOT, latency and tokens/s across threads, cores, requests in flight,
    weight compression, KV-cache and inference precision."""
    from wb_core.api import generate_profile, plots, results

    if timeout is not None and timeout <= 0:
        _fail(f"--timeout must be a positive number of seconds; got {timeout:g}.")
    if min_top1 is not None and not 0 < min_top1 <= 1:
        _fail(f"--min-top1 takes a number above 0 and at most 1; got {min_top1:g}.")
    summary = generate_profile(model, db=db, study=study, text=text, requests=requests, warmup=warmup,
                               quality_guard=not no_quality_guard, min_top1=min_top1, progress=not quiet,
                               timeout_s=timeout, return_frame=False, **axes_given)
    df = results(summary.study, summary.db, "stored")
    if not quiet:
        echo(generation_table(df))
    if plot:
        plot.write_text(plots.generation_pareto(df).to_html(include_plotlyjs=True), encoding="utf-8")
        echo(f"Wrote the plot to {plot}.")
    report_summary(summary)


# The generation limits, shared by `wb generate-recommend`, `wb generate-export`, `wb recommend` and `wb export`.
MAX_TTFT = typer.Option(None, "--max-ttft-ms", help="Text generation: limit on the p99 time to first token.")
MAX_TPOT = typer.Option(None, "--max-tpot-ms", help="Text generation: limit on the p99 time per output token.")
MAX_LATENCY = typer.Option(None, "--max-latency-ms", help="Text generation: limit on the p99 request latency.")


def say_generation_recommendation(study: str, db, max_ttft_ms=None, max_tpot_ms=None, max_latency_ms=None,
                                  as_json: bool = False) -> dict:
    """Recommend a generation study's run and print it (text, or JSON); returns the recommendation."""
    from wb_core.api import recommend_generation

    rec = recommend_generation(study, db, max_ttft_ms=max_ttft_ms, max_tpot_ms=max_tpot_ms, max_latency_ms=max_latency_ms)
    if as_json:
        echo(json.dumps(rec, indent=2, default=str))
        return rec
    echo(rec["text"])
    for note in rec["notes"]:
        echo(note)
    return rec


def export_generation_study(study: str, db, out: Path, name: str, formats: list[str], run_key: str | None = None,
                            max_ttft_ms=None, max_tpot_ms=None, max_latency_ms=None) -> None:
    """Write the chosen generation run (the recommended one, or `run_key`) in each of `formats`."""
    from wb_core.api import export_generation, recommend_generation
    from wb_core.faces import generation_run

    if run_key:
        run = generation_run(study, run_key, db)
        echo(f"Exporting run {run['key']}.")
    else:
        rec = recommend_generation(study, db, max_ttft_ms=max_ttft_ms, max_tpot_ms=max_tpot_ms,
                                   max_latency_ms=max_latency_ms)
        run = rec["best"]
        echo(rec["text"])
    for fmt in formats:
        base = out if len(formats) == 1 else out / fmt
        for rel in export_generation(run, base, name, fmt=fmt):
            echo(f"Wrote {base / rel}")


@app.command("generate-recommend")
def generate_recommend(
    study: str = typer.Option(..., "--study", help="A text-generation study."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default: ./wb.db)."),
    max_ttft_ms: Optional[float] = MAX_TTFT,
    max_tpot_ms: Optional[float] = MAX_TPOT,
    max_latency_ms: Optional[float] = MAX_LATENCY,
    as_json: bool = typer.Option(False, "--json", help="Print the recommendation as JSON."),
):
    """The generation run with the most output tokens/s within the limits (quality-failed runs never)."""
    say_generation_recommendation(study, db, max_ttft_ms, max_tpot_ms, max_latency_ms, as_json)


@app.command("generate-export")
def generate_export(
    study: str = typer.Option(..., "--study", help="A text-generation study."),
    out: Path = typer.Option(..., "--out", help="Folder to write graph.pbtxt, config.json and deployment.yaml into."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default: ./wb.db)."),
    name: str = typer.Option("model", "--name", help="The servable's name in OpenVINO Model Server."),
    max_ttft_ms: Optional[float] = MAX_TTFT,
    max_tpot_ms: Optional[float] = MAX_TPOT,
    max_latency_ms: Optional[float] = MAX_LATENCY,
):
    """OpenVINO Model Server's LLM graph and config for the recommended generation run."""
    from wb_core.faces import check_output_folder

    check_output_folder(out)
    export_generation_study(study, db, out, name, ["ovms-llm"], max_ttft_ms=max_ttft_ms, max_tpot_ms=max_tpot_ms,
                            max_latency_ms=max_latency_ms)
