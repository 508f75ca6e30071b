"""What the `wb` command and the dashboard share beyond the API's verbs: checking what a user typed
before anything runs, the words, names and choices every face shows alike, and what a face keeps
with a study.

The faces (`wb_core.cli`, `wb_core.ui`) import only `wb_core.api` and this module. It is not the
public API (that is `wb_core.api`, docs/api.md): a script or a notebook has no need of it. Names
are defined here or re-exported from the module that owns them and load on first use.
"""

from __future__ import annotations

from pathlib import Path

from wb_core.api import lazy_exports, results, study_info
from wb_core.paths import default_db

# Re-exported names -> the module that owns them (loaded on first use).
_REEXPORTS = {
    # checking what a user typed, in one sentence, before anything runs
    "check_number": "wb_core.config", "check_timeout": "wb_core.config", "check_ci_target": "wb_core.config",
    "check_max_rounds": "wb_core.config", "parse_ci_target": "wb_core.config", "parse_number": "wb_core.config",
    "parse_seq_lens": "wb_core.config", "parse_shape_axis": "wb_core.config", "load_spec_file": "wb_core.config",
    "field_help": "wb_core.config", "check_objective": "wb_core.analysis.recommend",
    "check_capacity_inputs": "wb_core.analysis.planning", "check_plan_inputs": "wb_core.analysis.planning",
    "check_output_file": "wb_core.paths", "check_output_folder": "wb_core.paths",
    "describe_data_source": "wb_core.data", "describe_text_source": "wb_core.text",
    "parse_formats": "wb_core.export", "parse_generation_formats": "wb_core.export.formats",
    "parse_prices": "wb_core.fleet.compare", "parse_time": "wb_core.tune",
    "oversubscription_warnings": "wb_core.sweep.preview",
    # whether a run may be picked, exported or reported, and why not (every face asks the same rule)
    "unfit_reason": "wb_core.analysis.pick", "pickable": "wb_core.analysis.pick",
    "export_caution": "wb_core.analysis.pick", "guard_failed_runs": "wb_core.variants.guard",
    "successful": "wb_core.analysis.recommend", "find_run": "wb_core.analysis.recommend",
    # figures a face derives from a study's runs, as the core computes them
    "with_efficiency": "wb_core.analysis.recommend", "pareto_front": "wb_core.analysis.recommend",
    "pareto_mask": "wb_core.analysis.recommend", "best_runs": "wb_core.analysis.compare",
    "ratio_sentences": "wb_core.analysis.compare", "stored_layer_profile": "wb_core.analysis.layers",
    "within_noise": "wb_core.analysis.planning", "within_p99": "wb_core.limits",
    # the settings a face offers, and how it names one that a message or note is about
    "sweep_axes": "wb_core.axes", "SPEC_OPTIONS": "wb_core.axes", "axis_readers": "wb_core.axes",
    "setting_flag": "wb_core.axes", "setting_label": "wb_core.axes", "word_for_cli": "wb_core.axes",
    "word_for_dashboard": "wb_core.axes", "with_role": "wb_core.axes", "generation_axes": "wb_core.axes",
    "pipeline_axes": "wb_core.pipeline.study",
    # words, the same in every face
    "LABELS": "wb_core.analysis.words", "MODES": "wb_core.analysis.words", "executed_words": "wb_core.analysis.words",
    "label": "wb_core.analysis.words", "plural": "wb_core.analysis.words", "results_table": "wb_core.analysis.words",
    "rounded": "wb_core.analysis.words", "run_name": "wb_core.analysis.words", "worded": "wb_core.analysis.words",
    "p99_verdict": "wb_core.analysis.words", "p99_limit_words": "wb_core.analysis.words",
    "printable": "wb_core.errors", "format_title": "wb_core.models",
    # files and where they go
    "default_db": "wb_core.paths", "cache_dir": "wb_core.paths", "write_output_file": "wb_core.paths",
    "default_study_name": "wb_core.demo_catalog", "demo_name_of": "wb_core.demo_catalog",
    "write_demo": "wb_core.demo", "build_report": "wb_core.report", "with_capacity": "wb_core.export",
    "model_files": "wb_core.export.bundle", "zip_bundle": "wb_core.export.bundle",
    "load_serve_checks": "wb_core.export.servecheck",
    # fleets
    "load_comparison": "wb_core.fleet.compare", "config_by_host_type": "wb_core.fleet.compare",
    "select_host_type": "wb_core.fleet.compare", "host_type_bars": "wb_core.fleet.plots",
    "host_type_scatter": "wb_core.fleet.plots",
    # the choices a face offers, and the thresholds it names
    "DEMOS": "wb_core.demo_catalog", "PRECISIONS": "wb_core.precisions", "OBJECTIVES": "wb_core.analysis.recommend",
    "BUSY_OTHER_CPU": "wb_core.measure", "BUSY_STEAL_PCT": "wb_core.measure",
}


