"""The Sweep tab with a text-generation model: its own settings, a generation sweep in the background,
the tokens/s vs p99 TPOT plot and the recommendation in words (widgets, no browser)."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets", reason="the ui extra is not installed (pip install -e '.[ui]')")

from wb_core.ui.state import DashboardState


@pytest.fixture(scope="module")
def generator():
    from wb_core.api import ensure_demo

    return ensure_demo("text-generator")


def test_a_generation_model_gets_the_generation_sweep(tmp_path, generator, lenet_savedmodel):
    from wb_core.ui.sweep_panel import SweepPanel

    session = DashboardState(tmp_path / "ui.db")
    panel = SweepPanel(session)
    session.model_path = str(lenet_savedmodel)
    assert panel.generation.layout.display == "none" and panel.model_sweep.layout.display != "none"
    session.model_path = str(generator)
    assert panel.generation.layout.display != "none" and panel.model_sweep.layout.display == "none"
    gen = panel.generation
    # the offered settings are the generation axes, by their declared flags' spec names
    assert set(gen.boxes) == {"threads", "concurrency", "weight_formats", "prompt_lens", "output_lens"}
    gen.boxes["threads"].value, gen.boxes["prompt_lens"].value, gen.boxes["output_lens"].value = "1", "8", "4"
    panel.study.value = "gen-ui"
    gen.run.click()
    gen._thread.join(240)
    assert not gen._thread.is_alive()
    assert "wb-msg-error" not in gen.messages.text.value, gen.messages.text.value
    fig = gen.plot.figure
    assert fig is not None and "time per output token" in fig.layout.title.text, gen.messages.text.value
    assert [t.name for t in fig.data if t.name == "the model's own"] == ["the model's own"]  # one point
    assert "Recommended:" in gen.answer.value and "own weights · FP32 activations" in gen.answer.value
    assert "output tokens/s" in gen.answer.value and not gen.run.disabled and session.measuring == ""
    from wb_core.api import results
    from wb_core.faces import is_generation_study

    assert is_generation_study("gen-ui", session.db)  # stored as a generation study, one point
    assert len(results("gen-ui", session.db, "stored")) == 1


def test_a_bad_generation_setting_is_one_sentence(tmp_path, generator):
    from wb_core.ui.sweep_panel import SweepPanel

    session = DashboardState(tmp_path / "ui.db")
    session.model_path = str(generator)
    panel = SweepPanel(session)
    gen = panel.generation
    gen.boxes["output_lens"].value = "0"
    panel.study.value = "bad"
    gen.run.click()
    gen._thread.join(120)
    assert gen.plot.figure is None and not gen.run.disabled
    assert "wb-msg-error" in gen.messages.text.value and "Output length" in gen.messages.text.value, gen.messages.text.value


def test_tune_on_a_generation_model_opens_its_sweep(tmp_path, generator, monkeypatch):
    from wb_core.ui.app import TAB_TITLES, dashboard

    monkeypatch.chdir(tmp_path)  # the page's database, ./wb.db, is this test's
    tabs = dashboard(tmp_path / "ui.db", demo="text-generator")
    start = tabs.panel("Start")
    start.tune_button.click()
    start._thread.join(120)
    assert "text-generation sweep in the Sweep tab" in start.messages.text.value, start.messages.text.value
    assert tabs.selected_index == TAB_TITLES.index("Sweep")
    sweep = tabs.panel("Sweep")  # built when the tab opened
    assert tabs.session.model_path and sweep.generation.layout.display != "none"
    assert start.result is None and not start.tune_button.disabled  # no tune of model calls ran


def test_cancel_stops_a_generation_sweep_and_keeps_its_finished_points(tmp_path, generator):
    """Cancel while a generation sweep runs: the running worker stops, the points finished stay stored,
    the message says it was cancelled, and Run measures the rest afterwards."""
    import sqlite3
    import time

    from wb_core.api import StoreError, results
    from wb_core.ui.sweep_panel import SweepPanel

    def stored() -> int:
        try:
            return len(results("gen-cancel", session.db, "stored"))
        except (StoreError, sqlite3.OperationalError):  # the sweep has not created the store yet
            return 0

    session = DashboardState(tmp_path / "ui.db")
    session.model_path = str(generator)
    panel = SweepPanel(session)
    gen = panel.generation
    assert gen.cancel_button.disabled  # nothing runs yet
    gen.boxes["threads"].value, gen.boxes["prompt_lens"].value, gen.boxes["output_lens"].value = "1", "8", "4,8,16"
    panel.study.value = "gen-cancel"
    gen.run.click()
    assert gen.run.disabled and not gen.cancel_button.disabled
    deadline = time.time() + 180
    while stored() < 1 and gen._thread.is_alive() and time.time() < deadline:
        time.sleep(0.05)
    gen.cancel_button.click()  # the first point is stored: the second one's worker is running
    assert gen.cancel_button.disabled and gen.cancel_button.description == "Cancelling…"
    gen._thread.join(120)
    assert not gen._thread.is_alive()
    message = gen.messages.text.value
    assert "Cancelled." in message and "(cancelled)" in message and "wb-msg-error" not in message, message
    kept = stored()
    assert 1 <= kept < 3, kept
    assert not gen.run.disabled and gen.cancel_button.disabled and gen.cancel_button.description == "Cancel"
    assert session.measuring == ""
    # Run again: only the points the cancel left are measured.
    gen.run.click()
    gen._thread.join(180)
    assert stored() == 3
    assert f"{3 - kept} ok" in gen.messages.text.value and f"{kept} already stored" in gen.messages.text.value, \
        gen.messages.text.value
