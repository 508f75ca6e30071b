"""No internal keys or codes on the page: every tab's text and the study's HTML report say settings
and precisions in words. The forbidden words are read from the code that defines them (the store's
columns, the backend registry, the precision codes a runtime reports), not copied here.
"""

from __future__ import annotations

import html
import re

import ipywidgets as w
import pytest

from analysis_data import make_study_db, sample_frame


def visible_text(widget) -> str:
    """What a person reads in a widget tree: HTML and labels (less styles and scripts), descriptions
    and the options of a choice. File previews are the file as it is, so they are left out."""
    out: list[str] = []

    def walk(x):
        classes = set(getattr(x, "_dom_classes", ()))
        if "wb-preview" in classes:
            return
        if isinstance(x, (w.HTML, w.HTMLMath, w.Label)):
            v = re.sub(r"(?s)<(style|script|pre)[^>]*>.*?</\1>", " ", x.value)
            out.append(html.unescape(re.sub(r"<[^>]+>", " ", v)))
        if getattr(x, "description", None):
            out.append(x.description)
        out.extend(getattr(x, "_options_labels", ()) or ())
        for c in getattr(x, "children", ()) or ():
            walk(c)

    walk(widget)
    return "\n".join(out)


def internal_words() -> tuple[list[str], re.Pattern]:
    """The store's column names that are identifiers (with an underscore: `latency_ms_p99`, not
    `throughput`), and a pattern of lowercase runtime and precision codes (`u8`, `f32`, `bf16`,
    `openvino`) as whole tokens."""
    from wb_core.analysis.words import EXECUTED
    from wb_core.api import list_backends
    from wb_core.store import RESULT_COLUMNS, RUN_HOST_COLUMNS, RUN_KIND_COLUMNS

    columns = [c for c in (*RESULT_COLUMNS, *RUN_HOST_COLUMNS, *RUN_KIND_COLUMNS) if "_" in c]
    codes = sorted({*EXECUTED, *list_backends()}, key=len, reverse=True)
    return columns, re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, codes)) + r")(?![\w/-])")


def offending(text: str) -> list[str]:
    columns, codes = internal_words()
    found = [c for c in columns if c in text]
    found += [f"{m.group(1)!r} in …{text[max(0, m.start() - 40):m.end() + 20]}…" for m in codes.finditer(text)]
    return found


@pytest.fixture
def study_db(tmp_path):
    db = tmp_path / "words.db"
    make_study_db(db, list(sample_frame().to_dict("records")))
    return db


def test_the_scan_finds_what_it_looks_for():
    assert offending("latency_ms_p99 at 3 ms") == ["latency_ms_p99"]
    assert len(offending("ran as bf16 on openvino")) == 2
    assert offending("OpenVINO · BF16 · batch 8 · flags avx512_bf16 · /models/openvino/x.xml") == []


def test_no_tab_shows_a_column_name_or_a_runtime_code(study_db):
    from wb_core.ui.app import TAB_TITLES, dashboard

    tabs = dashboard(study_db)
    for i in range(len(TAB_TITLES)):
        tabs.selected_index = i  # a tab draws what it shows when first opened
    tabs.panel("Start").model.wait(60)  # the CPU's table fills in after the page is up
    for title, panel in zip(TAB_TITLES, tabs.panels()):
        text = visible_text(panel)
        assert text.strip(), f"the {title} tab shows nothing"
        assert offending(text) == [], f"the {title} tab: {offending(text)}"


def test_the_report_shows_no_column_name_or_runtime_code(study_db):
    from wb_core.faces import build_report

    page = build_report(study_db, "t")
    body = re.sub(r"(?s)<(style|script)[^>]*>.*?</\1>", " ", page)
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    assert "OpenVINO" in text
    assert offending(text) == []
