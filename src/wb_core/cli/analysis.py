"""`wb recommend`, `wb report`, `wb layers` and `wb export`: deciding and deploying from a study."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wb_core.api import FORMATS
from wb_core.cli.app import app, echo, number, said
from wb_core.cli.app import fail as _fail
from wb_core.cli.generation import MAX_LATENCY, MAX_TPOT, MAX_TTFT, export_generation_study, say_generation_recommendation

OBJECTIVE_HELP = "throughput, latency or throughput_per_core."


def _constraints(max_p99_ms, max_accuracy_drop, max_memory_mb, max_cores):
    from wb_core.api import Constraints

    return Constraints(max_p99_ms=max_p99_ms, max_accuracy_drop=max_accuracy_drop, max_memory_mb=max_memory_mb,
                       max_cores=max_cores)


def _db(db: Optional[Path]) -> Path:
    from wb_core.faces import default_db

    return db or default_db()


# Shared options, as typer wants them spelled out per command.
MAX_P99 = typer.Option(None, "--max-p99-ms", parser=number, help="Highest acceptable p99 latency, in ms.")
MAX_DROP = typer.Option(None, "--max-accuracy-drop", help="Highest acceptable accuracy drop, a fraction (0.01 = 1 point).")
MAX_MEM = typer.Option(None, "--max-memory-mb", help="Highest acceptable peak memory, in MB.")
MAX_CORES = typer.Option(None, "--max-cores", help="Most cores the run may use.")
OBJECTIVE = typer.Option("throughput", "--objective", help=OBJECTIVE_HELP)


MAX_TOP = 10_000  # rows a terminal list can show; more says nothing


def _check_top(top: int, what: str) -> None:
    if not 0 <= top <= MAX_TOP:
        _fail(f"--top (the {what} to list) must be a whole number from 0 to {MAX_TOP:,}; got {top}.")


GENERATION_LIMITS = "--max-ttft-ms, --max-tpot-ms or --max-latency-ms"


def _generation(study, db, model_only: dict, max_ttft_ms, max_tpot_ms, max_latency_ms) -> bool:
    """Whether `study` measured text generation; a limit of the other kind of study is refused in one sentence."""
    from wb_core.api import ConfigError
    from wb_core.faces import is_generation_study

    generation = is_generation_study(study, _db(db))
    given = [flag for flag, v in model_only.items() if v is not None]
    if generation and given:
        raise ConfigError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to a model study; study "
                          f"'{study}' measured text generation, whose limits are {GENERATION_LIMITS}.")
    if not generation and any(v is not None for v in (max_ttft_ms, max_tpot_ms, max_latency_ms)):
        raise ConfigError(f"{GENERATION_LIMITS} limit a text-generation study; study '{study}' measured a model, "
                          "whose latency limit is --max-p99-ms.")
    return generation


@app.command()
def recommend(study: str = typer.Option(..., "--study"), db: Optional[Path] = typer.Option(None, "--db"),
              max_p99_ms: Optional[float] = MAX_P99, max_accuracy_drop: Optional[float] = MAX_DROP,
              max_memory_mb: Optional[float] = MAX_MEM, max_cores: Optional[int] = MAX_CORES,
              objective: str = OBJECTIVE, top: int = typer.Option(3, "--top", help="Runners-up to show."),
              seq_mix: Optional[str] = typer.Option(None, "--seq-mix", help="Weigh each configuration over a mix "
                                                    "of sequence lengths, LENGTH:WEIGHT,..., e.g. 128:0.8,384:0.2 "
                                                    "(a study swept with --dynamic-size)."),
              seq_len: Optional[int] = typer.Option(None, "--seq-len", help="Recommend for one sequence length "
                                                    "(default: one recommendation per length swept)."),
              layers: bool = typer.Option(False, "--layers", help="Say why a lower precision ran slower than FP32 "
                                          "from the layer profiles of both runs, profiling those not stored yet "
                                          "(OpenVINO runs; a few seconds each)."),
              max_ttft_ms: Optional[float] = MAX_TTFT, max_tpot_ms: Optional[float] = MAX_TPOT,
              max_latency_ms: Optional[float] = MAX_LATENCY):
    """Pick the best run under constraints and say why it won (a text-generation study: the most output
    tokens/s within the TTFT, TPOT and latency limits)."""
    from wb_core.api import precision_losses, results, study_info
    from wb_core.api import recommend as _recommend
    from wb_core.faces import run_name

    _check_top(top, "runners-up")
    model_only = {"--max-p99-ms": max_p99_ms, "--max-accuracy-drop": max_accuracy_drop, "--max-memory-mb": max_memory_mb,
                  "--max-cores": max_cores, "--seq-mix": seq_mix, "--seq-len": seq_len, "--layers": layers or None,
                  "--objective": None if objective == "throughput" else objective}
    if _generation(study, db, model_only, max_ttft_ms, max_tpot_ms, max_latency_ms):
        say_generation_recommendation(study, _db(db), max_ttft_ms, max_tpot_ms, max_latency_ms)
        return

    info = study_info(study, _db(db))
    df = results(study, _db(db), "efficiency")
    rec = _recommend(df, _constraints(max_p99_ms, max_accuracy_drop, max_memory_mb, max_cores), objective,
                     runners_up=top, hardware=info.get("hardware"), seq_mix=seq_mix, seq_len=seq_len)
    for n, per in rec.per_length.items():
        echo(f"Best at sequence length {n}: {run_name(per.best)}  (key {per.key})")
    if seq_mix:
        echo(f"Best for the mix: {run_name(rec.best)}  (keys {rec.best['mix_keys']})")
    else:
        echo(f"Best: {run_name(rec.best)}  (key {rec.key})")
    echo(said(rec.reason))
    for i, r in enumerate(rec.runners_up, start=2):
        echo(f"  {i}. {run_name(r)}: p99 {r['latency_ms_p99']:.3g} ms, {r['throughput']:,.0f} samples/s "
                   f"(key {r['key']})")
    for note in precision_losses(study, _db(db), measure=layers):
        echo(f"note: {said(note)}")


@app.command()
def report(study: str = typer.Option(..., "--study"), out: Path = typer.Option(Path("report.html"), "--out"),
           db: Optional[Path] = typer.Option(None, "--db"),
           max_p99_ms: Optional[float] = MAX_P99, max_accuracy_drop: Optional[float] = MAX_DROP,
           max_memory_mb: Optional[float] = MAX_MEM, max_cores: Optional[int] = MAX_CORES,
           objective: str = OBJECTIVE,
           layers: bool = typer.Option(False, "--layers", help="Add the per-layer profile of the recommended run, "
                                                             "and of a lower precision slower than FP32 with its "
                                                             "FP32 twin (OpenVINO runs; takes a few seconds).")):
    """Write one self-contained HTML report (works offline): hardware, model, recommendation, plots, runs."""
    from wb_core.api import write_report
    from wb_core.faces import check_objective, check_output_file

    check_output_file(out)
    constraints = _constraints(max_p99_ms, max_accuracy_drop, max_memory_mb, max_cores)
    profile = None
    if layers:
        from wb_core.api import precision_losses

        profile = _recommended_layers(_db(db), study, constraints, check_objective(objective))
        precision_losses(study, _db(db), measure=True)  # stored, so the report says why a precision lost
    path = write_report(_db(db), study, out, constraints=constraints, objective=objective, layer_profile=profile)
    echo(f"Wrote {path}")


@app.command()
def plot(study: str = typer.Option(..., "--study"), out: Path = typer.Option(Path("plots.html"), "--out"),
         db: Optional[Path] = typer.Option(None, "--db")):
    """Write a study's figures to one HTML file: latency vs throughput, batch, threads, cores, and
    sequence length when the study swept it."""
    from wb_core.api import plots, results
    from wb_core.faces import check_output_file, write_output_file

    check_output_file(out)
    df = results(study, _db(db), "stored")
    if df.empty:
        _fail(f"Study '{study}' has no runs to plot.")
    figs = plots.study_figures(df)
    html = "".join(f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figs.values()))
    write_output_file(out, "<html><head><meta charset='utf-8'></head><body>" + html + "</body></html>")
    echo(f"Wrote {len(figs)} figures ({', '.join(figs)}) to {out}.")


def _recommended_layers(db, study, constraints, objective):
    """The per-layer profile of the run the report recommends, or None (said on stderr) when there is
    no such run, or it ran on a backend without per-layer profiles: never another run's."""
    from wb_core.api import NoRunMeetsConstraints, layer_profile, results, study_info
    from wb_core.api import recommend as _recommend
    from wb_core.faces import backend_title, layer_profiling_backends

    info = study_info(study, db)
    try:
        rec = _recommend(results(study, db, "efficiency"), constraints, objective, hardware=info.get("hardware"))
    except NoRunMeetsConstraints:
        typer.echo("No run meets the limits, so the report recommends none and has no per-layer profile.", err=True)
        return None
    backend = rec.best.get("backend")
    if backend not in layer_profiling_backends():
        typer.echo(f"The recommended run ({rec.key}) ran on {backend_title(backend)}, which gives no per-layer "
                   f"counters ({', '.join(map(backend_title, layer_profiling_backends()))} do), so the report has no "
                   f"per-layer profile.", err=True)
        return None
    return layer_profile(study, rec.key, db)


