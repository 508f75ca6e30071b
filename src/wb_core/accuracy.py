"""Accuracy metrics: top-1, top-5, MSE, cosine similarity, max abs error, or a user's function.

A user's function takes (outputs, labels) and returns a number, higher is better; the API takes the
function itself, the CLI its import path (`package.module:function`). Accuracy is summed batch by
batch, so a user's function is called once per batch and its results averaged by samples.

With labels they score outputs against the labels; without, against the FP32 variant's outputs
on the same inputs (`reference_targets`).

Each built-in metric scores every sample; the metric is the mean of those scores. The per-sample
form is what NNCF's accuracy-aware quantization ranks layers by.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from wb_core.errors import ConfigError, one_line


def _top_k(k: int):
    def score(out: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = out.reshape(len(out), -1)
        if out.shape[1] < k:
            raise ConfigError(f"Top-{k} accuracy needs at least {k} outputs per sample; the model gives {out.shape[1]}.")
        y = y.reshape(len(y)).astype(np.int64)
        top = np.argpartition(-out, k - 1, axis=1)[:, :k] if k > 1 else out.argmax(1)[:, None]
        return (top == y[:, None]).any(axis=1).astype(np.float64)

    return score


def _mse(out: np.ndarray, y: np.ndarray) -> np.ndarray:
    return ((out.reshape(len(out), -1).astype(np.float64) - _targets(out, y)) ** 2).mean(axis=1)


def _cosine(out: np.ndarray, y: np.ndarray) -> np.ndarray:
    a = out.reshape(len(out), -1).astype(np.float64)
    b = _targets(out, y)
    denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(denom > 0, (a * b).sum(axis=1) / np.where(denom > 0, denom, 1), 0.0)


def _max_abs(out: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.abs(out.reshape(len(out), -1).astype(np.float64) - _targets(out, y)).max(axis=1)


def _targets(out: np.ndarray, y: np.ndarray) -> np.ndarray:
    b = y.reshape(len(y), -1).astype(np.float64)
    if b.shape[1] != int(np.prod(out.shape[1:])):
        raise ConfigError(f"Labels of shape {tuple(y.shape[1:])} do not match the model's output of shape "
                          f"{tuple(out.shape[1:])}; MSE and cosine similarity compare them element by element.")
    return b


def _metric_value(name: str, value) -> float:
    """A user's metric's result as a float: one finite real number (a NumPy scalar or 0-d array too)."""
    number = None
    if not isinstance(value, (str, bytes, bool, np.bool_)):
        try:  # a NumPy scalar, a 0-d array or a framework's one-element tensor converts too
            number = float(value)
        except (TypeError, ValueError):
            pass
    if number is None:
        raise ConfigError(f"The metric '{one_line(name)}' must return one number; it returned a "
                          f"{type(value).__name__}.")
    if not math.isfinite(number):
        raise ConfigError(f"The metric '{one_line(name)}' must return a finite number; it returned {number}.")
    return number


@dataclass(frozen=True)
class Metric:
    name: str
    higher_is_better: bool
    per_sample: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    fn: Callable[[np.ndarray, np.ndarray], float] | None = None  # a user's whole-set metric

    def __call__(self, outputs: np.ndarray, labels: np.ndarray) -> float:
        if len(outputs) != len(labels):
            raise ConfigError(f"Got {len(outputs)} outputs for {len(labels)} labels.")
        if self.fn is not None:
            try:
                value = self.fn(outputs, labels)
            except ConfigError:
                raise
            except Exception as e:
                raise ConfigError(f"The metric '{one_line(self.name)}' failed: {type(e).__name__}: "
                                  f"{one_line(str(e))}.") from None
            return _metric_value(self.name, value)
        return float(self.per_sample(outputs, labels).mean())

    def drop(self, reference: float, value: float) -> float:
        """How much worse `value` is than `reference` (positive = worse), in the metric's units."""
        return (reference - value) if self.higher_is_better else (value - reference)


BUILTIN = {
    "top1": Metric("top1", True, _top_k(1)),
    "top5": Metric("top5", True, _top_k(5)),
    "mse": Metric("mse", False, _mse),
    "cosine": Metric("cosine", True, _cosine),
    "max_abs": Metric("max_abs", False, _max_abs),
}
NAMES = ("auto",) + tuple(BUILTIN)


def is_import_path(metric) -> bool:
    """`package.module:function`: a user's metric named on the command line."""
    return isinstance(metric, str) and ":" in metric


def load_function(path: str, what: str = "metric") -> Callable:
    """The function an import path `package.module:function` names; a ConfigError says what is missing."""
    import importlib

    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"A {what} given by import path reads 'package.module:function'; got '{path}'.")
    try:
        target = importlib.import_module(module_name)
    except Exception as e:  # the user's module: any error it raises on import is theirs to see
        raise ConfigError(f"The {what} '{path}' cannot be imported: {type(e).__name__}: {e}.") from None
    for part in attr.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise ConfigError(f"The {what} '{path}' names nothing callable in module '{module_name}'.")
    return target


def import_path_of(fn: Callable) -> str | None:
    """`module:qualname` of a function a fresh process can import again; None for a lambda, a nested
    function or one defined in `__main__` (a notebook)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    try:
        return f"{module}:{qualname}" if load_function(f"{module}:{qualname}") is fn else None
    except ConfigError:
        return None


def resolve_metric(metric: str | Callable | Metric, labels: np.ndarray | None = None,
                   output_shape: tuple[int, ...] | None = None) -> Metric:
    """A Metric from a name, an import path, a callable (outputs, labels) -> float (higher is better), or `auto`.

    `auto` is top-1 for integer class labels and MSE for float targets.
    """
    if isinstance(metric, Metric):
        return metric
    if callable(metric):
        return Metric(getattr(metric, "__name__", "custom"), True, fn=metric)
    if is_import_path(metric):
        return Metric(str(metric), True, fn=load_function(str(metric)))
    name = str(metric).lower()
    if name == "auto":
        if labels is not None and labels.dtype.kind in "iub" and labels.ndim == 1:
            return BUILTIN["top1"]
        return BUILTIN["mse"]
    if name not in BUILTIN:
        raise ConfigError(f"Unknown metric '{metric}'; choose from {', '.join(NAMES)}, or name a function of "
                          f"yours as package.module:function.")
    return BUILTIN[name]


def reference_targets(metric: str | Callable | Metric, reference: np.ndarray) -> tuple[Metric, np.ndarray]:
    """The metric and targets that compare outputs with reference outputs (the FP32 variant's).

    `auto` is cosine similarity; top-1/top-5 count agreement with the reference's top class;
    MSE, cosine and max abs error compare element by element.
    """
    m = BUILTIN["cosine"] if isinstance(metric, str) and metric.lower() == "auto" else resolve_metric(metric)
    if m.name in ("top1", "top5"):
        return m, reference.reshape(len(reference), -1).argmax(axis=1)
    return m, reference
