"""One truth in the dashboard, without a browser: one pick shared by Explore, Export, the report and
Capacity; probes kept apart from runs (old databases migrated); runs whose accuracy guard failed
marked and never picked; run names, hovers and the report in words."""

from __future__ import annotations

import html
import json
import re
import sqlite3

import pytest

from analysis_data import make_study_db, run, sample_frame
from wb_core.api import Constraints, results
from wb_core.faces import build_report
from wb_core.store import Store
from wb_core.ui.capacity_panel import CapacityPanel
from wb_core.ui.explore_panel import ExplorePanel
from wb_core.ui.export_panel import ExportPanel
from wb_core.ui.state import DashboardState, Pick
from wb_core.ui.words import rounded, run_name

FRAME = sample_frame()
B1 = FRAME.iloc[0]  # batch 1, p99 0.5 ms, 2,000 samples/s
B32 = FRAME.iloc[2]  # batch 32, p99 8 ms, 15,000 samples/s: the fastest without limits


def _panels(db):
    session = DashboardState(db)
    session.study = "t"
    explore, export, capacity = ExplorePanel(session), ExportPanel(session), CapacityPanel(session)
    explore.shown()
    export.shown()
    return session, explore, export, capacity


def _add_probe(db, of_key: str, rate: float, p99: float):
    """A probe as a max-rate search stores it: an open-loop point of the run `of_key`."""
    from wb_core.config import RunConfig

    with Store(db) as s:
        cfg = s.run_config("t", of_key)
        probe = RunConfig.from_dict({**cfg.to_dict(), "rate": rate})
        s.add_run("t", probe.key, probe.to_dict(), "ok", {"latency_ms_p99": p99, "throughput": rate,
                                                          "saturated": False}, probe_of=of_key)
    return probe.key


def test_a_rate_search_leaves_explore_limits_and_export_pick_alone(tmp_path):
    db = tmp_path / "pick.db"
    make_study_db(db, list(FRAME.to_dict("records")))
    session, explore, export, capacity = _panels(db)
    assert session.pick.key == B32["key"] and capacity.run.control.value == B32["key"]
    explore.p99.value = 1.0  # only the batch 1 run keeps p99 within 1 ms
    assert session.pick.key == B1["key"] and session.pick.constraints.max_p99_ms == 1.0
    assert "The pick changed from" in explore.recommendation.value  # said where the user is looking
    assert run_name(B1) in export.run_line.value and "p99 latency ≤ 1 ms" in export.run_line.value
    assert capacity.run.control.value == B1["key"] and run_name(B1) in capacity.pick_note.value

    # A rate search of the batch 1 run stores probes (and the study's record of the search).
    for rate, p99 in ((100.0, 0.6), (900.0, 0.9), (5000.0, 40.0)):
        _add_probe(db, B1["key"], rate, p99)
    session.refresh()  # what any tab does when the study changes
    assert explore.constraints().max_p99_ms == pytest.approx(1.0)  # Explore's limit is still set
    assert session.pick.key == B1["key"] and run_name(B1) in export.run_line.value
    assert len(session.results()) == len(FRAME)  # probes are not runs
    assert {k for _, k in explore.look.options if k} == set(FRAME[FRAME.status == "ok"].key)
    assert len(capacity.run.control.options) == 5  # the search list holds runs only
    assert not any("req/s" in str(t.name) for t in explore.pareto_plot.figure.data)

    # The report names the same run under the same limits, in words.
    pick = session.current_pick()
    html_text = build_report(db, "t", constraints=pick.constraints, objective=pick.objective, pick=pick.key,
                             pick_reason=pick.reason)
    best = re.search(r"<b class='pick'>(.*?)</b>", html_text).group(1)
    assert best == run_name(B1)
    assert "p99 latency ≤ 1 ms" in re.search(r"<span class='limits'>(.*?)</span>", html_text).group(1)
    text = re.sub(r"<(script|style).*?</\1>", "", html_text, flags=re.S)
    assert B1["key"] not in text and "wb export" not in text and "--" not in re.sub(r"<[^>]+>", " ", text)