@app.command()
def layers(study: str = typer.Option(..., "--study"), run: str = typer.Option(..., "--run", help="Run key (or a "
                                                                                                   "unique prefix)."),
           db: Optional[Path] = typer.Option(None, "--db"),
           iterations: int = typer.Option(100, "--iterations", help="Inferences to average the counters over."),
           top: int = typer.Option(15, "--top", help="Slowest layers to list."),
           out: Optional[Path] = typer.Option(None, "--out", help="Also write the bar charts to this HTML file.")):
    """Per-layer profile of one run: time per layer and per layer type, and the precision each ran in."""
    from wb_core.api import layer_profile
    from wb_core.faces import check_output_file

    _check_top(top, "layers")
    if out:
        check_output_file(out)
    profile = layer_profile(study, run, _db(db), iterations=iterations)
    echo(f"{profile.label} (key {profile.key}), mean of {profile.iterations} inferences, "
               f"{profile.total_ms:.4f} ms of layer time per inference")
    echo("\nBy layer type:")
    t = profile.by_type().copy()
    t["time_ms"] = t["time_ms"].map(lambda v: f"{v:.4f}")
    t["share"] = t["share"].map(lambda v: f"{v:.1%}")
    echo(t.to_string(index=False))
    if top:  # --top 0: the layer types only
        echo(f"\nSlowest {min(top, len(profile.layers))} layers:")
        v = profile.top(top)[["name", "type", "exec_type", "precision", "time_ms", "share"]].copy()
        v["time_ms"] = v["time_ms"].map(lambda x: f"{x:.4f}")
        v["share"] = v["share"].map(lambda x: f"{x:.1%}")
        echo(v.to_string(index=False))
    if out:
        from wb_core.api import plots
        from wb_core.faces import write_output_file

        bars, types = plots.layer_bars(profile, top), plots.layer_type_bars(profile)
        html = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Layers</title></head><body>"
                + bars.to_html(full_html=False, include_plotlyjs=True)
                + types.to_html(full_html=False, include_plotlyjs=False) + "</body></html>")
        write_output_file(out, html)
        echo(f"\nWrote {out}")


