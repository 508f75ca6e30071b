"""Every tab of the dashboard opens without errors: no page errors, no console errors from our code,
no Python traceback on the page. The tabs are read from `wb_core.ui.app.TAB_TITLES`, so a tab added
later is covered too. The database holds one small study, so the plots and exports are drawn.
"""

from __future__ import annotations

import re

import pytest

from browser_support import open_tab, shoot

pytestmark = pytest.mark.browser

# Console errors that are not ours, each with why it is ignored:
KNOWN_NOISE = (
    # Voila's page template links Font Awesome (the buttons' icons) from cdn.jsdelivr.net; a machine
    # without internet access logs the failed load (ERR_NAME_NOT_RESOLVED and the like) as an error.
    re.compile(r"Failed to load resource: net::ERR_(NAME_NOT_RESOLVED|INTERNET_DISCONNECTED|CONNECTION_REFUSED|"
               r"ADDRESS_UNREACHABLE|NETWORK_ACCESS_DENIED)"),
    # The same anywidget start-up timeout as KNOWN_PAGE_NOISE below, when the browser also logs it.
    re.compile(r"\[anywidget\] Failed to initialize model\."),
)


# Page errors that are not ours: anywidget's front end (plotly's FigureWidget runs on it) gives each
# figure's model 2 seconds to start and reports this when loading plotly's bundle takes longer, as
# on a busy 2-core machine; the figure is drawn all the same, which the test checks.
KNOWN_PAGE_NOISE = (re.compile(r"^\[anywidget\] Failed to initialize model\.$"),)


def ours(errors: list[str], noise=KNOWN_NOISE) -> list[str]:
    return [e for e in errors if not any(p.search(e) for p in noise)]


def test_every_tab_opens_clean(server, page, lenet_ir, fast):
    from playwright.sync_api import expect

    from wb_core.api import profile
    from wb_core.ui.app import TAB_TITLES

    url, db = server
    # A study in the database before the page opens: the dashboard reopens it on every tab.
    profile(lenet_ir, db=db, study="clean", batch_sizes="1,4", settings=fast)
    page.goto(url)
    page.wait_for_selector(".wb-model-panel")
    page.get_by_role("button", name="Use this model").wait_for(state="visible")
    for title in (*TAB_TITLES, TAB_TITLES[0]):
        open_tab(page, title)
        expect(page.get_by_role("tab", name=title, exact=True)).to_have_attribute("aria-selected", "true")
        page.wait_for_timeout(1500)  # callbacks that draw a tab when it is first opened
        text = page.locator("body").inner_text()
        assert "Traceback" not in text, f"a traceback on the {title} tab"
        assert "Something went wrong" not in text, f"an unexpected error on the {title} tab"
        shoot(page, f"clean-{title.lower()}")
    # Explore and Export drew the study when opened.
    open_tab(page, "Explore")
    page.wait_for_selector(".wb-explore-panel .js-plotly-plot .main-svg")
    page.get_by_text("More plots: batch size").click()
    page.wait_for_function("() => document.querySelectorAll('.wb-explore-panel .js-plotly-plot .main-svg')"
                           ".length >= 2")
    open_tab(page, "Export")
    page.wait_for_selector('.wb-export-panel a.wb-download[download="deployment.yaml"]')
    assert "Traceback" not in page.locator("body").inner_text()
    assert ours(page.errors, KNOWN_PAGE_NOISE) == []
    assert ours(page.console_errors) == []