def test_the_report_without_a_pick_uses_the_limits_it_is_given(tmp_path):
    db = tmp_path / "r.db"
    make_study_db(db, list(FRAME.to_dict("records")))
    limited = build_report(db, "t", constraints=Constraints(max_p99_ms=1.0))
    assert re.search(r"<b class='pick'>(.*?)</b>", limited).group(1) == run_name(B1)
    assert re.search(r"<b class='pick'>(.*?)</b>", build_report(db, "t")).group(1) == run_name(B32)


def test_probes_are_stored_apart_and_old_databases_are_migrated(tmp_path):
    db = tmp_path / "old.db"
    make_study_db(db, list(FRAME.to_dict("records")))
    probe_key = _add_probe(db, B1["key"], 300.0, 0.7)
    # Make it a version 2 database: probes stored as ordinary runs, no kind.
    with sqlite3.connect(db) as c:
        c.execute("UPDATE runs SET kind = NULL, probe_of = NULL")
        c.execute("UPDATE meta SET value = '2' WHERE name = 'schema_version'")
    with Store(db, readonly=True) as s:  # read-only: nothing migrated yet, and nothing breaks
        assert len(s.to_frame("t")) == len(FRAME) + 1
    with Store(db) as s:  # opened for writing: migrated
        assert s.schema_version() == 3
        runs, probes = s.to_frame("t"), s.to_frame("t", probes=True)
        counts = s.list_studies()[0]
    assert probe_key not in set(runs.key) and len(runs) == len(FRAME)
    assert list(probes.key) == [probe_key] and list(probes.probe_of) == [B1["key"]]
    assert counts["runs"] == len(FRAME)

    from typer.testing import CliRunner

    from wb_core.cli import app

    plain = CliRunner().invoke(app, ["results", "--study", "t", "--db", str(db), "--format", "json"])
    asked = CliRunner().invoke(app, ["results", "--study", "t", "--db", str(db), "--format", "json", "--probes"])
    assert plain.exit_code == 0 and asked.exit_code == 0, (plain.output, asked.output)
    assert probe_key not in plain.output and len(json.loads(plain.output)) == len(FRAME)
    shown = json.loads(asked.output)
    assert [p["key"] for p in shown] == [probe_key] and shown[0]["probe_of"] == B1["key"]


def test_a_swept_arrival_rate_stays_a_run_in_the_migration(tmp_path):
    """Rates a sweep asked for (the server scenario) are runs; only rates nobody swept become probes."""
    from wb_core.config import RunConfig

    db = tmp_path / "swept.db"
    make_study_db(db, [])
    cfg = RunConfig(backend="openvino", rate=50.0)
    with Store(db) as s:
        s.update_spec("t", sweep={"rates": [50.0]})
        s.add_run("t", cfg.key, cfg.to_dict(), "ok", {"latency_ms_p99": 1.0, "throughput": 50.0})
    with sqlite3.connect(db) as c:
        c.execute("UPDATE meta SET value = '2' WHERE name = 'schema_version'")
    assert list(results("t", Store(db).path, "stored").key) == [cfg.key]


