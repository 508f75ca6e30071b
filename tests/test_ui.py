"""The dashboard panels without a browser: uploads, bad input, a sweep in the background, cancel."""

from __future__ import annotations

import datetime
import html
import io
import re
import zipfile

import pytest

pytest.importorskip("ipywidgets", reason="the ui extra is not installed (pip install -e '.[ui]')")

from wb_core.errors import ModelError
from wb_core.ui.state import DashboardState
from wb_core.ui.uploads import safe_name, save_upload


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize("raw, clean", [("model.onnx", "model.onnx"), ("../../etc/passwd.onnx", "passwd.onnx"),
                                         ("C:\\temp\\m.xml", "m.xml"), ("..hidden.keras", "hidden.keras"),
                                         ("my model (1).onnx", "my_model__1_.onnx")])
def test_upload_names_are_plain_file_names(raw, clean):
    assert safe_name(raw) == clean


def test_upload_name_without_usable_characters_is_refused():
    with pytest.raises(ModelError, match="no usable characters"):
        safe_name("../..")


def test_upload_saves_an_ir_pair_inside_its_own_folder(tmp_path, lenet_ir):
    files = [{"name": "../lenet.xml", "content": lenet_ir.read_bytes()},
             {"name": "lenet.bin", "content": lenet_ir.with_suffix(".bin").read_bytes()}]
    path = save_upload(files, dest_root=tmp_path)
    assert path.name == "lenet.xml" and path.parent.parent == tmp_path
    assert path.with_suffix(".bin").is_file()


def test_upload_over_the_limit_is_refused(tmp_path):
    with pytest.raises(ModelError, match="over the limit of 1 MB"):
        save_upload([{"name": "big.onnx", "content": b"x" * (2 * 2**20)}], dest_root=tmp_path, limit_mb=1)


def test_upload_of_a_non_model_file_is_refused(tmp_path):
    with pytest.raises(ModelError, match="not a model file"):
        save_upload([{"name": "notes.txt", "content": b"hello"}], dest_root=tmp_path)


def test_zip_with_a_member_outside_its_folder_is_refused(tmp_path):
    data = _zip({"../escape/saved_model.pb": b"x"})
    with pytest.raises(ModelError, match="outside its folder"):
        save_upload([{"name": "m.zip", "content": data}], dest_root=tmp_path)
    assert not (tmp_path / "escape").exists()


def test_zip_of_a_savedmodel_gives_its_folder(tmp_path, lenet_savedmodel):
    members = {f"sm/{p.relative_to(lenet_savedmodel)}": p.read_bytes()
               for p in lenet_savedmodel.rglob("*") if p.is_file()}
    path = save_upload([{"name": "lenet.zip", "content": _zip(members)}], dest_root=tmp_path)
    assert (path / "saved_model.pb").is_file()


def test_model_panel_shows_inline_errors_and_keeps_working(tmp_path, lenet_ir):
    from wb_core.ui.model_panel import SOURCES, ModelPanel

    session = DashboardState(tmp_path / "ui.db")
    panel = ModelPanel(session)
    panel.wait(60)
    assert "avx" in panel.hardware.value
    panel.source.value = SOURCES[1]
    panel.path.value = str(tmp_path / "missing.onnx")
    panel.use.click()
    panel.wait(60)
    assert "does not exist" in panel.messages.text.value and "wb-msg-error" in panel.messages.text.value
    assert not panel.use.disabled
    bad = tmp_path / "junk.onnx"
    bad.write_bytes(b"not a model at all")
    panel.source.value = SOURCES[2]
    panel.upload.set_trait("value", ({"name": "junk.onnx", "type": "", "size": 18,
                                      "last_modified": datetime.datetime.now(datetime.UTC),
                                      "content": memoryview(bad.read_bytes())},))
    panel.use.click()
    panel.wait(60)
    said = html.unescape(re.sub(r"<[^>]+>", "", panel.messages.text.value))
    assert "wb-msg-error" in panel.messages.text.value
    # The upload is named and the problem said in full, with no folder of the server in it.
    assert said.startswith("The upload 'junk.onnx' could not be used.") and "not a valid ONNX model" in said
    assert "/" not in said and "uploads" not in said and said.endswith("again."), said
    assert session.model_path == ""
    panel.source.value = SOURCES[1]
    assert panel.messages.text.value == ""  # the error went with the choice it was about
    panel.path.value = str(lenet_ir)
    panel.use.click()
    panel.wait(60)
    assert "Ready" in panel.messages.text.value
    assert session.model_path == str(lenet_ir)
    assert "image" in panel.model_info.value
    assert "Family" in panel.model_info.value and "CNN (convolutional)" in panel.model_info.value  # LeNet's convolutions
    assert "OpenVINO IR" in panel.model_info.value and ">openvino<" not in panel.model_info.value  # the format in words


