"""The Start tab's Tune path in a real browser: from the first screen, the demo model, a tiny time
budget, Tune; the answer in words and a download of its YAML. What the page says is checked against
the store and against the deployment file `api.tune` itself wrote, not against the page's own code.
"""

from __future__ import annotations

import os

import pytest

from browser_support import assert_clean, shoot

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_tune_from_the_first_screen(server, page, tmp_path):
    from wb_core.export.deployment import DeploymentConfig
    from wb_core.store import load_results
    from wb_core.ui.words import run_name

    url, db = server
    page.goto(url)
    start = page.locator(".wb-start-panel")
    start.wait_for()
    start.get_by_text("Demo model").click()
    # 45 s keeps the suite short; the screenshot run (`make screenshots`) gives the budget a user would,
    # so the picture shows an answer confirmed against the runtime's defaults.
    start.get_by_label("Time budget").fill("2m" if os.environ.get("WB_SCREENSHOTS") else "45s")
    start.get_by_role("button", name="Tune").click()
    page.locator(".wb-tune-progress").wait_for()
    answer = page.locator(".wb-start-panel .wb-answer-name")
    ended = page.locator(".wb-start-panel .wb-answer-name, .wb-tune-messages .wb-msg-error")
    ended.first.wait_for(timeout=300_000)
    assert answer.count() == 1, page.locator(".wb-start-panel").inner_text()  # else the error says why
    key, study = answer.get_attribute("data-key"), answer.get_attribute("data-study")
    words = page.locator(".wb-start-panel .wb-answer-words").inner_text()

    # The run on screen is a stored, successful run of the study it names, named in words.
    df = load_results(db, study)
    run = df[df["key"] == key].iloc[0]
    assert run["status"] == "ok"
    assert answer.inner_text() == run_name(run)
    assert run_name(run) in words and key not in words
    assert f"{run['throughput']:,.0f} samples/s" in words, words  # the figure `wb tune` says, from the store
    # api.tune wrote its own deployment file for that same run (the tune's export folder).
    written = list((server.home / "wb-deployments").glob("*-tune/deployment.yaml"))
    assert len(written) == 1, written
    assert DeploymentConfig.from_yaml(written[0].read_text()).measurement.run_key == key

    # The YAML's download link gives the same run.
    link = page.locator('.wb-tune-downloads a.wb-download[download="deployment.yaml"]')
    link.wait_for()
    with page.expect_download() as info:
        link.click()
    saved = tmp_path / "deployment.yaml"
    info.value.save_as(saved)
    dep = DeploymentConfig.from_yaml(saved.read_text())
    assert dep.measurement.run_key == key and dep.batch_size == int(run["batch_size"])
    # The screenshot: from the time budget down to the answer and its downloads.
    page.evaluate("() => document.querySelector('.wb-tune-budget').scrollIntoView({block: 'start'})")
    shoot(page, "start")
    assert_clean(page)
