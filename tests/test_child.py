"""The parent side of the worker protocol: hangs, crashes and exceptions become clear outcomes."""

import pytest

from wb_core.errors import WorkerError
from wb_core.proc.parent import run_child, run_task


def test_hung_child_is_killed_after_timeout():
    out = run_child({"task": "selftest", "mode": "hang"}, timeout=1.5)
    assert out.timed_out and not out.ok
    assert "stopped responding" in out.reason()


def test_crashed_child_reports_the_signal():
    out = run_child({"task": "selftest", "mode": "crash"}, timeout=30)
    assert out.returncode == -9
    assert "SIGKILL" in out.reason()


def test_exception_in_child_becomes_one_sentence():
    with pytest.raises(WorkerError, match="deliberate failure"):
        run_task({"task": "selftest", "mode": "raise"}, timeout=30, what="testing")


def test_child_result_reaches_parent():
    assert run_task({"task": "selftest", "mode": "ok"}, timeout=30, what="testing")["ok"] is True


def test_output_on_stdout_and_stderr_cannot_corrupt_messages():
    """Colour codes, progress bars, fake message lines and non-UTF-8 bytes are only output, never messages."""
    out = run_child({"task": "selftest", "mode": "noise"}, timeout=30)
    assert out.ok, out.reason()
    assert [m for m in out.messages if m["type"] == "result"] == [{"type": "result", "ok": True}]
    assert "\x1b" not in out.stderr_tail and "raw bytes" in out.stderr_tail


def test_non_utf8_output_of_a_failing_worker_is_one_sentence():
    with pytest.raises(WorkerError) as e:
        run_task({"task": "selftest", "mode": "noise-exit"}, timeout=30, what="testing")
    text = str(e.value)
    assert text.startswith("Failed while testing: the worker exited with code 5.")
    assert "\x1b" not in text and "\ufffd" in text  # undecodable bytes shown as replacement characters


def test_worker_refuses_to_start_without_its_channel():
    import subprocess
    import sys

    from wb_core.proc.parent import child_env

    env = {k: v for k, v in child_env().items() if k != "WB_CHANNEL"}
    done = subprocess.run([sys.executable, "-m", "wb_core.proc.worker"], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and "channel" in done.stderr
