"""SQLite store of studies and runs (WAL mode, one transaction per point, parameterised queries).

A point is written the moment it is measured, so a killed sweep loses nothing finished, and a
rerun skips the keys already stored as ok. The DataFrame view has flat columns: the public
config and metric columns first (RESULT_COLUMNS), then everything else a run recorded.
"""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path

from wb_core.config import CONFIG_COLUMNS, format_cores
from wb_core.errors import StoreError

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
"""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Store:
    """A results database. Safe to open from several processes at once."""

    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        try:
            if readonly:
                if not self.path.exists():
                    raise StoreError(f"Results database '{self.path}' does not exist.")
                self.conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
            else:
                if self.path.parent and not self.path.parent.exists():
                    raise StoreError(f"The folder for results database '{self.path}' does not exist.")
                self.conn = sqlite3.connect(str(self.path), timeout=30)
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                self.conn.executescript(SCHEMA)
            self.conn.execute("PRAGMA busy_timeout=30000")
            # SQLite opens lazily: touch the schema now so a corrupt file fails here, clearly.
            self.conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
            self.conn.row_factory = sqlite3.Row
        except sqlite3.DatabaseError as e:
            raise StoreError(f"Cannot open results database '{self.path}': {e}.") from None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextmanager
    def _write(self):
        try:
            with self.conn:
                yield self.conn
        except sqlite3.OperationalError as e:
            raise StoreError(f"Cannot write to results database '{self.path}': {e}.") from None

    # ---- studies ----
    def get_study(self, name: str) -> dict | None:
        row = self.conn.execute("SELECT * FROM studies WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        d = dict(row)
        for k in ("hardware_json", "versions_json", "spec_json", "inputs_json"):
            d[k.removesuffix("_json")] = json.loads(d.pop(k) or "null")
        return d

    def list_studies(self) -> list[dict]:
        rows = self.conn.execute(
            "SELECT s.name, s.created_at, s.model_path, s.model_format, "
            "SUM(r.status = 'ok') AS ok, SUM(r.status = 'failed') AS failed, COUNT(r.id) AS runs "
            "FROM studies s LEFT JOIN runs r ON r.study = s.name GROUP BY s.name ORDER BY s.created_at"
        ).fetchall()
        return [dict(r) for r in rows]

    def ensure_study(self, name: str, model_path: str, model_format: str, model_fingerprint: str,
                     hardware: dict, hardware_fingerprint: str, versions: dict, spec: dict,
                     inputs: list[dict] | None = None) -> dict:
        """Create a study, or check that an existing one is about the same model."""
        existing = self.get_study(name)
        if existing:
            if existing["model_fingerprint"] != model_fingerprint:
                raise StoreError(
                    f"Study '{name}' in '{self.path}' was made with a different model "
                    f"({existing['model_path']}); choose another --study name."
                )
            with self._write() as c:  # the latest spec is what a resume ran with
                c.execute("UPDATE studies SET spec_json = ? WHERE name = ?", (json.dumps(spec), name))
            return self.get_study(name)
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
        rows = self.conn.execute(
            "SELECT key FROM runs WHERE study = ? AND status IN (?, ?)", (study, *DONE_STATUSES)
        ).fetchall()
        return {r[0] for r in rows}

    def add_run(self, study: str, key: str, config: dict, status: str, metrics: dict | None = None,
                error: str | None = None) -> bool:
        """Store one point. An ok point is never overwritten; a failed one is replaced by a retry.

        Returns False when the key was already stored as done (nothing written).
        """
        with self._write() as c:
            cur = c.execute(
                "INSERT INTO runs (study, key, status, error, config_json, metrics_json, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (study, key) DO UPDATE SET status = excluded.status, error = excluded.error, "
                "config_json = excluded.config_json, metrics_json = excluded.metrics_json, "
                "created_at = excluded.created_at WHERE runs.status NOT IN ('ok', 'skipped')",
                (study, key, status, error, json.dumps(config), json.dumps(metrics or {}, default=str), _now()),
            )
            return cur.rowcount > 0

    def runs(self, study: str) -> list[dict]:
        rows = self.conn.execute(
            "SELECT key, status, error, config_json, metrics_json, created_at FROM runs WHERE study = ? ORDER BY id",
            (study,),
        ).fetchall()
        out = []
        for r in rows:
            rec = {"study": study, "key": r["key"]}
            cfg = json.loads(r["config_json"])
            rec.update(cfg)
            rec["cores"] = format_cores(tuple(cfg["cores"]) if cfg.get("cores") else None)
            rec["n_cores"] = len(cfg["cores"]) if cfg.get("cores") else None
            rec.update(json.loads(r["metrics_json"]))
            rec["status"] = r["status"]
            rec["error"] = r["error"]
            rec["created_at"] = r["created_at"]
            out.append(rec)
        return out

    def to_frame(self, study: str):
        import pandas as pd

        if self.get_study(study) is None:
            known = [s["name"] for s in self.list_studies()]
            raise StoreError(f"No study named '{study}' in '{self.path}'"
                             + (f"; studies there: {', '.join(known)}." if known else "; it holds no studies."))
        recs = self.runs(study)
        df = pd.DataFrame.from_records(recs)
        for col in RESULT_COLUMNS:
            if col not in df.columns:
                df[col] = None
        rest = [c for c in df.columns if c not in RESULT_COLUMNS]
        return df[list(RESULT_COLUMNS) + rest]


def load_results(db: str | Path, study: str):
    """The runs of a study as a pandas DataFrame with the public result columns first."""
    with Store(db, readonly=True) as s:
        return s.to_frame(study)
