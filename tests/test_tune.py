"""`wb tune`: a budget too small is refused before anything runs; a small budget on LeNet ends with
a confirmed recommendation, its interval, both ratios and a YAML export."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from wb_core.errors import ConfigError


@pytest.mark.parametrize("text,seconds", [("180", 180), ("90s", 90), ("3m", 180), ("2m30s", 150), (45, 45)])
def test_time_budgets_read_as_seconds(text, seconds):
    from wb_core.tune import parse_time

    assert parse_time(text) == seconds


def test_a_budget_too_small_for_one_round_is_one_sentence_and_nothing_is_measured(lenet_ir, db, fast):
    from wb_core.api import tune

    with pytest.raises(ConfigError, match="too small for one round of one configuration") as e:
        tune(lenet_ir, time_budget="1s", db=db, settings=fast)
    assert "\n" not in str(e.value) and str(e.value).endswith(".")
    assert not db.exists()
    with pytest.raises(ConfigError, match="not a duration"):
        tune(lenet_ir, time_budget="soon", db=db, settings=fast)


def test_cli_tune_refuses_a_tiny_budget_without_a_traceback(lenet_ir, db):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "wb_core.cli", "tune", str(lenet_ir), "--time", "1s", "--db", str(db)],
                       capture_output=True, text=True)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "too small for one round" in out and "Traceback" not in out
    assert not db.exists()


@pytest.mark.parametrize("left,needed,budget,runs", [
    (132, 135, 180, True),    # 3 s short of a 135 s estimate with 132 s left of 3 minutes: confirm, ending 3 s over
    (170, 135, 180, True),
    (162, 180, 180, True),    # 18 s over: the most 10% of the budget allows
    (161, 180, 180, False),
    (100, 135, 180, False),   # 35 s short: leave it, and say so
    (0, 10, 60, False),
])
def test_confirmation_may_run_a_tenth_past_the_budget(left, needed, budget, runs):
    from wb_core.tune import confirm_fits

    assert confirm_fits(left, needed, budget) is runs


@pytest.mark.slow
def test_tune_lenet_within_a_small_budget(lenet_ir, db, fast, tmp_path):
    from wb_core.api import tune
    from wb_core.store import Store

    said = []
    res = tune(lenet_ir, time_budget=120, db=db, study="t", data="demo:lenet-digits", calib_size=64, settings=fast,
               export_dir=tmp_path / "out", on_progress=said.append, batch_sizes="1,8")
    assert any(s.startswith("Searching") for s in said) and said[-1] == res.answer
    with Store(db, readonly=True) as s:
        rounds = s.round_counts("t")
        runs = s.to_frame("t")
    measured = runs[runs["status"] == "ok"]
    # OpenVINO's own THROUGHPUT hint, untouched, is always a candidate beside the leaders.
    assert ((measured["hint"] == "throughput") & (measured["untouched"] == True)).any()  # noqa: E712
    # One round for most configurations; more only for the leaders.
    assert len(measured) >= 2 and sum(1 for k in measured["key"] if rounds.get(k, 1) > 1) <= 5
    conf = res.confirmation
    assert conf is not None and conf["gain"] is not None and conf["gain"].low <= conf["gain"].ratio <= conf["gain"].high
    assert res.recommended["key"] == conf["recommended"]["key"]
    assert "samples/s" in res.answer and "budget" in res.answer
    doc = yaml.safe_load(Path(res.export_path).read_text())
    assert doc  # the exported deployment reads back as YAML
