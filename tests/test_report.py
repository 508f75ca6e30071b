"""The HTML report is one offline file whose plots render in a headless browser."""

from __future__ import annotations

import shutil

import pytest

from analysis_data import make_study_db, run, sample_frame
from wb_core.errors import WorkbenchError
from wb_core.report import build_report, write_report

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def report_db(tmp_path):
    db = tmp_path / "r.db"
    runs = sample_frame().to_dict("records")
    runs[0]["latency_hist"] = {"edges_ms": [0.1, 0.2, 0.4], "counts": [5, 1]}
    make_study_db(db, runs)
    return db


def test_report_is_self_contained(report_db, tmp_path):
    text = build_report(report_db, "t")
    assert text.count("<script") >= 5
    assert "<script src=" not in text.replace(" ", " ")  # plotly.js is inline, nothing is fetched
    for words in ("Hardware", "Test CPU", "Model", "Recommendation", "highest throughput", "All runs",
                  "Pareto front"):
        assert words in text
    out = write_report(report_db, "t", tmp_path / "sub" / "r.html")
    assert out.stat().st_size > 1_000_000  # plotly.js alone is over 3 MB


def test_report_states_unmet_constraints(report_db):
    from wb_core.analysis.recommend import Constraints

    text = build_report(report_db, "t", constraints=Constraints(max_p99_ms=0.01))
    assert "No run meets p99 latency ≤ 0.01 ms" in text


def test_report_of_an_empty_study(tmp_path):
    db = tmp_path / "e.db"
    make_study_db(db, [])
    with pytest.raises(WorkbenchError, match="no runs yet"):
        build_report(db, "t")


def test_report_escapes_text(tmp_path):
    db = tmp_path / "x.db"
    make_study_db(db, [run(status="failed", p99=float("nan"), thr=float("nan"), error="<script>alert(1)</script>")])
    text = build_report(db, "t")
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)" in text


@pytest.mark.browser
def test_report_plots_render_in_headless_chromium(report_db, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    if not shutil.which("chromium") and not __import__("os").path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (make browser)")
    out = write_report(report_db, "t", tmp_path / "report.html")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            # Offline: any request leaving the file would fail the test.
            page.route("http*://**", lambda route: (errors.append(route.request.url), route.abort()))
            page.goto(out.as_uri())
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
            plots = page.locator(".js-plotly-plot")
            assert plots.count() >= 5
            assert page.locator(".js-plotly-plot .main-svg").count() >= 5
            assert page.locator(".js-plotly-plot .scatterlayer .trace").count() >= 3
            assert not errors, errors
        finally:
            browser.close()