def test_model_panel_reads_in_the_background_with_progress(tmp_path, lenet_ir):
    """The button is disabled and a progress line names the step while the model is read; the
    page's thread is free meanwhile (the work runs in another thread)."""
    import threading

    from wb_core.ui.model_panel import SOURCES, ModelPanel

    panel = ModelPanel(DashboardState(tmp_path / "ui.db"))
    seen, release = [], threading.Event()
    original = panel.select

    def slow_select(model, label=None, progress=None):
        seen.append(threading.current_thread().name)
        release.wait(30)
        original(model, label, progress=lambda t: (seen.append(t), progress(t)))

    panel.select = slow_select
    panel.source.value = SOURCES[1]
    panel.path.value = str(lenet_ir)
    panel.use.click()  # returns at once
    assert panel.use.disabled and "Reading the model" in panel.messages.text.value
    release.set()
    panel.wait(60)
    assert seen[0] == "wb-model" and any("checking its format" in t for t in seen[1:])
    assert not panel.use.disabled and "Ready" in panel.messages.text.value


def test_demo_model_progress_names_each_step(tmp_path, lenet_dir):
    from wb_core.ui.model_panel import ModelPanel

    panel = ModelPanel(DashboardState(tmp_path / "ui.db"))
    steps = []
    panel.select("lenet-digits", progress=steps.append)
    assert "Step 1 of 2: preparing the demo model lenet-digits" in steps[0] and "Step 2 of 2" in steps[1]
    assert "Ready: lenet-digits" in panel.messages.text.value


def _sweep_panel(tmp_path, model, batch="1,8", threads="1"):
    from wb_core.ui.sweep_panel import SweepPanel

    session = DashboardState(tmp_path / "ui.db")
    session.model_path = str(model)
    panel = SweepPanel(session)
    panel.axis_boxes["batch_sizes"].value, panel.axis_boxes["threads"].value, panel.max_time.value = batch, threads, 0.3
    return session, panel


def test_sweep_runs_in_the_background_and_fills_table_and_plot(tmp_path, lenet_ir):
    from wb_core.store import load_results

    session, panel = _sweep_panel(tmp_path, lenet_ir)
    panel.study.value = "ui"
    seen = []
    session.observe(lambda ch: seen.append(ch["new"]), "results_version")
    panel.run.click()
    panel._thread.join(120)
    assert "2 ok" in panel.messages.text.value, panel.messages.text.value
    assert panel.progress.value == 2 and panel.progress.bar_style == "success"
    assert panel.table.value.count("<td>ok</td>") == 2
    assert sum(len(t.x) for t in panel.plot.figure.data) == 2
    assert len(load_results(session.db, "ui")) == 2 and seen
    assert panel.studies.options[0][1] == "ui"


def test_cancel_keeps_finished_points_and_run_resumes(tmp_path, lenet_ir):
    from wb_core.store import load_results

    session, panel = _sweep_panel(tmp_path, lenet_ir, batch="1,2", threads="1,2")
    panel.study.value = "cancel"
    original = panel._on_point

    def cancel_after_first(point):
        original(point)
        panel.cancel_button.click()

    panel._on_point = cancel_after_first
    panel.run.click()
    panel._thread.join(120)
    done = load_results(session.db, "cancel")
    assert 1 <= len(done) < 4
    assert "Cancelled" in panel.messages.text.value
    panel._on_point = original
    panel.run.click()
    panel._thread.join(120)
    assert len(load_results(session.db, "cancel")) == 4
    assert "already stored" in panel.messages.text.value


def test_bad_sweep_values_and_failing_models_show_messages(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"garbage")
    session, panel = _sweep_panel(tmp_path, bad)
    panel.axis_boxes["cores"].value = "0-999"
    panel.run.click()
    assert "does not offer" in panel.messages.text.value
    panel.axis_boxes["cores"].value = "none"
    panel.run.click()
    panel._thread.join(120)
    assert "wb-msg-error" in panel.messages.text.value and "broken.onnx" in panel.messages.text.value
    assert not panel.run.disabled


def test_dashboard_reopens_the_latest_study(tmp_path, lenet_ir, fast):
    from wb_core.api import profile
    from wb_core.ui import dashboard

    db = tmp_path / "ui.db"
    profile(lenet_ir, db=db, study="earlier", settings=fast)
    tabs = dashboard(db)
    assert tabs.session.study == "earlier"
    assert tabs.session.model_path == str(lenet_ir.resolve())
    assert "ok" in tabs.panel("Sweep").table.value


