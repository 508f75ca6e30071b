"""Registers the stand-in backend in every Python process started with this folder on PYTHONPATH
(the coordinator, the fleet's workers and the processes they start to measure)."""

try:
    from wb_core.backends.registry import BackendInfo, register
except ImportError:  # a Python without the workbench (a tool the tests run)
    pass
else:
    register(BackendInfo(name="standin", description="A stand-in backend: a calibrated sleep with known figures",
                         formats=("openvino",), session="standin_backend:StandInSession", distributions=(),
                         loads="openvino-ir", settings=("threads",)))
