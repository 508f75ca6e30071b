"""The Sweep tab in a real browser: one page session that opens on an existing study and walks
through a new study with live points, FP32+INT8 with the demo data and an accuracy-drop limit, a
smart search with a budget, a serving scenario, cancel and run again, and the oversubscription warning.
"""

from __future__ import annotations

import re

import pytest

from browser_support import assert_clean, open_tab, plot_points, shoot

pytestmark = pytest.mark.browser

PANEL = ".wb-sweep-panel"


def sweep_table(page) -> list[dict]:
    """The Sweep tab's table of runs, a dict per row keyed by its worded header."""
    return page.evaluate(
        """() => { const t = document.querySelector('.wb-sweep-panel table.wb-table');
                   if (!t) return [];
                   const head = [...t.querySelectorAll('thead th')].map(th => th.textContent.trim());
                   return [...t.querySelectorAll('tbody tr')].map(tr => Object.fromEntries(
                       [...tr.querySelectorAll('td')].map((td, i) => [head[i], td.textContent.trim()]))); }""")


def progress(page) -> tuple[str, float]:
    """The progress label and the bar's filled fraction."""
    return page.evaluate(
        """() => { const bar = document.querySelector('.wb-sweep-panel .wb-progress .progress-bar');
                   const label = document.querySelector('.wb-sweep-panel .wb-progress-text');
                   const frac = bar.style.width ? parseFloat(bar.style.width) / 100
                                                : bar.getBoundingClientRect().width
                                                  / bar.parentElement.getBoundingClientRect().width;
                   return [label ? label.textContent : '', frac]; }""")


def label_matches_bar(page) -> tuple[int, int, str, float]:
    text, frac = progress(page)
    m = re.match(r"(\d+) / (\d+)", text)
    assert m, text
    done, total = int(m[1]), int(m[2])
    assert abs(frac - done / total) < 0.02, (text, frac)
    return done, total, text, frac


def fill(panel, label: str, value: str) -> None:
    box = panel.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Tab")


def run(page, panel, study: str, timeout: float = 180_000) -> str:
    """Run a sweep into `study` and wait until its thread is done; returns the final message."""
    fill(panel, "Study name", study)
    panel.get_by_role("button", name="Run").click()
    done = panel.locator(".wb-messages .wb-msg-ok, .wb-messages .wb-msg-error, .wb-messages .wb-msg-info",
                         has_text=f"Study '{study}' in ")
    done.wait_for(timeout=timeout)
    page.wait_for_function("() => !document.querySelector('.wb-sweep-panel .mod-success').disabled")
    return done.inner_text()


WATCH_RUN_BUTTON = """() => {
    const panel = document.querySelector('.wb-sweep-panel');
    const watch = window.wbRunWatch = {cancelling: false, violations: []};
    const check = () => {
        const run = panel.querySelector('.mod-success'), cancel = panel.querySelector('.mod-danger');
        const message = panel.querySelector('.wb-messages').textContent;
        const cancelling = cancel.textContent.includes('Cancelling');
        watch.cancelling = watch.cancelling || cancelling;
        if (!run.disabled && (cancelling || !message.includes('Cancelled')))
            watch.violations.push(`Run enabled while "${cancel.textContent.trim()}" / "${message.trim()}"`);
    };
    new MutationObserver(check).observe(panel, {subtree: true, childList: true, attributes: true,
                                                characterData: true});
}"""


def open_sweep_tab(server, page, lenet_ir):
    """The dashboard on a database holding an older study, the demo model chosen, the Sweep tab open."""
    from wb_core.api import MeasureSettings, profile

    url, db = server
    profile(lenet_ir, db=db, study="old", batch_sizes="1", threads="1",
            settings=MeasureSettings(max_time_s=0.3, warmup_s=0.1, window_s=0.1))
    page.goto(url)
    page.wait_for_selector(".wb-model-panel")
    page.get_by_role("button", name="Use this model").click()
    page.get_by_text("Ready: lenet-digits").wait_for()
    open_tab(page, "Sweep")
    panel = page.locator(PANEL)
    assert panel.get_by_label("Study name", exact=True).input_value() == "lenet-digits"
    fill(panel, "Threads", "1")
    fill(panel, "Seconds per point", "0.3")
    return db, panel