def test_explore_and_export_follow_the_limits(tmp_path, lenet_ir, fast):
    import re

    from wb_core.api import profile
    from wb_core.ui import dashboard
    from wb_core.ui.words import run_name

    db = tmp_path / "ui.db"
    df = profile(lenet_ir, db=db, study="s", batch_sizes="1,8", settings=fast)
    tabs = dashboard(db)
    explore, export = tabs.panel("Explore"), tabs.panel("Export")
    assert explore.recommendation.value == "" and export.preview.value == ""  # nothing drawn until opened
    tabs.selected_index = 2
    fastest = df.loc[df["throughput"].idxmax()]
    assert f"data-key='{fastest['key']}'" in explore.recommendation.value
    assert run_name(fastest) in explore.recommendation.value
    assert tabs.session.selected_key == fastest["key"]
    assert explore.pareto_plot.figure is not None and not explore.other_plots.children  # more plots: on request
    explore.more.selected_index = 0
    assert len(explore.other_plots.children) >= 2
    explore.p99.value = explore.p99.min  # below every run
    assert "No run meets" in explore.recommendation.value
    assert fastest["key"] not in explore.recommendation.value  # runs named in words, not by key
    explore.p99.value = explore.p99.max
    # Plots are plotly output in an Output, never a FigureWidget: a browser must start one of those
    # within two seconds, which a busy machine misses (console errors, a figure stuck on its first data).
    from ipywidgets.widgets.widget import _instances

    assert not [x for x in _instances.values() if type(x).__name__ == "FigureWidget"]
    tabs.selected_index = 3
    assert "deployment.yaml" in export.preview.value and 'download="deployment.yaml"' in export.download.value
    assert run_name(fastest) in export.run_line.value and "recommended" in export.run_line.value
    export.format.value = "triton"
    assert ".zip" in export.download.value
    # Looking at a run shows it in words and leaves Export alone; "Export this run" changes it.
    other = df[df["key"] != fastest["key"]].iloc[0].to_dict()
    options = explore.look.options
    assert options[0][1] == "" and {k for _, k in options[1:]} == set(df["key"])
    assert (f"{run_name(fastest)} (Pareto front)", fastest["key"]) in options  # nothing beats it on throughput
    front = [i for i, (n, _) in enumerate(options) if n.endswith("(Pareto front)")]
    assert front == list(range(1, len(front) + 1))  # the front first
    explore.look.value = other["key"]
    shown = explore.details.value
    assert run_name(other) in shown and "p99 latency (ms)" in shown and "Peak memory (MB)" in shown
    assert "latency_ms_p99" not in shown and not re.search(r"\d\.\d{6,}", shown)
    assert not re.search(r"\d\.\d{6,}", explore.full_details.value)
    assert "latency_ms_p99" not in explore.full_details.value and "Batch" in explore.full_details.value
    assert tabs.session.selected_key == fastest["key"]
    assert run_name(fastest) in export.run_line.value
    explore.export_this.click()
    assert tabs.session.selected_key == other["key"]
    assert run_name(other) in export.run_line.value and "Export this run" in export.run_line.value
    assert explore.export_this.disabled
    export.folder.value = str(tmp_path / "out")
    export.write.click()
    assert (tmp_path / "out" / "model_repository").exists() or any((tmp_path / "out").iterdir())
    # New limits: the recommendation under them is exported again.
    explore.p99.value = explore.p99.min
    explore.p99.value = explore.p99.max
    assert tabs.session.selected_key == fastest["key"]


def test_pareto_plot_keeps_the_data_span_on_its_log_axis(tmp_path, lenet_ir, fast):
    """A p99 limit on the log x axis must not stretch it (plotly reads an annotation's x on a log
    axis as a power of ten: a 7 ms limit made the axis reach 10^7 ms)."""
    import math

    import plotly.graph_objects as go

    from wb_core.api import profile
    from wb_core.ui.explore_panel import ExplorePanel, highlight

    fig = go.Figure([go.Scatter(x=[1.2, 3.0, 8.5], y=[900, 1500, 2100], mode="markers")])
    fig.update_xaxes(type="log")
    highlight(fig, {"latency_ms_p99": 8.5, "throughput": 2100}, 7.0)
    lo, hi = fig.layout.xaxis.range
    assert math.log10(1.2) - 0.3 < lo < math.log10(1.2) and math.log10(8.5) < hi < math.log10(8.5) + 0.3
    assert not fig.layout.annotations and not fig.layout.shapes
    limit = [t for t in fig.data if str(t.name).startswith("p99 limit")]
    assert list(limit[0].x) == [7.0, 7.0]

    db = tmp_path / "ui.db"
    df = profile(lenet_ir, db=db, study="s", batch_sizes="1,8", settings=fast)
    session = DashboardState(db)
    session.study = "s"
    panel = ExplorePanel(session)
    panel.shown()
    panel.p99.value = (panel.p99.min + panel.p99.max) / 2
    lo, hi = panel.pareto_plot.figure.layout.xaxis.range
    assert 10 ** hi < 3 * df["latency_ms_p99"].max() and 10 ** lo > df["latency_ms_p99"].min() / 3


