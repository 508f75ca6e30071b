"""Run keys are a contract with every database already written: pinned to literal values here.

A change to RunConfig that alters one of these keys makes stored studies remeasure everything;
if that is really wanted, it needs a store migration (wb_core.store.SCHEMA_VERSION) like the one
tested below.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from wb_core.config import RunConfig, SweepSpec
from wb_core.store import SCHEMA_VERSION, Store, load_results
from wb_core.sweep.local import run_sweep

CONFIGS = [
    RunConfig("openvino"),
    RunConfig("openvino", precision="int8", batch_size=8, threads=2, cores=(0, 1)),
    RunConfig("tensorflow", threads=1, inter_op_threads=1, onednn=False),
    RunConfig("openvino", streams=2, hint="throughput", concurrency=4, cpu_pinning=False),
    RunConfig("openvino", instances=2, cores=(0, 1), cores_per_instance=1, rate=400),
]
KEYS = ["9446e890eaf49305", "4bfc8e40c3e92c43", "b4503d61c2f641e4", "2f8afad47851e307", "ec40bcd2ad9d8e04"]
# What the first release computed (every field hashed); the migration recognises these.
LEGACY_KEYS = ["1c193e70342a5726", "206ba8298d16261c", "ab6db7329b00e5f6", "792910f22c55df11", "4b7be28440d52fc5"]


@pytest.mark.parametrize("cfg,key,legacy", list(zip(CONFIGS, KEYS, LEGACY_KEYS)), ids=KEYS)
def test_keys_are_pinned(cfg, key, legacy):
    assert cfg.key == key
    assert cfg.legacy_key() == legacy


def test_key_hashes_only_settings_that_differ_from_the_defaults():
    assert RunConfig("openvino", precision="fp32", batch_size=1, instances=1).key == RunConfig("openvino").key
    assert RunConfig("openvino", rate=400).key == RunConfig("openvino", rate=400.0).key
    assert RunConfig("openvino", cores=(0,)).key != RunConfig("openvino").key
    assert RunConfig.from_dict(CONFIGS[1].to_dict()).key == KEYS[1]


def _downgrade_to_v1(db) -> None:
    """Rewrite a database as the first release left it: legacy keys, no meta table."""
    con = sqlite3.connect(db)
    with con:
        for rid, cfg_json, fp in con.execute("SELECT id, config_json, hardware_fingerprint FROM runs").fetchall():
            cfg = RunConfig.from_dict(json.loads(cfg_json))
            key = cfg.key_on_legacy(fp) if fp else cfg.legacy_key()
            con.execute("UPDATE runs SET key = ? WHERE id = ?", (key, rid))
        con.execute("DROP TABLE meta")
    con.close()


def test_database_of_the_first_release_resumes_without_remeasuring(lenet_ir, db, fast):
    spec = SweepSpec(backends="openvino", threads="1", batch_sizes="1,2")
    first = run_sweep(lenet_ir, spec, db, "old", settings=fast)
    assert first.ok == 2
    with Store(db) as s:  # a fleet row too: its key combines the config key and the hardware type
        cfg = RunConfig("openvino", threads=1, batch_size=4)
        s.add_run("old", cfg.key_on("cafe"), cfg.to_dict(), "ok", {"config_key": cfg.key, "throughput": 1.0},
                  hardware_fingerprint="cafe")
    before = load_results(db, "old").sort_values("batch_size")
    _downgrade_to_v1(db)
    assert set(load_results(db, "old")["key"]) == {c.legacy_key() for c in spec.expand()} | {
        cfg.key_on_legacy("cafe")}

    again = run_sweep(lenet_ir, spec, db, "old", settings=fast)

    assert again.skipped_done == 2 and again.ok == 0
    after = load_results(db, "old").sort_values("batch_size")
    assert list(after["key"]) == list(before["key"])
    assert list(after["created_at"]) == list(before["created_at"])  # nothing measured twice
    fleet_row = after[after["batch_size"] == 4].iloc[0]
    assert fleet_row["key"] == cfg.key_on("cafe") and fleet_row["config_key"] == cfg.key
    with Store(db) as s:
        assert s.schema_version() == SCHEMA_VERSION


def test_database_from_a_newer_release_is_refused(tmp_path):
    from wb_core.errors import StoreError

    path = tmp_path / "new.db"
    Store(path).close()
    con = sqlite3.connect(path)
    with con:
        con.execute("UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match="newer workbench"):
        Store(path)
