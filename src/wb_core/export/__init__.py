"""Export a measured run as a deployment: the workbench's YAML, OVMS, Triton, TF Serving or KServe.

Every format renders from one `DeploymentConfig` (see `deployment.py`); each lives in its own
module with `FORMAT`, `DESCRIPTION` and `render(dep) -> ExportResult`.
"""

from __future__ import annotations

from pathlib import Path

from wb_core.errors import ConfigError, WorkbenchError, article, setting
from wb_core.export.common import ExportResult
from wb_core.export.deployment import DeploymentConfig, load_schema, validate
from wb_core.export.formats import EXPORTERS, FORMATS, parse_formats, render


def export(dep: DeploymentConfig, formats: str | list[str], out: str | Path, bundle: bool = False
           ) -> dict[str, ExportResult]:
    """Write the files of each format under `out` (one format: straight into it; several: a folder each).

    `bundle` also copies the model files into each format's repository layout (see `bundle.py`);
    what each format's result then holds is listed in its `files` (text) and `model_files`.
    """
    from wb_core.errors import check_kind
    from wb_core.export.bundle import write_model_files
    from wb_core.paths import check_output_file, check_output_folder

    check_kind(dep, DeploymentConfig, "The run to export", "api.deployment_for_study gives it")
    asked = ",".join(formats) if isinstance(formats, (list, tuple)) else str(formats)
    names = parse_formats(asked)
    every = set(names) == set(FORMATS)  # `all`, or every format by name
    cannot = {name: why for name in names if (why := cannot_serve(dep, name))}
    if cannot and not every:
        raise ConfigError(next(iter(cannot.values())))
    out = check_output_folder(out)
    # Under `all`, a server that cannot run this model is left out with its reason (no files).
    rendered = {name: (ExportResult(name, notes=[cannot[name]]) if name in cannot else EXPORTERS[name].render(dep))
                for name in names}
    for name, res in rendered.items():  # every file checked before the first is written: none half-done
        for rel in res.files:
            check_output_file((out if len(names) == 1 else out / name) / rel, "The export file")
    results = rendered
    for name, res in rendered.items():
        base = out if len(names) == 1 else out / name
        for rel, text in res.files.items():
            path = base / rel
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # surrogateescape: a path from an undecodable file name goes back as the bytes it was
                path.write_text(text, encoding="utf-8", errors="surrogateescape")
            except OSError as e:
                raise WorkbenchError(f"Cannot write '{path}': {e.strerror or e}.") from None
            if path.suffix == ".sh":
                path.chmod(0o755)
        if bundle and name not in cannot:
            res.model_files = write_model_files(dep, name, base, res.notes)
    return results


def deployment_for_study(db: str | Path, study: str, run_key: str | None = None, constraints=None,
                         objective: str = "throughput", host_type: str | None = None,
                         name: str | None = None) -> DeploymentConfig:
    """The DeploymentConfig of one run of a study: `run_key`, else the recommended run.

    `host_type` (a fleet study's hardware fingerprint, or one of its host names) chooses among
    that type's runs only, and the deployment names that type's hardware. `name` names the model
    in every format (default: from the model's path, e.g. a SavedModel's parent folder).
    """
    if name is not None:
        check_name(name)
    from wb_core.analysis.recommend import find_run, recommend, with_efficiency
    from wb_core.analysis.study_model import study_flops, study_model_paths
    from wb_core.store import Store

    with Store(db, readonly=True) as store:
        info = store.get_study(study)
        df = store.to_frame(study)
        if host_type:
            from wb_core.fleet.compare import select_host_type

            df, fp, hw = select_host_type(df, store.hosts(study), host_type)
            info = {**info, "hardware": hw or info.get("hardware"), "hardware_fingerprint": fp}
    if df.empty:
        raise WorkbenchError(f"Study '{study}' has no runs yet; profile the model first with `wb profile`.")
    paths = study_model_paths(info)
    flops = study_flops(info, paths.get("ir_path"))
    df = with_efficiency(df, info.get("hardware"), flops)
    reason = busy_note = None
    if run_key:
        row = find_run(df, run_key)
        if row.get("status") != "ok":
            raise WorkbenchError(f"Run {row['key']} did not succeed ({row.get('status')}: {row.get('error')}); "
                                 f"export a successful run.")
        run = {k: v for k, v in row.to_dict().items()}
        from wb_core.analysis.pick import guard_failed

        if guard_failed(run):  # by any path: a run that lost too much accuracy is never exported
            raise WorkbenchError(f"Run {row['key']} failed the accuracy guard "
                                 f"({str(run.get('accuracy_guard_note') or 'it lost too much accuracy').rstrip('.')}); "
                                 f"export a run that passed it.")
    else:
        rec = recommend(df, constraints, objective, hardware=info.get("hardware"))
        run, reason, busy_note = rec.best, rec.reason, rec.busy_sentence
    from wb_core.export.deployment import build

    ir_path = paths.get("ir_path")
    variant = run.get("variant_path")
    if isinstance(variant, str) and variant.endswith(".xml"):
        ir_path = variant  # an INT8 run ran its own quantized IR, not the study model's FP32 one
    return build(info, run, reason=reason, ir_path=ir_path, savedmodel_path=paths.get("savedmodel_path"),
                 flops_per_sample=flops, cores_used=run.get("cores_used"), name=name, busy_note=busy_note)