@app.command()
def export(study: str = typer.Option(..., "--study"),
           best: bool = typer.Option(False, "--best", help="Export the recommended run (with the constraints)."),
           run: Optional[str] = typer.Option(None, "--run", help="Export this run key (or a unique prefix)."),
           fmt: str = typer.Option("yaml", "--format", help=f"{', '.join(FORMATS)}, or all "
                                                           "(comma-separated for several)."),
           out: Path = typer.Option(Path("deploy"), "--out", help="Folder to write into."),
           name: Optional[str] = typer.Option(None, "--name", help="Model name in every format (default: from the "
                                                                  "model's path, e.g. a SavedModel's parent folder)."),
           bundle: bool = typer.Option(False, "--bundle", help="Also copy the model files the run measured into "
                                                               "each format's repository layout."),
           db: Optional[Path] = typer.Option(None, "--db"),
           max_p99_ms: Optional[float] = MAX_P99, max_accuracy_drop: Optional[float] = MAX_DROP,
           max_memory_mb: Optional[float] = MAX_MEM, max_cores: Optional[int] = MAX_CORES,
           objective: str = OBJECTIVE,
           target_rate: Optional[float] = typer.Option(None, "--target-rate", parser=number,
                                                       help="Requests/s to plan capacity for, e.g. 1000, 1e3 or 1k "
                                                            "(needs --max-p99-ms), "
                                                            "from the exported run's own measurements."),
           machine_cores: Optional[int] = typer.Option(None, "--machine-cores",
                                                       help="Cores of a serving machine, for the capacity plan."),
           host_type: Optional[str] = typer.Option(None, "--host-type",
                                                   help="Fleet study: choose among this hardware type's runs (a "
                                                        "fingerprint, prefix or host name; see `wb compare-hosts`)."),
           max_ttft_ms: Optional[float] = MAX_TTFT, max_tpot_ms: Optional[float] = MAX_TPOT,
           max_latency_ms: Optional[float] = MAX_LATENCY):
    """Write serving configs for a run: deployment YAML, OVMS, Triton, TF Serving or KServe (a
    text-generation study: OpenVINO Model Server's LLM graph, ovms-llm)."""
    from wb_core.api import ConfigError, deployment_for_study
    from wb_core.api import export as _export
    from wb_core.faces import check_output_folder, parse_formats, parse_generation_formats, with_capacity

    model_only = {"--max-p99-ms": max_p99_ms, "--max-accuracy-drop": max_accuracy_drop, "--max-memory-mb": max_memory_mb,
                  "--max-cores": max_cores, "--target-rate": target_rate, "--machine-cores": machine_cores,
                  "--host-type": host_type, "--objective": None if objective == "throughput" else objective}
    generation = _generation(study, db, model_only, max_ttft_ms, max_tpot_ms, max_latency_ms)
    # an unknown format, or one of the other kind of study, fails before any work
    names = parse_generation_formats(fmt) if generation else parse_formats(fmt)
    check_output_folder(out)
    if best == bool(run):
        raise ConfigError("Choose what to export: --best (the recommended run) or --run KEY, not both or neither.")
    if generation:
        if run and any(v is not None for v in (max_ttft_ms, max_tpot_ms, max_latency_ms)):
            raise ConfigError(f"Limits choose a run with --best; with --run KEY leave out {GENERATION_LIMITS}.")
        export_generation_study(study, _db(db), out, name or "model", names, run_key=run, max_ttft_ms=max_ttft_ms,
                                max_tpot_ms=max_tpot_ms, max_latency_ms=max_latency_ms)
        return
    if target_rate is not None and max_p99_ms is None:
        raise ConfigError("--target-rate needs a latency target: add --max-p99-ms.")
    # With --run, --max-p99-ms is only the capacity plan's latency target (it chooses nothing).
    choosing_p99 = None if (run and target_rate is not None) else max_p99_ms
    constraints = _constraints(choosing_p99, max_accuracy_drop, max_memory_mb, max_cores)
    if run and not constraints.is_empty():
        raise ConfigError("Constraints choose a run with --best; with --run KEY leave them out (--max-p99-ms is "
                          "allowed as the latency target of --target-rate).")
    dep = deployment_for_study(_db(db), study, run_key=run, constraints=constraints, objective=objective,
                               host_type=host_type, name=name)
    if target_rate is not None:
        with_capacity(dep, _db(db), study, target_rate, max_p99_ms, machine_cores)
    results = _export(dep, fmt, out, bundle=bundle)  # as given: under `all` a server that cannot run it is left out
    echo(f"Exported run {dep.measurement.run_key} ({dep.backend} {dep.precision}, batch {dep.batch_size}) "
               f"to {out}:")
    for fmt_name, res in results.items():
        base = out if len(results) == 1 else out / fmt_name
        for rel in list(res.files) + res.model_files:
            echo(f"  {base / rel}")
        for note in res.notes:
            echo(f"    note ({fmt_name}): {said(note)}")


