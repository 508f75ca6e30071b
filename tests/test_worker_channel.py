"""Real workers in the environment of a Jupyter kernel, beside a library that prints all the time.

A kernel started by JupyterLab or Voila sets FORCE_COLOR=1 (and TERM, CLICOLOR_FORCE): runtimes
then write colour codes and progress bars even into pipes. Results must not depend on it.
"""

from __future__ import annotations

import textwrap

import pandas as pd
import pytest

from wb_core.config import SweepSpec
from wb_core.store import load_results
from wb_core.sweep.local import run_sweep
from wb_core.variants.planner import PrecisionOptions

KERNEL_ENV = {"FORCE_COLOR": "1", "TERM": "xterm-256color", "PY_COLORS": "1", "CLICOLOR_FORCE": "1"}

# Loaded by every worker at start-up (sitecustomize): a thread that keeps printing a tqdm bar,
# colour codes and bytes that are not UTF-8 on both stdout and stderr while the worker runs.
NOISY_SITECUSTOMIZE = textwrap.dedent('''
    import os, sys, threading, time

    def _noise():
        from tqdm import tqdm
        bar = tqdm(total=10**9, file=sys.stdout, colour="green")
        err = tqdm(total=10**9, file=sys.stderr)
        while True:
            bar.update(1); err.update(1)
            os.write(1, b"\\x1b[31mnoise\\x1b[0m {\\"type\\": \\"point\\"}\\r\\x1b[?25l")  # no line end, as rich
            os.write(2, b"\\xff\\xfe\\x80 \\xc3\\x28 not utf-8\\n")
            os.write(1, b"\\xff stdout bytes \\x80")
            time.sleep(0.005)

    threading.Thread(target=_noise, daemon=True).start()
''')


def _sweep(model, db, study, fast, lenet_dir):
    s = run_sweep(model, SweepSpec(backends="openvino", precisions="fp32,int8", batch_sizes="1,4"), db, study,
                  settings=fast, precision=PrecisionOptions(data=str(lenet_dir / "data.npz")))
    df = load_results(db, study).set_index(["precision", "batch_size"]).sort_index()
    return s, df


@pytest.mark.slow  # long; `make test-all` runs it
def test_noisy_kernel_environment_gives_the_same_results(lenet_savedmodel, lenet_dir, db, fast, tmp_path,
                                                         monkeypatch):
    clean_summary, clean = _sweep(lenet_savedmodel, db, "clean", fast, lenet_dir)
    assert clean_summary.ok == 4, clean_summary.errors

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NOISY_SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(site))
    for k, v in KERNEL_ENV.items():
        monkeypatch.setenv(k, v)
    # INT8 and accuracy are cached by content: clear them so quantizing and evaluating run again, noisily.
    monkeypatch.setenv("WB_CACHE_DIR", str(tmp_path / "cache"))
    noisy_summary, noisy = _sweep(lenet_savedmodel, tmp_path / "noisy.db", "noisy", fast, lenet_dir)

    assert noisy_summary.ok == 4, noisy_summary.errors
    assert list(noisy.index) == list(clean.index)
    same = ["status", "executed_precision", "variant", "accuracy", "accuracy_drop", "calibration_size"]
    pd.testing.assert_frame_equal(noisy[same], clean[same])
    assert (noisy["throughput"] > 0).all()
    assert noisy.loc[("int8", 1), "accuracy_drop"] <= 0.01


def test_sitecustomize_noise_really_reaches_the_worker(tmp_path, monkeypatch):
    """Guards the test above: the noisy module is loaded by workers (or it would prove nothing)."""
    from wb_core.proc.parent import run_child

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NOISY_SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(site))
    out = run_child({"task": "selftest", "mode": "hang"}, timeout=1.0)
    assert out.timed_out
    assert "not utf-8" in out.stderr_tail and "\ufffd" in out.stderr_tail
