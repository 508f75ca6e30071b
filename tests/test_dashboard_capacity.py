"""The Capacity tab in a real browser: plan for a target rate, find the highest rate a run sustains
under a loose p99 limit (the probed rates drawn as they are stored), and a bad input answered in
one sentence. The study is measured before the page opens, so the dashboard opens it."""

from __future__ import annotations

import pytest

from browser_support import assert_clean, open_tab, shoot

pytestmark = pytest.mark.browser

# Probe points drawn in the rate plot (every trace but the dashed limit line).
PROBES_DRAWN = """() => { const el = document.querySelector('.wb-capacity-panel .js-plotly-plot');
                          if (!el || !el.data) return 0;
                          return el.data.filter(t => t.name !== 'p99 limit')
                                        .reduce((n, t) => n + (t.x ? t.x.length : 0), 0); }"""


def test_capacity_tab(server, page, lenet_dir, fast):
    from wb_core.api import load_results, profile

    url, db = server
    profile("lenet-digits", db=db, study="lenet-digits", threads="1", cores="none,0", settings=fast)
    page.goto(url)
    page.wait_for_selector(".wb-model-panel")
    open_tab(page, "Capacity")
    cap = page.locator(".wb-capacity-panel")
    # The run to search: the one Explore recommended, named in words.
    run = cap.locator("select").first
    chosen = run.locator("option:checked").inner_text().replace("\xa0", " ")  # the select shows spaces as nbsp
    assert chosen.startswith("OpenVINO · FP32 · batch 1 · 1 thread") and "samples/s" in chosen

    # A bad target: one sentence in the message area, no plan.
    target = cap.get_by_label("Target (requests/s)")
    target.fill("-3")
    target.press("Tab")
    cap.get_by_role("button", name="Plan").click()
    cap.get_by_text("The target rate (requests/s) must be a number above 0").wait_for(timeout=60_000)
    assert cap.locator(".wb-plan-sentence").count() == 0

    # Capacity plan for 5,000 requests/s on 2-CPU replicas: the sentence and the table.
    target.fill("5000")
    cap.get_by_label("CPUs per replica").fill("2")
    cap.get_by_label("CPUs per replica").press("Tab")
    cap.get_by_role("button", name="Plan").click()
    sentence = cap.locator(".wb-plan-sentence")
    sentence.wait_for(timeout=60_000)
    assert sentence.inner_text().startswith("To serve 5,000 requests/s you need ")
    assert sentence.inner_text().endswith("CPUs.") or sentence.inner_text().endswith("CPU.")
    plan = cap.locator(".wb-plan").inner_text()
    assert "Instances needed" in plan and "CPUs in total" in plan
    assert "Based on run OpenVINO · FP32" in cap.locator(".wb-plan-basis").inner_text()
    assert cap.get_by_text("must be a number above 0").count() == 0  # the message went with the bad input

    # Highest rate under a loose p99 limit, with short probes.
    cap.get_by_label("p99 limit (ms)", exact=True).fill("1000")
    cap.get_by_label("Seconds per rate").fill("0.3")
    cap.get_by_label("Rates to try").fill("3")
    cap.get_by_label("Rates to try").press("Tab")
    find = cap.get_by_role("button", name="Find max rate")
    find.click()
    answer = cap.locator(".wb-max-rate")
    answer.wait_for(timeout=180_000)
    assert "sustains" in answer.inner_text() and "requests/s arriving at random with p99 ≤ 1,000 ms" in answer.inner_text(), \
        answer.inner_text()
    page.wait_for_function(f"() => ({PROBES_DRAWN})() >= 3", timeout=60_000)
    assert cap.locator(".wb-rate-table tbody tr").count() == 3  # the rates tried, listed as they came
    assert find.is_enabled()
    assert "Done: 3 rate(s) tried" in cap.locator(".wb-rate-progress").inner_text()
    df = load_results(db, "lenet-digits")
    assert df.rate.notna().sum() == 3  # every probe stored in the study
    shoot(page, "capacity")

    assert_clean(page)
