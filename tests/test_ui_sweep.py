"""The Sweep tab without a browser: data choice, search and scenario values, warnings, resume counting,
Run kept disabled while the sweep's thread finishes, the one live plot, the runs table in words."""

from __future__ import annotations

import datetime
import threading

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("ipywidgets", reason="the ui extra is not installed (pip install -e '.[ui]')")

from wb_core.errors import ConfigError
from wb_core.ui.state import DashboardState


def _panel(tmp_path, model=None, batch="1", threads="1"):
    from wb_core.ui.sweep_panel import SweepPanel

    session = DashboardState(tmp_path / "ui.db")
    if model is not None:
        session.model_path = str(model)
    panel = SweepPanel(session)
    panel.axis_boxes["batch_sizes"].value, panel.axis_boxes["threads"].value, panel.max_time.value = batch, threads, 0.3
    return session, panel


def _upload(name: str, content: bytes) -> tuple:
    return ({"name": name, "type": "", "size": len(content), "last_modified": datetime.datetime.now(datetime.UTC),
             "content": memoryview(content)},)


def test_spec_and_run_values_carry_scenario_search_and_data(tmp_path, lenet_savedmodel):
    from wb_core.ui.data_section import DEMO_DATA
    from wb_core.ui.sweep_sections import SMART

    _, panel = _panel(tmp_path, lenet_savedmodel)
    sc = panel.scenario
    box = panel.axis_boxes
    box["instances"].value, box["cores_per_instance"].value, box["concurrency"].value = "1,2", "1", "1,4"
    panel.axis_boxes["rates"].value, sc.repeats.value = "50", 2
    values = panel.spec_values()
    assert (values["instances"], values["cores_per_instance"], values["concurrency"], values["rates"],
            values["repeats"]) == ("1,2", "1", "1,4", "50", 2)
    assert panel.run_values() == {"data": None, "metric": "auto", "calib_size": 300, "max_accuracy_drop": None,
                                  "search": "grid", "budget": None, "p99_ms": None}
    panel.data.source.value = DEMO_DATA
    panel.data.metric.value, panel.data.calib.value, panel.data.drop.value = "top1", 100, "0.02"
    panel.search.how.value = SMART
    panel.search.budget.value, panel.search.p99.value = 5, "3.5"
    assert panel.run_values() == {"data": "demo:lenet-digits", "metric": "top1", "calib_size": 100,
                                  "max_accuracy_drop": 0.02, "search": "smart", "budget": 5, "p99_ms": 3.5}
    panel.axis_boxes["cores_per_instance"].value = "0"
    with pytest.raises(ConfigError, match="Cores per instance"):
        panel.spec_values()


def test_smart_search_fields_show_only_for_a_smart_search():
    from wb_core.ui.sweep_sections import GRID, SMART, SearchSection, parse_p99

    s = SearchSection()
    assert s.smart_box.layout.display == "none"
    s.how.value = SMART
    assert s.smart_box.layout.display == ""
    s.p99.value = "fast"
    with pytest.raises(ConfigError, match="p99 target takes a number"):
        s.values()
    s.how.value = GRID
    assert s.values()["search"] == "grid" and s.smart_box.layout.display == "none"
    assert parse_p99("") is None and parse_p99("5 ms") == 5.0
    with pytest.raises(ConfigError):
        parse_p99("0")


def test_threads_beyond_the_cpus_are_warned_about_before_measuring(tmp_path):
    from wb_core.api import available_cpus

    n = len(available_cpus())
    _, panel = _panel(tmp_path)
    assert panel.warnings.value == ""
    panel.axis_boxes["threads"].value = "1,99"
    assert f"Threads = 99 is more than the {n} CPU" in panel.warnings.value
    assert "oversubscribe" in panel.warnings.value
    panel.axis_boxes["threads"].value = "1"
    panel.axis_boxes["instances"].value, panel.axis_boxes["cores_per_instance"].value = "2", str(n)
    assert f"2 instances × {n} cores = {2 * n} cores" in panel.warnings.value
    panel.axis_boxes["instances"].value = "1"
    panel.axis_boxes["threads"].value = "nonsense"  # said when Run is pressed, not as a warning
    assert panel.warnings.value == ""


@pytest.mark.parametrize("typed, value", [("", None), (" 0.01 ", 0.01), ("1%", 0.01), ("0", 0.0)])
def test_accuracy_drop_limit_in_words(typed, value):
    from wb_core.ui.data_section import parse_drop_limit

    assert parse_drop_limit(typed) == value


