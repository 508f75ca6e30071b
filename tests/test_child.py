"""The parent side of the worker protocol: hangs, crashes and exceptions become clear outcomes."""

import pytest

from wb_core.child import run_child, run_task
from wb_core.errors import WorkerError


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
