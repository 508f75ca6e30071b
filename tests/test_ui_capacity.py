"""The Capacity tab without a browser: the run list, the capacity plan in words, bad inputs, and a
real rate search on the demo model whose probes reach the plot as they are stored."""

from __future__ import annotations

import pytest

from analysis_data import make_study_db, sample_frame
from wb_core.api import ConfigError, capacity
from wb_core.plots import rate_figure
from wb_core.ui.capacity_panel import (
    CapacityPanel,
    number,
    plan_sentence,
    run_options,
)
from wb_core.ui.state import DashboardState, Pick
from wb_core.ui.words import rounded


@pytest.fixture
def panel(tmp_path):
    db = tmp_path / "cap.db"
    make_study_db(db, list(sample_frame().to_dict("records")))
    session = DashboardState(db)
    session.study = "t"
    return CapacityPanel(session)


def test_numbers_typed_as_text_are_checked_in_one_sentence():
    assert number("1,000", "Target", 0, 1e9, low_open=True) == 1000
    assert number(" 2.5 ", "Limit", 0, 10) == 2.5
    assert number("", "Limit", 0, 10, blank_ok=True) is None
    for bad, words in (("0", "above 0"), ("-4", "above 0"), ("lots", "must be a number"), ("", "is empty"),
                       ("nan", "finite"), ("inf", "finite")):
        with pytest.raises(ConfigError, match=words):
            number(bad, "The target rate (requests/s)", 0, 1e9, low_open=True)
    with pytest.raises(ConfigError, match="whole number"):
        number("2.5", "CPUs per replica", 1, 64, integer=True)


def test_run_list_names_runs_in_words_and_follows_the_selected_run(panel):
    df = panel.session.results()
    options = run_options(df)
    ok_keys = set(df[df.status == "ok"].key)
    assert {k for _, k in options} == ok_keys and len(options) == len(ok_keys)  # the failed run is left out
    assert all(name.startswith(("OpenVINO ·", "TensorFlow ·")) and "samples/s" in name for name, _ in options)
    # Nothing selected in Explore: the recommended run (highest throughput: batch 32).
    best = df.loc[df.throughput.idxmax(), "key"]
    assert panel.run.control.value == best
    other = next(k for k in ok_keys if k != best)
    panel.session.set_pick(Pick(key=other, name="the other run"), "limits changed.")
    assert panel.run.control.value == other
    assert "the other run" in panel.pick_note.value  # the Run box says it followed Explore's pick
    panel.run.control.value = best  # the user searches another run: the pick stays, and the tab says so
    assert panel.session.pick.key == other and "not Explore's pick" in panel.pick_note.value
    assert not panel.find.disabled


def test_rate_search_needs_numbers_it_can_use(panel):
    panel.p99.control.value = "fast"
    panel.find.click()
    assert "must be a number" in panel.rate_messages.text.value
    assert panel.rate_messages.details_box.layout.display == "none"  # a sentence, no traceback
    assert panel._searching is None and not panel.find.disabled


def test_capacity_plan_in_words(panel):
    panel.target.control.value = "5000"
    panel.plan_p99.control.value = "5"
    panel.machine.control.value = "4"
    panel.headroom.control.value = "20"
    panel.plan_button.click()
    assert panel.plan_messages.text.value == ""
    plan = capacity(panel.session.results(), 5000, 5, 0.2, 4)
    sentence = plan_sentence(plan)
    assert sentence.startswith("To serve 5,000 requests/s with p99 ≤ 5 ms you need ")
    assert sentence.endswith(f": {plan.total_cpus} CPU{'s' if plan.total_cpus != 1 else ''}.")
    assert sentence in panel.plan_out.value.replace("&quot;", '"')
    for words in ("Instances needed", "Cores per instance", "Replicas", "CPUs in total", "20% spare"):
        assert words in panel.plan_out.value
    # What it rests on: the run in words, the study, the CPU it was measured on.
    assert "Test CPU (4 CPUs)" in panel.basis.value and "back to back" in panel.basis.value
    assert "OpenVINO · FP32 · batch" in panel.basis.value
    # Pinned single-instance runs exist, so the split of one replica's CPUs is shown.
    assert "Instances × cores" in panel.split.value


def test_capacity_plan_without_a_latency_limit(panel):
    panel.target.control.value = "300"
    panel.plan_p99.control.value = ""
    panel.plan_button.click()
    assert panel.plan_messages.text.value == ""
    assert "To serve 300 requests/s you need 1 replica of 1 instance" in panel.plan_out.value


