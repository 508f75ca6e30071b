"""The deployment record: one measured run, with everything a serving config needs.

`DeploymentConfig` is what every export format is rendered from, and what the `yaml` format
writes. It round-trips: `DeploymentConfig.from_yaml(d.to_yaml()) == d`. Its JSON Schema is
`schemas/deployment.schema.json` (shipped in the package as `wb_core/schemas/`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from wb_core.errors import ConfigError

# Unicode line breaks (NEL, LS, PS) that YAML folds into a space when they stand unescaped in a scalar.
_YAML_BREAKS = frozenset("\x85\u2028\u2029")


class _Dumper(yaml.SafeDumper):
    """SafeDumper that writes a string holding a Unicode line break double-quoted, where it is
    escaped, so the string reads back exactly as written."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = '"' if _YAML_BREAKS.intersection(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)

SCHEMA_VERSION = 1
# Columns where a backend reports what it actually chose (e.g. streams when left to the runtime).
REPORTED = ("ov_streams", "ov_threads", "ov_optimal_requests", "tf_intra_op", "tf_inter_op")


@dataclass
class ModelInfo:
    name: str
    path: str
    format: str
    fingerprint: str
    inputs: list[dict] = field(default_factory=list)  # [{name, shape (-1 = dynamic), dtype}]
    ir_path: str | None = None  # the OpenVINO IR the openvino backend ran
    savedmodel_path: str | None = None  # the SavedModel the tensorflow backend ran
    flops_per_sample: float | None = None


@dataclass
class ExpectedMetrics:
    """What the run measured; a deployment on the same hardware should see about this."""

    latency_ms_p50: float | None = None
    latency_ms_p99: float | None = None
    throughput: float | None = None  # samples per second
    cpu_util: float | None = None  # cores kept busy
    rss_mb: float | None = None
    accuracy: float | None = None
    accuracy_drop: float | None = None


@dataclass
class Measurement:
    """Where and when the run was measured."""

    study: str
    run_key: str
    measured_at: str
    hardware: dict = field(default_factory=dict)  # cpu_model, fingerprint, cores, flags
    versions: dict = field(default_factory=dict)  # library -> version
    reason: str | None = None  # why this run was chosen, when it was recommended
    # The run (or a point the choice rests on) was measured while other processes used its cores:
    # its figures may not hold on a quiet machine; `busy_note` says which and what to do.
    measured_on_busy_machine: bool = False
    busy_note: str | None = None


@dataclass
class DeploymentConfig:
    """A run configuration ready to deploy: the settings, the expected metrics and their origin."""

    model: ModelInfo
    backend: str
    precision: str
    batch_size: int
    measurement: Measurement
    executed_precision: str | None = None
    threads: int | None = None
    cores: list[int] | None = None  # CPU ids the run was pinned to; None = not pinned
    cores_used: int | None = None  # cores the run could keep busy (see wb_core.analysis.recommend)
    instances: int = 1
    cores_per_instance: int | None = None  # instances > 1: each one's own slice of `cores`
    concurrency: int = 1
    rate: float | None = None  # open-loop Poisson arrivals (requests/s); None = closed loop
    # The settings its backend declares beyond the workbench's own (wb_core.axes.backend_settings), by
    # RunConfig field: OpenVINO's hint, ONNX Runtime's execution mode... Each reads as an attribute too
    # (`dep.hint`: None where the run's backend has no such setting).
    settings: dict[str, Any] = field(default_factory=dict)
    runtime_properties: dict[str, str] = field(default_factory=dict)  # values are strings
    runtime_reported: dict[str, str] = field(default_factory=dict)  # what the runtime chose (streams, threads)
    expected: ExpectedMetrics = field(default_factory=ExpectedMetrics)
    # From wb_core.analysis.planning.capacity when a target rate was given: instances, replicas, CPU requests.
    capacity: dict | None = None
    schema_version: int = SCHEMA_VERSION

    def __getattr__(self, name: str):
        if not name.startswith("_") and name != "settings" and name in _setting_names():
            return self.__dict__.get("settings", {}).get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if name not in _FIELDS and name in _setting_names():  # a backend's setting: kept in `settings`
            self.settings[name] = value
        else:
            object.__setattr__(self, name, value)

    def run(self) -> dict:
        """The run's settings as a results row names them (cores as text), for words shared with results."""
        from wb_core.parsing import format_cores

        own = {name: getattr(self, name) for name in _setting_names() if name in _FIELDS}
        return {**own, "cores": format_cores(tuple(self.cores or ())), **self.settings}

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["runtime_properties"] = {str(k): str(v) for k, v in self.runtime_properties.items()}
        d["runtime_reported"] = {str(k): str(v) for k, v in self.runtime_reported.items()}
        # schema_version first: readers check it before anything else.
        return {"schema_version": d.pop("schema_version"), **d}

    @classmethod
    def from_dict(cls, d: dict) -> DeploymentConfig:
        d = upgraded(d)
        validate(d)
        d = dict(d)
        d["model"] = ModelInfo(**d["model"])
        d["measurement"] = Measurement(**d["measurement"])
        d["expected"] = ExpectedMetrics(**(d.get("expected") or {}))
        return cls(**d)

    def to_yaml(self) -> str:
        return yaml.dump(self.to_dict(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)

    @classmethod
    def from_yaml(cls, text: str) -> DeploymentConfig:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"The deployment file is not valid YAML: {str(e).splitlines()[0]}.") from None
        if not isinstance(data, dict):
            raise ConfigError("The deployment file must hold a mapping (schema_version, model, backend, ...).")
        return cls.from_dict(data)

    @property
    def serving_name(self) -> str:
        """The model's name as serving systems and Kubernetes accept it (lowercase, digits, dashes)."""
        return serving_name(self.model.name)

    def instance_cores(self) -> list[list[int] | None]:
        """The CPUs of each instance, as the run pinned them (None: not pinned).

        With `cores_per_instance`, instance i had the i-th slice of `cores` (wrapping around when
        the run was oversubscribed, as the runner does); otherwise every instance had all `cores`.
        """
        n = max(1, self.instances)
        if not self.cores:
            return [None] * n
        cpus = list(self.cores)
        k = self.cores_per_instance
        if n == 1 or not k:
            return [cpus] * n
        return [[cpus[(i * k + j) % len(cpus)] for j in range(k)] for i in range(n)]


