"""The session protocol every backend implements: open a model with process-level settings,
prepare a batch size, infer. Backends are declared in registry.py.

Backends import their runtime only when a session is opened, so that a worker can set CPU
affinity and thread variables before the runtime sizes its thread pools.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # types only: backends/ does not import config or models at run time
    from wb_core.config import InputOptions, RunConfig
    from wb_core.model_inputs import InputSpec


class BackendSession(Protocol):
    inputs: list[InputSpec]
    cfg: RunConfig  # the worker sets it to each point's config (batch size, concurrency) before `prepare`

    def prepare(self, batch_size: int, opts: InputOptions) -> dict:
        """Get ready for a batch size (reshape/compile); return timing/info columns."""

    def make_infer(self) -> Callable[[dict], object]:
        """A callable running one request synchronously on a prepared batch."""

    def convert_batches(self, batches: list[dict]) -> list:
        """Turn numpy batches into what `infer` takes (done once, outside the timed loop)."""

    def info(self) -> dict:
        """Columns describing what really ran (executed precision, properties)."""
