"""Shared fixtures: one real demo model per test session, converted once, and a fresh database per test.

The cache (demo models, converted IRs) lives in `.wb-cache/test` in the repository, so a second run
of the suite skips the build. Tests that need TensorFlow workers or MobileNetV2 are marked slow.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("WB_CACHE_DIR", str(ROOT / ".wb-cache" / "test"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from browser_support import page, server  # noqa: E402,F401  (the browser tests' fixtures)
from wb_core.config import MeasureSettings  # noqa: E402

# Short windows: the tests check mechanics and orders of magnitude, not final numbers.
FAST = MeasureSettings(warmup_s=0.1, window_s=0.1, max_time_s=0.6, min_windows=3, tolerance=0.5)


def pytest_configure(config):
    """With pytest-xdist (`make test` runs `-n 3`), the controller builds the shared demo models once
    before the workers start, so two workers never build the same model side by side."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if config.option.collectonly:
        return
    from wb_core.demo import ensure_demo
    from wb_core.variants.convert import ensure_ir

    ensure_ir(ensure_demo("lenet-digits") / "saved_model")
    ensure_demo("text-encoder")
    from wb_core.generation.folder import HF_EXTRA, extra_installed

    if extra_installed(HF_EXTRA):  # the text-generation tests and notebook 09 share it
        ensure_demo("text-generator")


@pytest.fixture(scope="session")
def lenet_dir() -> Path:
    from wb_core.demo import ensure_demo

    return ensure_demo("lenet-digits")


@pytest.fixture(scope="session")
def lenet_savedmodel(lenet_dir) -> Path:
    return lenet_dir / "saved_model"


@pytest.fixture(scope="session")
def lenet_ir(lenet_savedmodel) -> Path:
    from wb_core.variants.convert import ensure_ir

    return ensure_ir(lenet_savedmodel)


@pytest.fixture(scope="session")
def lenet_ir_copy(lenet_ir, tmp_path_factory) -> Path:
    """The IR in a private folder (so tests may damage copies without touching the cache)."""
    d = tmp_path_factory.mktemp("ir")
    shutil.copy(lenet_ir, d / "lenet.xml")
    shutil.copy(lenet_ir.with_suffix(".bin"), d / "lenet.bin")
    return d / "lenet.xml"


@pytest.fixture(scope="session")
def generator() -> Path:
    """The demo text generator (an OpenVINO GenAI folder), built once per session."""
    from wb_core.demo import ensure_demo

    return ensure_demo("text-generator")


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "results.db"


@pytest.fixture
def fast() -> MeasureSettings:
    return FAST


# The environment JupyterLab and Voila give a kernel: colour forced on, a colour terminal named.
# Libraries then print ANSI codes and progress bars even to pipes, which anything that reads a
# child process's output must survive.
JUPYTER_KERNEL_ENV = {"FORCE_COLOR": "1", "TERM": "xterm-256color", "CLICOLOR_FORCE": "1", "PY_COLORS": "1"}


@pytest.fixture
def jupyter_kernel_env(monkeypatch) -> dict:
    """Set JUPYTER_KERNEL_ENV for this test; kernels and servers it starts inherit it."""
    for name, value in JUPYTER_KERNEL_ENV.items():
        monkeypatch.setenv(name, value)
    return dict(JUPYTER_KERNEL_ENV)


@pytest.fixture
def cache_without_int8(tmp_path, monkeypatch, lenet_ir) -> Path:
    """WB_CACHE_DIR for this test: the test cache's entries linked in, all but the INT8 variants.

    INT8 is then quantized afresh (about a second for the demo), so the quantizing worker runs
    under whatever environment the test set up instead of being skipped by a cached IR.
    """
    shared = Path(os.environ["WB_CACHE_DIR"])
    folder = tmp_path / "cache-without-int8"
    folder.mkdir()
    for entry in shared.iterdir():
        if entry.name != "int8":
            (folder / entry.name).symlink_to(entry)
    monkeypatch.setenv("WB_CACHE_DIR", str(folder))
    return folder


# ---- skips that say the truth: `make test` (WB_NO_SKIPS=1) and CI (CI=true) fail on any skip of a
# default test, except those that depend on the CPU itself (its flags, its number of CPUs).
ALLOWED_SKIPS = (
    "this CPU runs no INT8 kernels",  # no AVX2/VNNI/AMX in /proc/cpuinfo
    "needs two CPUs",  # a one-CPU machine cannot pin two ways
    "neither avx512_bf16 nor amx_bf16",  # BF16 runs only where the CPU has it (AMD Zen 3 has not)
)
_SKIPS: list[tuple[str, str]] = []


def _strict_skips() -> bool:
    return os.environ.get("WB_NO_SKIPS", "") == "1" or os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPS.append((report.nodeid, _skip_reason(report)))


def pytest_collectreport(report):
    if report.skipped:
        _SKIPS.append((report.nodeid, _skip_reason(report)))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if not _strict_skips():
        return
    bad = [(node, why) for node, why in _SKIPS if not any(ok in why for ok in ALLOWED_SKIPS)]
    if not bad:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", f"{len(bad)} skipped test(s): every default test must run here", red=True)
        for node, why in bad:
            reporter.write_line(f"SKIPPED {node}: {why}")
    if session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
