"""LeNet-5 on a Fashion-MNIST-shaped set, built here (nothing is downloaded): the training case study.

- `fashion_shaped(n)`: n grey 28x28 images in [0, 1] with labels 0-9: ten smooth random patterns
  (one per class) with noise and a random shift, so the model has something to learn; the shapes
  and sizes are Fashion-MNIST's (60,000 training images), the pictures are not.
- `write_lenet5(path)`: the classic LeNet-5 (conv 6@5x5, pool, conv 16@5x5, pool, dense 120, 84,
  10) compiled with Adam and sparse categorical cross-entropy, saved as a `.keras` file; built in a
  child process so that the caller never imports TensorFlow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FASHION_TRAIN = 60_000


def fashion_shaped(n: int = FASHION_TRAIN, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): x float32 of shape (n, 28, 28, 1) in [0, 1], y int64 class labels 0-9."""
    rng = np.random.default_rng(seed)
    coarse = rng.random((10, 7, 7)).astype(np.float32)
    protos = np.kron(coarse, np.ones((4, 4), np.float32))  # 10 x 28 x 28, blocky but distinct
    y = rng.integers(0, 10, size=n).astype(np.int64)
    shifts = rng.integers(-2, 3, size=(n, 2))
    x = np.empty((n, 28, 28, 1), np.float32)
    chunk = 4096
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        base = protos[y[s:e]]
        for i in range(e - s):
            base[i] = np.roll(base[i], tuple(shifts[s + i]), axis=(0, 1))
        noisy = base + 0.25 * rng.standard_normal(base.shape, dtype=np.float32)
        x[s:e, ..., 0] = np.clip(noisy, 0.0, 1.0)
    return x, y


def write_fashion_npz(path: str | Path, n: int = FASHION_TRAIN, seed: int = 0) -> Path:
    """Save `fashion_shaped(n)` as an .npz with `x_train` and `y_train`."""
    x, y = fashion_shaped(n, seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, x_train=x, y_train=y)
    return path


def write_lenet5(path: str | Path, input_shape=(28, 28, 1), classes: int = 10, compile: bool = True) -> Path:
    """A compiled LeNet-5 saved to `path` (.keras), built in a child process (`compile=False`: left uncompiled)."""
    from wb_core.proc.parent import run_task

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    run_task({"task": "wb_core.training.examples:task_build_lenet5", "out": str(path),
              "input_shape": list(input_shape), "classes": classes, "compile": compile},
             timeout=600, what="building LeNet-5")
    return path


def task_build_lenet5(task: dict) -> None:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    from wb_core.proc.channel import emit

    keras.utils.set_random_seed(0)
    layers = keras.layers
    model = keras.Sequential([
        keras.Input(shape=tuple(task["input_shape"]), name="image"),
        layers.Conv2D(6, 5, padding="same", activation="tanh"),
        layers.AveragePooling2D(2),
        layers.Conv2D(16, 5, activation="tanh"),
        layers.AveragePooling2D(2),
        layers.Flatten(),
        layers.Dense(120, activation="tanh"),
        layers.Dense(84, activation="tanh"),
        layers.Dense(int(task["classes"]), activation="softmax"),
    ], name="lenet5")
    if task.get("compile", True):
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.save(task["out"])
    emit({"type": "result", "path": task["out"], "params": int(model.count_params())})
