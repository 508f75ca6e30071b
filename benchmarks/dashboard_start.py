"""How long the dashboard takes to become usable: `wb dashboard` started to the page in chromium.

    python benchmarks/dashboard_start.py [--repeats 2] [--db wb.db] [--baseline OTHER_CHECKOUT/src]

For a fresh database and for one holding a small study (or `--db`), each row times, from the
moment `wb dashboard` starts: the first HTTP answer, the Start tab's model controls visible in the
browser ("Use this model" on screen), and the tabs responding (Explore then Export opened and
their panels on screen). "Warm server" times a second visit to the same server once its kept-ready
kernel is back (POOL_REFILL_DELAY_S plus WARM_WAIT_S after the first page closed), from the address
entered to the model controls visible: what a user who opens the dashboard while it runs waits for.
A separate column times the dashboard notebook's code alone in a fresh
Python process (imports and panel construction, what the Voila kernel does before the page shows
anything). The machine's load average is printed too: on a shared 2-core machine it moves these.
With `--baseline SRC` each row is timed for that source tree too, the two alternating run by run
(the same load falls on both), so a change can be measured against the code before it.

Needs chromium and playwright (as the browser tests do). The demo model is not built here: the
page must not build it at start.
"""

from __future__ import annotations

import argparse
import os
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "src"))

from bench_util import fixed_time, median_spread, print_table  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "benchmark-token-123"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(src: Path = ROOT / "src") -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), e.get("PYTHONPATH")]))
    e["WB_DASHBOARD_TOKEN"] = TOKEN
    return e


def study_db(folder: Path) -> Path:
    """A database with one small study of a tiny synthetic IR (two points)."""
    from synthetic_model import build

    from wb_core.api import profile

    model = build(folder / "tiny.xml", size=16, channels=8, depth=2)
    db = folder / "with-study.db"
    profile(model, db=db, study="tiny", batch_sizes="1,4", threads="1", settings=fixed_time(0.3, 0.1),
            accuracy=False)
    return db


def in_process(db: Path, src: Path = ROOT / "src") -> float:
    """Seconds for the dashboard notebook's code (what the Voila kernel runs) in a fresh process."""
    from wb_core.cli.dashboard import FALLBACK_SOURCE

    code = FALLBACK_SOURCE.replace("dashboard()", f"dashboard({str(db)!r})")
    code = f"import time\nt = time.perf_counter()\n{code}\nprint(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], env=env(src), capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


WARM_WAIT_S = 20  # after the pool's refill delay: a new kernel's start and imports, on a busy 2-CPU machine too


def page_times(browser, db: Path, workdir: Path, src: Path = ROOT / "src") -> tuple[float, float, float, float]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/?token={TOKEN}"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "wb_core.cli", "dashboard", "--db", str(db), "--port", str(port)],
                            cwd=workdir, env=env(src), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        while True:
            try:  # any answer counts (a 404 too): asking for the page itself would start a kernel
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/favicon.ico", timeout=5):
                    break
            except urllib.error.HTTPError:
                break
            except OSError:
                if proc.poll() is not None or time.perf_counter() - t0 > 180:
                    raise RuntimeError("the dashboard did not start") from None
                time.sleep(0.1)
        http = time.perf_counter() - t0
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        page.set_default_timeout(180_000)
        page.goto(url, wait_until="commit")
        page.get_by_role("button", name="Use this model").wait_for(state="visible")
        widget = time.perf_counter() - t0
        for tab, panel in (("Explore", ".wb-explore-panel"), ("Export", ".wb-export-panel")):
            page.get_by_role("tab", name=tab, exact=True).click()
            page.locator(panel).wait_for(state="visible")
        page.get_by_role("tab", name="Start", exact=True).click()
        page.get_by_role("button", name="Use this model").wait_for(state="visible")
        tabs = time.perf_counter() - t0
        page.close()
        from wb_core.cli.dashboard import POOL_REFILL_DELAY_S

        time.sleep(POOL_REFILL_DELAY_S + WARM_WAIT_S)
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        page.set_default_timeout(180_000)
        t1 = time.perf_counter()
        page.goto(url, wait_until="commit")
        page.get_by_role("button", name="Use this model").wait_for(state="visible")
        warm = time.perf_counter() - t1
        page.close()
        return http, widget, tabs, warm
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--db", type=Path, help="also time the dashboard on this database")
    ap.add_argument("--baseline", type=Path, help="another checkout's src folder, timed in turn with this one")
    args = ap.parse_args()
    trees = [("this", ROOT / "src")] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="wb-dashboard-start-"))
    try:
        cases = [("fresh database", work / "fresh.db"), ("one small study", study_db(work))]
        if args.db:
            cases.append((str(args.db), args.db.resolve()))
        rows = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for name, db in cases:
                runs = {tree: [] for tree, _ in trees}
                build = {tree: [] for tree, _ in trees}
                for _ in range(args.repeats):  # the trees in turn: one load for both
                    for tree, src in trees:
                        runs[tree].append(page_times(browser, db, work, src))
                        build[tree].append(in_process(db, src))
                for tree, _ in trees:
                    med = [median_spread([r[i] for r in runs[tree]])[0] for i in range(4)]
                    label = f"{name} ({tree})" if args.baseline else name
                    rows.append([label, *(f"{m:.1f}" for m in med), f"{median_spread(build[tree])[0]:.1f}",
                                 f"{min(r[2] for r in runs[tree]):.1f}-{max(r[2] for r in runs[tree]):.1f}"])
            browser.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(f"Dashboard start (seconds from `wb dashboard` starting; median of {args.repeats})",
                ["database", "HTTP answer", "Model controls visible", "tabs usable", "warm server: controls visible",
                 "dashboard() alone", "tabs usable (range)"], rows,
                notes=[f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; chromium headless; "
                       "tabs usable = Explore and Export opened and back to Start; warm server = a second visit, "
                       "from the address entered, once the kept-ready kernel is back."])


if __name__ == "__main__":
    main()
