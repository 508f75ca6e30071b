"""Pipeline studies: the whole serving path (decode, preprocess, queue, inference), not only the model call.

- `source`: scan a video or a folder of images/videos; decode and preprocess frames.
- `queue`: the bounded queue of batches in shared memory between the two sides.
- `tasks`: the worker processes of each side.
- `study`: the sweep (PipelineSpec), one point's orchestration, the merged row and the bottleneck.
- `plots`: stage times, throughput against pre-workers, the batch-size trade-off.
"""

# Lazy: worker processes import task modules of this package before they pin their cores, so the
# package itself must not pull in numpy (whose thread pool would start unpinned) or pandas.
__all__ = ['PIPELINE_COLUMNS', 'PipelinePoint', 'PipelineSpec', 'bottleneck', 'run_pipeline']


def __getattr__(name):
    if name in __all__:
        import importlib

        return getattr(importlib.import_module("wb_core.pipeline.study"), name)
    raise AttributeError(name)
