"""The export formats, each declared once: the module that renders it, its title, the model file its
server runs and where a bundle puts that file. Everything else that lists formats reads this table:
`export`, `parse_formats`, bundles, the serve check, the dashboard's choices and `wb export --format`.

Adding a format: `export/<name>.py` with `FORMAT`, `DESCRIPTION` and `render(dep) -> ExportResult`,
and its `ExportFormat(...)` line below. The modules are named by declaration strings and loaded on
first use, so that the shared helpers (common.py, bundle.py) can read this table too.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from wb_core.errors import ConfigError


@dataclass(frozen=True)
class ExportFormat:
    name: str  # as `export` and `--format` take it
    module: str  # "wb_core.export.<module>": FORMAT, DESCRIPTION, render(dep) -> ExportResult
    title: str  # as people know it, the file they get in brackets
    # The model file (a `BackendInfo.loads` kind) the server runs itself when the run's backend names
    # no runtime in this format; empty: the format serves no model file.
    serves: str = "openvino-ir"
    model_dir: str = "models/{name}/1"  # where a bundle puts the model files ({name}: the serving name)
    savedmodel_dir: str = ""  # where a bundle puts a served SavedModel (empty: model_dir)


DECLARED: tuple[ExportFormat, ...] = (
    ExportFormat("yaml", "wb_core.export.yaml_format", "Deployment YAML (deployment.yaml)", serves="", model_dir=""),
    ExportFormat("ovms", "wb_core.export.ovms", "OpenVINO Model Server config (config.json)"),
    ExportFormat("triton", "wb_core.export.triton", "Triton model repository (config.pbtxt)",
                 model_dir="model_repository/{name}/1", savedmodel_dir="model_repository/{name}/1/model.savedmodel"),
    ExportFormat("tfserving", "wb_core.export.tfserving", "TensorFlow Serving (run script and batching parameters)",
                 serves="savedmodel"),
    ExportFormat("kserve", "wb_core.export.kserve", "KServe InferenceService (inferenceservice.yaml)",
                 model_dir="model/{name}/1"),
)
FORMATS = tuple(f.name for f in DECLARED)


def declared(name: str) -> ExportFormat:
    """A format's declaration; an unknown name gets the list of formats."""
    for f in DECLARED:
        if f.name == name:
            return f
    if name in GENERATION_FORMATS:
        raise ConfigError(f"'{name}' exports a text-generation study, and this study measured a model: choose from "
                          f"{', '.join(FORMATS)} or all.")
    raise ConfigError(f"Unknown export format '{name}'; choose from {', '.join(FORMATS)} or all.")


def exporter(name: str):
    """The module that renders format `name` (loaded on first use)."""
    return importlib.import_module(declared(name).module)


class _Exporters(Mapping):
    """Format name -> its module, in the declared order, each loaded when first asked for."""

    def __getitem__(self, name: str):
        if name not in FORMATS:
            raise KeyError(name)
        return exporter(name)

    def __iter__(self) -> Iterator[str]:
        return iter(FORMATS)

    def __len__(self) -> int:
        return len(FORMATS)


EXPORTERS: Mapping = _Exporters()
# Text-generation studies export their pick from a results row (`render_generation(run, name)`), not
# from a DeploymentConfig: their own table, so `all` above keeps meaning every format of a model study.
GENERATION_FORMATS = {"ovms-llm": "wb_core.export.ovms_llm"}


class _GenerationExporters(Mapping):
    """Text-generation format name -> its module, loaded when first asked for."""

    def __getitem__(self, name: str):
        return importlib.import_module(GENERATION_FORMATS[name])

    def __iter__(self) -> Iterator[str]:
        return iter(GENERATION_FORMATS)

    def __len__(self) -> int:
        return len(GENERATION_FORMATS)


GENERATION_EXPORTERS: Mapping = _GenerationExporters()


def parse_formats(text: str) -> list[str]:
    """`yaml`, `ovms,triton` or `all`; an unknown name gets the list of formats."""
    names = [t.strip().lower() for t in str(text).replace(";", ",").split(",") if t.strip()]
    if not names:
        raise ConfigError(f"Give an export format: {', '.join(FORMATS)} or all.")
    if "all" in names:
        return list(FORMATS)
    for n in names:
        declared(n)
    return list(dict.fromkeys(names))


def parse_generation_formats(text: str) -> list[str]:
    """`ovms-llm` or `all` for a text-generation study; a model study's format gets one sentence."""
    names = [t.strip().lower() for t in str(text).replace(";", ",").split(",") if t.strip()]
    choices = f"{', '.join(GENERATION_FORMATS)} or all"
    if not names:
        raise ConfigError(f"Give an export format: {choices}.")
    if "all" in names:
        return list(GENERATION_FORMATS)
    for n in names:
        if n in FORMATS:
            raise ConfigError(f"'{n}' exports a model study, and this study measured text generation: choose {choices}.")
        if n not in GENERATION_FORMATS:
            raise ConfigError(f"Unknown text-generation export format '{n}'; choose {choices}.")
    return list(dict.fromkeys(names))


def render(dep, fmt: str):
    """One format of a DeploymentConfig, as an ExportResult."""
    from wb_core.errors import check_kind
    from wb_core.export.deployment import DeploymentConfig

    check_kind(dep, DeploymentConfig, "The run to render", "api.deployment_for_study gives it")
    (name,) = parse_formats(fmt) if fmt != "all" else (None,)
    if name is None:
        raise ConfigError("render() takes one format; use export() for several.")
    return exporter(name).render(dep)
