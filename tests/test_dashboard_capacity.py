"""The Capacity tab in a real browser: plan for a target rate, find the highest rate a run sustains
under a loose p99 limit (the probed rates drawn as they are stored), and a bad input answered in
one sentence. The study is measured before the page opens, so the dashboard opens it.

The journey across tabs: a p99 limit set in Explore picks a run; Capacity starts from it; its rate
search (probes, not runs) leaves Explore's limit, Export's run and the report's pick as they were."""

from __future__ import annotations

import pytest

from browser_support import assert_clean, drag_slider, open_tab, shoot

pytestmark = pytest.mark.browser

# Probe points drawn in the rate plot (every trace but the dashed limit line).
PROBES_DRAWN = """() => { const el = document.querySelector('.wb-capacity-panel .js-plotly-plot');
                          if (!el || !el.data) return 0;
                          return el.data.filter(t => t.name !== 'p99 limit')
                                        .reduce((n, t) => n + (t.x ? t.x.length : 0), 0); }"""


def test_capacity_tab(server, page, lenet_dir, fast, tmp_path):
    import base64
    import dataclasses
    import re

    from wb_core.api import profile, results
    from wb_core.ui.explore_panel import _span
    from wb_core.ui.words import run_name

    url, db = server
    # Windows longer than `fast`'s and three interleaved rounds (each figure their median): on a loaded
    # machine one round starved of its CPU must not swap the two runs' order.
    steady = dataclasses.replace(fast, window_s=0.3, max_time_s=2.0)
    df = profile("lenet-digits", db=db, study="lenet-digits", threads="1", batch_sizes="1,128", repeats="3",
                 settings=steady)
    small, big = df.sort_values("batch_size").iloc[0], df.sort_values("batch_size").iloc[1]
    if small["latency_ms_p99"] >= big["latency_ms_p99"] or small["throughput"] >= big["throughput"]:
        pytest.fail("batch 1 measured a higher p99 or throughput than batch 128: the machine was too busy to "
                    f"tell them apart ({df[['batch_size', 'throughput', 'latency_ms_p99']].to_dict('records')})")
    page.goto(url)
    page.wait_for_selector(".wb-model-panel")
    # Explore: without limits the pick is batch 128 (more per second); a p99 limit between the two
    # runs picks batch 1.
    open_tab(page, "Explore")
    page.wait_for_selector(".wb-explore-panel .js-plotly-plot .main-svg")
    page.wait_for_function("(k) => { const el = document.querySelector('.wb-explore-panel .wb-best');"
                           " return el && el.dataset.key === k; }", arg=big["key"], timeout=30_000)
    lo, hi = _span(df["latency_ms_p99"])
    target = (small["latency_ms_p99"] + big["latency_ms_p99"]) / 2
    drag_slider(page, page.locator(".wb-explore-panel .widget-slider").first, (target - lo) / (hi - lo))
    page.wait_for_function("(k) => { const el = document.querySelector('.wb-explore-panel .wb-best');"
                           " return el && el.dataset.key === k; }", arg=small["key"], timeout=30_000)
    limits = page.locator(".wb-explore-panel").inner_text()
    assert "p99 latency ≤" in limits  # said where the user looks
    assert "The pick changed from" in limits

    open_tab(page, "Capacity")
    cap = page.locator(".wb-capacity-panel")
    # The run to search: the one Explore picked, named in words.
    run = cap.locator("select").first
    chosen = run.locator("option:checked").inner_text().replace("\xa0", " ")  # the select shows spaces as nbsp
    assert chosen.startswith(run_name(small)) and "samples/s" in chosen

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

    # Highest rate under a loose p99 limit, with short probes. Four rates, down to a fifteenth of the
    # closed-loop capacity, and 1 s each: with both CPUs taken by other work, the higher ones can
    # read saturated (arrivals falling behind), and one of them must still be sustained.
    cap.get_by_label("p99 limit (ms)", exact=True).fill("1000")
    cap.get_by_label("Seconds per rate").fill("1")
    cap.get_by_label("Rates to try").fill("4")
    cap.get_by_label("Rates to try").press("Tab")
    find = cap.get_by_role("button", name="Find max rate")
    find.click()
    answer = cap.locator(".wb-max-rate")
    answer.wait_for(timeout=180_000)
    assert "sustains" in answer.inner_text() and "requests/s arriving at random with p99 ≤ 1,000 ms" in answer.inner_text(), \
        answer.inner_text()
    page.wait_for_function(f"() => ({PROBES_DRAWN})() >= 4", timeout=60_000)
    assert cap.locator(".wb-rate-table tbody tr").count() == 4  # the rates tried, listed as they came
    assert find.is_enabled()
    assert "Done: 4 rates tried" in cap.locator(".wb-rate-progress").inner_text()
    assert "samples/s for this run" in cap.locator(".wb-modes").inner_text()  # why its figures differ
    probes = results("lenet-digits", db, "probes")
    assert len(probes) == 4 and set(probes.probe_of) == {small["key"]}  # every probe stored, as a probe
    assert len(results("lenet-digits", db, "stored")) == 2  # and not as a run
    shoot(page, "capacity")

    # Explore, Export and the report still stand on Explore's limit and pick.
    open_tab(page, "Explore")
    best = page.locator(".wb-explore-panel .wb-best")
    assert best.get_attribute("data-key") == small["key"]
    explore = page.locator(".wb-explore-panel").inner_text()
    assert "p99 latency ≤" in explore and "req/s" not in explore  # no probe among the runs
    open_tab(page, "Export")
    page.locator('a.wb-download[download="deployment.yaml"]').wait_for()
    assert page.locator(".wb-export-panel .wb-export-name").get_attribute("data-key") == small["key"]
    assert "p99 latency ≤" in page.locator(".wb-export-panel .wb-export-run").inner_text()
    page.get_by_role("button", name="Build the report").click()
    link = page.locator('a.wb-download[download="lenet-digits-report.html"]')
    link.wait_for(timeout=120_000)
    report = base64.b64decode(link.get_attribute("href").split("base64,", 1)[1]).decode()
    assert re.search(r"<b class='pick'>(.*?)</b>", report).group(1) == run_name(small)
    assert "p99 latency ≤" in re.search(r"<span class='limits'>(.*?)</span>", report).group(1)

    assert_clean(page)
