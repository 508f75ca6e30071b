"""The export formats: one module each, registered here by their FORMAT name."""

from __future__ import annotations

from wb_core.errors import ConfigError
from wb_core.export import kserve, ovms, ovms_llm, tfserving, triton, yaml_format
from wb_core.export.common import ExportResult
from wb_core.export.deployment import DeploymentConfig

EXPORTERS = {m.FORMAT: m for m in (yaml_format, ovms, triton, tfserving, kserve)}
FORMATS = tuple(EXPORTERS)
# Text-generation studies export their pick from a results row (`render_generation(run, name)`), not
# from a DeploymentConfig: their own table, so `all` above keeps meaning every format of a model study.
GENERATION_EXPORTERS = {m.FORMAT: m for m in (ovms_llm,)}


def parse_formats(text: str) -> list[str]:
    """`yaml`, `ovms,triton` or `all`; an unknown name gets the list of formats."""
    names = [t.strip().lower() for t in str(text).replace(";", ",").split(",") if t.strip()]
    if not names:
        raise ConfigError(f"Give an export format: {', '.join(FORMATS)} or all.")
    if "all" in names:
        return list(FORMATS)
    for n in names:
        if n not in EXPORTERS:
            raise ConfigError(f"Unknown export format '{n}'; choose from {', '.join(FORMATS)} or all.")
    return list(dict.fromkeys(names))


def render(dep: DeploymentConfig, fmt: str) -> ExportResult:
    (name,) = parse_formats(fmt) if fmt != "all" else (None,)
    if name is None:
        raise ConfigError("render() takes one format; use export() for several.")
    return EXPORTERS[name].render(dep)
