"""The results store on a real PostgreSQL server (Debian's package; the test starts its own)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install '.[fleet]')")

from postgres_server import postgres_url
from wb_core.config import SweepSpec
from wb_core.errors import StoreError
from wb_core.store import Store, load_results
from wb_core.sweep.local import run_sweep


@pytest.fixture(scope="module")
def pg_url():
    with postgres_url() as url:
        yield url


def test_a_sweep_stores_and_resumes_in_postgresql(pg_url, lenet_ir, fast):
    s = run_sweep(lenet_ir, SweepSpec(batch_sizes="1,2"), pg_url, "pg", settings=fast)
    assert s.ok == 2 and "127.0.0.1" in s.db
    again = run_sweep(lenet_ir, SweepSpec(batch_sizes="1,2,4"), pg_url, "pg", settings=fast)
    assert (again.ok, again.skipped_done) == (1, 2)
    df = load_results(pg_url, "pg")
    assert len(df) == 3 and df.key.is_unique and (df.status == "ok").all()
    assert df.throughput.gt(0).all() and df.latency_ms_p99.notna().all()
    # What Path() makes of a URL (one slash) is read the same; that is how `--db` arrives.
    assert len(load_results(Path(pg_url), "pg")) == 3
    with Store(pg_url, readonly=True) as st:
        assert [r["name"] for r in st.list_studies()] == ["pg"] and st.list_studies()[0]["ok"] == 3


def test_postgresql_store_keeps_ok_points_and_hosts(pg_url):
    with Store(pg_url) as st:
        st.ensure_study("h", "m", "openvino", "fp", {"cpu_model": "x"}, "hw", {}, {"sweep": "50% of it"})
        cfg = {"backend": "openvino", "cores": None}
        assert st.add_run("h", "k1", cfg, "failed", error="boom", host="a", hardware_fingerprint="t1")
        assert st.add_run("h", "k1", cfg, "ok", {"throughput": 5.0}, host="b", hardware_fingerprint="t1")
        assert not st.add_run("h", "k1", cfg, "failed", error="late")  # ok is never overwritten
        st.add_host("h", "b", "t1", {"cpu_model": "x"})
        st.add_host("h", "b", "t2", {"cpu_model": "y"})  # the latest wins
        run = st.runs("h")[0]
        assert (run["status"], run["host"], run["hardware_fingerprint"], run["throughput"]) == ("ok", "b", "t1", 5.0)
        assert st.hosts("h") == [{"study": "h", "name": "b", "hardware_fingerprint": "t2",
                                  "hardware": {"cpu_model": "y"}, "seen_at": st.hosts("h")[0]["seen_at"]}]
        assert st.get_study("h")["spec"] == {"sweep": "50% of it"} and st.done_keys("h") == {"k1"}


def test_unreachable_postgresql_is_a_clear_error(pg_url):
    bad = pg_url.rsplit(":", 1)[0] + ":1/postgres"  # nothing listens on port 1
    with pytest.raises(StoreError, match=r"Cannot open results database 'postgresql://postgres@127\.0\.0\.1:1"):
        Store(bad)
