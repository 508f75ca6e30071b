"""What every export format shares: the result type, the provenance header, and small helpers."""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field

from wb_core.backends.registry import get, runtime_label, serving, title
from wb_core.errors import one_line
from wb_core.export.deployment import DeploymentConfig


@dataclass
class ExportResult:
    """Files of one format (path relative to the output folder -> text) and notes for the user.

    Notes say what the target format cannot express, so that nothing is dropped silently.
    """

    format: str
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    model_files: list[str] = field(default_factory=list)  # copied by a bundle, relative to the format's folder


def provenance(dep: DeploymentConfig) -> list[str]:
    """Lines saying what was measured, when, and on which hardware."""
    m, e, hw = dep.measurement, dep.expected, dep.measurement.hardware
    runtime = runtime_label(dep.backend, m.versions)
    busy = f"{fmt(e.cpu_util)} CPU core{'' if e.cpu_util == 1 else 's'} busy" if e.cpu_util is not None else ""
    lines = [
        f"Exported by CPU Inference Workbench from study '{m.study}' (run id {m.run_key}).",
        f"Measured {m.measured_at or 'at an unrecorded time'} with {runtime} on {hw.get('cpu_model') or 'unknown CPU'} "
        f"({hw.get('physical_cores')} physical / {hw.get('logical_cores')} logical cores).",
        f"Settings: {setting_summary(dep)}.",
        "Expected (measured closed loop in process, requests sent back to back): " + ", ".join(
            text for value, text in ((e.latency_ms_p50, f"p50 latency {fmt(e.latency_ms_p50)} ms"),
                                     (e.latency_ms_p99, f"p99 latency {fmt(e.latency_ms_p99)} ms"),
                                     (e.throughput, f"{fmt(e.throughput)} samples/s"), (busy or None, busy),
                                     (e.rss_mb, f"peak memory {fmt(e.rss_mb)} MB"),
                                     (e.accuracy, f"accuracy {fmt(e.accuracy)}"))
            if value is not None) + ".",  # a figure not measured (side by side: no p50, no memory) is left out
    ]
    if m.reason:
        lines.append(f"Chosen because: {m.reason}")
    return lines


def setting_summary(dep: DeploymentConfig) -> str:
    """The run's settings in words, as its name says them (`analysis.words.name_parts`), with what
    precision it executed: `OpenVINO, FP32 (executed as FP32), batch 1, 1 thread, ...`."""
    from wb_core.analysis.words import executed_words, name_parts

    parts = name_parts(dep.run())
    if dep.executed_precision:
        parts[1] += f" (executed as {executed_words(dep.executed_precision)})"
    return ", ".join(parts)


def served_file(dep: DeploymentConfig, fmt: str) -> str:
    """The model file (a `BackendInfo.loads` kind: "openvino-ir", "savedmodel") that `fmt` serves for the
    run: the file its backend loads when the registry's serving map gives the format a runtime for
    it, else the one the server runs itself (its `ExportFormat.serves`: OVMS an IR, TensorFlow Serving a
    SavedModel)."""
    from wb_core.export.formats import declared

    if serving(dep.backend, fmt) is not None:
        return get(dep.backend).loads
    return declared(fmt).serves or "openvino-ir"


def model_file_name(dep: DeploymentConfig, fmt: str) -> str:
    """The name a format gives a model served as the file it is (an ONNX model): the name the
    backend's serving entry declares, else `model` with the file's own suffix."""
    from pathlib import PurePath

    declared = serving(dep.backend, fmt)
    if declared and declared.model_file:
        return declared.model_file
    # The suffix comes from the user's path: kept only when it is a plain one (.onnx), as the
    # file name is a path in the bundle and a word in the scripts.
    suffix = next((s for s in (PurePath(dep.model.path).suffix, f".{dep.model.format}")
                   if re.fullmatch(r"\.[A-Za-z0-9_]{1,16}", s)), "")
    return "model" + suffix


def openvino_run(dep: DeploymentConfig) -> bool:
    """Whether the run's backend is the one OpenVINO Model Server serves as measured (its serving map
    names `ovms`): its runtime properties are OpenVINO properties."""
    return serving(dep.backend, "ovms") is not None


def serving_note(dep: DeploymentConfig, fmt: str, how: str) -> str | None:
    """The note for a run measured on a backend that `fmt` has no runtime for (None when it has one);
    `how` says what the server runs instead ("OVMS serves the OpenVINO IR")."""
    from wb_core.backends.registry import serving_backends

    if serving(dep.backend, fmt) is not None:
        return None
    others = " or ".join(serving_backends(fmt)) or "other"
    article = "an" if others[0] in "aeiou" else "a"
    return (f"This run was measured with {title(dep.backend)}; {how}, so latency and throughput will differ. "
            f"Profile {article} {others} run to export measured numbers.")