def _setting_names() -> tuple[str, ...]:
    from wb_core.axes import run_settings

    return run_settings()


def upgraded(d):
    """A deployment mapping written when a backend's settings stood at the top level (`hint: latency`)
    with them under `settings`, as this version writes them; anything else as it is."""
    if not isinstance(d, dict):
        return d
    moved = {k: d[k] for k in d if k not in _FIELDS and k in _setting_names()}
    if not moved:
        return d
    out = {k: v for k, v in d.items() if k not in moved}
    out["settings"] = {**moved, **(d.get("settings") or {})}
    return out


_FIELDS = frozenset(f.name for f in dataclasses.fields(DeploymentConfig))

# Folder and file names that say nothing about the model: a name is taken from the folder above.
GENERIC_NAMES = {"saved_model", "savedmodel", "model", "models", "export", "exported", "serving", "ir", "openvino",
                 "onnx", "keras", "tf", "tensorflow", "1"}


def model_name(path: str | None, fallback: str) -> str:
    """A model's name from its path: `models/resnet50/saved_model` -> `resnet50`, `bert.onnx` -> `bert`.

    A SavedModel folder, or a file, whose own name is generic (`saved_model`, `model.xml`, a version
    number) takes the name of the folder holding it; a demo model keeps its demo name.
    """
    from pathlib import PurePath

    if not path or path == "None":
        return fallback
    from wb_core.demo_catalog import demo_name_of

    try:
        demo = demo_name_of(path)
    except (OSError, ValueError):  # ValueError: a path holding NUL, which no file on disk has
        demo = None
    if demo:
        return demo
    p = PurePath(str(path).rstrip("/"))
    stem = p.stem if p.suffix.lower() in (".xml", ".onnx", ".keras", ".h5", ".pb", ".bin", ".tflite", ".pdmodel") else p.name
    for part in [stem] + [q.name for q in p.parents]:
        if part and part.lower() not in GENERIC_NAMES and not part.isdigit():
            return part
    return fallback


def serving_name(text: str) -> str:
    """`text` as a name every target accepts: a Kubernetes DNS-1035 label, as KServe requires of an
    InferenceService (a-z, 0-9 and '-', at most 63, starting with a letter), which is also a valid
    Triton, OVMS and TF Serving model name. Accented letters lose their accents (é -> e); other
    scripts have no such form (see `check_name`, which refuses a given name left with nothing)."""
    import unicodedata

    ascii_text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode().lower()
    out = "".join(c if c.isascii() and c.isalnum() else "-" for c in ascii_text)
    out = "-".join(p for p in out.split("-") if p)
    if out and not out[0].isalpha():
        out = f"model-{out}"
    return out[:63].strip("-") or "model"


def load_schema() -> dict:
    """The JSON Schema of a deployment file (the copy shipped in the package)."""
    text = resources.files("wb_core").joinpath("schemas/deployment.schema.json").read_text()
    return json.loads(text)


def validate(data: dict) -> None:
    """Check a deployment mapping against the JSON Schema; a ConfigError names the first problem."""
    import jsonschema

    if isinstance(data, dict) and data.get("schema_version") not in (None, SCHEMA_VERSION):
        raise ConfigError(f"Deployment schema_version {data.get('schema_version')!r} is not supported; "
                          f"this workbench reads version {SCHEMA_VERSION}.")
    try:
        jsonschema.validate(data, load_schema())
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "the top level"
        raise ConfigError(f"The deployment file is invalid at {where}: {e.message}.") from None
    from wb_core.backends.registry import names

    if data.get("backend") not in names():
        raise ConfigError(f"The deployment file is invalid at backend: {data.get('backend')!r} is not one of "
                          f"{', '.join(names())}.")
    from wb_core.axes import backend_settings

    own = backend_settings(data["backend"])
    for name in data.get("settings") or {}:
        if name not in own:
            raise ConfigError(f"The deployment file is invalid at settings/{name}: the {data['backend']} backend has "
                              f"no such setting; it has {', '.join(own) or 'none'}.")