def test_accuracy_failed_runs_are_marked_and_never_picked(tmp_path):
    db = tmp_path / "guard.db"
    failed = run(precision="int8", batch=32, threads=4, p99=4.0, thr=40000, accuracy=0.96, accuracy_drop=0.0,
                 accuracy_guard="failed",
                 accuracy_guard_note="INT8 cosine to FP32 0.081 is below the guard's 0.99")
    make_study_db(db, [*FRAME.to_dict("records"), failed])
    session, explore, export, _ = _panels(db)
    assert session.pick.key == B32["key"]  # the failed INT8 run has the most throughput, yet is not picked
    assert "INT8 cosine to FP32 0.081" in explore.recommendation.value and "left out" in explore.recommendation.value
    names = dict((k, n) for n, k in explore.look.options)
    assert names[failed["key"]].endswith("(accuracy failed)")
    assert not any(n.endswith("(Pareto front)") for n, k in explore.look.options if k == failed["key"])
    marked = [t for t in explore.pareto_plot.figure.data if str(t.name).startswith("accuracy failed")]
    assert len(marked) == 1 and list(marked[0].y) == [40000]
    front = next(t for t in explore.pareto_plot.figure.data if t.name == "Pareto front")
    assert 40000 not in list(front.y)
    explore.look.value = failed["key"]
    assert explore.export_this.disabled and "Accuracy failed" in explore.chosen_text.value
    assert run_name(B32) in export.run_line.value
    report = build_report(db, "t")
    assert re.search(r"<b class='pick'>(.*?)</b>", report).group(1) == run_name(B32)
    assert "accuracy failed" in report and "INT8 cosine to FP32 0.081" in report


def test_names_hovers_and_precisions_read_as_words():
    from wb_core.api import plots

    one = run(batch=1, threads=1, thr=12020.0, executed_precision="u8")
    assert run_name(one) == "OpenVINO · FP32 · batch 1 · 1 thread · not pinned"
    assert rounded("u8", "executed_precision") == "INT8" and rounded("f32, u8", "executed_precision") == "FP32, INT8"
    fig = plots.latency_throughput(sample_frame().assign(executed_precision="u8"))
    hovers = " ".join(h for t in fig.data for h in (t.text or ()))
    assert hovers and "e+" not in hovers and "key" not in hovers and "INT8" in hovers
    assert "15,000 samples/s" in hovers
    from wb_core.ui.sweep_panel import live_figure

    live = live_figure(sample_frame().head(1))  # the first point of a sweep
    assert live.layout.xaxis.rangemode == "tozero" and live.layout.yaxis.rangemode == "tozero"
    assert "e+" not in " ".join(live.data[0].text) and live.data[0].hoverinfo == "text"
    from wb_core.ui.capacity_panel import plan_rows

    class Plan:  # the fields plan_rows reads
        instances, cores_per_instance, replicas, instances_per_machine, instances_per_replica = 1, 1, 1, 1, 1
        total_cpus, cpu_request, per_instance_rate, headroom, basis = 1, 1, 100.0, 0.2, "closed-loop"

    rows = dict(plan_rows(Plan, 1))
    assert "at most 1 instance each" in rows["Replicas"] and "of 1 CPU," in rows["Replicas"]
    assert "closed loop" in rows["One instance serves"]


def _two_studies(db):
    """Study 't' whose INT8 run passed the guard, and study 'u' holding the same configuration (the same
    run key) whose INT8 run failed it, as two sweeps of two models would store them."""
    passed = run(precision="int8", batch=32, threads=4, p99=4.0, thr=12000, accuracy=0.99, accuracy_drop=0.0)
    failed = {**passed, "accuracy": 0.863, "accuracy_drop": 0.137, "accuracy_guard": "failed",
              "accuracy_guard_note": "INT8 accuracy 0.863 is below FP32's 1.000 by more than the guard allows"}
    make_study_db(db, [*FRAME.to_dict("records"), passed])
    make_study_db(db, [*FRAME.to_dict("records"), failed], name="u")
    return passed["key"]


