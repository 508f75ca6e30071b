"""`wb hw`, `demo-model`, `inspect`, `profile`, `results`, `studies`: measuring and reading results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from wb_core.cli.app import app, count, echo, number, report_summary, said
from wb_core.cli.app import fail as _fail
from wb_core.faces import field_help


@app.command()
def hw(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text.")):
    """Show the CPU: model, cores, caches, ISA flags and peak FLOP/s per precision."""
    from wb_core.api import describe_hardware, hardware_info

    h = hardware_info()
    echo(json.dumps({**h.to_dict(), "fingerprint": h.fingerprint}, indent=2) if as_json else describe_hardware(h))


@app.command("demo-model")
def demo_model(name: str = typer.Argument(..., help="lenet-digits, mobilenet-v2, text-encoder or text-generator"),
               out: Path = typer.Option(Path("."), "--out", help="Folder to write the model into.")):
    """Build (or take from the cache) a bundled demo model and write it to a folder."""
    from wb_core.faces import write_demo

    dest = write_demo(name, out)
    if (dest / "openvino_tokenizer.xml").exists():
        echo(f"Wrote {name} to {dest} (an OpenVINO GenAI folder: {dest / 'openvino_model.xml'} with its tokenizer and "
             f"detokenizer, prompts {dest / 'prompts.txt'}, the Hugging Face original in {dest / 'hf'}).")
    elif (dest / "model.xml").exists():
        echo(f"Wrote {name} to {dest} (OpenVINO IR {dest / 'model.xml'}, tokenizer {dest / 'tokenizer.json'}, "
                   f"sample text {dest / 'sample.txt'}).")
    else:
        echo(f"Wrote {name} to {dest} (SavedModel in {dest / 'saved_model'}, Keras file "
                   f"{dest / 'model.keras'}).")


@app.command()
def inspect(model: str = typer.Argument(..., help="Model path or demo name.")):
    """Show a model's format, inputs, outputs and family."""
    from wb_core.api import inspect_model

    for label, value in inspect_model(model).facts():
        echo(f"{label + ':':<12} {value}")


def with_axis_options(command=None, *, axes=None, spec_options: bool = True):
    """Give a command one option per sweep axis (and spec option) of the axes table, with its flag, default and
    help; the command receives them by SweepSpec field name in `**axes_given`. An axis a backend adds
    becomes an option here without a line of its own. `axes`: a function giving the axes instead (a
    pipeline study's inference side), each with its own default and help."""
    if command is None:
        return lambda c: with_axis_options(c, axes=axes, spec_options=spec_options)
    import inspect

    from wb_core.api import list_backends
    from wb_core.faces import SPEC_OPTIONS, sweep_axes

    sig = inspect.signature(command)
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    for a in (axes or sweep_axes)():
        if a.flag and a.generated_option:  # the others have options with other duties (--dynamic-size, --shape)
            words = field_help(a.spec) if axes is None else a.help.format(backends=", ".join(list_backends()))
            params.append(inspect.Parameter(a.spec, inspect.Parameter.KEYWORD_ONLY, annotation=str,
                                            default=typer.Option(a.text_default, a.flag, help=words)))
    for o in SPEC_OPTIONS if spec_options else ():
        flag = "--" + o.name.replace("_", "-")
        kind = bool if isinstance(o.default, bool) else str
        default = o.default if kind is bool else str(o.default)
        params.append(inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, annotation=kind,
                                        default=typer.Option(default, flag, help=field_help(o.name))))
    command.__signature__ = sig.replace(parameters=params)
    return command


