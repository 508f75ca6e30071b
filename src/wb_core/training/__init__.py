"""Training studies: `model.fit` time per step and epoch, CPU use and throughput per core, against threads and cores.

- `tasks`: the worker (pin, thread variables, then TensorFlow; warm up; time the epochs).
- `study`: the sweep (TrainSpec), data, the stored rows, and `recommend_training` (cores per job).
- `plots`: epoch time, CPU use and samples/s per core against the cores given.
"""

# Lazy: worker processes import task modules of this package before they pin their cores, so the
# package itself must not pull in numpy (whose thread pool would start unpinned) or pandas.
__all__ = ['TRAINING_COLUMNS', 'TrainPoint', 'TrainSpec', 'recommend_training', 'run_training']


def __getattr__(name):
    if name in __all__:
        import importlib

        return getattr(importlib.import_module("wb_core.training.study"), name)
    raise AttributeError(name)
