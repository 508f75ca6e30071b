"""The one worker supervisor: real worker processes that die, hang, get cancelled or start together."""

import ast
import os
import threading
from pathlib import Path

import psutil

from wb_core.config import InputOptions, RunConfig
from wb_core.proc.supervisor import StartBarrier, Supervisor

SRC = Path(__file__).resolve().parent.parent / "src" / "wb_core"


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """The process has ended (a kill takes a moment to land on a busy machine)."""
    try:
        psutil.Process(pid).wait(timeout=within_s)
        return True
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def _ends(sup):
    return [w for w, msg in sup.events() if msg is None]


def test_a_worker_that_dies_mid_stream_keeps_its_finished_points_and_says_why_in_one_sentence(lenet_ir, fast):
    from dataclasses import replace

    from wb_core.sweep.local import worker_task

    members = [RunConfig("openvino", batch_size=b, threads=1) for b in (1, 2, 4)]
    settings = replace(fast, max_time_s=2.0, tolerance=1e-9)  # each point runs its full time
    task = worker_task("measure", lenet_ir, members, settings, InputOptions())
    got, ended = [], []
    with Supervisor(timeout=600) as sup:
        worker = sup.start(task)
        for w, msg in sup.events():
            if msg is None:
                ended.append(w)
                continue
            got.append(msg)
            if msg["type"] == "point":
                os.kill(w.pid, 9)  # dies while the second point is measured
    points = [m for m in got if m["type"] == "point"]
    assert [p["key"] for p in points] == [members[0].key]
    assert points[0]["status"] == "ok" and points[0]["metrics"]["throughput"] > 0
    assert ended == [worker] and worker.outcome.returncode == -9 and not worker.outcome.ok
    sentence = worker.outcome.sentence()
    assert sentence.startswith("The worker was killed by signal SIGKILL")
    assert sentence.count(". ") <= 1 and "\n" not in sentence and "Traceback" not in sentence
    assert _gone(worker.pid)


def test_a_worker_is_seen_to_exit_even_when_a_forked_helper_holds_its_channel_and_the_helper_goes_too():
    with Supervisor(timeout=60) as sup:
        worker = sup.start({"task": "selftest", "mode": "orphan"})
        msgs = [m for _, m in sup.events() if m is not None]
    helper = [m["pid"] for m in msgs if m["type"] == "forked"]
    assert helper and worker.outcome.returncode == 0 and not worker.outcome.timed_out  # its exit, not the timeout
    assert _gone(helper[0])


def test_a_message_larger_than_the_output_cap_arrives_whole():
    """A multi-instance point carries every latency of its window: hundreds of KiB on one line. The
    cap on a worker's printed output (a redrawn progress bar) must not cut a message."""
    n = 200_000  # about 1.3 MB of JSON, twenty times the 64 KiB cap
    with Supervisor(timeout=60) as sup:
        worker = sup.start({"task": "selftest", "mode": "big", "n": n})
        msgs = [m for _, m in sup.events() if m is not None]
    big = [m for m in msgs if m["type"] == "big"]
    assert worker.outcome.returncode == 0
    assert len(big) == 1 and big[0]["values"] == list(range(n))
    assert [m["type"] for m in msgs] == ["start", "big", "result"]


def test_a_crash_reports_the_last_output_line():
    with Supervisor(timeout=60) as sup:
        worker = sup.start({"task": "selftest", "mode": "noise-exit"})
        msgs = [m for _, m in sup.events() if m is not None]
    assert msgs == [{"type": "start"}]
    out = worker.outcome
    assert out.returncode == 5
    assert out.sentence().startswith("The worker exited with code 5. Last output: ")
    assert "\x1b" not in out.sentence()


def test_a_hung_worker_is_killed_after_the_idle_timeout_while_another_finishes():
    with Supervisor(timeout=2.0) as sup:
        hung = sup.start({"task": "selftest", "mode": "hang"}, name="hung")
        fine = sup.start({"task": "selftest", "mode": "ok"}, name="fine")
        seen = [(w.name, m) for w, m in sup.events()]
    assert ("fine", {"type": "result", "ok": True}) in seen
    assert ("hung", {"type": "start"}) in seen  # what it said before hanging is kept
    assert [name for name, m in seen if m is None] == ["fine", "hung"]
    assert hung.outcome.timed_out and not hung.outcome.past_deadline
    assert "stopped responding" in hung.outcome.reason()
    assert fine.outcome.ok
    assert _gone(hung.pid)


def test_a_deadline_kills_a_worker_however_fresh_its_messages():
    with Supervisor(timeout=600) as sup:
        worker = sup.start({"task": "selftest", "mode": "hang"})
        worker.set_deadline(1.0)
        _ends(sup)
    assert worker.outcome.past_deadline and worker.outcome.timed_out
    assert "time it was given" in worker.outcome.reason()
    assert _gone(worker.pid)


