"""Pipeline studies with real processes on the LeNet IR: frames accounted for, stages, bottleneck, pinning.

Sources are made here (a 40-frame H.264 video, small image folders). The checks are about
mechanics that would break if the feature broke, never about how fast this machine is.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wb_core.data import ImageOptions
from wb_core.errors import ConfigError
from wb_core.hardware import detect
from wb_core.pipeline import PipelineSpec, bottleneck, run_pipeline
from wb_core.pipeline.samples import write_images, write_video
from wb_core.pipeline.source import assign_units, scan_source
from wb_core.store import RESULT_COLUMNS, load_results

FRAMES = 40


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("video") / "clip.mp4", frames=FRAMES, width=64, height=48, gop=8)


@pytest.fixture
def messy_folder(tmp_path, video):
    """6 images in two subfolders, a 40-frame video, and three files that cannot be used."""
    root = tmp_path / "frames"
    good = write_images(root, 6, subfolders=2)
    (root / "part0" / "notes.jpg").write_bytes(b"this is not a picture")
    (root / "part1" / "broken.mp4").write_bytes(b"\x00" * 256)
    data = good[0].read_bytes()
    (root / "part1" / "truncated.png").write_bytes(data[: len(data) // 2])
    (root / "clip.mp4").write_bytes(video.read_bytes())
    return root


def _rows(db, study):
    return load_results(db, study).sort_values(["pre_workers", "batch_size"]).reset_index(drop=True)


def test_every_frame_of_a_video_is_counted_once_whatever_the_split(video):
    plan = scan_source(video)
    assert plan.frames == FRAMES and plan.videos == 1 and not plan.skipped
    for workers in (1, 2, 3, 5):
        shares = assign_units(plan, workers)
        covered = sorted(i for share in shares for u in share for i in range(u["start"], u["end"]))
        assert covered == list(range(FRAMES))
        if workers > 1:  # segments start at keyframes, so several processes decode one video
            assert sum(len(s) for s in shares) > 1


def test_video_pipeline_counts_frames_and_stage_times_add_up(lenet_ir, video, db):
    spec = PipelineSpec(pre_workers="0,1,3", batch_sizes="4", threads="1")
    s = run_pipeline(lenet_ir, video, spec, db, "v")
    assert (s.ok, s.failed) == (3, 0), s.errors
    df = _rows(db, "v")
    assert list(df.columns[: len(RESULT_COLUMNS)]) == list(RESULT_COLUMNS)
    assert (df.frames == FRAMES).all() and (df.frames_expected == FRAMES).all() and (df.frames_skipped == 0).all()
    assert ((df.batches == FRAMES // 4) | (df.pre_workers == 3)).all()  # three producers may each send a partial batch
    assert (df.throughput > 0).all() and (df.latency_ms_p50 <= df.latency_ms_p99).all()
    eps = 0.02
    serial = df[df.pre_workers == 0].iloc[0]
    # One loop: decode, preprocess and inference run one after another inside the measured wall time.
    assert 0 < serial.decode_s + serial.preprocess_s + serial.infer_s <= serial.wall_s + eps
    assert serial.queue_wait_s == 0 and serial.infer_wait_s == 0
    # One process: its decoding thread's CPU is the pre side, the rest the inference side.
    assert serial.pre_cpu_util > 0 and serial.pre_cpu_util + serial.infer_cpu_util == pytest.approx(serial.cpu_util)
    for _, r in df[df.pre_workers > 0].iterrows():
        n, k = r.pre_workers, r.infer_threads
        assert r.decode_s > 0 and r.preprocess_s > 0 and r.infer_s > 0
        # Each process's stages (and waits) fit in the wall time it ran in.
        for w in r.pre_worker_stats:
            assert w["decode_s"] + w["preprocess_s"] + w["queue_wait_s"] <= w["active_s"] + eps
            assert w["active_s"] <= r.wall_s + 0.2  # a producer may still be posting its end marker
        assert (r.decode_s + r.preprocess_s + r.queue_wait_s) / n <= r.wall_s + 0.2
        assert r.infer_s + r.infer_wait_s <= k * r.wall_s + eps
        assert sum(w["frames"] for w in r.pre_worker_stats) == FRAMES
        assert r.queue_mean is not None and 0 <= r.queue_mean <= r.queue_depth
    # Stored like any study: a rerun skips what is done.
    again = run_pipeline(lenet_ir, video, spec, db, "v")
    assert again.skipped_done == 3 and again.ok == 0


def test_a_cancelled_pipeline_study_keeps_the_points_it_finished_and_a_rerun_measures_the_rest(lenet_ir, video, db):
    import threading

    cancel = threading.Event()
    seen = []

    def on_point(rec):
        seen.append(rec)
        cancel.set()  # after the first arrangement is stored

    spec = PipelineSpec(pre_workers="0,1", batch_sizes="4", threads="1")
    s = run_pipeline(lenet_ir, video, spec, db, "c", on_point=on_point, cancel=cancel)
    assert s.cancelled and (s.ok, s.failed) == (1, 0), s.errors
    assert len(seen) == 1 and seen[0]["point"] is seen[0]["config"] and seen[0]["point"].pre_workers == 0
    stored = load_results(db, "c")
    assert list(stored["key"]) == [seen[0]["key"]] and list(stored["status"]) == ["ok"]
    again = run_pipeline(lenet_ir, video, spec, db, "c")
    assert (again.skipped_done, again.ok, again.cancelled) == (1, 1, False), again.errors
    assert sorted(load_results(db, "c")["pre_workers"]) == [0, 1]


def test_unreadable_files_are_skipped_counted_and_named(lenet_ir, messy_folder, db):
    s = run_pipeline(lenet_ir, messy_folder, PipelineSpec(pre_workers="0,2", batch_sizes="3"), db, "m")
    assert s.ok == 2, s.errors
    assert any("notes.jpg" in n and "broken.mp4" in n and "truncated.png" in n for n in s.notes)
    df = _rows(db, "m")
    # 6 images + 40 video frames readable; the truncated PNG has a sound header and is found when the
    # scan decodes it, so no frame is expected of it and none fails while measuring.
    assert (df.frames == 6 + FRAMES).all()
    assert (df.frames_expected == 6 + FRAMES).all() and (df.frames_skipped == 0).all()
    for files in df.files_skipped:
        names = sorted(f["path"].rsplit("/", 1)[-1] for f in files)
        assert names == ["broken.mp4", "notes.jpg", "truncated.png"]


def test_a_damaged_video_keeps_what_decodes(lenet_ir, video, tmp_path, db):
    data = bytearray(video.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 400] = b"\xff" * 400  # garbage in the middle of the stream
    bad = tmp_path / "damaged.mp4"
    bad.write_bytes(bytes(data))
    s = run_pipeline(lenet_ir, bad, PipelineSpec(pre_workers="1", batch_sizes="4"), db, "d")
    assert s.ok == 1, s.errors
    r = load_results(db, "d").iloc[0]
    assert r.frames + r.frames_skipped == r.frames_expected and r.frames > 0


def test_the_slow_side_is_named_the_bottleneck(lenet_ir, video, db):
    spec = PipelineSpec(pre_workers="1", batch_sizes="2", threads="1", queue_depth="2")
    # Delays are sleeps, far above the real work: 80 ms per batch against decoding two small frames
    # (a few ms, tens on a loaded machine), 12 ms per frame against LeNet's inference (well under 1 ms).
    run_pipeline(lenet_ir, video, spec, db, "slow-infer", inject={"infer_delay_ms": 80})
    run_pipeline(lenet_ir, video, spec, db, "slow-pre", inject={"pre_delay_ms": 12})
    slow_infer = load_results(db, "slow-infer").iloc[0]
    slow_pre = load_results(db, "slow-pre").iloc[0]
    assert slow_infer.bottleneck == "inference"
    assert slow_infer.pre_idle_frac > 0.5 and slow_infer.queue_full_frac > 0.5  # producers wait for room
    assert slow_pre.bottleneck == "preprocess"
    assert slow_pre.infer_idle_frac > 0.5 and slow_pre.queue_empty_frac > 0.5  # inference waits for batches
    assert slow_infer.stage_ms_infer > slow_infer.stage_ms_preprocess
    assert slow_pre.stage_ms_preprocess > slow_pre.stage_ms_infer


@pytest.mark.parametrize("side", ["pre", "infer"])
def test_a_process_that_dies_fails_its_point_and_the_study_goes_on(lenet_ir, video, db, side, tmp_path,
                                                                    monkeypatch):
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setenv("WB_SHM_DIR", str(shm))
    spec = PipelineSpec(pre_workers="1", batch_sizes="2,4")
    s = run_pipeline(lenet_ir, video, spec, db, "crash", inject={"crash": side})
    assert (s.ok, s.failed) == (0, 2)
    who = "Preprocessing process 0" if side == "pre" else "The inference process"
    assert all(who in e and "SIGKILL" in e for e in s.errors), s.errors
    df = load_results(db, "crash")
    assert (df.status == "failed").all() and len(df) == 2
    # Nothing is left behind: no process of ours, no shared memory.
    import psutil

    assert not [p for p in psutil.Process().children(recursive=True) if p.is_running()]
    assert not list(shm.iterdir())
    # A rerun measures the failed points again (here: without the crash).
    assert run_pipeline(lenet_ir, video, spec, db, "crash").ok == 2


def test_bottleneck_rule():
    assert bottleneck(2, 1.0, 1.0, pre_idle_frac=0.6, infer_idle_frac=0.01) == "inference"
    assert bottleneck(2, 1.0, 1.0, pre_idle_frac=0.0, infer_idle_frac=0.7) == "preprocess"
    assert bottleneck(2, 1.0, 1.0, pre_idle_frac=0.05, infer_idle_frac=0.1) == "balanced"
    assert bottleneck(0, 3.0, 1.0, 0, 0) == "preprocess" and bottleneck(0, 1.0, 3.0, 0, 0) == "inference"


@pytest.mark.skipif(len(detect().available_cpus) < 2, reason="needs two CPUs")
def test_each_side_runs_on_the_cores_asked_for(lenet_ir, video, db):
    cpus = detect().available_cpus
    pre, inf = cpus[0], cpus[1]
    spec = PipelineSpec(pre_workers="2", pre_cores=str(pre), infer_cores=str(inf), batch_sizes="4", threads="1")
    s = run_pipeline(lenet_ir, video, spec, db, "pin")
    assert s.ok == 1, s.errors
    r = load_results(db, "pin").iloc[0]
    # Read per thread in each process after the work: the runtime's pool and the decoders' threads included.
    assert r.pre_cpus == str(pre) and r.infer_cpus == str(inf)
    assert r.cores == str(inf) and r.pre_cores == str(pre)
    assert all(w["placement_cpus"] == [pre] for w in r.pre_worker_stats)


def test_model_input_that_preprocessing_cannot_feed_is_one_sentence(lenet_ir, video, db):
    with pytest.raises(ConfigError) as e:
        run_pipeline(lenet_ir, video, PipelineSpec(), db, "x", image=ImageOptions(size=(16, 16)))
    msg = str(e.value)
    assert "16x16x1" in msg and "8x8x1" in msg and msg.count(".") <= 3
    with pytest.raises(ConfigError, match="3x8x8|8x8x3"):
        run_pipeline(lenet_ir, video, PipelineSpec(), db, "x", image=ImageOptions(channels=3))


def test_bad_sources_stop_before_anything_is_stored(lenet_ir, tmp_path, db):
    with pytest.raises(ConfigError, match="does not exist"):
        run_pipeline(lenet_ir, tmp_path / "nothing", PipelineSpec(), db, "x")
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "a.jpg").write_bytes(b"nope")
    (junk / "b.mp4").write_bytes(b"nope")
    with pytest.raises(ConfigError, match="no readable frames"):
        run_pipeline(lenet_ir, junk, PipelineSpec(), db, "x")
    with pytest.raises(ConfigError, match="Pre-workers"):
        PipelineSpec(pre_workers="-1")
    assert not db.exists()  # nothing above opened the store


def test_cli_prints_the_table_and_writes_figures(lenet_ir, video, db, tmp_path):
    html = tmp_path / "figs.html"
    r = subprocess.run([sys.executable, "-m", "wb_core.cli", "pipeline", str(lenet_ir), "--source", str(video),
                        "--pre-workers", "0,1", "--batch", "4", "--db", str(db), "--study", "cli", "--plot", str(html)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "frames/s" in r.stdout and "bottleneck" in r.stdout and "2 ok" in r.stdout
    assert html.read_text().count("plotly") > 3
    bad = subprocess.run([sys.executable, "-m", "wb_core.cli", "pipeline", str(lenet_ir), "--source", str(video),
                          "--image-size", "16", "--db", str(db)], capture_output=True, text=True)
    assert bad.returncode == 2
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and "8x8x1" in lines[0]
    out = subprocess.run([sys.executable, "-m", "wb_core.cli", "results", "--study", "cli", "--db", str(db),
                          "--format", "json"], capture_output=True, text=True)
    rows = json.loads(out.stdout)
    assert {r["pre_workers"] for r in rows} == {0, 1} and all(r["frames"] == FRAMES for r in rows)


def test_figures(lenet_ir, video, db):
    from wb_core.pipeline.plots import pipeline_figures

    run_pipeline(lenet_ir, video, PipelineSpec(pre_workers="0,1", batch_sizes="2,4"), db, "f")
    figs = pipeline_figures(load_results(db, "f"))
    assert set(figs) == {"stages", "throughput", "batch", "queue"}
    stages = figs["stages"]
    assert {t.name for t in stages.data} >= {"decode", "preprocess", "model", "waiting for a batch"}
    assert len(figs["throughput"].data) == 2 and list(figs["throughput"].data[0].x) == [0, 1]
    assert len(figs["batch"].data) == 4


@pytest.mark.slow
def test_tensorflow_inference_side_with_two_threads(lenet_savedmodel, video, db):
    spec = PipelineSpec(backends="tensorflow", pre_workers="2", batch_sizes="4", threads="1", concurrency="2")
    s = run_pipeline(lenet_savedmodel, video, spec, db, "tf")
    assert s.ok == 1, s.errors
    r = load_results(db, "tf").iloc[0]
    assert r.backend == "tensorflow" and r.infer_threads == 2 and r.frames == FRAMES
    assert r.tf_intra_op == 1 and r.infer_s + r.infer_wait_s <= 2 * r.wall_s + 0.02