@pytest.mark.parametrize("typed", ["abc", "2", "-0.1", "nan"])
def test_a_bad_accuracy_drop_limit_is_one_sentence(typed):
    from wb_core.ui.data_section import parse_drop_limit

    with pytest.raises(ConfigError, match="accuracy-drop limit"):
        parse_drop_limit(typed)


def test_data_choices_are_checked_when_chosen(tmp_path, lenet_ir, lenet_savedmodel):
    from wb_core.ui.data_section import DEMO_DATA, NO_DATA, SERVER_PATH, UPLOAD

    session, panel = _panel(tmp_path, lenet_ir)
    data = panel.data
    assert data.data() is None
    data.source.value = DEMO_DATA  # a model that is not a demo has no demo data
    assert "fits only the demo models" in data.status.value
    with pytest.raises(ConfigError, match="fits only the demo models"):
        data.data()
    session.model_path = str(lenet_savedmodel)
    data.source.value = NO_DATA
    data.source.value = DEMO_DATA
    assert data.data() == "demo:lenet-digits" and "wb-msg-ok" in data.status.value

    data.source.value = SERVER_PATH
    data.path.value = str(tmp_path / "missing.npz")
    assert "does not exist" in data.status.value and "wb-msg-error" in data.status.value
    with pytest.raises(ConfigError, match="does not exist"):
        data.data()
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not an archive")
    data.path.value = str(junk)
    assert "not a readable .npz" in data.status.value
    empty = tmp_path / "images"
    (empty / "cats").mkdir(parents=True)
    data.path.value = str(empty)
    assert "holds no images" in data.status.value
    good = tmp_path / "val.npz"
    np.savez(good, x=np.zeros((7, 8, 8, 1), np.float32), y=np.arange(7))
    data.path.value = str(good)
    assert "7 samples, with labels" in data.status.value and "wb-msg-ok" in data.status.value
    assert data.data() == str(good)

    data.source.value = UPLOAD
    with pytest.raises(ConfigError, match="Upload an .npz file first"):
        data.data()
    data.upload.set_trait("value", _upload("notes.txt", b"hello"))
    assert "is not an .npz file" in data.status.value
    data.upload.set_trait("value", _upload("../../my data.npz", good.read_bytes()))
    assert "Uploaded my_data.npz: 7 samples" in data.status.value
    assert data.uploaded.is_file() and data.uploaded.name == "my_data.npz"
    assert data.data() == str(data.uploaded)


def test_preview_counts_the_points_already_stored(tmp_path, lenet_ir, fast):
    from wb_core.api import SweepSpec, preview_sweep, profile

    db = tmp_path / "p.db"
    spec = SweepSpec(batch_sizes="1,2,4", threads="1")
    assert (preview_sweep(spec, db, "s").total, preview_sweep(spec, db, "s").done) == (3, 0)
    profile(lenet_ir, db=db, study="s", batch_sizes="1,2", threads="1", settings=fast)
    plan = preview_sweep(spec, db, "s")
    assert (plan.total, plan.done, plan.remaining) == (3, 2, 1)
    assert preview_sweep(spec, db, "other").done == 0
    assert preview_sweep(spec, db, "s", search="smart", budget=1).total == 1
    rounds = preview_sweep(SweepSpec(batch_sizes="1,2,4", threads="1", repeats=2), db, "s")
    assert (rounds.total, rounds.done) == (6, 2)  # a point measured once counts as its first round


def test_cancel_then_run_again_counts_stored_points_and_label_agrees_with_bar(tmp_path, lenet_ir):
    session, panel = _panel(tmp_path, lenet_ir, batch="1,2,4,8,16,32,64,128")
    total = 8  # enough points that a cancel after the first lands before the worker has measured them all
    panel.study.value = "resume"
    original = panel._on_point

    def cancel_after_first(point):
        original(point)
        panel.cancel_button.click()

    panel._on_point = cancel_after_first
    panel.run.click()
    panel._thread.join(120)
    assert "Cancelled" in panel.messages.text.value
    done = panel.progress.value
    assert 1 <= done < total and panel.progress_text.value == f"{done} / {total}"
    panel._on_point = original
    panel.run.click()
    # Before anything is measured, the bar already stands at the stored points, and says so.
    assert panel.progress.value == done and panel.progress.max == total
    assert panel.progress_text.value.startswith(f"{done} / {total}")
    assert f"resuming: {done} already measured" in panel.progress_text.value
    panel._thread.join(120)
    assert panel.progress.value == panel.progress.max == total
    assert panel.progress_text.value == f"{total} / {total}" and panel.progress.bar_style == "success"
    panel.run.click()  # nothing left: said at once, without a thread
    assert "already stored" in panel.messages.text.value and panel.progress_text.value == f"{total} / {total}"


