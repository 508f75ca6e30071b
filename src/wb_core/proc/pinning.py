"""Pin a worker process, every thread it already has included, to a set of CPUs; read where its threads may run."""

from __future__ import annotations

import os


def pin(cores) -> None:
    """Set the CPU affinity of this process and of each of its threads (threads started later inherit it).

    Linux's affinity belongs to a thread: setting the process's only moves the calling thread, so a
    thread started before (the parent watch) would stay free to run anywhere.
    """
    cpus = sorted(int(c) for c in cores)
    os.sched_setaffinity(0, cpus)
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # the thread ended meanwhile
            pass


def thread_cpus() -> tuple[list[int], int]:
    """The CPUs this process's threads may run on (their union) and how many threads it has.

    Read after the work, when the runtimes' pools exist: it shows whether any thread escaped the
    cores asked for, whatever else the machine was doing.
    """
    cpus: set[int] = set()
    threads = 0
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        try:
            cpus |= os.sched_getaffinity(int(tid))
            threads += 1
        except OSError:  # the thread ended while we looked
            continue
    return sorted(cpus), threads
