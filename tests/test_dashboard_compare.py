"""The Layers and Compare tabs in a real browser: profile a run's layers, put an FP32 and an INT8 run
side by side, compare their layers, and compare the best runs of two studies.

The database is seeded through `wb_core.api.profile` before the page opens (quicker than a sweep
through the page, which tests/test_dashboard_browser.py covers).
"""

from __future__ import annotations

import time

import pytest

from browser_support import assert_clean, open_tab, shoot

pytestmark = pytest.mark.browser


def _header_of_highlighted(page, panel: str) -> list[str]:
    """The column headers of the cells a panel's first table highlights."""
    return page.evaluate(
        """(sel) => { const t = document.querySelector(sel + ' table.wb-table');
                      const head = [...t.querySelectorAll('thead th')].map(th => th.textContent.trim());
                      const row = t.querySelector('tbody tr');
                      return [...row.querySelectorAll('td')].map((td, i) => td.classList.contains('wb-diff')
                          ? head[i] : null).filter(h => h); }""", panel)


@pytest.mark.slow  # long; `make test-all` runs it
def test_layers_and_compare(server, page):
    from cpu_flags import int8_native
    from wb_core import api
    from wb_core.ui.words import run_name

    if not int8_native():
        pytest.skip("this CPU runs no INT8 kernels; the FP32 and INT8 comparison needs them")
    url, db = server
    api.profile("lenet-digits", db=db, study="lenet-2-threads", threads="2", max_time=0.3)
    time.sleep(1.1)  # the dashboard opens the newest study: make sure it is the next one
    df = api.profile("lenet-digits", db=db, study="lenet-digits", precisions="fp32,int8", threads="1",
                     max_time=0.3)
    assert list(df["status"]) == ["ok", "ok"], df[["status", "error"]]
    names = {r["precision"]: run_name(r) for _, r in df.iterrows()}

    page.goto(url)
    page.wait_for_selector(".wb-model-panel")

    # Layers: profile the INT8 run.
    open_tab(page, "Layers")
    layers = page.locator(".wb-layers-panel")
    layers.locator("select").select_option(label=names["int8"])
    layers.get_by_text("Not profiled yet").wait_for()
    layers.get_by_role("button", name="Profile layers").click()
    page.wait_for_selector(".wb-layers-result .js-plotly-plot .main-svg", timeout=120_000)
    layers.get_by_text("Profiled OpenVINO · INT8").wait_for()
    assert layers.locator(".wb-layers-result table.wb-table").first.locator("tbody tr").count() >= 2
    bars = page.evaluate("() => document.querySelector('.wb-layers-result .js-plotly-plot').data"
                         ".reduce((n, t) => n + t.y.length, 0)")
    assert bars >= 2
    assert "executed in" in layers.inner_text().lower()
    shoot(page, "layers")

    # Compare: FP32 (the baseline) and INT8 side by side; Precision differs.
    open_tab(page, "Compare")
    compare = page.locator(".wb-compare-panel")
    compare.locator("select[multiple]").first.select_option(label=[names["fp32"], names["int8"]])
    compare.locator(".wb-compare-button").click()
    page.wait_for_selector(".wb-compare-table td.wb-diff")
    assert _header_of_highlighted(page, ".wb-compare-table") == ["Precision"]
    ratios = compare.locator(".wb-compare-ratios")
    ratios.get_by_text("the throughput of the first run").wait_for()
    assert ratios.inner_text().startswith("Run 2: ")
    compare.get_by_role("button", name="Compare layers").click()
    page.wait_for_selector(".wb-compare-layers .js-plotly-plot .main-svg", timeout=180_000)
    result = compare.locator(".wb-compare-layers")
    summary = result.locator(".wb-layer-summary").inner_text()
    assert summary.startswith("The layers of the INT8 run took"), summary
    assert "helped most in" in summary or "was faster in no layer type" in summary
    types = result.locator("table.wb-table tbody tr")
    assert types.count() >= 3
    assert "Convolution" in result.locator("table.wb-table").inner_text()
    assert page.evaluate("() => document.querySelector('.wb-compare-layers .js-plotly-plot').data.length") == 2
    result.scroll_into_view_if_needed()
    shoot(page, "compare")

    # The best run of each of two studies: the study and the threads differ.
    compare.get_by_text("The best run of each of these studies").click()
    compare.locator("select[multiple]").nth(1).select_option(label=["lenet-digits", "lenet-2-threads"])
    compare.locator(".wb-compare-button").click()
    page.wait_for_function("() => { const t = document.querySelector('.wb-compare-table table');"
                           " return t && t.textContent.includes('lenet-2-threads'); }")
    highlighted = _header_of_highlighted(page, ".wb-compare-table")
    assert "Study" in highlighted and "Threads" in highlighted, highlighted

    assert compare.locator(".wb-msg-error").count() == 0
    assert_clean(page)
