"""Every tab of the dashboard opens without errors: no page errors, no console errors from our code,
no Python traceback on the page. The tabs are read from `wb_core.ui.app.TAB_TITLES`, so a tab added
later is covered too. The database holds one small study, so the plots and exports are drawn.
"""

from __future__ import annotations

import time

import pytest

from browser_support import assert_clean, kernels_of, kernels_settle_at, open_tab, shoot
from wb_core.cli.dashboard import KERNEL_POOL_SIZE, POOL_REFILL_DELAY_S

# Besides the pages' kernels, the server keeps KERNEL_POOL_SIZE kernels ready (started, imports done):
# they belong to no page, and are there whatever the pages do. A count settles once a spare taken by a
# page has been replaced.
STEADY_S = POOL_REFILL_DELAY_S + 5

pytestmark = pytest.mark.browser


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
    # Every plot on the page was drawn by plotly (an empty one, e.g. accuracy when none was measured,
    # holds no trace but a note).
    drawn = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map(el => "
                          "Array.isArray(el.data) && !!el.querySelector('.main-svg'))")
    assert len(drawn) >= 4 and all(drawn), drawn
    assert_clean(page)

    # Reloading shuts the page's kernel down (its shutdown request carries the _xsrf cookie, which
    # the server used to refuse): after three reloads one page's kernel is alive, the last page's,
    # beside the pool's spare (a leak would leave three more).
    for _ in range(3):
        page.reload()
        page.wait_for_selector(".wb-model-panel")
    assert len(kernels_settle_at(server.pid, 1 + KERNEL_POOL_SIZE, steady_s=STEADY_S)) == 1 + KERNEL_POOL_SIZE
    assert_clean(page)


def _reload_before_loaded_then_close(server, page, reloads: int) -> None:
    """Open the page, reload it `reloads` times a second apart (each long before the page has loaded:
    its notebook alone takes seconds), close the browser, and find no page's kernel of the server
    30 s later: only the pool's spares."""
    url, _ = server
    page.goto(url, wait_until="commit")
    seen = 0
    for _ in range(reloads):
        page.wait_for_timeout(1000)
        seen = max(seen, len(kernels_of(server.pid)))
        page.reload(wait_until="commit")
    page.wait_for_timeout(1000)
    seen = max(seen, len(kernels_of(server.pid)))
    assert seen >= 1, "no page ever started a kernel: the test measured nothing"
    page.context.browser.close()
    left = kernels_settle_at(server.pid, KERNEL_POOL_SIZE, timeout=30 + STEADY_S, steady_s=STEADY_S)
    assert len(left) == KERNEL_POOL_SIZE, f"{len(left) - KERNEL_POOL_SIZE} kernel(s) outlived their pages"


def test_fast_reloads_leave_no_kernel(server, page):
    _reload_before_loaded_then_close(server, page, reloads=3)


@pytest.mark.slow
def test_ten_fast_reloads_leave_no_kernel(server, page):
    _reload_before_loaded_then_close(server, page, reloads=10)


@pytest.mark.slow
def test_a_page_that_never_connects_loses_its_kernel(server):
    """A page fetched whole by a client that never runs its scripts (no websocket ever connects)
    keeps its kernel only for the grace the command sets, not for the idle cull's minutes."""
    import urllib.request

    from wb_core.cli.dashboard import UNCONNECTED_GRACE_S

    url, _ = server
    spares = {k.pid for k in kernels_settle_at(server.pid, KERNEL_POOL_SIZE, steady_s=2)}
    assert len(spares) == KERNEL_POOL_SIZE  # the pool is ready: the page takes one of these
    with urllib.request.urlopen(url, timeout=120) as answer:
        assert b"pagehide" in answer.read()  # the early shutdown script is in the page
    done = time.time()
    taken = spares & {k.pid for k in kernels_of(server.pid)}
    assert len(taken) == KERNEL_POOL_SIZE
    while taken & {k.pid for k in kernels_of(server.pid)} and time.time() < done + UNCONNECTED_GRACE_S + 30:
        time.sleep(1)
    assert not taken & {k.pid for k in kernels_of(server.pid)}  # the page's kernel is gone
    assert time.time() - done >= UNCONNECTED_GRACE_S - 1  # not shut down before its grace
    # and the pool holds a fresh spare, never taken by a page
    assert len(kernels_settle_at(server.pid, KERNEL_POOL_SIZE, steady_s=2)) == KERNEL_POOL_SIZE
