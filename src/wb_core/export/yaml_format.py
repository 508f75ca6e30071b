"""`yaml`: the deployment record itself (loads back with DeploymentConfig.from_yaml)."""

from __future__ import annotations

from wb_core.export.common import ExportResult, comment_block, provenance
from wb_core.export.deployment import DeploymentConfig

FORMAT = "yaml"
DESCRIPTION = "deployment.yaml: the run's settings, expected metrics and hardware (JSON Schema in schemas/)"


def render(dep: DeploymentConfig) -> ExportResult:
    header = comment_block(provenance(dep) + ["Schema: schemas/deployment.schema.json (schema_version 1)."])
    return ExportResult(FORMAT, files={"deployment.yaml": header + dep.to_yaml()})