def test_panels_import_no_heavy_library_until_shown(tmp_path, lenet_ir, fast):
    """Building the Model, Explore and Export tabs imports neither TensorFlow, OpenVINO, NNCF nor
    plotly (seconds each on a small machine): the page appears first, the plots when opened."""
    import subprocess
    import sys

    from wb_core.api import profile

    db = tmp_path / "ui.db"
    profile(lenet_ir, db=db, study="s", settings=fast)
    code = f"""
import sys
from wb_core.ui import DashboardState
from wb_core.ui.model_panel import ModelPanel
from wb_core.ui.explore_panel import ExplorePanel
from wb_core.ui.export_panel import ExportPanel
s = DashboardState({str(db)!r})
s.study = "s"
panels = [ModelPanel(s), ExplorePanel(s), ExportPanel(s)]
s.refresh()
panels[0].wait(60)
print(sorted(m for m in ("tensorflow", "openvino", "nncf", "plotly") if m in sys.modules))
panels[1].shown()
print("plotly" in sys.modules, panels[1].pareto_plot.figure is not None)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == "[]", out.stdout
    assert lines[-1] == "True True", out.stdout


def test_export_names_formats_in_words_and_offers_the_report(tmp_path, lenet_ir, fast):
    from wb_core.api import profile
    from wb_core.export.formats import EXPORTERS
    from wb_core.ui.export_panel import ExportPanel

    db = tmp_path / "ui.db"
    profile(lenet_ir, db=db, study="my study", settings=fast)
    session = DashboardState(db)
    session.study = "my study"
    panel = ExportPanel(session)
    titles = [t for t, _ in panel.format.options]
    assert "OpenVINO Model Server config (config.json)" in titles
    assert "Triton model repository (config.pbtxt)" in titles and "Deployment YAML (deployment.yaml)" in titles
    assert len(titles) == len(EXPORTERS) and not any(t.startswith(tuple(f"{k}:" for k in EXPORTERS)) for t in titles)
    panel.shown()
    assert "recommended with no limits" in panel.run_line.value
    panel.report_button.click()
    assert panel.report_button.disabled and "Building the report" in panel.report_messages.text.value
    panel._reporting.join(120)
    assert not panel.report_button.disabled
    assert 'download="my_study-report.html"' in panel.report_download.value
    assert "data:text/html;base64," in panel.report_download.value
    assert "Report ready" in panel.report_messages.text.value


def test_a_bad_time_budget_is_said_under_its_box_and_nothing_is_stored(tmp_path, lenet_ir):
    """A budget that is not a duration, and one too small for one round, each get one sentence under
    the budget box (not elsewhere), the Tune button works again, and the store holds nothing."""
    from wb_core.ui.data_section import NO_DATA
    from wb_core.ui.model_panel import SOURCES
    from wb_core.ui.start_panel import StartPanel

    db = tmp_path / "tune.db"
    start = StartPanel(DashboardState(db))
    start.model.source.value = SOURCES[1]
    start.model.path.value = str(lenet_ir)
    start.data.source.value = NO_DATA
    start.budget.value = "soon"
    start.tune_button.click()
    assert "not a duration" in start.budget_messages.text.value and "wb-msg-error" in start.budget_messages.text.value
    assert start.messages.text.value == "" and start._thread is None
    start.budget.value = "1s"
    assert start.budget_messages.text.value == ""  # the message went with the value it was about
    start.tune_button.click()
    start._thread.join(120)
    said = html.unescape(re.sub(r"<[^>]+>", "", start.budget_messages.text.value))
    assert "too small for one round" in said and "Time budget" in said and "\n" not in said, said
    assert "wb-msg-error" not in start.messages.text.value
    assert not start.tune_button.disabled
    from wb_core.api import studies

    assert not db.exists() or studies(db) == []


def test_only_the_start_tab_is_built_before_the_page_shows(tmp_path):
    from wb_core.ui.app import TAB_TITLES, dashboard

    tabs = dashboard(tmp_path / "fresh.db")  # no study to reopen
    slots = dict(zip(TAB_TITLES, tabs.children))
    assert type(slots["Start"].children[0]).__name__ == "StartPanel"
    assert all(not slots[t].children for t in TAB_TITLES[1:])  # nothing else built yet
    tabs.selected_index = TAB_TITLES.index("Export")
    assert type(slots["Export"].children[0]).__name__ == "ExportPanel"  # built when first opened
    assert not slots["Sweep"].children and tabs.panel("Sweep") is tabs.panel("Sweep")  # built once


def test_missing_or_bad_data_is_said_under_the_data_box_before_anything_runs(tmp_path, lenet_ir):
    from wb_core.ui.data_section import NO_DATA, SERVER_PATH, UPLOAD
    from wb_core.ui.model_panel import SOURCES
    from wb_core.ui.start_panel import StartPanel

    db = tmp_path / "tune.db"
    start = StartPanel(DashboardState(db))
    start.model.source.value = SOURCES[1]
    start.model.path.value = str(lenet_ir)
    start.data.source.value = UPLOAD  # chosen, nothing uploaded
    start.tune_button.click()
    assert "Upload an .npz file first" in start.data_messages.text.value
    assert "wb-msg-error" in start.data_messages.text.value and start.messages.text.value == ""
    assert start._thread is None and not start.tune_button.disabled
    start.data.source.value = SERVER_PATH
    assert start.data_messages.text.value == ""  # went with the choice it was about
    start.data.path.value = str(tmp_path / "nowhere.npz")
    start.tune_button.click()
    assert "nowhere.npz" in start.data_messages.text.value and start.messages.text.value == ""
    assert start._thread is None
    start.data.source.value = NO_DATA
    assert start.data_messages.text.value == ""
    from wb_core.api import studies

    assert not db.exists() or studies(db) == []


@pytest.mark.parametrize("failure", ["worker", "other"])
def test_a_tune_broken_off_says_one_sentence_by_its_progress(tmp_path, lenet_ir, monkeypatch, failure):
    """A worker that died (or anything else breaking the tune off) in the tune's thread: one sentence
    beside the progress, the bar red, Tune usable again, the store without a study."""
    import wb_core.api as api
    from wb_core.ui.data_section import NO_DATA
    from wb_core.ui.model_panel import SOURCES
    from wb_core.ui.start_panel import StartPanel

    def broken_tune(*_a, **_k):
        if failure == "worker":
            raise api.WorkerError("Failed while measuring: the worker process was killed by signal 9.")
        raise RuntimeError("the kernel lost its worker pipe")

    monkeypatch.setattr(api, "tune", broken_tune, raising=False)
    db = tmp_path / "tune.db"
    start = StartPanel(DashboardState(db))
    start.model.source.value = SOURCES[1]
    start.model.path.value = str(lenet_ir)
    start.data.source.value = NO_DATA
    start.budget.value = "1m"
    start.tune_button.click()
    start._thread.join(120)
    said = html.unescape(re.sub(r"<[^>]+>", "", start.tune_failed.text.value)).strip()
    assert ("killed by signal 9" if failure == "worker" else "lost its worker pipe") in said
    assert "wb-msg-error" in start.tune_failed.text.value and "\n" not in said
    assert start.messages.text.value == "" and start.data_messages.text.value == ""
    assert start.progress.bar_style == "danger" and not start.tune_button.disabled and start.cancel_button.disabled
    assert "No answer" in start.answer.value and start.session.measuring == ""
    from wb_core.api import studies

    assert not db.exists() or studies(db) == []


def test_explore_says_why_a_reduced_precision_ran_slower_beside_its_recommendation(tmp_path):
    """The core's sentence, as the dashboard words it: which two runs to profile in the Layers tab."""
    from analysis_data import make_study_db, run
    from wb_core.ui.explore_panel import ExplorePanel

    fp32, int8 = run(precision="fp32", thr=1000.0), run(precision="int8", thr=400.0)
    db = tmp_path / "slow.db"
    make_study_db(db, [fp32, int8], name="s")
    session = DashboardState(db)
    session.study = "s"
    panel = ExplorePanel(session)
    panel.shown()
    assert "wb-precision-loss" in panel.recommendation.value, panel.recommendation.value
    # The runs named in words, their keys left out as everywhere on the page.
    assert ("Why INT8 ran slower than FP32 (0.40x) shows in the layer profiles of OpenVINO · INT8 · batch 1 · 1 "
            "thread · not pinned and of its FP32 twin OpenVINO · FP32 · batch 1 · 1 thread · not pinned: profile both "
            "runs (Layers tab)") in panel.recommendation.value