@pytest.mark.parametrize("field,value,words", [
    ("target", "0", "target rate (requests/s) must be a number above 0"),
    ("target", "-50", "above 0"),
    ("target", "many", "must be a number; got &#x27;many&#x27;"),
    ("plan_p99", "-1", "p99 limit (ms) must be a number above 0"),
    ("machine", "0", "CPUs per replica must be a whole number at least 1"),
    ("headroom", "100", "Spare capacity (%) must be a number at least 0 and at most 99"),
])
def test_capacity_plan_refuses_bad_inputs_in_one_sentence(panel, field, value, words):
    panel.plan_out.value = "old"
    getattr(panel, field).control.value = value
    panel.plan_button.click()
    assert words in panel.plan_messages.text.value
    assert "wb-msg-error" in panel.plan_messages.text.value
    assert panel.plan_messages.details_box.layout.display == "none"
    assert panel.plan_out.value == ""


def test_capacity_plan_with_no_study_says_so(tmp_path):
    p = CapacityPanel(DashboardState(tmp_path / "none.db"))
    p.plan_button.click()
    assert "run a sweep" in p.plan_messages.text.value
    assert p.run.control.options == () and p.find.disabled


def test_plan_keeps_limit_out_of_the_sentence_when_none_and_counts_cpus(tmp_path):
    df = sample_frame()
    plan = capacity(df, 5000, None, 0.0, 2)
    assert plan.p99_ms is None and "without a p99 limit" in plan.describe()
    assert plan.instances_per_replica * plan.replicas >= plan.instances
    assert plan.total_cpus == plan.replicas * plan.instances_per_replica * plan.cores_per_instance
    assert " with p99" not in plan_sentence(plan)


def test_rate_figure_draws_the_limit_and_marks_the_queueing_rates():
    probes = [{"rate": 100.0, "p99": 2.0}, {"rate": 200.0, "p99": 30.0}, {"rate": 400.0, "p99": None,
                                                                         "saturated": True}]
    fig = rate_figure(probes, 10.0, best_rate=100.0)
    drawn = {t.name: (list(t.x), list(t.y)) for t in fig.data if t.showlegend}
    assert drawn == {"kept p99 within the limit": ([100.0], [2.0]), "p99 over the limit": ([200.0], [30.0]),
                     "fell behind (queue kept growing)": ([400.0], [37.5]), "highest rate within": ([100.0], [2.0]),
                     "p99 limit": ([0, 420.0], [10.0, 10.0])}
    assert fig.data[-1].line.dash == "dash"
    assert fig.layout.xaxis.title.text == "arrival rate (requests/s)"
    assert fig.layout.yaxis.title.text == "p99 latency (ms)" and fig.layout.yaxis.type != "log"
    # A limit far above every measured p99 would flatten the dots onto the axis: a log scale, said so.
    fig = rate_figure(probes[:1], 1000.0)
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.title.text == "p99 latency (ms), log scale"
    assert [t.name for t in fig.data if t.showlegend] == ["kept p99 within the limit", "p99 limit"]
    empty = rate_figure([], None)
    assert not any(t.showlegend or t.x for t in empty.data)


def test_find_max_rate_draws_each_probe_and_answers_in_words(lenet_ir, tmp_path, fast):
    from wb_core.api import profile, results

    db = tmp_path / "rate.db"
    profile(lenet_ir, db=db, study="rate", threads="1", settings=fast)
    session = DashboardState(db)
    session.study = "rate"
    p = CapacityPanel(session)
    assert len(p.run.control.options) == 1
    p.p99.control.value = "1000"
    p.probe_time.control.value = "0.3"
    p.steps.control.value = "3"  # a quarter of the closed-loop capacity is tried: it passes even on a busy machine
    seen, tables = [], []
    session.observe(lambda c: seen.append(c["new"]), "results_version")
    p.rate_table.observe(lambda c: tables.append(c["new"].count("<tr><td>")), "value")
    p.find.click()
    search = p._searching
    assert p.find.disabled and "Working…" in p.rate_progress.value
    search.join(120)
    assert p.rate_messages.text.value == "", p.rate_messages.text.value
    assert "sustains" in p.rate_answer.value and "requests/s arriving at random with p99 ≤ 1,000 ms" in p.rate_answer.value, \
        (p.rate_answer.value, p._probes)
    assert p.rate_answer.value.count("OpenVINO · FP32 · batch 1 · 1 thread ") == 1
    assert "samples/s for this run" in p.rate_answer.value  # the sweep's figure, and why it differs
    assert len(p._probes) == 3 and "Done: 3 rates tried" in p.rate_progress.value
    assert tables[-3:] == [1, 2, 3]  # each rate tried was listed as it was stored
    fig = p.rate_plot.figure
    star = next(t for t in fig.data if t.name == "highest rate within")
    assert sum(len(t.x) for t in fig.data if t.name != "p99 limit") >= 4  # three probes and the star
    assert f"sustains {rounded(star.x[0])} requests/s" in p.rate_answer.value  # the star is the answer
    assert not p.find.disabled and not seen  # probes are not runs: the other tabs have nothing new
    probes = results("rate", db, "probes")
    assert len(probes) == 3 and set(probes.probe_of) == {session.results().key.iloc[0]}  # every probe stored
    assert results("rate", db, "stored").rate.isna().all()  # and none among the runs
    assert len(p.run.control.options) == 1  # probes are not runs to search from
    # Reopened, the tab shows the last answer and its probes again.
    again = CapacityPanel(session)
    assert again.rate_answer.value == p.rate_answer.value and again.rate_table.value.count("<tr><td>") == 3
    # The plan now rests on the probes (requests arriving at random).
    p.target.control.value = "10"
    p.plan_p99.control.value = "1000"
    p.plan_button.click()
    assert "arriving at random" in p.basis.value, p.plan_messages.text.value


