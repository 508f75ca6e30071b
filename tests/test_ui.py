"""The dashboard panels without a browser: uploads, bad input, a sweep in the background, cancel."""

from __future__ import annotations

import datetime
import io
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
    assert "avx" in panel.hardware.value
    panel.source.value = SOURCES[1]
    panel.path.value = str(tmp_path / "missing.onnx")
    panel.use.click()
    assert "does not exist" in panel.messages.text.value and "wb-msg-error" in panel.messages.text.value
    bad = tmp_path / "junk.onnx"
    bad.write_bytes(b"not a model at all")
    panel.source.value = SOURCES[2]
    panel.upload.set_trait("value", ({"name": "junk.onnx", "type": "", "size": 18,
                                      "last_modified": datetime.datetime.now(datetime.UTC),
                                      "content": memoryview(bad.read_bytes())},))
    panel.use.click()
    assert "wb-msg-error" in panel.messages.text.value
    assert session.model_path == ""
    panel.source.value = SOURCES[1]
    panel.path.value = str(lenet_ir)
    panel.use.click()
    assert "Ready" in panel.messages.text.value
    assert session.model_path == str(lenet_ir)
    assert "image" in panel.model_info.value


def _sweep_panel(tmp_path, model, batch="1,8", threads="1"):
    from wb_core.ui.sweep_panel import SweepPanel

    session = DashboardState(tmp_path / "ui.db")
    session.model_path = str(model)
    panel = SweepPanel(session)
    panel.batch.value, panel.threads.value, panel.max_time.value = batch, threads, 0.3
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
    assert sum(len(t.x) for t in panel._figure.data) == 2
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
    panel.cores.value = "0-999"
    panel.run.click()
    assert "does not offer" in panel.messages.text.value
    panel.cores.value = "none"
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
    assert "ok" in tabs.children[1].table.value


def test_explore_and_export_follow_the_limits(tmp_path, lenet_ir, fast):
    pytest.importorskip("wb_core.analysis.recommend", reason="the analysis module is not on this branch yet")
    from wb_core.api import profile
    from wb_core.ui import dashboard

    db = tmp_path / "ui.db"
    df = profile(lenet_ir, db=db, study="s", batch_sizes="1,8", settings=fast)
    tabs = dashboard(db)
    explore, export = tabs.children[2], tabs.children[3]
    fastest = df.loc[df["throughput"].idxmax()]
    assert fastest["key"] in explore.recommendation.value
    assert tabs.session.selected_key == fastest["key"]
    explore.p99.value = explore.p99.min  # below every run
    assert "No run meets" in explore.recommendation.value
    explore.p99.value = explore.p99.max
    assert "deployment.yaml" in export.preview.value and 'download="deployment.yaml"' in export.download.value
    export.format.value = "triton"
    assert ".zip" in export.download.value
    other = df[df["key"] != fastest["key"]].iloc[0].to_dict()
    explore.show_run(other)
    assert other["key"] in export.run_line.value
    export.folder.value = str(tmp_path / "out")
    export.write.click()
    assert (tmp_path / "out" / "model_repository").exists() or any((tmp_path / "out").iterdir())
