"""A stand-in backend for fleet rehearsals: each request is a calibrated sleep, and each point's
throughput is known in advance (a rate per hardware type, scaled by threads and batch size, with
seeded noise), so a study's stored results can be checked exactly against `known`.

It imports neither TensorFlow nor OpenVINO, so fifty hosts fit on a small machine. The hardware
type comes from WB_HARDWARE_TYPE (the label a fleet host reports). A host started with
WB_STANDIN_GARBAGE=1 answers with numbers that are not a measurement.
"""

from __future__ import annotations

import hashlib
import os
import random
import time

# Samples per second at batch 1 and 1 thread, per hardware type.
RATES = {"type-a": 400.0, "type-b": 700.0, "type-c": 1100.0, "type-d": 1600.0}
UNLABELLED_RATE = 300.0
NOISE = 0.05  # relative standard deviation of the seeded noise


def known(hardware_type: str, threads: int | None, batch_size: int) -> tuple[float, float]:
    """The (throughput in samples/s, p99 latency in ms) the stand-in reports for one point."""
    rate = RATES.get(hardware_type, UNLABELLED_RATE) * (threads or 1) ** 0.5 * batch_size ** 0.3
    seed = int(hashlib.sha256(f"{hardware_type}|{threads}|{batch_size}".encode()).hexdigest()[:16], 16)
    throughput = round(rate * (1 + NOISE * random.Random(seed).gauss(0.0, 1.0)), 3)
    return throughput, round(1000.0 * batch_size / throughput, 4)


class StandInSession:
    def __init__(self, model_path, cfg):
        from wb_core.models import InputSpec

        self.inputs = [InputSpec(name="x", shape=(-1, 4), dtype="float32")]
        self.cfg = cfg
        self.hardware_type = os.environ.get("WB_HARDWARE_TYPE", "")

    def _known(self):
        return known(self.hardware_type, self.cfg.threads, self.cfg.batch_size)

    def prepare(self, batch_size, opts):
        return {}

    def convert_batches(self, batches):
        return batches

    def make_infer(self):
        delay = self.cfg.batch_size / self._known()[0]
        return lambda batch: time.sleep(delay)

    def info(self):
        if os.environ.get("WB_STANDIN_GARBAGE"):
            return {"throughput": "fast", "latency_ms_p99": -1.0}
        throughput, p99 = self._known()
        return {"throughput": throughput, "latency_ms_p99": p99, "standin_type": self.hardware_type}