def build(study: dict, run: dict, reason: str | None = None, ir_path: str | None = None,
          savedmodel_path: str | None = None, flops_per_sample: float | None = None,
          cores_used: float | None = None, name: str | None = None,
          busy_note: str | None = None) -> DeploymentConfig:
    """A DeploymentConfig from a study record (Store.get_study) and one run (a results row as a dict).

    `name` names the model in every format; by default it comes from the model's path (see `model_name`).
    `busy_note`: the choice rests on points measured on a busy machine (a run measured busy itself
    is marked so without it).
    """
    if busy_note is None and _bool(run.get("busy")):
        busy_note = (f"Run {run['key']} was measured on a busy machine (other processes used its cores): its "
                     f"figures may not hold on a quiet one; measure it again before relying on them.")
    from wb_core.config import parse_cores

    hw = study.get("hardware") or {}
    cores_text = run.get("cores")
    cores = list(parse_cores(cores_text, cpus=list(range(1 << 12)))) if cores_text not in (None, "none", "") else None
    props = run.get("ov_properties") if isinstance(run.get("ov_properties"), dict) else {}
    if run_properties_declared(str(run["backend"])):  # a runtime that reports none: its settings, in its words
        props = declared_properties(run)
    return DeploymentConfig(
        model=ModelInfo(name=name or model_name(study.get("model_path"), str(study["name"])),
                        path=str(study.get("model_path")), format=str(study.get("model_format")),
                        fingerprint=str(study.get("model_fingerprint")), inputs=list(study.get("inputs") or []),
                        ir_path=ir_path, savedmodel_path=savedmodel_path,
                        flops_per_sample=_num(flops_per_sample)),
        backend=str(run["backend"]),
        precision=str(run["precision"]),
        executed_precision=_str(run.get("executed_precision")),
        batch_size=int(run["batch_size"]),
        threads=_int(run.get("threads")),
        cores=cores,
        cores_used=_int(math.ceil(cores_used)) if _num(cores_used) else None,
        instances=_int(run.get("instances")) or 1,
        cores_per_instance=_int(run.get("cores_per_instance")),
        concurrency=_int(run.get("concurrency")) or 1,
        rate=_num(run.get("rate")),
        settings=backend_values(str(run["backend"]), run),
        runtime_properties={str(k): str(v) for k, v in props.items()},
        runtime_reported={k: str(_int(run.get(k))) for k in REPORTED if _int(run.get(k)) is not None},
        expected=ExpectedMetrics(**{f.name: _num(run.get(f.name)) for f in dataclasses.fields(ExpectedMetrics)}),
        measurement=Measurement(
            study=str(study["name"]), run_key=str(run["key"]), measured_at=str(run.get("created_at") or ""),
            hardware={"cpu_model": hw.get("cpu_model"), "fingerprint": study.get("hardware_fingerprint"),
                      "physical_cores": hw.get("physical_cores"), "logical_cores": hw.get("logical_cores"),
                      "sockets": hw.get("sockets"), "numa_nodes": hw.get("numa_nodes"),
                      "flags": sorted(k for k, v in (hw.get("flags") or {}).items() if v)},
            versions={str(k): str(v) for k, v in (study.get("versions") or {}).items()},
            reason=None if reason is None else str(reason),  # plain text: a Sentence is no YAML type
            measured_on_busy_machine=busy_note is not None, busy_note=None if busy_note is None else str(busy_note)),
    )


def backend_values(backend: str, run: dict) -> dict[str, Any]:
    """The run's values of the settings its backend declares (wb_core.axes.backend_settings), each typed
    as its RunConfig field is (a count, a switch, a word); none for a backend no longer registered."""
    from wb_core.axes import axis, backend_settings
    from wb_core.backends.registry import names

    if backend not in names():
        return {}
    typed = {"int": _int, "bool": _bool, "float": _num, "str": _str}
    out = {}
    for name in backend_settings(backend):
        kind = axis(name).annotation.split("|")[0].strip()
        out[name] = typed.get(kind, _str)(run.get(name))
    return out


def run_properties_declared(backend: str) -> bool:
    """Whether the backend names its settings itself (the registry's `properties`) instead of reporting them."""
    from wb_core.backends.registry import get, names

    return backend in names() and bool(get(backend).properties or get(backend).bf16_property)


def declared_properties(run: dict) -> dict[str, Any]:
    """The settings a run used, named as its runtime names them (the registry's `properties`)."""
    from wb_core.backends.registry import named_properties
    from wb_core.config import RunConfig

    switches = frozenset(f.name for f in dataclasses.fields(RunConfig) if "bool" in str(f.type))
    return named_properties(str(run["backend"]), run, switches)


def _num(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def _int(v) -> int | None:
    f = _num(v)
    return int(f) if f is not None else None


def _str(v) -> str | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _bool(v) -> bool | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return bool(v)