def test_run_stays_disabled_until_the_sweep_thread_has_finished(tmp_path, lenet_ir):
    session, panel = _panel(tmp_path, lenet_ir)
    panel.study.value = "busy"
    release, reached = threading.Event(), threading.Event()
    original = session.refresh

    def slow_refresh():  # the thread's wrap-up, held open
        if threading.current_thread() is panel._thread:
            reached.set()
            release.wait(60)
        original()

    session.refresh = slow_refresh
    panel.run.click()
    panel.cancel_button.click()
    assert panel.cancel_button.description == "Cancelling…" and panel.cancel_button.disabled
    assert reached.wait(120)
    assert panel._thread.is_alive()
    assert panel.run.disabled and panel.cancel_button.description == "Cancelling…"
    panel.run.click()  # refused while the thread runs
    assert "still running" in panel.messages.text.value
    release.set()
    panel._thread.join(60)
    assert not panel.run.disabled and panel.cancel_button.description == "Cancel"


def test_the_live_plot_is_sent_whole_to_the_page_with_every_point(tmp_path, lenet_ir, fast):
    """The live plot goes to the page as plotly's own output (no widget to start in the browser),
    redrawn whole with the study's points, the last drawing holding every point."""
    from wb_core.api import profile
    from wb_core.ui import dashboard
    from wb_core.ui.widgets import PLOTLY_MIME

    db = tmp_path / "ui.db"
    profile(lenet_ir, db=db, study="old", batch_sizes="1", threads="1", settings=fast)
    tabs = dashboard(db)  # opens on the old study
    panel = tabs.panel("Sweep")
    drawn = []
    panel.plot.observe(lambda ch: drawn.append(ch["new"]), "outputs")

    def points(outputs):
        (out,) = outputs
        return sum(len(t["x"]) for t in out["data"][PLOTLY_MIME]["data"])

    assert panel.plot.outputs == () and panel.plot.figure is None  # drawn once the tab is opened
    tabs.selected_index = 1
    assert points(panel.plot.outputs) == 1
    panel.study.value = "new"
    panel.axis_boxes["batch_sizes"].value, panel.axis_boxes["threads"].value, panel.max_time.value = "1,2", "1", 0.3
    panel.run.click()
    panel._thread.join(120)
    assert "2 ok" in panel.messages.text.value, panel.messages.text.value
    assert drawn and points(drawn[-1]) == 2 == points(panel.plot.outputs)  # the state a browser reads
    assert sum(len(t.x) for t in panel.plot.figure.data) == 2
    # Reopened (a new page opens the latest study), the study comes back with its settings and the
    # model's name, not its cache path.
    again = dashboard(db).panel("Sweep")
    assert again.study.value == "new" and again.axis_boxes["batch_sizes"].value == "1,2" and again.max_time.value == 0.3
    assert str(lenet_ir) not in again.model_line.value and again.session.model_label in again.model_line.value