def test_api_find_max_rate_passes_each_stored_probe(lenet_ir, tmp_path, fast):
    from dataclasses import replace

    from wb_core.api import RunConfig, find_max_rate

    points = []
    r = find_max_rate(lenet_ir, RunConfig(backend="openvino", threads=1), 1000.0, db=tmp_path / "p.db", study="p",
                      settings=replace(fast, max_time_s=0.3), steps=2, on_point=points.append)
    assert len(points) == 2 and all(pt["config"].rate for pt in points)
    assert r["best"] is None or r["best"]["key"] in {pt["key"] for pt in points}


def _probes(rows):
    import pandas as pd

    base = {"status": "ok", "instances": 1, "backend": "openvino", "precision": "fp32", "threads": 1,
            "streams": None, "concurrency": 1, "batch_size": 1, "saturated": False, "n_cores": 1,
            "search": "max-rate p99<10ms"}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_the_plan_rests_on_the_rate_the_search_says_is_sustained():
    """A rate search at p99 ≤ 10 ms kept 1,365 requests/s (Poisson luck brought 1,525) and turned down
    1,600 (p99 14 ms, 1,559 achieved): the plan's instance serves 1,365, the search's answer, with the
    search's limit or no limit of its own, and never counts a window's luck or a refused rate."""
    df = _probes([
        {"key": "p1", "rate": 1365.0, "achieved_rate": 1525.0, "throughput": 1525.0, "latency_ms_p99": 8.0},
        {"key": "p2", "rate": 1600.0, "achieved_rate": 1559.0, "throughput": 1559.0, "latency_ms_p99": 14.0},
        {"key": "p3", "rate": 700.0, "achieved_rate": 690.0, "throughput": 690.0, "latency_ms_p99": 3.0},
    ])
    for limit in (None, 10):
        plan = capacity(df, 5000, limit, headroom=0.0, machine_cores=4)
        assert plan.per_instance_rate == 1365.0 and plan.source_key == "p1", limit
        assert plan.instances == 4  # 5000 / 1365, rounded up
    # A rate that arrived short of what was offered counts as what arrived.
    short = capacity(df.assign(achieved_rate=[1300.0, 1559.0, 690.0]), 5000, 10, headroom=0.0)
    assert short.per_instance_rate == 1300.0
    # A looser limit of the plan's own admits the probe the search turned down.
    assert capacity(df, 5000, 20, headroom=0.0).per_instance_rate == 1559.0


def test_noise_is_claimed_only_when_the_interval_says_so():
    from wb_core.faces import within_noise
    from wb_core.ui.capacity_panel import modes_explained

    assert within_noise(1000, 950, 1050) is True
    assert within_noise(1100, 950, 1050) is False
    assert within_noise(1000, None, None) is None and within_noise(1000, float("nan"), 1050) is None
    run = {"throughput": 1000.0, "batch_size": 1, "throughput_ci_low": 950.0, "throughput_ci_high": 1050.0}
    assert "differ by measurement noise" in modes_explained(run, 1020.0, 900.0)
    outside = modes_explained(run, 1300.0, 900.0)
    assert "outside the run's 95% interval" in outside and "differ by measurement noise" not in outside
    one_round = modes_explained({"throughput": 1000.0, "batch_size": 1}, 1300.0, 900.0)
    assert "30% apart" in one_round and "no interval" in one_round and "differ by measurement noise" not in one_round
