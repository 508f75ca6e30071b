"""Training studies: the sweep, the recommendation, and real `model.fit` workers on a tiny LeNet-5.

TensorFlow workers cost seconds each, so the real runs are few: one study of one pinned point
(mechanics: rows, pinning, thread variables, resume), and the bad inputs that stop a study.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from wb_core.errors import ConfigError
from wb_core.hardware import detect
from wb_core.training import TrainSpec, recommend_training
from wb_core.training.examples import fashion_shaped, write_lenet5


@pytest.fixture(scope="session")
def lenet5(tmp_path_factory):
    return write_lenet5(tmp_path_factory.mktemp("lenet5") / "lenet5.keras")


def test_spec_expands_every_setting_and_refuses_bad_values():
    spec = TrainSpec(threads="auto,2", inter_op_threads="1", omp_threads="auto,2", onednn="on,off", cores="none",
                     batch_sizes="32,64")
    points = spec.expand()
    assert len(points) == 2 * 1 * 2 * 2 * 2
    assert {p.omp_threads for p in points} == {None, 2} and {p.onednn for p in points} == {True, False}
    assert len({p.key_for("d") for p in points}) == len(points)
    assert TrainSpec().expand()[0].is_default
    for kwargs, needle in (({"threads": "0"}, "at least 1"), ({"epochs": 0}, "Epochs"),
                           ({"cores": "999"}, "does not offer"), ({"onednn": "maybe"}, "oneDNN")):
        with pytest.raises(ConfigError, match=needle):
            TrainSpec(**kwargs)


def _row(cores, epoch_s, threads=None, **kw):
    n = 1000
    return {"status": "ok", "cores_given": cores, "cores": "none" if cores is None else f"0-{cores - 1}",
            "epoch_s": epoch_s, "throughput": n / epoch_s, "throughput_per_core": n / epoch_s / cores,
            "cpu_util_pct": 90.0, "threads": threads, "inter_op_threads": None, "omp_threads": None, "onednn": None,
            "batch_size": 32, **kw}


def test_recommendation_gives_the_fastest_of_the_efficient_core_counts():
    # 1 core: 1000/s per core; 2 cores: 950 (within 10%: efficient); 4 cores: 600 (not).
    df = pd.DataFrame([_row(1, 1.0, 1), _row(2, 1 / 1.9, 2), _row(4, 1 / 2.4, 4), _row(2, 0.9, None)])
    rec = recommend_training(df, machine_cores=32)
    assert rec["best"]["cores_given"] == 2 and rec["best"]["threads"] == 2
    assert rec["jobs_per_machine"] == 16 and rec["fastest"]["cores_given"] == 4
    assert "2 core(s)" in rec["text"] and "16 job(s)" in rec["text"] and "fastest single job used 4" in rec["text"]
    assert recommend_training(pd.DataFrame([{"status": "failed", "epoch_s": None}]))["best"] is None


def test_fashion_shaped_set_has_the_shape_and_is_learnable_in_principle():
    x, y = fashion_shaped(500, seed=1)
    assert x.shape == (500, 28, 28, 1) and x.dtype == np.float32 and x.min() >= 0 and x.max() <= 1
    assert set(np.unique(y)) == set(range(10))
    # Samples of one class resemble each other more than samples of two classes.
    a, b = x[y == 3][:20].reshape(20, -1), x[y == 7][:20].reshape(20, -1)
    assert np.linalg.norm(a[:10] - a[10:], axis=1).mean() < np.linalg.norm(a[:10] - b[:10], axis=1).mean()


def test_a_pinned_training_point_is_measured_and_stored(lenet5, tmp_path):
    from wb_core.api import train_profile
    from wb_core.training.plots import training_figures

    db = tmp_path / "t.db"
    cpu = detect().available_cpus[0]
    x, y = fashion_shaped(320)
    np.savez(tmp_path / "d.npz", x_train=x, y_train=y)
    kw = dict(data=str(tmp_path / "d.npz"), db=db, study="t", threads="1", inter_op_threads="1", omp_threads="1",
              cores=str(cpu), batch_sizes="64", epochs=2, warmup_steps=2)
    df = train_profile(lenet5, **kw)
    r = df.iloc[0]
    assert r.status == "ok", r.error
    assert r.steps_per_epoch == 5 and r.samples_per_epoch == 320 and r.epochs_measured == 2
    assert math.isclose(r.throughput, 320 / r.epoch_s, rel_tol=1e-6)
    assert r.epoch_s_min <= r.epoch_s <= r.epoch_s_max and r.latency_ms_p50 > 0
    assert r.cores_given == 1 and r.cores == str(cpu) and r.thread_cpus == [cpu]  # every TF thread on that core
    assert r.env_threads["TF_NUM_INTRAOP_THREADS"] == "1" and r.env_threads["OMP_NUM_THREADS"] == "1"
    assert 0 < r.cpu_util_pct <= 110 and r.throughput_per_core == pytest.approx(r.throughput)
    assert math.isfinite(r.loss_last) and r.rss_mb > 100
    # Resumes like any study, and plots.
    again = train_profile(lenet5, **kw, return_frame=False)
    assert again.skipped_done == 1 and again.ok == 0
    figs = training_figures(df)
    assert len(figs["scaling"].data) == 3 and len(figs["settings"].data) == 1


def test_wrong_data_is_one_sentence(lenet5, tmp_path):
    from wb_core.api import train_profile

    np.savez(tmp_path / "wrong.npz", x=np.zeros((8, 32, 32, 1), np.float32), y=np.zeros(8, np.int64))
    with pytest.raises(ConfigError) as e:
        train_profile(lenet5, data=str(tmp_path / "wrong.npz"), db=tmp_path / "t.db")
    assert "(32, 32, 1)" in str(e.value) and "28x28x1" in str(e.value)
    np.savez(tmp_path / "nolabels.npz", x=np.zeros((8, 28, 28, 1), np.float32))
    with pytest.raises(ConfigError, match="no labels"):
        train_profile(lenet5, data=str(tmp_path / "nolabels.npz"), db=tmp_path / "t.db")
    assert not (tmp_path / "t.db").exists()


@pytest.mark.slow  # long; `make test-all` runs it
def test_an_uncompiled_model_is_one_sentence_on_the_command_line(tmp_path):
    model = write_lenet5(tmp_path / "raw.keras", compile=False)
    r = subprocess.run([sys.executable, "-m", "wb_core.cli", "train-profile", str(model), "--db", str(tmp_path / "t.db")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and "not compiled" in lines[0], r.stderr