def test_a_reopened_study_gets_back_every_setting_it_ran_with(tmp_path):
    from analysis_data import make_study_db
    from wb_core.ui.data_section import SERVER_PATH
    from wb_core.ui.sweep_panel import SweepPanel, settings_from_spec
    from wb_core.ui.sweep_sections import SMART

    db = tmp_path / "ui.db"
    make_study_db(db, [], name="kept", model_path=str(tmp_path / "models" / "resnet" / "model.xml"))
    make_study_db(db, [], name="other")
    data = tmp_path / "val.npz"
    np.savez(data, x=np.zeros((4, 8, 8, 1), np.float32), y=np.zeros(4, np.int64))
    first = SweepPanel(DashboardState(db))
    for box in first.precisions.boxes:
        box.value = box.option in ("fp32", "bf16")
    first.axis_boxes["batch_sizes"].value, first.axis_boxes["threads"].value, first.max_time.value = "1,4", "2", 0.7
    first.data.source.value = SERVER_PATH
    first.data.path.value = str(data)
    first.data.metric.value, first.data.drop.value = "top1", "0.01"
    first.search.how.value, first.search.budget.value, first.search.p99.value = SMART, 5, "7"
    first.axis_boxes["rates"].value, first.axis_boxes["concurrency"].value = "50,200", "2"
    first.session.study = "kept"
    first.session.model_label = "resnet"
    kept = first.settings()
    first.session.save_settings(kept)

    fresh = SweepPanel(DashboardState(db))
    assert fresh.settings() != kept  # a new page starts from the defaults
    fresh.studies.value = "kept"
    fresh.open_button.click()
    assert fresh.settings() == kept
    assert "Found" in fresh.data.status.value and "resnet" in fresh.model_line.value
    assert "models" not in fresh.model_line.value  # its name, not where it lies
    # A study `wb profile` made: its recorded sweep fills the tab.
    spec = {"sweep": {"backends": ["openvino"], "precisions": ["fp32", "int8"], "batch_sizes": [1, 8],
                      "threads": [None, 2], "rates": [None, 100.0]}, "search": "grid",
            "settings": {"max_time_s": 1.5}}
    assert settings_from_spec(spec) == {"axes": {"batch_sizes": "1,8", "threads": "auto,2", "rates": "none,100.0"},
                                        "backends": ["openvino"], "precisions": ["fp32", "int8"], "search": "grid",
                                        "max_time": 1.5}
    # A study saved before the tab kept its boxes by SweepSpec field reopens with them.
    fresh.restore({"batch": "2,4", "pinning": "off", "scenario_rates": "30", "threads": "1"})
    assert [fresh.axis_boxes[f].value for f in ("batch_sizes", "cpu_pinning", "rates", "threads")] == [
        "2,4", "off", "30", "1"]


def test_runs_table_in_words_with_the_reason_of_a_skipped_run():
    from wb_core.ui.sweep_panel import runs_table

    df = pd.DataFrame([
        {"backend": "openvino", "precision": "fp32", "batch_size": 1, "threads": 2.0, "streams": None,
         "cores": "none", "instances": 1, "concurrency": 1, "latency_ms_p50": 0.123456, "latency_ms_p99": 0.98765,
         "throughput": 1234.5678, "cpu_util": 1.23456, "rss_mb": 300.123, "status": "ok", "error": None},
        {"backend": "openvino", "precision": "bf16", "batch_size": 1, "threads": None, "streams": None,
         "cores": "0-1", "instances": 1, "concurrency": 1, "latency_ms_p50": None, "latency_ms_p99": None,
         "throughput": None, "cpu_util": None, "rss_mb": None, "status": "skipped",
         "error": "bf16 skipped: this CPU has no native BF16"},
    ])
    table = runs_table(df)
    for header in ("Runtime", "Precision", "Batch", "Threads", "Cores pinned", "p99 latency (ms)",
                   "Throughput (samples/s)", "Status", "Problem"):
        assert f"<th>{header}</th>" in table
    assert "latency_ms_p99" not in table and "Instances" not in table and "Streams" not in table
    assert "<td>1,235</td>" in table and "<td>0.988</td>" in table and "1234.5678" not in table
    assert "<td>skipped</td>" in table and "bf16 skipped: this CPU has no native BF16" in table
    assert "<td>auto</td>" in table and "<td>not pinned</td>" in table
    assert runs_table(pd.DataFrame()) == "<i>No runs yet.</i>"


def test_a_text_model_sweeps_real_text_at_the_lengths_chosen(tmp_path):
    """Text and tokenizer paths on the server are checked when entered and feed the sweep, at each length."""
    from wb_core.api import demo_sample_text, ensure_demo, results
    from wb_core.ui.data_section import TEXT

    model = ensure_demo("text-encoder") / "model.xml"
    sample, tokenizer = demo_sample_text("text-encoder")
    session, panel = _panel(tmp_path, model, batch="1")
    panel.axis_boxes["seq_lens"].value = "16,32"
    panel.data.source.value = TEXT
    panel.data.text_path.value = str(tmp_path / "missing.txt")
    panel.data.tokenizer_path.value = str(tokenizer)
    assert "does not exist" in panel.data.status.value
    with pytest.raises(ConfigError, match="does not exist"):
        panel.run_values()
    panel.data.text_path.value = str(sample)
    assert "lines of text" in panel.data.status.value and "vocabulary" in panel.data.status.value
    values = panel.run_values()
    assert values["text"] == str(sample) and values["tokenizer"] == str(tokenizer) and values["data"] is None
    assert panel.spec_values()["seq_lens"] == "16,32"
    panel.study.value = "text"
    panel.run.click()
    panel._thread.join(180)
    df = results("text", session.db, "stored")
    assert sorted(df["seq_len"]) == [16, 32] and (df["status"] == "ok").all(), panel.messages.text.value
    assert (df["data_source"] == f"'{sample}'").all()


