"""A run's name in words, the one way every face names a run (`OpenVINO · INT8 · batch 8 · 2 threads`).

Read from the axes table: each axis with the "name" role says its value as its `in_name` declares,
in `name_rank` order, so a backend's new setting is named at once. Kept below the analysis and the
configuration (it reads only the axes and the backend registry) so `RunConfig.label` can use it.
"""

from __future__ import annotations

import re


def _present(v) -> bool:
    return v is not None and v == v and v != ""


def run_name(run) -> str:
    """A run named by what a user chose: `OpenVINO · INT8 · batch 8 · 2 threads · cores 0-1`.

    Every axis with the "name" role says its value as its `in_name` declares (the label and the
    value where it declares none), in `name_rank` order: a backend's new setting is named at once.
    """
    return " · ".join(name_parts(run))


def name_parts(run) -> list[str]:
    """The parts of a run's name (`run_name`), for a face that joins them its own way. A
    text-generation run is named by the generation axes: `OpenVINO GenAI · INT4 symmetric weights ·
    groups of 32 · FP32 activations · 32-token prompts · 32 tokens out · 1 thread · not pinned`."""
    g = run.get if hasattr(run, "get") else (lambda k, d=None: getattr(run, k, d))
    from wb_core.axes import GENERATION_RUNTIME, axis, generation_axes, with_role

    if g("study_kind") == "generation":
        named, parts = sorted(generation_axes(), key=lambda a: a.name_rank), [GENERATION_RUNTIME]
    else:
        named, parts = [axis(name) for name in with_role("name")], []
    for a in named:
        if not a.applies(g):
            continue
        part = _named(a, g(a.name))
        if part:
            parts.append(part)
    if g("untouched") in (True, 1):  # the runtime's own choices (its precision, its requests in flight)
        parts.append("untouched")
    return parts


def _named(a, value) -> str:
    """One axis's part of a run's name ("" when it says nothing there)."""
    switch = a.annotation.startswith("bool")
    if switch and _present(value) and str(value) in ("True", "False", "1", "0", "1.0", "0.0"):
        shown = "on" if str(value) in ("True", "1", "1.0") else "off"
    elif not _present(value) or not value or str(value) in ("none", "None"):
        return a.unset_name
    elif ((a.name_over is not None and float(value) <= a.name_over)
          or (a.name_under is not None and float(value) >= a.name_under)):
        return ""
    elif isinstance(value, (int, float)):
        shown = str(int(value)) if float(value).is_integer() else f"{float(value):.3g}"
    else:
        shown = dict(a.words).get(str(value), str(value))
    if not a.in_name:
        word = re.sub(r"\s*\(.*\)$", "", a.label)
        word = word[0].lower() + word[1:] if len(word) > 1 and word[1].islower() else word
        return f"{word} {shown}"
    from wb_core.backends.registry import title

    one = shown in ("1", "on")
    return a.in_name.format(value=shown, VALUE=shown if a.words else shown.upper(), s="" if one else "s",
                            title=title(shown) if "{title}" in a.in_name else "")