def test_a_run_looked_at_in_one_study_is_never_exported_from_the_next(tmp_path):
    db = tmp_path / "two.db"
    int8 = _two_studies(db)
    session, explore, export, _ = _panels(db)
    explore.look.value = int8  # study t: INT8 passed its guard, so it may be chosen
    assert not explore.export_this.disabled and explore.export_this.layout.display == ""
    session.study = "u"  # a new sweep (or opening a study) changes the open study
    assert explore.look.value == "" and explore._looked is None
    assert explore.export_this.disabled and explore.export_this.layout.display == "none"
    explore.export_this.click()  # even a click that got through changes nothing
    assert session.current_pick().key != int8 and session.pick.key != int8
    export.shown()
    assert f"data-key='{int8}'" not in export.run_line.value and run_name(B32) in export.run_line.value
    # A pick of the study before (however it got there) is refused with a sentence, and Export writes
    # the open study's own recommendation instead.
    session.pick = Pick(key=int8, name="INT8 run", study="t")
    why = session.unfit(Pick(key=int8, name="INT8 run", study="t"))
    assert "belongs to study 't'" in why and "open study 'u'" in why
    assert session.current_pick().key == B32["key"] and f"data-key='{B32['key']}'" in export.run_line.value
    # And u's own INT8 run, chosen by any path, is refused: its guard failed.
    explore.look.value = int8
    assert explore.export_this.disabled and "failed the accuracy guard" in explore.chosen_text.value
    session.pick = Pick(key=int8, name="INT8 run", study="u")
    assert export.download.value == "" and export.preview.value == ""
    assert "failed the accuracy guard" in export.blocked_text.value
    assert export.write.disabled and export.report_button.disabled and export.serve.disabled


@pytest.mark.parametrize("case", ["guard", "oversubscribed", "measuring"])
def test_export_and_report_are_off_with_the_sentence_why(tmp_path, case):
    db = tmp_path / "unfit.db"
    _two_studies(db)
    session, explore, export, _ = _panels(db)
    assert export.download.value and not export.write.disabled and not export.report_button.disabled
    tf = FRAME.iloc[5]  # 4 threads on 2 pinned CPUs
    if case == "guard":
        session.study = "u"
        bad = session.results().query("accuracy_guard == 'failed'").iloc[0]
        session.pick = Pick(key=bad["key"], name=run_name(bad), study="u")
        sentence = "failed the accuracy guard (INT8 accuracy 0.863"
    elif case == "oversubscribed":
        session.pick = Pick(key=tf["key"], name=run_name(tf), study="t")
        sentence = "4 threads on 2 CPUs"
    else:
        session.measuring = "t"
        sentence = "being measured now"
    export.shown()
    assert sentence in export.blocked_text.value
    assert export.download.value == "" and export.preview.value == ""
    for control in (export.write, export.report_button, export.serve):
        assert control.disabled and sentence in html.unescape(control.tooltip)
    out = tmp_path / "out"
    export.folder.value = str(out)
    export._on_write()  # what a click would do, were the button on
    assert not out.exists() and sentence in html.unescape(export.messages.text.value)
    export._on_report()
    assert export._reporting is None and sentence in html.unescape(export.report_messages.text.value)


def test_oversubscribed_and_guard_failed_runs_are_never_recommended(tmp_path):
    db = tmp_path / "over.db"
    fastest_but_oversubscribed = run(batch=64, threads=8, p99=9.0, thr=90000)  # 8 threads on 4 CPUs
    make_study_db(db, [*FRAME.to_dict("records"), fastest_but_oversubscribed])
    session, explore, export, _ = _panels(db)
    assert session.pick.key == B32["key"]
    assert "8 threads" not in export.run_line.value and "left out" in explore.recommendation.value
    assert "more threads than CPUs" in explore.recommendation.value


def test_the_core_refuses_a_guard_failed_run_by_key(tmp_path):
    from wb_core.api import WorkbenchError, deployment_for_study

    db = tmp_path / "core.db"
    _two_studies(db)
    bad = results("u", db, "stored").query("accuracy_guard == 'failed'").iloc[0]
    with pytest.raises(WorkbenchError, match="failed the accuracy guard"):
        deployment_for_study(db, "u", run_key=bad["key"])
    report = build_report(db, "u", pick=bad["key"], pick_reason="chosen")
    assert re.search(r"<b class='pick'>", report) is None and "failed the accuracy guard" in report