def test_out_of_range_numbers_are_refused_in_words_and_stale_errors_clear(tmp_path, lenet_ir):
    """Nothing typed is changed behind the user's back: -5 stays -5 and is refused with a sentence;
    fixing the field takes the message away."""
    session, panel = _panel(tmp_path, lenet_ir)
    panel.max_time.value = -5
    assert panel.max_time.value == -5  # kept as typed
    assert "Seconds per point" in panel.messages.text.value and "got -5" in panel.messages.text.value
    panel.max_time.value = 0.3
    assert panel.messages.text.value == ""
    panel.scenario.repeats.value = 0
    assert "Repeats" in panel.messages.text.value
    panel.scenario.repeats.value = 1
    panel.axis_boxes["batch_sizes"].value = "-5"
    panel.run.click()
    assert panel.axis_boxes["batch_sizes"].value == "-5" and "Batch size must be at least 1; got -5" in panel.messages.text.value
    assert panel._thread is None  # nothing ran
    panel.axis_boxes["batch_sizes"].value = "1"
    assert panel.messages.text.value == ""  # the stale error is gone once the field changed


def test_busy_points_are_marked_and_measured_again_from_a_button(tmp_path, lenet_ir, fast):
    """The table says which points were measured on a busy machine, the note says so in words (no
    command line), and the button measures those points again (their stored rows replaced)."""
    import json
    import re
    import sqlite3

    from wb_core.api import profile
    from wb_core.ui.sweep_panel import SweepPanel

    db = tmp_path / "ui.db"
    profile(lenet_ir, db=db, study="busy", batch_sizes="1,2", threads="1", settings=fast)
    with sqlite3.connect(db) as c:  # the batch 2 point as if measured while others used its cores
        key, metrics, when = c.execute("SELECT key, metrics_json, created_at FROM runs WHERE config_json LIKE "
                                       "'%\"batch_size\": 2%'").fetchone()
        c.execute("UPDATE runs SET metrics_json = ?, created_at = '2000-01-01T00:00:00+00:00' WHERE key = ?",
                  (json.dumps({**json.loads(metrics), "busy": True, "other_cpu": 1.5}), key))
    session = DashboardState(db)
    panel = SweepPanel(session)
    panel.max_time.value = 0.3
    panel.studies.value = "busy"
    panel.open_button.click()
    with sqlite3.connect(db) as c:  # on a shared machine the other point may really have been busy too
        n = sum(bool(json.loads(m).get("busy")) for (m,) in c.execute("SELECT metrics_json FROM runs"))
    cells = re.findall(r"<td>([^<]*)</td>", panel.table.value)
    assert "Measured on a busy machine" in panel.table.value and cells.count("busy") == n >= 1
    note = panel.show_busy()
    assert note.startswith(f"{n} point{' was' if n == 1 else 's were'} measured while other programs")
    assert "Measure busy points again" in note
    assert "--" not in note and "api." not in note and "wb " not in note
    assert panel.remeasure.layout.display == ""
    panel.remeasure.click()
    panel._thread.join(120)
    with sqlite3.connect(db) as c:
        (again,) = c.execute("SELECT created_at FROM runs WHERE key = ?", (key,)).fetchone()
    assert again > "2000-01-01T00:00:00+00:00", panel.messages.text.value  # measured again, its row replaced
    assert "--remeasure" not in panel.messages.text.value and "api.profile" not in panel.messages.text.value