def cannot_serve(dep: DeploymentConfig, name: str) -> str:
    """Why format `name`'s server cannot run the run's model, in one sentence; "" when it can (`serves`).
    An ONNX, IR or TFLite model gives TensorFlow Serving, which serves a SavedModel, nothing to serve."""
    from wb_core.export.common import served_file
    from wb_core.export.formats import DECLARED, declared
    from wb_core.models import format_title

    if serves(dep, name):
        return ""
    others = [f.title.split(" (")[0] for f in DECLARED if f.serves and f.name != name and serves(dep, f.name)]
    return (f"{declared(name).title.split(' (')[0]} was not written: its server runs "
            f"{article(format_title(served_file(dep, name)))}, and '{dep.model.name}' is "
            f"{article(format_title(dep.model.format))} model; export it for {', '.join(others[:-1])} or {others[-1]}.")


def serves(dep: DeploymentConfig, name: str) -> bool:
    """Whether format `name`'s server can run the run's model: the file it serves (`common.served_file`)
    is one a backend makes from the model's format, or the run has a SavedModel on disk already."""
    from wb_core.backends.registry import loaders
    from wb_core.export.common import served_file

    return bool(dep.model.savedmodel_path or loaders(dep.model.format, served_file(dep, name)))


def check_name(name: str) -> str:
    """A model name a user gave: servers and Kubernetes get it as `serving_name` makes it (Latin
    lowercase letters, digits, dashes), so it needs Latin letters or digits to keep."""
    from wb_core.export.deployment import serving_name

    text = str(name).strip()
    if not text or not any(c.isalnum() for c in text):
        raise ConfigError(f"The model name '{name}' has no letters or digits; give one such as resnet50.")
    if serving_name(text) == "model" and text.lower() != "model" and not any(c.isascii() and c.isalnum()
                                                                           for c in text):
        raise ConfigError(f"The model name '{name}' has no Latin letters or digits, and Kubernetes (KServe) and the "
                          f"model servers take only a-z, 0-9 and '-' in names; give one such as "
                          f"{setting('serving_name', 'Model name')} my-model.")
    return text


def with_capacity(dep: DeploymentConfig, db: str | Path, study: str, target_rate: float, p99_ms: float | None,
                  machine_cores: int | None = None) -> DeploymentConfig:
    """Attach the capacity plan for `target_rate` computed from the exported run's own measurements.

    Refuses (a WorkbenchError naming the other run) when only another run could meet the target.
    """
    from wb_core.analysis.planning import capacity
    from wb_core.store import Store, load_measurements

    if p99_ms is None:
        raise ConfigError(f"{setting('target_rate', 'A target rate')} needs a latency target: add "
                          f"{setting('max_p99_ms', 'a p99 limit')}.")
    with Store(db, readonly=True) as s:
        checks = s.serve_checks(study)
    dep.capacity = capacity(load_measurements(db, study), target_rate, p99_ms, machine_cores=machine_cores,
                            run_key=dep.measurement.run_key, serve_checks=checks).to_dict()
    return dep


__all__ = ["DeploymentConfig", "ExportResult", "EXPORTERS", "FORMATS", "check_name", "deployment_for_study", "export",
           "load_schema", "parse_formats", "render", "validate", "with_capacity"]
