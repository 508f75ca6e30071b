"""The bounded queue between the preprocessing processes and the inference process.

Batches live in shared memory (a file in /dev/shm, or $WB_SHM_DIR, mapped by every process), so a batch is
written once by the process that preprocesses it and read in place by the runtime: nothing is
pickled or copied on the way. Two named pipes (FIFOs) in the same private folder carry 8-byte
records `(slot, frames)`:

- `free`: slots the inference side has finished with; a preprocessing process takes one before it
  fills a batch (waiting here means the queue is full: inference is the slower side);
- `full`: filled batches in order; the inference side takes the next one (waiting here means the
  queue is empty: preprocessing is the slower side).

Writes of 8 bytes to a pipe are atomic, so several processes may write and read one FIFO. The
queue holds at most `depth` filled batches: there are `depth + consumers` slots, and each
inference thread holds one while the runtime reads it. `pending()` (FIONREAD on `full`) is the
queue's occupancy at that moment.

Each slot carries the start time of each of its frames (CLOCK_MONOTONIC, shared by every process
on Linux), so the inference side measures per-frame latency from decode to result.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import tempfile
import termios
from pathlib import Path

import numpy as np

from wb_core.errors import ConfigError, setting

RECORD = struct.Struct("<ii")
DONE = -1  # a producer has finished (frames field: its index)
STOP = -2  # inference threads: no more batches
MAX_BYTES = 4 << 30


class SlotQueue:
    """Shared batch slots plus the `free` and `full` FIFOs; create in the parent, attach in workers."""

    def __init__(self, folder: str | Path, slots: int, batch: int, frame_shape, dtype: str = "float32"):
        self.folder = Path(folder)
        self.slots, self.batch = int(slots), int(batch)
        self.frame_shape = tuple(int(d) for d in frame_shape)
        self.dtype = np.dtype(dtype)
        shape = (self.slots, self.batch) + self.frame_shape
        self.data = np.memmap(self.folder / "slots.bin", dtype=self.dtype, mode="r+", shape=shape)
        self.starts = np.memmap(self.folder / "starts.bin", dtype=np.int64, mode="r+", shape=(self.slots, self.batch))
        # O_RDWR: opening never blocks, and the pipe stays open (no EOF) while any worker holds it.
        self.free_fd = os.open(self.folder / "free", os.O_RDWR)
        self.full_fd = os.open(self.folder / "full", os.O_RDWR)

    # ---- set-up ----
    @classmethod
    def create(cls, slots: int, batch: int, frame_shape, dtype: str = "float32") -> dict:
        """Make the folder, files and FIFOs; returns the description workers attach with."""
        nbytes = int(np.prod((slots, batch) + tuple(frame_shape))) * np.dtype(dtype).itemsize
        if nbytes > MAX_BYTES:
            raise ConfigError(f"The queue would need {nbytes / 2**30:.1f} GiB of shared memory ({slots} batches of "
                              f"{batch} frames of {'x'.join(map(str, frame_shape))}); use a smaller batch or queue depth "
                              f"({setting('queue_depth', 'Queue depth')}).")
        base = os.environ.get("WB_SHM_DIR") or ("/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
        folder = Path(tempfile.mkdtemp(prefix="wb-pipeline-", dir=base))
        with open(folder / "slots.bin", "wb") as f:
            f.truncate(max(nbytes, 1))
        with open(folder / "starts.bin", "wb") as f:
            f.truncate(max(slots * batch * 8, 8))
        os.mkfifo(folder / "free", 0o600)
        os.mkfifo(folder / "full", 0o600)
        return {"folder": str(folder), "slots": slots, "batch": batch, "frame_shape": list(frame_shape),
                "dtype": str(np.dtype(dtype))}

    @classmethod
    def attach(cls, desc: dict) -> SlotQueue:
        return cls(desc["folder"], desc["slots"], desc["batch"], desc["frame_shape"], desc["dtype"])

    @staticmethod
    def remove(desc: dict) -> None:
        shutil.rmtree(desc["folder"], ignore_errors=True)

    def close(self) -> None:
        for fd in (self.free_fd, self.full_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    # ---- records ----
    @staticmethod
    def _put(fd: int, a: int, b: int) -> None:
        os.write(fd, RECORD.pack(a, b))

    @staticmethod
    def _get(fd: int) -> tuple[int, int]:
        buf = b""
        while len(buf) < RECORD.size:  # a whole record arrives at once; the loop only guards signals
            chunk = os.read(fd, RECORD.size - len(buf))
            if not chunk:
                raise EOFError("the queue was closed")
            buf += chunk
        return RECORD.unpack(buf)

    def release(self, slot: int) -> None:
        """Give a slot back to the producers."""
        self._put(self.free_fd, slot, 0)

    def take_free(self) -> int:
        """Block until a slot is free; returns its index."""
        return self._get(self.free_fd)[0]

    def post(self, slot: int, frames: int) -> None:
        """Hand a filled batch (its first `frames` frames are real) to the inference side."""
        self._put(self.full_fd, slot, frames)

    def post_marker(self, kind: int, value: int = 0) -> None:
        self._put(self.full_fd, kind, value)

    def take_full(self) -> tuple[int, int]:
        """Block until a batch (or a marker) arrives: (slot, frames) or (DONE/STOP, value)."""
        return self._get(self.full_fd)

    def pending(self) -> int:
        """Records waiting in the `full` FIFO: the queue's occupancy now."""
        buf = fcntl.ioctl(self.full_fd, termios.FIONREAD, b"\0\0\0\0")
        return struct.unpack("i", buf)[0] // RECORD.size
