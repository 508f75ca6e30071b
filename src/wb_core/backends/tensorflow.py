"""TensorFlow backend: call a SavedModel signature (never `model.predict`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import tensorflow as tf

from wb_core.errors import ModelError
from wb_core.model_inputs import InputSpec, first_line, resolve_shape

if TYPE_CHECKING:  # types only: backends/ does not import config at run time
    from wb_core.config import InputOptions, RunConfig


def signature_inputs(fn) -> list[InputSpec]:
    _, kwargs = fn.structured_input_signature
    specs = []
    for name, spec in sorted(kwargs.items()):
        shape = tuple(-1 if d is None else int(d) for d in spec.shape) if spec.shape.rank is not None else (-1,)
        specs.append(InputSpec(name=name, shape=shape, dtype=spec.dtype.name))
    return specs


def load_signature(model_path: str):
    try:
        loaded = tf.saved_model.load(model_path)
    except Exception as e:
        raise ModelError(f"TensorFlow cannot load the SavedModel '{model_path}': {first_line(e)}") from None
    sigs = getattr(loaded, "signatures", {}) or {}
    if not sigs:
        raise ModelError(f"SavedModel '{model_path}' has no serving signatures; export it with one "
                         f"(for Keras: model.export(path)).")
    fn = sigs["serving_default"] if "serving_default" in sigs else next(iter(sigs.values()))
    return loaded, fn


def read_inputs(model_path: str) -> list[InputSpec]:
    """The inputs of a SavedModel's serving signature (the registry's reader for SavedModels)."""
    _, fn = load_signature(model_path)
    return signature_inputs(fn)


class TensorFlowSession:
    def __init__(self, model_path: str, cfg: RunConfig):
        self.cfg = cfg
        # Thread pools must be sized before the first op (loading the model runs ops).
        if cfg.threads:
            tf.config.threading.set_intra_op_parallelism_threads(int(cfg.threads))
        if cfg.inter_op_threads:
            tf.config.threading.set_inter_op_parallelism_threads(int(cfg.inter_op_threads))
        if cfg.precision == "bf16":
            # oneDNN auto mixed precision rewrites the graph to bfloat16 where it is safe.
            tf.config.optimizer.set_experimental_options({"auto_mixed_precision_onednn_bfloat16": True})
        t0 = time.perf_counter()
        self._loaded, self.fn = load_signature(model_path)
        self.load_ms = (time.perf_counter() - t0) * 1e3
        self.inputs = signature_inputs(self.fn)

    def prepare(self, batch_size: int, opts: InputOptions) -> dict:
        for spec in self.inputs:
            resolve_shape(spec, batch_size, opts)  # validates the shape early, with a clear error
        return {"load_ms": self.load_ms, "compile_ms": 0.0}

    def convert_batches(self, batches: list[dict]) -> list:
        return [{k: tf.constant(v) for k, v in b.items()} for b in batches]

    def make_infer(self):
        fn = self.fn

        def infer(batch):
            return fn(**batch)

        return infer

    def info(self) -> dict:
        return {
            "executed_precision": "bf16-amp" if self.cfg.precision == "bf16" else "f32",
            "tf_version": tf.__version__,
            "tf_intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "tf_inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        }
