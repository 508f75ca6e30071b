"""Training studies: `model.fit` time per step and epoch, CPU use and throughput per core, against threads and cores.

- `tasks`: the worker (pin, thread variables, then TensorFlow; warm up; time the epochs).
- `study`: the sweep (TrainSpec), data, the stored rows, and `recommend_training` (cores per job).
- `plots`: epoch time, CPU use and samples/s per core against the cores given.
"""

from wb_core.training.study import TRAINING_COLUMNS, TrainPoint, TrainSpec, recommend_training, run_training

__all__ = ["TRAINING_COLUMNS", "TrainPoint", "TrainSpec", "recommend_training", "run_training"]