def test_a_backend_setting_without_a_control_of_its_own_gets_one_from_the_axes_table(tmp_path, lenet_savedmodel):
    from wb_core.api import SweepSpec
    from wb_core.faces import field_help, sweep_axes

    _, panel = _panel(tmp_path, lenet_savedmodel)
    # Every axis but the runtimes and precisions (checkboxes) and the input shape has a box.
    unboxed = {"backend", "precision", "shape"}
    assert set(panel.axis_boxes) == {a.spec for a in sweep_axes() if a.name not in unboxed}
    box = panel.axis_boxes["execution_modes"]
    assert box.description == "Execution mode (ONNX Runtime)" and box.tooltip == field_help("execution_modes")
    assert box.value == "auto"
    box.value = "sequential,parallel"
    for b in panel.backends.boxes:
        b.value = b.option == "onnxruntime"
    values = panel.spec_values()
    assert SweepSpec(**values).execution_modes == ["sequential", "parallel"]
    kept = panel.settings()
    box.value = "auto"
    panel.restore(kept)
    assert box.value == "sequential,parallel"
    box.value = "fastest"
    with pytest.raises(ConfigError, match="Unknown execution mode 'fastest'"):
        panel.spec_values()
    from wb_core.ui.sweep_panel import settings_from_spec

    # A study `wb profile` made with a backend's own setting reopens with it in its box.
    assert settings_from_spec({"sweep": {"execution_modes": [None, "parallel"]}})["axes"] == {
        "execution_modes": "auto,parallel"}


def test_each_sweep_control_carries_the_label_errors_and_notes_use(tmp_path):
    """A message about a setting names it as the dashboard labels it (the axes table's label): the box
    the user sees must carry that very label (every box is made from the axes table)."""
    from wb_core.faces import setting_label

    _, panel = _panel(tmp_path)
    shown = {"backends": panel.backends.children[0].value, "precisions": panel.precisions.children[0].value,
             **{spec: box.description for spec, box in panel.axis_boxes.items()}}
    expected = {"backends": "Backends", "precisions": "Precisions", "batch_sizes": "Batch sizes",
                "seq_lens": "Sequence lengths", "threads": "Threads", "cores": "Cores",
                "streams": "Streams (OpenVINO)", "hints": "Hint (OpenVINO)", "cpu_pinning": "CPU pinning (OpenVINO)",
                "inter_op_threads": "Inter-op threads (TensorFlow)", "onednn": "oneDNN (TensorFlow)",
                "instances": "Instances", "cores_per_instance": "Cores per instance",
                "concurrency": "Requests in flight", "rates": "Arrival rate (req/s)"}
    for spec, label in expected.items():
        assert shown[spec] == label, spec
    for spec, label in shown.items():
        assert setting_label(spec) == label, f"{spec}: the box says {label!r}, messages say {setting_label(spec)!r}"


def test_the_sweep_says_how_many_points_and_about_how_long_before_run(tmp_path):
    """Before Run: the number of points the grid holds (counted here from what was typed: 3 batch
    sizes × 2 thread counts) and the time they take; stored points are not counted again."""
    from analysis_data import make_study_db, run
    from wb_core.ui.state import DashboardState
    from wb_core.ui.sweep_panel import SweepPanel

    db = tmp_path / "est.db"
    make_study_db(db, [run(batch=1, threads=1, cores=None, p99=1.0, thr=100)], name="est")
    panel = SweepPanel(DashboardState(db))
    box = panel.axis_boxes
    box["batch_sizes"].value, box["threads"].value, box["cores"].value = "1,2,4", "1,2", "none"
    panel.max_time.value = 1.0
    assert "6 points to measure, about 20 seconds" in panel.estimate.value  # 6 × (1.5 start + 0.5 + 1 s)
    panel.max_time.value = 60.0
    assert "6 points to measure, about 6 minutes" in panel.estimate.value
    panel.axis_boxes["batch_sizes"].value = "0"
    assert panel.estimate.value == ""  # Run says what is wrong with it
    panel.axis_boxes["batch_sizes"].value = "1"
    panel.study.value = "est"
    assert "1 point to measure (1 stored already)" in panel.estimate.value


def test_after_a_sweep_the_estimate_says_what_is_left(tmp_path, lenet_ir, fast):
    from wb_core.ui.state import DashboardState
    from wb_core.ui.sweep_panel import SweepPanel

    session = DashboardState(tmp_path / "left.db")
    session.model_path = str(lenet_ir)
    panel = SweepPanel(session)
    panel.study.value = "left"
    box = panel.axis_boxes
    box["batch_sizes"].value, box["threads"].value, box["cores"].value, panel.max_time.value = "1", "1", "none", 0.3
    assert "1 point to measure" in panel.estimate.value
    panel.run.click()
    panel._thread.join(120)
    assert "The one point of this sweep is stored already" in panel.estimate.value, panel.messages.text.value
