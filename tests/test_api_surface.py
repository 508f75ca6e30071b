"""The public API is the list docs/api.md documents, nothing more, and each name there is real."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from wb_core import api, faces

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"


def documented() -> set[str]:
    """Every backticked name in the doc's list items under its sections (prose and code aside)."""
    text = DOC.read_text()
    body = text[text.index("\n## "):]
    names = set()
    for line in body.splitlines():
        if line.startswith("- "):
            # The names a list item is about come before its colon: "- `a`, `b`: what they do".
            names |= set(re.findall(r"`(\w+)`", line.split(":", 1)[0]))
            if line.startswith("- What the"):  # the types' items list their names after the colon
                names |= set(re.findall(r"`(\w+)`", line))
    return names


def test_the_api_is_what_its_page_documents():
    listed, public = documented(), set(api.__all__)
    assert not public - listed, f"public but not in docs/api.md: {sorted(public - listed)}"
    assert not listed - public, f"in docs/api.md but not public: {sorted(listed - public)}"


def test_the_api_stays_small():
    # The verbs and the types they take and return; the faces' words, checks and choices are not in it.
    assert len(api.__all__) <= 75
    for helper in ("label", "plural", "rounded", "run_name", "check_number", "stored_runs", "default_db"):
        assert helper not in api.__all__ and helper in faces.__all__


@pytest.mark.parametrize("name", sorted(api.__all__))
def test_every_verb_says_what_it_does(name):
    value = getattr(api, name)
    if callable(value) or inspect.ismodule(value):
        assert (inspect.getdoc(value) or "").strip(), f"{name} has no docstring"


def test_one_reader_with_views():
    assert set(api.RESULT_VIEWS) == {"runs", "stored", "efficiency", "probes", "measurements", "outputs"}
    for gone in ("load_results", "load_measurements", "results_with_notes", "stored_runs"):
        assert gone not in api.__all__


def test_an_unknown_view_is_one_sentence(tmp_path):
    from wb_core.api import ConfigError

    with pytest.raises(ConfigError, match=r"^Unknown results view 'rows'; choose from runs, stored, .*\.$"):
        api.results("s", tmp_path / "x.db", "rows")


def test_the_faces_kit_never_shadows_a_verb():
    assert not set(api.__all__) & set(faces.__all__)


def test_tune_takes_the_option_objects_profile_takes(tmp_path):
    from wb_core.api import ConfigError, InputOptions, MeasureSettings

    # Given twice, differently: one sentence before anything runs (nothing is measured, no database written).
    with pytest.raises(ConfigError, match=r"^tune got text twice, as a keyword and in its options; give it once\.$"):
        api.tune("lenet-digits", db=tmp_path / "t.db", text="a.txt",
                 inputs=InputOptions(text="b.txt", tokenizer="tokenizer.json"))
    with pytest.raises(ConfigError, match=r"^tune\(\) takes an InputOptions as inputs, not a MeasureSettings"):
        api.tune("lenet-digits", db=tmp_path / "t.db", inputs=MeasureSettings())
    assert not (tmp_path / "t.db").exists()