def test_cancel_kills_every_worker_and_keeps_what_they_said():
    cancel = threading.Event()
    with Supervisor(timeout=600, cancel=cancel) as sup:
        workers = [sup.start({"task": "selftest", "mode": "hang"}) for _ in range(2)]
        said = []
        for _w, msg in sup.events():
            if msg is not None:
                said.append(msg)
                if len(said) == 2:
                    cancel.set()  # both are hanging now
    assert sup.cancelled
    assert said == [{"type": "start"}, {"type": "start"}]
    for w in workers:
        assert w.outcome.cancelled and not w.outcome.ok and "cancelled" in w.outcome.reason()
        assert _gone(w.pid)


def test_a_sweep_cancelled_mid_group_keeps_the_points_measured_and_leaves_no_worker(lenet_ir, db, fast):
    from dataclasses import replace

    from wb_core.config import SweepSpec
    from wb_core.store import load_results
    from wb_core.sweep.local import run_sweep

    cancel = threading.Event()
    settings = replace(fast, max_time_s=2.0, tolerance=1e-9)  # the worker is busy with the next point

    def on_point(point):
        cancel.set()

    s = run_sweep(lenet_ir, SweepSpec(batch_sizes="1,2,4", threads="1"), db, "cancel", settings=settings,
                  on_point=on_point, cancel=cancel)
    assert s.cancelled and (s.ok, s.failed) == (1, 0)
    df = load_results(db, "cancel")
    assert list(df["batch_size"]) == [1] and list(df["status"]) == ["ok"]  # nothing half-measured stored
    assert not [p for p in psutil.Process().children(recursive=True)  # killed and reaped
                if "wb_core.proc.worker" in " ".join(p.cmdline())]


def test_leaving_the_supervisor_kills_its_workers():
    with Supervisor(timeout=600) as sup:
        worker = sup.start({"task": "selftest", "mode": "hang"})
        for _event in sup.events():
            break  # the caller has what it needs (or failed)
    assert worker.outcome is not None and _gone(worker.pid)


def test_a_start_barrier_starts_two_workers_together_once_both_are_ready():
    window = 7.0
    with Supervisor(timeout=120) as sup:
        early = sup.start({"task": "selftest", "mode": "barrier"}, keep_channel_open=True)
        late = sup.start({"task": "selftest", "mode": "barrier", "delay_s": 1.5}, keep_channel_open=True)
        barrier = StartBarrier([early, late], lead_s=30.0, window_s=window, close_after=True)
        ready, went, signal_after_first = {}, {}, "unset"
        for w, msg in sup.events():
            if msg is None:
                continue
            if msg["type"] == "ready":
                ready[w] = msg["ready_ns"]
                done = barrier.ready(w)
                if len(ready) == 1:
                    signal_after_first = (done, barrier.signal)
            elif msg["type"] == "went":
                went[w] = msg
    assert signal_after_first == (False, None)  # one ready worker is not enough
    assert early.outcome.ok and late.outcome.ok
    start, end = went[early]["go"]["start_ns"], went[early]["go"]["end_ns"]
    assert went[late]["go"] == {"start_ns": start, "end_ns": end}  # one common window
    assert end - start == int(window * 1e9)
    # The early worker got its signal only after the late one was ready; both before the start.
    assert went[early]["received_ns"] > ready[late]
    assert all(went[w]["received_ns"] < start for w in (early, late))


# ---- no other module supervises workers by sleeping ----

_WORKER_SIDE = {"proc/worker.py", "proc/channel.py", "proc/supervisor.py"}


def _starts_workers(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("wb_core.proc.parent", "wb_core.proc.supervisor"):
            return True
    return False


def _polls(loop: ast.AST) -> list[int]:
    """Lines in a loop that sleep or wait a fixed time: `time.sleep(x)`, `sleep(x)`, `something.wait(0.05)`."""
    out = []
    for node in ast.walk(loop):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name == "sleep" or (name == "wait" and node.args and isinstance(node.args[0], ast.Constant)):
            out.append(node.lineno)
    return out


def test_no_module_that_runs_workers_polls_them_with_sleep():
    offenders, runners = [], []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in _WORKER_SIDE:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        if not _starts_workers(tree):
            continue
        runners.append(rel)
        for node in ast.walk(tree):
            if isinstance(node, (ast.For, ast.While)):
                offenders += [f"{rel}:{line}" for line in _polls(node)]
    assert {"sweep/local.py", "pipeline/study.py", "training/study.py", "analysis/layers.py"} <= set(runners)
    assert not offenders, f"worker loops that sleep instead of waiting on the supervisor: {offenders}"


def test_the_polling_check_sees_a_sleeping_loop():
    tree = ast.parse("import time\nwhile True:\n    for c in children:\n        pass\n    time.sleep(0.02)\n"
                     "while not done:\n    eof.wait(0.05)\n")
    loops = [n for n in tree.body if isinstance(n, ast.While)]
    assert _polls(loops[0]) == [5] and _polls(loops[1]) == [7]
