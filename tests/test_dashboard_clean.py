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
    # Chromium asks every page for /favicon.ico; Voila serves none (a 404 logged as a console error).
    re.compile(r"favicon\.ico"),
    # Plotly's anywidget bridge logs when a figure's model arrives after the view asked for it
    # (slow kernels on a busy 2-core machine); the figure is drawn once it arrives.
    re.compile(r"anywidget", re.I),
)


def ours(errors: list[str]) -> list[str]:
    return [e for e in errors if not any(p.search(e) for p in KNOWN_NOISE)]


def test_every_tab_opens_clean(server, page, lenet_ir, fast):
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
        panel = page.locator(".widget-tab-contents > .lm-Widget:not(.lm-mod-hidden), "
                             ".widget-tab-contents > .p-Widget:not(.p-mod-hidden)").first
        panel.wait_for(state="visible")
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1500)  # callbacks that draw a tab when it is first opened
        text = page.locator("body").inner_text()
        assert "Traceback" not in text, f"a traceback on the {title} tab"
        assert "Something went wrong" not in text, f"an unexpected error on the {title} tab"
        shoot(page, f"clean-{title.lower()}")
    # Explore and Export drew the study when opened.
    open_tab(page, "Explore")
    page.wait_for_selector(".wb-explore-panel .js-plotly-plot .main-svg")
    open_tab(page, "Export")
    page.wait_for_selector('.wb-export-panel a.wb-download[download="deployment.yaml"]')
    assert page.errors == []
    assert ours(page.console_errors) == []