@app.command("serve-check")
def serve_check(study: str = typer.Option(..., "--study"),
                run: str = typer.Option(..., "--run", help="The run to serve (a key or unique prefix)."),
                db: Optional[Path] = typer.Option(None, "--db"),
                max_time: Optional[float] = typer.Option(None, "--max-time", help="Measuring time limit in seconds "
                                                                                  "(default: the study's)."),
                port: Optional[int] = typer.Option(None, "--port", help="HTTP port of the server (gRPC is the next "
                                                                        "one); default: free loopback ports."),
                tritonserver: Optional[Path] = typer.Option(None, "--tritonserver",
                                                            help="The tritonserver binary (default: WB_TRITONSERVER, "
                                                                 "PATH, or the one nvidia-pytriton installs)."),
                out: Optional[Path] = typer.Option(None, "--out", help="Keep the model repository and server log "
                                                                       "here (default: a temporary folder)."),
                as_json: bool = typer.Option(False, "--json")):
    """Serve a run with a real Triton server and measure it: served vs predicted throughput and latency."""
    import json

    from wb_core.api import serve_check as _serve_check

    result = _serve_check(study, run, _db(db), max_time=max_time, port=port, tritonserver=tritonserver, out=out)
    echo(json.dumps(result.to_dict(), indent=2, default=str) if as_json else result.describe())


