"""A reopened study comes back as the user left it: the study opened last is the one the page opens,
with Explore's limits and objective as they were set (not open again)."""

from __future__ import annotations

from analysis_data import make_study_db, sample_frame


def test_the_last_opened_study_reopens_with_explores_limits(tmp_path):
    from wb_core.ui.app import TAB_TITLES, dashboard

    db = tmp_path / "reopen.db"
    rows = list(sample_frame().to_dict("records"))
    make_study_db(db, rows, name="first")
    make_study_db(db, [{**r, "study": "second"} for r in rows], name="second")

    page = dashboard(db)
    sweep = page.panel("Sweep")
    explore = page.panel("Explore")
    assert page.session.study == "second"  # nothing opened yet: the newest
    sweep.studies.value = "first"
    sweep._on_open()
    page.selected_index = TAB_TITLES.index("Explore")
    p99 = explore.p99
    limit = round(p99.min + (p99.max - p99.min) * 0.4, 3)
    p99.value = limit
    explore.objective.value = "latency"
    assert explore.constraints().max_p99_ms == limit

    again = dashboard(db)  # the page loaded anew
    assert again.session.study == "first"
    explore = again.panel("Explore")
    again.selected_index = TAB_TITLES.index("Explore")
    assert explore.objective.value == "latency"
    assert explore.constraints().max_p99_ms == limit
    assert explore.constraints().max_memory_mb is None  # a limit never set stays open
    # Another study opened in it starts with its own (none kept: open).
    sweep = again.panel("Sweep")
    sweep.studies.value = "second"
    sweep._on_open()
    assert explore.constraints().max_p99_ms is None