def comment_block(lines: list[str], prefix: str = "# ") -> str:
    """Lines as comments of a script or config (`# ...`). The lines carry user text (study, model and
    CPU names, reasons), so each is made one line first: a line break in a name would end the
    comment and make the rest of the name a command or a setting."""
    return "".join(f"{prefix}{text}\n" if text else prefix.rstrip() + "\n" for text in map(one_line, lines))


# In an argument given to `shell_word`: the folder the script runs in, expanded by the shell. NUL,
# which no argument can hold, keeps it apart from any text (a path may be called "$PWD").
HERE = "\x00PWD\x00"


def shell_word(text) -> str:
    """`text` as one shell word that sh reads back exactly (`shlex.quote`), whatever it holds: quotes,
    `$(...)`, backticks, line breaks. Only `HERE` is expanded, as "$PWD"."""
    from wb_core.errors import ConfigError

    parts = str(text).split(HERE)
    if any("\x00" in p for p in parts):
        raise ConfigError(f"'{one_line(text)}' holds a NUL byte, which no file name or command argument can "
                          "hold, so the export's scripts cannot pass it on; correct the deployment's paths.")
    if parts == [""]:
        return "''"
    return '"$PWD"'.join(shlex.quote(p) if p else "" for p in parts)


def shell_line(args: list[str]) -> str:
    """A command line of shell words (see `shell_word`)."""
    return " ".join(shell_word(a) for a in args)


def copy_unless_there(src, dest, check=None, recursive: bool = False) -> str:
    """The script line that copies `src` to `dest` unless `check` (default `dest`) is a file already
    (a bundle has it), every path one quoted word."""
    cp = ["cp", "-r"] if recursive else ["cp"]
    return f"[ -f {shell_word(check or dest)} ] || {shell_line([*cp, src, dest])}\n"


def notes_file(dep: DeploymentConfig, result: ExportResult, how_to: list[str]) -> str:
    """NOTES.txt: provenance, how to use the files, and the settings the format cannot carry; each
    entry one line, without control characters (the user text in it is shown by `cat`)."""
    text = "\n".join(map(one_line, provenance(dep))) + "\n\n"
    if how_to:
        text += "How to use these files:\n" + "".join(f"  {one_line(line)}\n" for line in how_to) + "\n"
    if result.notes:
        text += ("Not carried over, or carried over differently:\n"
                 + "".join(f"  - {one_line(n)}\n" for n in result.notes))
    return text


def cpu_list(cores: list[int] | None, sep: str = ",") -> str:
    """`0-3,6` style CPU list (cpuset syntax)."""
    if not cores:
        return ""
    ids = sorted(set(cores))
    parts, start = [], ids[0]
    for a, b in zip(ids, ids[1:] + [None]):
        if b != a + 1:
            parts.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return sep.join(parts)


def core_ranges(cores: list[int] | None) -> list[tuple[int, int]]:
    """Contiguous runs of CPU ids, lowest first: [0, 1, 2, 5] -> [(0, 2), (5, 5)]."""
    if not cores:
        return []
    ids = sorted(set(int(c) for c in cores))
    out, start = [], ids[0]
    for a, b in zip(ids, ids[1:] + [None]):
        if b != a + 1:
            out.append((start, a))
            start = b
    return out


def whole_cpus(dep: DeploymentConfig) -> int:
    """CPUs to reserve: the pinned set, else the cores the run could keep busy, at least one."""
    if dep.cores:
        return len(dep.cores)
    return max(1, int(dep.cores_used or dep.threads or 1))


def memory_mib(dep: DeploymentConfig, headroom: float = 1.25, floor: int = 256) -> int:
    """Memory to request: measured peak RSS plus headroom, rounded up to 64 MiB."""
    rss = dep.expected.rss_mb or 0.0
    return max(floor, int(math.ceil(rss * headroom / 64.0)) * 64)


def requests_in_flight(dep: DeploymentConfig) -> int:
    return max(1, dep.concurrency) * max(1, dep.instances)


def fmt(v) -> str:
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


INPUT_DTYPES_TRITON = {"float32": "TYPE_FP32", "float16": "TYPE_FP16", "bfloat16": "TYPE_BF16", "float64": "TYPE_FP64",
                       "int8": "TYPE_INT8", "int16": "TYPE_INT16", "int32": "TYPE_INT32", "int64": "TYPE_INT64",
                       "uint8": "TYPE_UINT8", "uint16": "TYPE_UINT16", "uint32": "TYPE_UINT32",
                       "uint64": "TYPE_UINT64", "bool": "TYPE_BOOL", "string": "TYPE_STRING"}