POINTS = 10  # in the cancel-and-resume study


def finish(page, name: str) -> None:
    page.evaluate("() => window.scrollTo(0, 0)")
    shoot(page, name)
    assert_clean(page)


def test_new_study_live_points_warning_cancel_and_resume(server, page, lenet_ir):
    """(i) a new study after the page opened on an old one shows its points; (vi) threads beyond the
    CPUs are warned about; (v) cancel, then Run again: label and bar agree, Run held until the thread ends."""
    from wb_core.api import available_cpus
    from wb_core.store import load_results

    db, panel = open_sweep_tab(server, page, lenet_ir)

    # (vi) Threads beyond the CPUs: a warning before anything runs.
    n = len(available_cpus())
    fill(panel, "Threads", "99")
    panel.locator(".wb-warnings", has_text=f"Threads = 99 is more than the {n} CPU").wait_for()
    assert "oversubscribe" in panel.locator(".wb-warnings").inner_text()
    fill(panel, "Threads", "1")
    page.wait_for_function("() => document.querySelector('.wb-sweep-panel .wb-warnings').textContent === ''")

    # (i) The page opened on the old study; choosing another model cleared its point from the live
    # plot, and the new study's points appear there.
    assert plot_points(page, PANEL) == 0
    fill(panel, "Batch sizes", "1,2")
    message = run(page, panel, "fresh")
    assert "2 ok" in message, message
    page.wait_for_function("() => { const el = document.querySelector('.wb-sweep-panel .js-plotly-plot');"
                           " return el && el.data && el.data.reduce((n, t) => n + (t.x ? t.x.length : 0), 0) == 2; }")
    label_matches_bar(page)
    assert progress(page)[0] == "2 / 2"

    # (v) Cancel after the first point, then Run again: the label and the bar agree, counting the
    # stored points from the start, and Run stays disabled until the sweep's thread has ended.
    # Ten points of at least a second's measuring each: however fast the machine, the cancel after the
    # first and the check right after resuming land while points are still to come.
    fill(panel, "Batch sizes", ",".join(str(2 ** i) for i in range(POINTS)))
    fill(panel, "Seconds per point", "1")
    fill(panel, "Study name", "resume")
    run_button, cancel = panel.get_by_role("button", name="Run"), panel.locator(".mod-danger")
    run_button.click()
    page.wait_for_function("() => /^[1-9] \\/ 10/.test(document.querySelector('.wb-sweep-panel .wb-progress-text')"
                           ".textContent)", timeout=180_000)
    # Every change on the page from here is checked: Run may come back only once the sweep's thread
    # has said it is done (its last words are the "Cancelled" message), never while "Cancelling…" shows.
    page.evaluate(WATCH_RUN_BUTTON)
    cancel.click()
    page.wait_for_function("() => !document.querySelector('.wb-sweep-panel .mod-success').disabled",
                           timeout=120_000)
    assert "Cancelled" in panel.locator(".wb-messages").inner_text(), panel.locator(".wb-messages").inner_text()
    assert cancel.is_disabled() and cancel.inner_text().strip() == "Cancel"
    seen = page.evaluate("() => window.wbRunWatch")
    assert seen["cancelling"] and seen["violations"] == [], seen
    stored = len(load_results(db, "resume"))
    assert 1 <= stored < POINTS
    done, total, _, _ = label_matches_bar(page)
    assert (done, total) == (stored, POINTS)
    run_button.click()
    try:
        panel.locator(".wb-progress-text", has_text="resuming").wait_for(timeout=60_000)
    except Exception:  # say what the page shows instead
        pytest.fail(f"no 'resuming' beside the progress: {progress(page)}; {panel.locator('.wb-messages').inner_text()}")
    done, total, text, _ = label_matches_bar(page)
    # The bar starts at the stored points (points may have arrived since; the label says how it started).
    assert total == POINTS and stored <= done < POINTS and f"resuming: {stored} already measured" in text, text
    assert run_button.is_disabled()
    panel.locator(".wb-messages .wb-msg", has_text="Study 'resume' in ").wait_for(timeout=180_000)
    page.wait_for_function("() => !document.querySelector('.wb-sweep-panel .mod-success').disabled")
    done, total, text, frac = label_matches_bar(page)
    assert text == f"{POINTS} / {POINTS}" and frac > 0.98
    assert len(load_results(db, "resume")) == POINTS

    finish(page, "sweep-tab")