__getattr__ = lazy_exports(__name__, globals(), _REEXPORTS)


def __dir__():
    return sorted(__all__)


def backend_title(name: str) -> str:
    """A backend's name for sentences and legends (`OpenVINO`); an unknown name as it is."""
    from wb_core.backends.registry import title

    return title(name)


def layer_profiling_backends() -> tuple[str, ...]:
    """The backends whose runs have per-layer profiles (their runtime's performance counters)."""
    from wb_core.backends.registry import get, names

    return tuple(n for n in names() if get(n).layer_profiling)


def busy_notes(df) -> list[str]:
    """A note naming how many stored points were measured on a busy machine, and how to measure them again."""
    from wb_core.analysis.results_view import busy_notes as notes

    return notes(df)


def stored_runs(study: str | None, db: str | Path | None = None, probes: bool = False):
    """A study's runs (or, with `probes`, its max-rate probes) as stored, without the notes `results`
    adds: an empty frame when the database or the study is not there (a dashboard opening a new one)."""
    import pandas as pd

    from wb_core.store import Store

    path = db or default_db()
    if not study or not Path(path).exists():
        return pd.DataFrame()
    with Store(path, readonly=True) as s:
        if s.get_study(study) is None:
            return pd.DataFrame()
        return s.to_frame(study, probes=probes)


def point_row(study: str, point: dict):
    """The one-row frame a point (as `profile` passes it to `on_point`) has among the study's stored runs."""
    from wb_core.store import point_record, results_frame

    return results_frame([point_record(study, point)])


def study_record(study: str | None, db: str | Path | None = None) -> dict | None:
    """What a study recorded about itself (as `study_info`), or None when it is not there."""
    from wb_core.store import Store

    path = db or default_db()
    if not study or not Path(path).exists():
        return None
    with Store(path, readonly=True) as s:
        return s.get_study(study)


def save_study_settings(study: str, settings: dict, db: str | Path | None = None) -> None:
    """Keep a face's settings (the dashboard's Sweep tab) with a study, for reopening it."""
    from wb_core.store import Store

    with Store(db or default_db()) as s:
        s.update_spec(study, dashboard=settings)


def save_layer_profile(study: str, run_key: str, profile, db: str | Path | None = None) -> None:
    """Store a layer profile (from `layer_profile`) with its run, for `stored_layer_profile` and Compare."""
    from wb_core.store import Store

    with Store(db or default_db()) as s:
        s.save_layer_profile(study, run_key, profile.to_dict())


def check_database(db: str | Path) -> None:
    """Raise StoreError (one sentence) unless `db` is a workbench database or a new (missing or empty) file."""
    from wb_core.store import Store

    path = Path(db).expanduser()
    if path.is_file() and path.stat().st_size > 0:
        with Store(path, readonly=True):
            pass


def export_formats(titles: bool = False) -> dict[str, str]:
    """The export formats: name (as `export` takes it) -> one-line description, or with `titles` -> its
    title as people know it (the file they get in brackets)."""
    from wb_core.export.formats import DECLARED, EXPORTERS

    if titles:
        return {f.name: f.title for f in DECLARED}
    return {k: str(getattr(m, "DESCRIPTION", k)) for k, m in EXPORTERS.items()}


def is_generation_model(model: str | Path | None) -> bool:
    """Whether a model (a path or a demo name) is a text-generation folder, measured by `generate_profile`."""
    from wb_core.generation.folder import looks_like_generation

    return bool(model) and (str(model) == "text-generator" or looks_like_generation(Path(model)))


def is_generation_study(study: str, db: str | Path | None = None) -> bool:
    """Whether a stored study measured text generation (so recommend and export take its own path)."""
    from wb_core.analysis.generation import is_generation_study as _is
    return _is(results(study, db, "stored"), study_info(study, db))


def generation_run(study: str, key: str, db: str | Path | None = None) -> dict:
    """A generation study's run `key` (or a unique prefix) as a results row; quality-failed runs are refused."""
    from wb_core.analysis.generation import generation_run as _run
    return _run(results(study, db, "stored"), key)


def cluster_hosts(cluster: str, hosts=None) -> list:
    """The hosts of a Dask cluster (or only `hosts`), each with its hardware type (`fingerprint`) and `describe()`."""
    from wb_core.fleet.cli_support import open_executor

    with open_executor(cluster, hosts) as executor:
        return list(executor.hosts())


__all__ = sorted([
    "backend_title", "layer_profiling_backends", "busy_notes", "stored_runs", "point_row", "study_record",
    "save_study_settings", "save_layer_profile", "check_database", "export_formats", "is_generation_model",
    "is_generation_study", "generation_run", "cluster_hosts",
    *_REEXPORTS,
])