@app.command()
def confirm(study: str = typer.Option(..., "--study"), db: Optional[Path] = typer.Option(None, "--db"),
            rounds: int = typer.Option(5, "--rounds", help="Interleaved rounds, each a fresh worker per configuration."),
            max_p99_ms: Optional[float] = MAX_P99, max_accuracy_drop: Optional[float] = MAX_DROP,
            max_memory_mb: Optional[float] = MAX_MEM, max_cores: Optional[int] = MAX_CORES,
            objective: str = OBJECTIVE,
            allow_unmeasured_accuracy: bool = typer.Option(False, "--allow-unmeasured-accuracy",
                                                           help="Let a bf16/int8 variant of unmeasured accuracy be "
                                                                "recommended."),
            model: Optional[Path] = typer.Option(None, "--model", help="The model file, when it moved since the "
                                                 "study (it must be the same model)."),
            seq_len: Optional[int] = typer.Option(None, "--seq-len", help="Confirm the pick for this sequence "
                                                  "length (default: the longest swept)."),
            design: str = typer.Option("auto", "--design", help="auto or paired: the pick side by side in one "
                                       "worker with every configuration that can share it, the rest in fresh "
                                       "rounds; rounds: fresh rounds for all."),
            paired_time: Optional[str] = typer.Option(None, "--time", help="Longest the side-by-side comparison "
                                                      "measures, e.g. 30s (default: what the rounds would take, "
                                                      "at most 30 s)."),
            margin: Optional[float] = typer.Option(None, "--margin", help="Equivalence band of the stopping rule, "
                                                   "as a fraction (0.03: +-3%).")):
    """Measure the recommendation, its runner-up and the runtime's real defaults again (side by side in
    one worker where they can share one, else in interleaved fresh rounds), with the study's data,
    inputs and variant files, and say what tuning is worth, with its 95% interval and the stopping
    rule's answer (difference, equivalent or undecided): what the precision variant buys and what
    tuning buys on top."""
    from wb_core.api import confirm as _confirm
    from wb_core.faces import parse_time, run_name

    out = _confirm(study, _db(db), rounds=rounds, objective=objective, allow_unmeasured_accuracy=allow_unmeasured_accuracy,
                   constraints=_constraints(max_p99_ms, max_accuracy_drop, max_memory_mb, max_cores), progress=True,
                   model=model, seq_len=seq_len, design=design,
                   max_s=parse_time(paired_time) if paired_time else None, margin=margin)
    rows = [("tuned", out["tuned"])] + list(out["defaults"].items()) + [
        ("same variant, THROUGHPUT hint", out.get("same_variant_hint"))]
    for label, r in rows:
        if r is None:
            continue
        lo, hi = r.get("throughput_ci_low"), r.get("throughput_ci_high")
        iv = f" (95% CI {lo:,.1f}-{hi:,.1f})" if lo is not None and hi is not None and lo == lo else ""
        ran = r.get("executed_precision")
        ran = f", ran {ran}" if isinstance(ran, str) and ran else ""
        req = r.get("requests_in_flight")
        req = f", {int(req)} requests" if isinstance(req, (int, float)) and req == req and req else ""
        echo(f"  {label}: {run_name(r)}: {r['throughput']:,.1f} samples/s{iv}, p99 {r['latency_ms_p99']:.3g} ms"
                   f"{ran}{req}")
    for what, d in (out.get("decisions") or {}).items():
        echo(f"  {what.replace('_', ' ')}: {d.outcome} ({d.ratio.percent()}, band +-{100 * d.margin:g}%)")
    echo(out["verdict"])
    if out.get("recommended") is not None:
        echo(f"Recommended: {run_name(out['recommended'])} (key {out['recommended']['key']}, "
                   f"study {out['study']})")
