"""What every browser test of the dashboard shares: Debian's chromium through Playwright, a
`wb dashboard` server on a fresh database (`server`), a page that records page errors and console
errors (`page`), and small helpers to click through tabs and read plots.

conftest.py registers the fixtures; test modules import the helpers they use.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)

ROOT = Path(__file__).resolve().parent.parent
# Screenshots go to a scratch folder, so a test run leaves the tree clean; `make screenshots`
# sets WB_SCREENSHOTS to refresh the ones the docs show.
SHOTS = Path(os.environ.get("WB_SCREENSHOTS") or Path(tempfile.gettempdir()) / "wb-screenshots")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


# Console errors that are not ours, each with why it is ignored:
KNOWN_CONSOLE_NOISE = (
    # Voila's page template links Font Awesome (the buttons' icons) from cdn.jsdelivr.net; a machine
    # without internet access logs the failed load (ERR_NAME_NOT_RESOLVED and the like) as an error.
    re.compile(r"Failed to load resource: net::ERR_(NAME_NOT_RESOLVED|INTERNET_DISCONNECTED|CONNECTION_REFUSED|"
               r"ADDRESS_UNREACHABLE|NETWORK_ACCESS_DENIED)"),
)


def our_console_errors(page) -> list[str]:
    """The page's console errors, less those in KNOWN_CONSOLE_NOISE."""
    return [e for e in page.console_errors if not any(p.search(e) for p in KNOWN_CONSOLE_NOISE)]


def assert_clean(page) -> None:
    """No page error, no console error of ours, no Python traceback on the page."""
    assert "Traceback (most recent call last)" not in page.locator("body").inner_text()
    assert page.errors == [], page.errors
    errors = our_console_errors(page)
    assert errors == [], errors


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    """Until the server answers `url` at all (any HTTP status counts: the server is up)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the dashboard exited early:\n{proc.stdout.read()}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"the dashboard did not answer at {url} within {timeout} s")


class Served(tuple):
    """(url, db) of a running dashboard; `pid` is its `wb dashboard` process, `home` its $HOME."""

    pid: int
    home: Path


def kernels_of(pid: int) -> list:
    """The Jupyter kernels a dashboard process started that are still running (psutil processes)."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for c in children:
        try:
            if "ipykernel" in " ".join(c.cmdline()) and c.status() != psutil.STATUS_ZOMBIE:
                out.append(c)
        except psutil.Error:
            continue
    return out


def kernels_settle_at(pid: int, count: int, timeout: float = 60, steady_s: float = 6) -> list:
    """The dashboard's kernels once there are `count` of them for `steady_s` seconds on end (a pool's
    spare is replaced seconds after a page takes it, so the count moves meanwhile); whatever is
    running after `timeout`, else."""
    deadline = time.time() + timeout
    since = None
    while True:
        kernels = kernels_of(pid)
        if len(kernels) != count:
            since = None
        elif since is None:
            since = time.time()
        elif time.time() - since >= steady_s:
            return kernels
        if time.time() > deadline:
            return kernels
        time.sleep(0.5)


@pytest.fixture
def server(tmp_path, lenet_dir, jupyter_kernel_env, cache_without_int8):
    """`wb dashboard` on a fresh database and a free loopback port; yields (url, db) with `.pid`.

    It runs with the colour environment a Jupyter server has (its kernels, being ipykernel, force
    colour on themselves too), on a cache without INT8 variants, so INT8 is quantized in it.
    """
    db = tmp_path / "dash.db"
    port = free_port()
    env = dict(os.environ)
    assert env["FORCE_COLOR"] == "1" and env["WB_CACHE_DIR"] == str(cache_without_int8)
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["WB_DASHBOARD_TOKEN"] = "browser-test-token"
    # Files the page writes by default (its ~/wb-deployments) land in the test's folder.
    home = tmp_path / "home"
    home.mkdir()
    env["HOME"] = str(home)
    proc = subprocess.Popen([sys.executable, "-m", "wb_core.cli", "dashboard", "--db", str(db), "--port", str(port),
                             "--cull-idle", "120"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}/?token=browser-test-token"
    try:
        # Asked for a static file, not the page: every page visit starts a kernel, and one started
        # here would live on (until culled) beside the browser's.
        wait_for_http(f"http://127.0.0.1:{port}/voila/static/up", proc)
        served = Served((url, db))
        served.pid = proc.pid
        served.home = home
        yield served
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
        proc.stdout.close()


@pytest.fixture
def page():
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (`make browser` installs Debian's package)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1200, "height": 1250}, accept_downloads=True)
        pg = context.new_page()
        pg.set_default_timeout(120_000)
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.errors = errors
        console_errors: list[str] = []
        pg.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
        pg.console_errors = console_errors
        yield pg
        browser.close()


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()
    page.wait_for_timeout(800)  # let plotly lay out what was hidden


def shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def plot_points(page, panel: str) -> int:
    return page.evaluate(
        """(sel) => { const el = document.querySelector(sel + ' .js-plotly-plot');
                      if (!el || !el.data) return 0;
                      return el.data.reduce((n, t) => n + (t.x ? t.x.length : 0), 0); }""", panel)


def drag_slider(page, slider, fraction: float) -> None:
    """Drag a slider's handle to `fraction` of its track, as a mouse would."""
    track = slider.locator(".noUi-target").bounding_box()
    handle = slider.locator(".noUi-handle").bounding_box()
    page.mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
    page.mouse.down()
    target = track["x"] + track["width"] * fraction
    page.mouse.move(target, handle["y"] + handle["height"] / 2, steps=12)
    page.mouse.up()