@app.command()
@with_axis_options
def profile(
    model: str = typer.Argument(..., help="Model path (SavedModel dir, .keras, .onnx, .xml, .tflite, .pdmodel) or a "
                                "demo name."),
    find_max_rate: bool = typer.Option(False, "--find-max-rate",
                                       help="Search the highest rate whose p99 stays under --p99-ms."),
    p99_ms: Optional[float] = typer.Option(None, "--p99-ms", parser=number,
                                           help="p99 latency target (ms) for --find-max-rate and --search smart."),
    search: str = typer.Option("grid", "--search",
                               help="grid (every configuration) or smart (climbs to the best in far fewer runs)."),
    budget: Optional[int] = typer.Option(None, "--budget", parser=count, help="Most configurations to measure."),
    ci: Optional[str] = typer.Option(None, "--ci", help="Interval target, e.g. 3%: after the first rounds (at least "
                                     "3), add rounds to the leading configurations until each one's 95% throughput "
                                     "interval is within this share of its median, or --max-rounds are spent."),
    max_rounds: int = typer.Option(10, "--max-rounds", help="Most extra rounds --ci may add."),
    remeasure_busy: bool = typer.Option(False, "--remeasure-busy", help="Measure again the points stored as measured "
                                        "on a busy machine (others used their cores, or the hypervisor stole time)."),
    study: Optional[str] = typer.Option(None, "--study", help="Study name (default: the model's name)."),
    db: Optional[Path] = typer.Option(None, "--db", help="Results database (default: ./wb.db)."),
    max_time: float = typer.Option(10.0, "--max-time", help="Measuring time limit of one point, in seconds."),
    warmup: float = typer.Option(0.5, "--warmup", help="Warm-up seconds per point."),
    window: float = typer.Option(0.5, "--window", help="Length of one measuring window, in seconds."),
    tolerance: float = typer.Option(0.05, "--tolerance", help="Windows agree when their spread is under this."),
    dynamic_size: Optional[str] = typer.Option(None, "--dynamic-size", help="Size of dynamic non-batch dimensions "
                                               "(the sequence length), stored in column seq_len; several, e.g. "
                                               "32,128,384, are a sweep axis."),
    shape: list[str] = typer.Option([], "--shape", help="Input shape, NAME=1x128 (repeatable); several, e.g. "
                                    "image=1x3x224x224,1x3x320x320, are a sweep axis (column shape)."),
    int_range: list[str] = typer.Option([], "--int-range", help="Integer input range NAME=LOW:HIGH, or LOW:HIGH for "
                                        "every integer input but masks and token type ids (repeatable, merged). "
                                        "Default: masks all ones, token type ids zeros, token ids within the "
                                        "model's vocabulary."),
    batch_axis: list[str] = typer.Option([], "--batch-axis", help="The dimension holding an input's batch where it "
                                         "is not the first, NAME=AXIS or NAME=LAYOUT with N for the batch, e.g. "
                                         "state=1 or state=CNH for a recurrent state [layers, batch, hidden] "
                                         "(repeatable). Default: the model's own layout."),
    text: Optional[Path] = typer.Option(None, "--text", help="A text file (or - for standard input, or a pipe such "
                                        "as <(command)), one sample per line, tokenized with "
                                        "--tokenizer into the model's inputs (input_ids, attention_mask, "
                                        "token_type_ids) at each --dynamic-size: the measured inputs and the "
                                        "calibration and accuracy data."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="A local tokenizer.json for --text, or a "
                                             "folder holding one."),
    spec_file: Optional[Path] = typer.Option(None, "--spec", help="Sweep spec YAML (replaces the sweep flags)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds a silent worker is given before it is killed."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or table."),
    data: Optional[str] = typer.Option(None, "--data", help="Calibration/validation data: .npz (x, optional y; or "
                                       "one array per model input named after it), a folder with one subfolder "
                                       "of images per class, or demo:NAME."),
    metric: str = typer.Option("auto", "--metric", help="Accuracy metric: auto, top1, top5, mse, cosine, max_abs, "
                               "or a function of yours as package.module:function (outputs, labels -> a number, "
                               "higher is better; called per batch). Without labels in the data: against the FP32 "
                               "outputs (auto: cosine). The guard also checks every output by its kind."),
    output: Optional[str] = typer.Option(None, "--output", help="The model output accuracy reads, by name "
                                         "(default: the first), e.g. sentence_embedding."),
    decode: Optional[str] = typer.Option(None, "--decode", help="Your decoding of that output as "
                                         "package.module:function (a batch of outputs -> one item per sample: a "
                                         "label, a sequence, a string): the guard checks that each variant "
                                         "decodes to FP32's items."),
    data_input: list[str] = typer.Option([], "--data-input", help="Map a model input to an array of the data, "
                                         "INPUT=ARRAY (repeatable); by default arrays are named after the inputs."),
    calib_size: int = typer.Option(300, "--calib-size", parser=count, help="Calibration samples for INT8 quantization."),
    max_accuracy_drop: Optional[float] = typer.Option(None, "--max-accuracy-drop",
                                                      help="Quantize with NNCF accuracy control, keeping the "
                                                           "absolute metric drop within this bound."),
    accuracy_guard: str = typer.Option("auto", "--accuracy-guard", help="The largest accuracy drop an INT8 or BF16 "
                                       "variant may show against FP32 before it is marked 'accuracy failed' and "
                                       "never recommended: auto (cosine to FP32 at least 0.99, top-1 within 1 "
                                       "point, and each output's own checks: top-1 agreement, detections kept, "
                                       "decoded sequences), a number such as 0.02 (the accuracy metric's drop), "
                                       "or off."),
    memory_budget: Optional[float] = typer.Option(None, "--memory-budget", help="Megabytes a worker measuring "
                                                  "accuracy may hold (its runtime and model, and a batch of outputs "
                                                  "with FP32's beside them); the batch shrinks to fit. Default: "
                                                  "half the free memory."),
    int8_recipe: str = typer.Option("auto", "--int8-recipe", help="The first INT8 recipe to try: auto (the model "
                                    "family's: transformer or cnn), default, mixed-preset, transformer, "
                                    "transformer-sq50, accuracy-control, mixed-precision."),
    fallback_budget: float = typer.Option(600.0, "--fallback-budget", help="Seconds the INT8 fallback recipes may "
                                          "take when a recipe misses the accuracy guard."),
    image_size: Optional[str] = typer.Option(None, "--image-size", help="Resize folder images to HxW (default: the "
                                             "model's input size)."),
    image_scale: str = typer.Option("unit", "--image-scale", help="Folder image pixels: unit (0..1), raw (0..255), "
                                    "symmetric (-1..1)."),
    accuracy: bool = typer.Option(True, "--accuracy/--no-accuracy", help="Measure each variant's accuracy when the "
                                  "data has labels."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Dask scheduler address (tcp://HOST:8786): run "
                                          "the study on its hosts, once per hardware type (docs/fleet.md)."),
    hosts: Optional[str] = typer.Option(None, "--hosts", help="With --cluster: only these hosts, e.g. host-a,host-b."),
    ship_model: bool = typer.Option(False, "--ship-model", help="With --cluster: send the model's files to the "
                                    "hosts instead of relying on a shared path."),
    **axes_given,
):
    """Sweep a model over the given settings; every point is stored as soon as it is measured."""
    from wb_core.api import InputOptions, MeasureSettings, RunOptions, SweepSpec, resolve_model
    from wb_core.api import profile as run_profile
    from wb_core.api import results as study_results  # `results` here is the command below
    from wb_core.faces import (
        check_max_rounds,
        check_timeout,
        default_db,
        default_study_name,
        load_spec_file,
        parse_ci_target,
        parse_seq_lens,
        parse_shape_axis,
    )

    single_shapes, shape_axis = parse_shape_axis(shape)
    spec = SweepSpec(shapes=shape_axis, **axes_given)
    settings = MeasureSettings(max_time_s=max_time, warmup_s=warmup, window_s=window, tolerance=tolerance)
    seq_lens = parse_seq_lens(dynamic_size)
    if seq_lens != [None]:  # one size or several: the seq_len column (several are a sweep axis)
        spec.seq_lens = seq_lens
    inputs = InputOptions.parse(dynamic_size=seq_lens[0] if len(seq_lens) == 1 else None, shapes=single_shapes,
                                int_range=int_range, batch_axes=batch_axis)
    if spec_file:
        spec, file_settings, file_inputs = load_spec_file(spec_file)
        settings, inputs = file_settings or settings, file_inputs or inputs
    if text is not None or tokenizer is not None:
        import dataclasses

        inputs = dataclasses.replace(inputs, text=str(text) if text else inputs.text,
                                     tokenizer=str(tokenizer) if tokenizer else inputs.tokenizer)
    check_timeout(timeout)
    ci_target = parse_ci_target(ci)
    check_max_rounds(max_rounds)  # even unused: a budget of -1 rounds is a mistake to say at once
    path = resolve_model(model)
    db = db or default_db()
    study = study or default_study_name(path)
    if (hosts or ship_model) and not cluster:
        _fail("--hosts and --ship-model need --cluster ADDRESS.")
    if find_max_rate:
        if cluster:
            _fail("--find-max-rate runs on this machine; leave out --cluster.")
        _find_max_rate(path, spec, p99_ms, db, study, settings, inputs)
        return
    if cluster and (search != "grid" or budget is not None or p99_ms is not None):
        _fail("The smart search runs on this machine; leave out --cluster, or search with a grid.")
    prec = precision_options_from_cli(data, metric, calib_size, max_accuracy_drop, image_size, image_scale, accuracy,
                                      output, data_input, accuracy_guard, int8_recipe, fallback_budget,
                                      memory_budget, decode)
    run = RunOptions(search=search, p99_ms=p99_ms, budget=budget, cluster=cluster, hosts=hosts, ship_model=ship_model,
                     timeout_s=timeout, remeasure_busy=remeasure_busy, ci_target=ci_target, max_rounds=max_rounds)
    summary = run_profile(path, spec, settings=settings, inputs=inputs, precision_options=prec, run=run, db=db,
                          study=study, progress=not quiet, return_frame=False)
    if not quiet:
        df = study_results(study, db)
        _print_table(df, df.attrs["notes"])
    report_summary(summary)


def _find_max_rate(path, spec, p99_ms, db, study, settings, inputs):
    from wb_core.api import find_max_rate

    if p99_ms is None:
        _fail("--find-max-rate needs a target, for example --p99-ms 10.")
    for cfg in spec.expand():
        if cfg.instances > 1 or cfg.rate:
            continue
        r = find_max_rate(path, cfg, p99_ms, db=db, study=study, settings=settings, inputs=inputs)
        best = r.get("best")
        if best:
            echo(f"{cfg.label()}: highest rate with p99 under {p99_ms:g} ms is {best['rate']:.1f} requests/s "
                       f"(measured p99 {best['p99_ms']:.3f} ms; closed-loop capacity {r['closed_loop_rate']:.1f}/s).")
        else:
            echo(f"{cfg.label()}: no rate tried kept p99 under {p99_ms:g} ms "
                       f"(closed-loop capacity {r['closed_loop_rate']:.1f}/s).")


@app.command()
def results(study: str = typer.Option(..., "--study"), db: Optional[Path] = typer.Option(None, "--db"),
            fmt: str = typer.Option("table", "--format", help="table, csv or json."),
            probes: bool = typer.Option(False, "--probes", help="Print the arrival rates max-rate searches tried "
                                                                "(each names the run it probed) instead of the runs."),
            outputs: bool = typer.Option(False, "--outputs", help="Print the accuracy guard's figures per output of "
                                         "each INT8/BF16 run (what each output was read as, its figures against "
                                         "FP32, the checks it failed) instead of the runs.")):
    """Print a study's results (its runs; with --probes, its max-rate probes; with --outputs, the guard's
    figures per output)."""
    from wb_core.api import results
    from wb_core.faces import default_db, is_generation_study, printable

    if fmt not in ("table", "csv", "json"):
        _fail(f"Unknown format '{fmt}'; choose from table, csv, json.")
    if probes and outputs:
        _fail("Choose --probes or --outputs, not both.")
    if outputs:
        df = results(study, db or default_db(), "outputs")
        if fmt == "csv":
            echo(df.to_csv(index=False), nl=False)
        elif fmt == "json":
            echo(df.to_json(orient="records", indent=2))
        elif df.empty:
            echo("(no INT8 or BF16 run has per-output figures: give data to measure accuracy)")
        else:
            for key, g in df.groupby("key", sort=False):
                first = g.iloc[0]
                echo(f"{first['run']} (key {key}): accuracy guard {first['accuracy_guard'] or '-'}")
                for _, o in g.iterrows():
                    echo(f"  '{printable(o['output'])}' read as {o['read_as']} ({printable(o['why'])}): "
                         f"{o['figures']}")
        return
    df = results(study, db or default_db(), "probes" if probes else "runs")
    notes = [] if probes else list(df.attrs["notes"])
    if fmt == "csv":
        echo(df.to_csv(index=False), nl=False)
    elif fmt == "json":
        echo(df.to_json(orient="records", indent=2))
    elif not probes and is_generation_study(study, db or default_db()):
        from wb_core.cli.generation import generation_table

        echo(generation_table(df))  # its own figures: TTFT, TPOT, tokens/s and quality, by weight format
        for note in notes:
            echo(f"note: {said(note)}")
    else:
        _print_table(df, notes)


@app.command()
def studies(db: Optional[Path] = typer.Option(None, "--db")):
    """List the studies in a database."""
    from wb_core.api import studies as list_studies
    from wb_core.faces import printable

    breaks = str.maketrans({c: " " for c in "\n\r\t\v\f\u2028\u2029"})  # one study, one line
    for row in list_studies(db):
        echo(f"{printable(row['name']).translate(breaks):24} {row['runs'] or 0:4} runs ({row['ok'] or 0} ok, "
                   f"{row['failed'] or 0} failed)  {printable(row['model_path'])}")


# The results table: every setting a comparison shows (the axes' "compare" role), then these.
MEASURED_COLUMNS = ["saturated", "latency_ms_p50", "latency_ms_p99",
                 "latency_ms_p99_ci_low", "latency_ms_p99_ci_high", "throughput", "throughput_ci_low",
                 "throughput_ci_high", "rounds", "tied_with_best", "vs_fp32", "cpu_util", "other_cpu", "steal_pct",
                 "busy", "rss_mb",
                 "executed_precision", "variant", "quant_recipe", "accuracy", "accuracy_metric", "accuracy_drop",
                 "accuracy_guard", "status", "error", "host", "probe_of"]


def precision_options_from_cli(data, metric, calib_size, max_accuracy_drop, image_size, image_scale, accuracy,
                               output=None, data_input=(), accuracy_guard="auto", int8_recipe="auto",
                               fallback_budget=600.0, memory_budget=None, decode=None):
    from wb_core.api import ImageOptions, PrecisionOptions

    mapping = {}
    for item in data_input or ():
        name, eq, array = item.partition("=")
        if not eq or not name or not array:
            _fail(f"--data-input '{item}' must look like INPUT=ARRAY.")
        mapping[name] = array
    return PrecisionOptions(data=data, metric=metric, subset_size=calib_size, max_accuracy_drop=max_accuracy_drop,
                            image=ImageOptions(size=ImageOptions.parse_size(image_size), scale=image_scale),
                            accuracy=accuracy, output=output, input_map=mapping, guard=accuracy_guard,
                            int8_recipe=int8_recipe, fallback_budget_s=fallback_budget,
                            memory_budget_mb=memory_budget, decode=decode)


def _print_table(df, notes=()) -> None:
    if df.empty:
        echo("(no runs)")
        return
    from wb_core.faces import PRECISIONS

    if "vs_fp32" in df and not (df["precision"] != next(p.name for p in PRECISIONS if p.baseline)).any():
        df = df.drop(columns="vs_fp32")  # only fp32: nothing to compare
    from wb_core.faces import with_role

    cols = [c for c in (*with_role("compare"), *MEASURED_COLUMNS) if c in df.columns and df[c].notna().any()]
    view = df[cols].copy()
    for c in ("latency_ms_p50", "latency_ms_p99", "latency_ms_p99_ci_low", "latency_ms_p99_ci_high", "throughput",
              "throughput_ci_low", "throughput_ci_high", "cpu_util", "other_cpu", "steal_pct", "rss_mb"):
        if c in view:
            view[c] = view[c].astype(float).round(2 if c.startswith(("latency", "cpu", "other", "steal")) else 1)
    if "busy" in view:
        view["busy"] = view["busy"].map(lambda b: "busy" if b is True or b == 1 else ("-" if b is None or b != b
                                                                                      else "no"))
    for c in ("accuracy", "accuracy_drop"):
        if c in view:
            view[c] = view[c].astype(float).round(4)
    if "vs_fp32" in view:
        view["vs_fp32"] = view["vs_fp32"].astype(float).map(lambda r: f"{r:.2f}x" if r == r else None)
    if "error" in view:  # why a point was skipped or failed, short enough for a table row
        view["error"] = view["error"].map(lambda e: e if not isinstance(e, str) or len(e) <= 80 else e[:77] + "...")
    view = view.astype(object).where(view.notna(), "-")
    echo(view.to_string(index=False))
    for note in notes:
        echo(f"note: {said(note)}")
