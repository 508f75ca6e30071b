"""The first screen served from the kernel `wb dashboard` keeps ready: the Start tab's controls on
screen, built from the database as it is when the page asks (not when the kernel started), and a
tune starts from them (then is cancelled)."""

from __future__ import annotations

import pytest

from browser_support import assert_clean, kernels_of, kernels_settle_at
from wb_core.cli.dashboard import KERNEL_POOL_SIZE, POOL_REFILL_DELAY_S

pytestmark = pytest.mark.browser


def test_the_first_screen_comes_from_a_ready_kernel_and_a_tune_starts(server, page, lenet_ir, fast):
    from playwright.sync_api import expect

    from wb_core.api import profile

    url, db = server
    spares = {k.pid for k in kernels_settle_at(server.pid, KERNEL_POOL_SIZE, steady_s=2)}
    assert len(spares) == KERNEL_POOL_SIZE
    # A study stored after the spare kernel started: the page, built when it asks, must see it.
    profile(lenet_ir, db=db, study="stored-later", batch_sizes="1", settings=fast)
    page.goto(url)
    start = page.locator(".wb-start-panel")
    start.get_by_role("button", name="Use this model").wait_for(state="visible")
    assert spares & {k.pid for k in kernels_of(server.pid)}, "the page did not take the kernel kept ready"
    for name in ("Use this model", "Tune"):
        expect(start.get_by_role("button", name=name)).to_be_visible()
    expect(start.get_by_label("Time budget")).to_be_visible()
    expect(start.get_by_text("Demo model")).to_be_visible()
    page.get_by_role("tab", name="Sweep", exact=True).click()
    expect(page.locator(".wb-sweep-panel")).to_contain_text("stored-later")

    page.get_by_role("tab", name="Start", exact=True).click()
    start.get_by_text("Demo model").click()
    start.get_by_label("Time budget").fill("30s")
    tune = start.locator("button.wb-tune")
    tune.click()
    page.locator(".wb-tune-progress").wait_for(state="visible")
    expect(tune).to_be_disabled()  # the tune is running
    cancel = start.get_by_role("button", name="Cancel")
    expect(cancel).to_be_enabled()
    cancel.click()
    expect(tune).to_be_enabled(timeout=180_000)  # the tune has ended
    assert_clean(page)
    # The page's kernel and one spare: the pool was refilled after the page took its kernel.
    settled = kernels_settle_at(server.pid, 1 + KERNEL_POOL_SIZE, steady_s=POOL_REFILL_DELAY_S + 2)
    assert len(settled) == 1 + KERNEL_POOL_SIZE
