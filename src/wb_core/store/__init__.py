"""Store of studies and runs: SQLite (WAL mode) by default, or PostgreSQL given a URL.

One transaction per point, parameterised queries.

A point is written the moment it is measured, so a killed sweep loses nothing finished, and a
rerun skips the keys already stored as ok. The DataFrame view has flat columns: the public
config and metric columns first (RESULT_COLUMNS), then everything else a run recorded. A run
measured on a fleet also names its `host` and `hardware_fingerprint`; the `hosts` table keeps
each host's hardware.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from contextlib import contextmanager
from pathlib import Path

from wb_core.config import CONFIG_COLUMNS, format_cores
from wb_core.errors import StoreError, setting
from wb_core.store.sql import connect

METRIC_COLUMNS = ("latency_ms_p50", "latency_ms_p90", "latency_ms_p95", "latency_ms_p99", "latency_ms_mean",
                  "throughput", "cpu_util", "rss_mb", "status", "error")
RESULT_COLUMNS = ("study", "key") + CONFIG_COLUMNS + METRIC_COLUMNS
DONE_STATUSES = ("ok", "skipped")

SCHEMA = """
CREATE TABLE IF NOT EXISTS studies (
    name TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    model_path TEXT,
    model_format TEXT,
    model_fingerprint TEXT,
    hardware_fingerprint TEXT,
    hardware_json TEXT,
    versions_json TEXT,
    spec_json TEXT,
    inputs_json TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    study TEXT NOT NULL REFERENCES studies(name),
    key TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    config_json TEXT NOT NULL,
    metrics_json TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (study, key)
);
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (
    study TEXT NOT NULL,
    key TEXT NOT NULL,
    round INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    metrics_json TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (study, key, round)
);
CREATE TABLE IF NOT EXISTS leases (
    study TEXT NOT NULL,
    key TEXT NOT NULL,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    heartbeat DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (study, key)
);
CREATE TABLE IF NOT EXISTS layer_profiles (
    study TEXT NOT NULL,
    key TEXT NOT NULL,
    profile_json TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (study, key)
);
CREATE TABLE IF NOT EXISTS hosts (
    study TEXT NOT NULL,
    name TEXT NOT NULL,
    hardware_fingerprint TEXT NOT NULL,
    hardware_json TEXT,
    seen_at TEXT NOT NULL,
    PRIMARY KEY (study, name)
);
"""
# Columns added after the first release: created on open when an older database lacks them.
RUN_HOST_COLUMNS = ("host", "hardware_fingerprint")
# What a stored point is: a run of a sweep, or a probe (a max-rate search's arrival rate) of one
# run, named by `probe_of`. Probes stay out of the results frame: they answer a question about a
# run, they are not runs to choose from.
RUN_KIND_COLUMNS = ("kind", "probe_of")
RUN_KIND, PROBE_KIND = "run", "probe"
# Fields of a study's spec kept when a sweep records its own: the last max-rate search and its
# answer, and the settings the dashboard's Sweep tab ran with (a reopened study shows them again).
KEPT_SPEC_FIELDS = ("last_max_rate", "dashboard")
# 1: run keys hashed every RunConfig field; 2: keys hash the non-default settings only;
# 3: every point has a kind (run or probe).
SCHEMA_VERSION = 3
# SQLite's application_id of a workbench store ("WBNC"): set on every file the workbench creates.
APPLICATION_ID = 0x57424E43
# The tables (and the columns of each) that make a database a workbench store.
OWN_TABLES = {"studies": {"name", "model_fingerprint", "spec_json"}, "runs": {"study", "key", "config_json",
                                                                             "metrics_json", "status"}}
# Every table a store may hold, read from the schema itself so a new table is never forgotten (a store
# restored from `sqlite3 .dump` has lost its application id and is known by these alone);
# sqlite_sequence comes with AUTOINCREMENT.
ALL_TABLES = set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA)) | {"sqlite_sequence"}
# A lease not refreshed for this long is stale: its sweep is gone, and another may take the point.
LEASE_STALE_S = 30.0


def _pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (a zombie counts as gone)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class Store:
    """A results database. Safe to open from several processes at once."""

    def __init__(self, path: str | Path, readonly: bool = False):
        self.readonly = readonly
        self.db, name = connect(path, readonly)  # raises StoreError for a missing file or folder
        self.path = Path(name) if self.db.dialect == "sqlite" else name
        try:
            self._check_ours()  # before anything is written: another application's file stays untouched
            if not readonly:
                self._check_version()  # a version this one cannot read stops here too, the file unchanged
                self.db.prepare_writes()
                self.db.script(SCHEMA)
                self._add_missing_columns()
                self._migrate()
            # SQLite opens lazily: touch the schema now so a corrupt file fails here, clearly.
            self.db.execute("SELECT 1 FROM studies LIMIT 1" if self.db.dialect != "sqlite"
                            else "SELECT name FROM sqlite_master LIMIT 1")
        except self.db.errors as e:
            self.db.close()
            raise StoreError(f"Cannot open results database '{self.path}': {e}.") from None
        except StoreError:
            self.db.close()
            raise

    def _check_ours(self) -> None:
        """Refuse a database that belongs to another application, without changing it.

        A workbench store is empty (new), or carries the workbench's application id, or has the
        workbench's `studies` and `runs` tables with their columns (stores made before the id).
        """
        app_id = self.db.application_id()
        tables = self.db.tables()
        if app_id == APPLICATION_ID:
            return
        if app_id == 0 and not tables:
            if not self.readonly:
                self.db.set_application_id(APPLICATION_ID)
                return
            if self.db.dialect == "sqlite":  # an empty (0-byte) file: nothing to read yet
                raise StoreError(f"'{self.path}' is an empty database that holds no studies yet; profile a model "
                                 f"into it, or choose another database ({setting('db', 'Database')}).")
            return
        if self.db.dialect == "sqlite":
            # Only tables of ours (a store, or one another process is creating right now), each complete.
            ours = (app_id == 0 and tables <= ALL_TABLES
                    and all(cols <= self.db.columns(t) for t, cols in OWN_TABLES.items() if t in tables))
        else:  # a PostgreSQL database is shared by design: only a clash over our table names is refused
            ours = all(cols <= self.db.columns(t) for t, cols in OWN_TABLES.items() if t in tables)
        if not ours:
            shown = ", ".join(sorted(tables)[:8]) + (", ..." if len(tables) > 8 else "")
            what = f"application id {app_id:#x}" if app_id else f"tables {shown}"
            raise StoreError(f"'{self.path}' is not a workbench results database (it holds {what}); it was left "
                             f"untouched: choose another database ({setting('db', 'Database')}).")
        if not self.readonly and self.db.dialect == "sqlite":
            self.db.set_application_id(APPLICATION_ID)

    def _add_missing_columns(self) -> None:
        have = self.db.columns("runs")
        for col in RUN_HOST_COLUMNS + RUN_KIND_COLUMNS:
            if col not in have:
                try:
                    with self.db.transaction() as c:
                        c.execute(f"ALTER TABLE runs ADD COLUMN {col} TEXT")
                except self.db.errors:
                    if col not in self.db.columns("runs"):  # else another process added it first
                        raise

    def _check_version(self) -> None:
        """Refuse a store whose recorded schema version is not a number, or newer than this workbench knows."""
        if "meta" not in self.db.tables():
            return
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(f"Results database '{self.path}' was written by a newer workbench "
                             f"(schema {version}, this one knows {SCHEMA_VERSION}); upgrade the workbench.")

    def schema_version(self) -> int:
        try:
            rows = self.db.execute("SELECT value FROM meta WHERE name = 'schema_version'")
        except self.db.errors:  # an older database opened read-only has no meta table
            rows = []
        if rows:
            value = rows[0]["value"]
            try:
                version = int(str(value).strip())
            except ValueError:
                version = None
            if version is None or version < 1:
                raise StoreError(f"Results database '{self.path}' holds a schema version of {str(value)[:40]!r} in its "
                                 f"meta table, which is not a version number (1, 2, 3...); it was left untouched: "
                                 f"choose another database ({setting('db', 'Database')}), or restore this one from a "
                                 f"copy.")
            return version
        return 1 if self.db.execute("SELECT id FROM runs LIMIT 1") else SCHEMA_VERSION

    def _migrate(self) -> None:
        """Bring an older database to SCHEMA_VERSION, in one transaction, so it resumes as it was."""
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(f"Results database '{self.path}' was written by a newer workbench "
                             f"(schema {version}, this one knows {SCHEMA_VERSION}); upgrade the workbench.")
        with self._write() as c:
            if version < 2:
                self._rekey_runs(c)
            if version < 3:
                self._mark_probes(c)
            c.execute_count("INSERT INTO meta (name, value) VALUES ('schema_version', ?) "
                            "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))

    def _rekey_runs(self, c) -> None:
        """Version 1 -> 2: give each run the stable key of its configuration (fleet keys too)."""
        from wb_core.config import RunConfig

        rows = c.execute("SELECT id, key, config_json, metrics_json, hardware_fingerprint FROM runs")
        for r in rows:
            try:
                cfg = RunConfig.from_dict(json.loads(r["config_json"]))
            except (TypeError, ValueError):
                continue  # not a configuration this version can read: its key stays
            metrics = json.loads(r["metrics_json"] or "{}")
            fp = r["hardware_fingerprint"]
            if fp and r["key"] == cfg.key_on_legacy(fp):
                metrics["config_key"] = cfg.key
                new = cfg.key_on(fp)
            elif r["key"] == cfg.legacy_key():
                new = cfg.key
            else:
                continue
            c.execute_count("UPDATE runs SET key = ?, metrics_json = ? WHERE id = ?",
                            (new, json.dumps(metrics), r["id"]))

    def _mark_probes(self, c) -> None:
        """Version 2 -> 3: points a max-rate search stored as runs become probes of the run they searched.

        A probe is an open-loop point (it has an arrival rate) at a rate its study's sweep did not
        ask for (a sweep of the server scenario lists its rates); it is linked to the closed-loop
        run with the same settings when the study holds one.
        """
        from wb_core.config import RunConfig

        specs = {r["name"]: json.loads(r["spec_json"] or "null") or {}
                 for r in c.execute("SELECT name, spec_json FROM studies")}
        keys = {(r["study"], r["key"]) for r in c.execute("SELECT study, key FROM runs")}
        for r in c.execute("SELECT id, study, config_json FROM runs"):
            config = json.loads(r["config_json"] or "{}")
            rate = config.get("rate")
            if rate is None:
                continue
            swept = ((specs.get(r["study"]) or {}).get("sweep") or {}).get("rates") or []
            if any(x is not None and abs(float(x) - float(rate)) < 1e-9 for x in swept):
                continue
            try:
                base = RunConfig.from_dict({**config, "rate": None}).key
            except (TypeError, ValueError):
                base = None
            c.execute_count("UPDATE runs SET kind = ?, probe_of = ? WHERE id = ?",
                            (PROBE_KIND, base if (r["study"], base) in keys else None, r["id"]))

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextmanager
    def _write(self):
        try:
            with self.db.transaction() as c:
                yield c
        except self.db.errors as e:
            raise StoreError(f"Cannot write to results database '{self.path}': {e}.") from None

    # ---- studies ----
    def get_study(self, name: str) -> dict | None:
        rows = self.db.execute("SELECT * FROM studies WHERE name = ?", (name,))
        if not rows:
            return None
        d = dict(rows[0])
        for k in ("hardware_json", "versions_json", "spec_json", "inputs_json"):
            d[k.removesuffix("_json")] = json.loads(d.pop(k) or "null")
        return d

    def list_studies(self) -> list[dict]:
        """The studies with their counts of runs (probes not counted)."""
        runs_only = " AND (r.kind IS NULL OR r.kind = 'run')" if "kind" in self.db.columns("runs") else ""
        rows = self.db.execute(
            "SELECT s.name, s.created_at, s.model_path, s.model_format, "
            "SUM(CASE WHEN r.status = 'ok' THEN 1 ELSE 0 END) AS ok, "
            "SUM(CASE WHEN r.status = 'failed' THEN 1 ELSE 0 END) AS failed, COUNT(r.id) AS runs "
            "FROM studies s LEFT JOIN runs r ON r.study = s.name" + runs_only + " "
            "GROUP BY s.name, s.created_at, s.model_path, s.model_format ORDER BY s.created_at"
        )
        return [dict(r) for r in rows]

    def ensure_study(self, name: str, model_path: str, model_format: str, model_fingerprint: str,
                     hardware: dict, hardware_fingerprint: str, versions: dict, spec: dict,
                     inputs: list[dict] | None = None, spec_field: str | None = None) -> dict:
        """Create a study, or check that an existing one is about the same model.

        `spec_field` keeps an existing study's spec (its sweep settings) and stores `spec` under
        that field of it: a max-rate search is recorded without forgetting the sweep.
        """
        existing = self.get_study(name)
        if existing:
            if existing["model_fingerprint"] != model_fingerprint:
                raise StoreError(
                    f"Study '{name}' in '{self.path}' was made with a different model "
                    f"({existing['model_path']}); choose another study name ({setting('study', 'Study name')})."
                )
            old = existing.get("spec") or {}
            if spec_field:
                spec = {**old, spec_field: spec}
            else:  # a new sweep's spec; what was recorded beside the sweep stays
                spec = {**{k: old[k] for k in KEPT_SPEC_FIELDS if k in old}, **spec}
            with self._write() as c:  # the latest spec is what a resume ran with
                c.execute("UPDATE studies SET spec_json = ? WHERE name = ?", (json.dumps(spec), name))
            return self.get_study(name)
        if spec_field:
            spec = {spec_field: spec}
        with self._write() as c:
            c.execute(
                "INSERT INTO studies (name, created_at, model_path, model_format, model_fingerprint, "
                "hardware_fingerprint, hardware_json, versions_json, spec_json, inputs_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, _now(), str(model_path), model_format, model_fingerprint, hardware_fingerprint,
                 json.dumps(hardware), json.dumps(versions), json.dumps(spec), json.dumps(inputs)),
            )
        return self.get_study(name)

    # ---- runs ----
    def done_keys(self, study: str) -> set[str]:
        rows = self.db.execute(
            "SELECT key FROM runs WHERE study = ? AND status IN (?, ?)", (study, *DONE_STATUSES)
        )
        return {r["key"] for r in rows}

    def busy_keys(self, study: str) -> set[str]:
        """Keys of ok points measured on a busy machine (their metrics say `busy`)."""
        rows = self.db.execute("SELECT key, metrics_json FROM runs WHERE study = ? AND status = ?", (study, "ok"))
        out = set()
        for r in rows:
            try:
                if json.loads(r["metrics_json"] or "{}").get("busy"):
                    out.add(r["key"])
            except (ValueError, AttributeError):
                continue
        return out

    def add_run(self, study: str, key: str, config: dict, status: str, metrics: dict | None = None,
                error: str | None = None, host: str | None = None, hardware_fingerprint: str | None = None,
                replace: bool = False, release_owner: str | None = None, probe_of: str | None = None) -> bool:
        """Store one point. An ok point is never overwritten; a failed one is replaced by a retry.

        `host` and `hardware_fingerprint` name where a fleet measured it. Returns False when the
        key was already stored as done (nothing written). `replace` overwrites whatever is stored:
        the summary of a repeated point, rewritten as each of its rounds arrives. `release_owner`:
        the sweep whose lease on the point is given back in the same transaction. `probe_of` makes
        the point a probe of that run (a max-rate search's rate), kept out of the study's runs.
        """
        guard = "" if replace else " WHERE runs.status NOT IN ('ok', 'skipped')"
        kind = PROBE_KIND if probe_of is not None else RUN_KIND
        with self._write() as c:
            changed = c.execute_count(
                "INSERT INTO runs (study, key, status, error, config_json, metrics_json, created_at, host, "
                "hardware_fingerprint, kind, probe_of) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (study, key) DO UPDATE SET status = excluded.status, error = excluded.error, "
                "config_json = excluded.config_json, metrics_json = excluded.metrics_json, "
                "created_at = excluded.created_at, host = excluded.host, "
                "hardware_fingerprint = excluded.hardware_fingerprint, kind = excluded.kind, "
                "probe_of = excluded.probe_of" + guard,
                (study, key, status, error, json.dumps(config), json.dumps(metrics or {}, default=str), _now(),
                 host, hardware_fingerprint, kind, probe_of),
            )
            if release_owner is not None:
                c.execute_count("DELETE FROM leases WHERE owner = ? AND study = ? AND key = ?",
                                (release_owner, study, key))
            return changed > 0

    # ---- rounds of a repeated point ----
    def add_round(self, study: str, key: str, round_no: int, status: str, metrics: dict | None = None,
                  error: str | None = None) -> None:
        """Store one round of a repeated point (its key is the point's; a round measured again replaces it)."""
        with self._write() as c:
            c.execute_count(
                "INSERT INTO rounds (study, key, round, status, error, metrics_json, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (study, key, round) DO UPDATE SET status = excluded.status, "
                "error = excluded.error, metrics_json = excluded.metrics_json, created_at = excluded.created_at",
                (study, key, int(round_no), status, error, json.dumps(metrics or {}, default=str), _now()))

    def rounds(self, study: str, key: str | None = None) -> list[dict]:
        """Stored rounds ({key, round, status, error, metrics, created_at}), in round order."""
        try:
            rows = self.db.execute("SELECT * FROM rounds WHERE study = ?" + (" AND key = ?" if key else "")
                                   + " ORDER BY key, round", (study, key) if key else (study,))
        except self.db.errors:  # an older database opened read-only has no rounds table
            return []
        out = []
        for r in rows:
            d = dict(r)
            d["metrics"] = json.loads(d.pop("metrics_json") or "{}")
            out.append(d)
        return out

    def round_counts(self, study: str) -> dict[str, int]:
        """Rounds measured (ok or skipped) per key."""
        counts: dict[str, int] = {}
        for r in self.rounds(study):
            if r["status"] in DONE_STATUSES:
                counts[r["key"]] = counts.get(r["key"], 0) + 1
        return counts

    # ---- leases: one sweep measures a point at a time ----
    def claim(self, study: str, key: str, owner: str, host: str, pid: int,
              stale_s: float = LEASE_STALE_S) -> dict | None:
        """Claim `key` of `study` for `owner` before measuring it. None when claimed (or already ours).

        Otherwise the holder's lease ({owner, host, pid, heartbeat}): another sweep that is alive
        measures it. A lease is taken over when its heartbeat is older than `stale_s`, or when its
        owner ran on this host and its process is gone.
        """
        import time

        now = time.time()
        with self._write() as c:
            changed = c.execute_count(
                "INSERT INTO leases (study, key, owner, host, pid, heartbeat) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (study, key) DO UPDATE SET owner = excluded.owner, host = excluded.host, "
                "pid = excluded.pid, heartbeat = excluded.heartbeat "
                "WHERE leases.owner = excluded.owner OR leases.heartbeat < ?",
                (study, key, owner, host, pid, now, now - stale_s))
        if changed:
            return None
        rows = self.db.execute("SELECT owner, host, pid, heartbeat FROM leases WHERE study = ? AND key = ?",
                               (study, key))
        if not rows:  # released between the two statements: try once more
            return self.claim(study, key, owner, host, pid, stale_s)
        holder = rows[0]
        if holder["host"] == host and not _pid_alive(int(holder["pid"])):
            with self._write() as c:
                taken = c.execute_count("UPDATE leases SET owner = ?, host = ?, pid = ?, heartbeat = ? "
                                        "WHERE study = ? AND key = ? AND owner = ?",
                                        (owner, host, pid, now, study, key, holder["owner"]))
            if taken:
                return None
        return holder

    def refresh_leases(self, owner: str) -> None:
        """The heartbeat of every lease `owner` holds."""
        import time

        with self._write() as c:
            c.execute_count("UPDATE leases SET heartbeat = ? WHERE owner = ?", (time.time(), owner))

    def release(self, owner: str, study: str | None = None, key: str | None = None) -> None:
        """Give up one lease (`key`), a study's leases, or all of `owner`'s."""
        sql, params = "DELETE FROM leases WHERE owner = ?", [owner]
        if study is not None:
            sql, params = sql + " AND study = ?", [*params, study]
        if key is not None:
            sql, params = sql + " AND key = ?", [*params, key]
        with self._write() as c:
            c.execute_count(sql, tuple(params))

    def other_sweeps(self, owner: str, host: str, stale_s: float = LEASE_STALE_S) -> list[str]:
        """Live sweeps other than `owner` holding points on `host` (measurements now share its CPUs)."""
        import time

        rows = self.db.execute("SELECT DISTINCT owner, pid FROM leases WHERE owner <> ? AND host = ? AND heartbeat >= ?",
                               (owner, host, time.time() - stale_s))
        return sorted({r["owner"] for r in rows if _pid_alive(int(r["pid"]))})

    # ---- hosts of a fleet ----
    def add_host(self, study: str, name: str, hardware_fingerprint: str, hardware: dict) -> None:
        """Remember a host that measured points of `study`, with its hardware (latest wins)."""
        with self._write() as c:
            c.execute_count(
                "INSERT INTO hosts (study, name, hardware_fingerprint, hardware_json, seen_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (study, name) DO UPDATE SET hardware_fingerprint = excluded.hardware_fingerprint, "
                "hardware_json = excluded.hardware_json, seen_at = excluded.seen_at",
                (study, name, hardware_fingerprint, json.dumps(hardware), _now()),
            )

    def hosts(self, study: str) -> list[dict]:
        """The hosts recorded for a study: name, hardware_fingerprint, hardware, seen_at."""
        try:
            rows = self.db.execute("SELECT * FROM hosts WHERE study = ? ORDER BY name", (study,))
        except self.db.errors:  # an older database opened read-only has no hosts table
            return []
        out = []
        for r in rows:
            d = dict(r)
            d["hardware"] = json.loads(d.pop("hardware_json") or "null")
            out.append(d)
        return out

    # ---- layer profiles of runs (measured once, shown many times) ----
    def save_layer_profile(self, study: str, key: str, profile: dict) -> None:
        """Keep a run's layer profile (`LayerProfile.to_dict()`); a newer one replaces it."""
        with self._write() as c:
            c.execute_count(
                "INSERT INTO layer_profiles (study, key, profile_json, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (study, key) DO UPDATE SET profile_json = excluded.profile_json, "
                "created_at = excluded.created_at",
                (study, key, json.dumps(profile, default=str), _now()))

    def layer_profile(self, study: str, key: str) -> dict | None:
        """A run's stored layer profile, or None (also for a database made before they were kept)."""
        try:
            rows = self.db.execute("SELECT profile_json FROM layer_profiles WHERE study = ? AND key = ?",
                                   (study, key))
        except self.db.errors:  # an older database opened read-only has no layer_profiles table
            return None
        return json.loads(rows[0]["profile_json"]) if rows else None

    def serve_checks(self, study: str | None = None) -> list[dict]:
        """Stored serve checks (`wb serve-check`), newest first: each result dict with `status` and `error`."""
        try:
            rows = self.db.execute("SELECT * FROM serve_checks" + (" WHERE study = ?" if study else "")
                                   + " ORDER BY id DESC", (study,) if study else ())
        except self.db.errors:  # no check stored yet: the table does not exist
            return []
        return [{**json.loads(r["result_json"]), "status": r["status"], "error": r["error"]} for r in rows]

    def run_config(self, study: str, key: str):
        """The RunConfig a stored run measured, read from its config as stored (cores as integers)."""
        from wb_core.config import RunConfig

        rows = self.db.execute("SELECT config_json FROM runs WHERE study = ? AND key = ?", (study, key))
        if not rows:
            raise StoreError(f"No run with key '{key}' in study '{study}' of '{self.path}'.")
        return RunConfig.from_dict(json.loads(rows[0]["config_json"]))

    def points(self, study: str, keys: list[str]) -> dict[str, dict]:
        """Stored points by key ({key, config, status, metrics, error}); keys not stored are absent."""
        from wb_core.config import RunConfig

        out = {}
        for i in range(0, len(keys), 500):  # stay under SQLite's parameter limit
            chunk = keys[i:i + 500]
            marks = ", ".join("?" for _ in chunk)
            rows = self.db.execute(f"SELECT key, status, error, config_json, metrics_json FROM runs "
                                   f"WHERE study = ? AND key IN ({marks})", (study, *chunk))
            for r in rows:
                out[r["key"]] = {"key": r["key"], "config": RunConfig.from_dict(json.loads(r["config_json"])),
                                 "status": r["status"], "metrics": json.loads(r["metrics_json"] or "{}"),
                                 "error": r["error"]}
        return out

    def runs(self, study: str, probes: bool = False) -> list[dict]:
        """The study's runs as flat records; `probes` gives its probes instead (each names `probe_of`)."""
        rows = self.db.execute("SELECT * FROM runs WHERE study = ? ORDER BY id", (study,))
        want = PROBE_KIND if probes else RUN_KIND
        return [flat_record(study, r["key"], json.loads(r["config_json"]), json.loads(r["metrics_json"]), r["status"],
                            r["error"], r["created_at"], {c: r.get(c) for c in (*RUN_HOST_COLUMNS, "probe_of")})
                for r in rows if (r.get("kind") or RUN_KIND) == want]

    def to_frame(self, study: str, probes: bool = False):
        """The study's runs as a DataFrame; `probes` gives its probes (max-rate search points) instead."""
        if self.get_study(study) is None:
            known = [s["name"] for s in self.list_studies()]
            raise StoreError(f"No study named '{study}' in '{self.path}'"
                             + (f"; studies there: {', '.join(known)}." if known else "; it holds no studies."))
        return results_frame(self.runs(study, probes=probes))

    def update_spec(self, study: str, **fields) -> None:
        """Add fields to a study's stored spec (e.g. the last max-rate answer), keeping the rest."""
        info = self.get_study(study)
        if info is None:
            return
        spec = {**(info.get("spec") or {}), **fields}
        with self._write() as c:
            c.execute_count("UPDATE studies SET spec_json = ? WHERE name = ?", (json.dumps(spec, default=str), study))


def flat_record(study: str, key: str, config: dict, metrics: dict, status: str, error: str | None,
                created_at: str | None = None, host_columns: dict | None = None) -> dict:
    """One run as a flat row of the results frame: config, then metrics, then status columns."""
    rec = {"study": study, "key": key, **config}
    rec["cores"] = format_cores(tuple(config["cores"]) if config.get("cores") else None)
    rec["n_cores"] = len(config["cores"]) if config.get("cores") else None
    rec.update(metrics)
    rec["status"], rec["error"], rec["created_at"] = status, error, created_at
    for col, value in (host_columns or {}).items():  # absent from databases made before fleets
        if value is not None:
            rec[col] = value
    return rec


def point_record(study: str, point: dict) -> dict:
    """A point as a sweep reports it (`on_point`) turned into the row `load_results` would give."""
    cfg = point["config"]
    config = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(cfg)
    hosts = {c: point.get(c) for c in RUN_HOST_COLUMNS}
    return flat_record(study, point["key"], config, point.get("metrics") or {}, point["status"], point.get("error"),
                       _now(), hosts)


def results_frame(records: list[dict]):
    """Rows from `flat_record` as a DataFrame with the public result columns first."""
    import pandas as pd

    df = pd.DataFrame.from_records(records)
    for col in RESULT_COLUMNS:
        if col not in df.columns:
            df[col] = None
    rest = [c for c in df.columns if c not in RESULT_COLUMNS]
    return df[list(RESULT_COLUMNS) + rest]


def load_results(db: str | Path, study: str, probes: bool = False):
    """The runs of a study as a pandas DataFrame with the public result columns first
    (`probes`: its max-rate probes instead, each naming the run it probes in `probe_of`)."""
    with Store(db, readonly=True) as s:
        return s.to_frame(study, probes=probes)


def load_measurements(db: str | Path, study: str):
    """Every measurement of a study: its runs and its probes (max-rate search points, whose
    open-loop p99 at a known arrival rate is what a capacity plan rests on)."""
    import pandas as pd

    with Store(db, readonly=True) as s:
        runs, probes = s.to_frame(study), s.to_frame(study, probes=True)
    if probes.empty:
        return runs
    return pd.concat([runs, probes], ignore_index=True) if not runs.empty else probes
