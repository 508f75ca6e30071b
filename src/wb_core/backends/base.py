"""The backend protocol: open a model with process-level settings, prepare a batch size, infer.

Backends import their runtime only when a session is opened, so that a worker can set CPU
affinity and thread variables before the runtime sizes its thread pools.
"""

from __future__ import annotations

from typing import Callable, Protocol

from wb_core.config import InputOptions, RunConfig
from wb_core.models import InputSpec

# Which model formats each backend runs (after the variant step has converted what it can).
BACKEND_FORMATS = {
    "tensorflow": ("savedmodel", "keras"),
    "openvino": ("openvino", "onnx", "savedmodel", "keras"),
}


class Session(Protocol):
    inputs: list[InputSpec]

    def prepare(self, batch_size: int, opts: InputOptions) -> dict:
        """Get ready for a batch size (reshape/compile); return timing/info columns."""

    def make_infer(self) -> Callable[[dict], object]:
        """A callable running one request synchronously on a prepared batch."""

    def convert_batches(self, batches: list[dict]) -> list:
        """Turn numpy batches into what `infer` takes (done once, outside the timed loop)."""

    def info(self) -> dict:
        """Columns describing what really ran (executed precision, properties)."""


def open_session(model_path: str, cfg: RunConfig) -> Session:
    if cfg.backend == "openvino":
        from wb_core.backends.openvino import OpenVINOSession

        return OpenVINOSession(model_path, cfg)
    if cfg.backend == "tensorflow":
        from wb_core.backends.tensorflow import TensorFlowSession

        return TensorFlowSession(model_path, cfg)
    raise ValueError(f"unknown backend {cfg.backend}")