@pytest.mark.slow
def test_accuracy_smart_search_and_serving_scenario(server, page, lenet_ir):
    """(ii) FP32 and INT8 with the demo data, top-1 and an accuracy-drop limit; (iii) a smart search
    with a budget; (iv) two instances of one core each."""
    from cpu_flags import int8_native
    from wb_core.store import load_results

    db, panel = open_sweep_tab(server, page, lenet_ir)
    # (ii) FP32 and INT8 with the demo's data, top-1 accuracy and an accuracy-drop limit.
    panel.get_by_label("INT8", exact=True).check()
    fill(panel, "Batch sizes", "1")
    panel.get_by_text("The demo's own data").click()
    panel.locator(".wb-data-section .wb-msg-ok", has_text="lenet-digits").wait_for()
    panel.get_by_label("Accuracy metric").select_option(label="Top-1 accuracy")
    fill(panel, "Accuracy-drop limit", "0.02")
    message = run(page, panel, "accuracy")
    rows = {r["Precision"].lower(): r for r in sweep_table(page)}
    assert sorted(rows) == ["fp32", "int8"], rows
    assert rows["fp32"]["Status"] == "ok" and re.fullmatch(r"0\.\d+|1\.0+", rows["fp32"]["Accuracy"]), rows
    if int8_native():
        assert rows["int8"]["Status"] == "ok", f"{rows['int8']} (page says: {message})"
        assert re.fullmatch(r"0\.\d+|1\.0+", rows["int8"]["Accuracy"]), rows
        df = load_results(db, "accuracy").set_index("precision")
        assert df.loc["int8", "accuracy_metric"] == "top1" and df.loc["int8", "accuracy_drop"] <= 0.02
    else:
        assert rows["int8"]["Status"] == "skipped" and rows["int8"]["Problem"], rows
    panel.get_by_label("INT8", exact=True).uncheck()
    panel.get_by_text("No data (speed only)").click()

    # (iii) A smart search with a budget: it measures at most that many of the grid's configurations.
    panel.get_by_role("button", name="Smart search").click()
    budget = panel.get_by_label("Budget (configurations)")
    budget.wait_for()
    budget.fill("2")
    budget.press("Tab")
    fill(panel, "Batch sizes", "1,2,4")
    message = run(page, panel, "smart")
    assert "Smart search tried" in message and "of 3 configurations" in message, message
    measured = len(load_results(db, "smart"))
    assert 1 <= measured <= 2 and len(sweep_table(page)) == measured
    done, total, _, _ = label_matches_bar(page)
    assert done == total == measured
    panel.get_by_role("button", name="Every combination").click()
    budget.wait_for(state="hidden")

    # (iv) A serving scenario: two instances of one core each.
    fill(panel, "Batch sizes", "1")
    fill(panel, "Instances", "2")
    fill(panel, "Cores per instance", "1")
    message = run(page, panel, "serving")
    assert "1 ok" in message, message
    (row,) = sweep_table(page)
    assert row["Instances"] == "2" and row["Status"] == "ok", row
    fill(panel, "Instances", "1")
    fill(panel, "Cores per instance", "auto")

    finish(page, "sweep-tab-scenario")
