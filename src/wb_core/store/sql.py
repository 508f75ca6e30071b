"""Connections for the results store: SQLite (the default, a file) or PostgreSQL (a URL).

Both sit behind one small adapter so that `Store` writes its SQL once: `?` placeholders, rows
as dicts, `transaction()` for writes. PostgreSQL goes through psycopg 3 (the `fleet` extra),
imported only when a URL asks for it.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import contextmanager
from pathlib import Path

from wb_core.errors import StoreError

# The advisory lock that serialises creating and upgrading the schema ("WBNC", as SQLite's application id).
SCHEMA_LOCK = 0x57424E43
_URL = re.compile(r"^(postgres(?:ql)?):/+", re.IGNORECASE)


def is_url(target) -> bool:
    """True for a PostgreSQL URL (`postgresql://...`), also after Path() folded its `//`."""
    return bool(_URL.match(str(target)))


def normalise_url(target) -> str:
    """`postgresql:/user@host/db` (what Path makes of a URL) back to `postgresql://user@host/db`."""
    text = str(target)
    m = _URL.match(text)
    slashes = text[len(m.group(1)) + 1:m.end()]
    # Path() keeps one slash of `//`; a `///` (no host) is folded too, so it cannot be told apart.
    return f"{m.group(1)}://" + ("/" if len(slashes) >= 3 else "") + text[m.end():]


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


class Connection:
    """One database connection: `execute` takes `?` placeholders and returns dict rows."""

    dialect = "sqlite"

    def execute(self, sql: str, params: tuple = ()) -> list[dict]:
        raise NotImplementedError

    def execute_count(self, sql: str, params: tuple = ()) -> int:
        """Run a write; the number of rows it changed."""
        raise NotImplementedError

    def columns(self, table: str) -> set[str]:
        raise NotImplementedError

    @contextmanager
    def transaction(self):
        raise NotImplementedError
        yield  # pragma: no cover

    def close(self) -> None:
        raise NotImplementedError


class SQLiteConnection(Connection):
    dialect = "sqlite"
    errors = (sqlite3.DatabaseError,)

    def __init__(self, path: Path, readonly: bool):
        if readonly:
            self.conn = sqlite3.connect(sqlite_uri(path, "ro"), uri=True, timeout=30)
        else:
            self.conn = sqlite3.connect(str(path), timeout=30)
        self.conn.execute("PRAGMA busy_timeout=30000")
        self.conn.row_factory = sqlite3.Row

    def prepare_writes(self) -> None:
        """WAL mode for concurrent readers: called once the file is known to be ours (it changes the file)."""
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")

    def tables(self) -> set[str]:
        return {r["name"] for r in self.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def application_id(self) -> int:
        return int(self.execute("PRAGMA application_id")[0]["application_id"])

    def set_application_id(self, value: int) -> None:
        self.conn.execute(f"PRAGMA application_id = {int(value)}")

    def execute(self, sql, params=()):
        return [dict(r) for r in self.conn.execute(sql, params).fetchall()]

    def execute_count(self, sql, params=()):
        return self.conn.execute(sql, params).rowcount

    def script(self, sql: str) -> None:
        self.conn.executescript(sql)

    def columns(self, table):
        return {r["name"] for r in self.execute(f"PRAGMA table_info({table})")}

    @contextmanager
    def transaction(self):
        with self.conn:
            yield self

    def close(self):
        self.conn.close()


def sqlite_uri(path: Path, mode: str) -> str:
    """A `file:` URI for SQLite with the path percent-quoted (`#`, `?` and `%` are URI syntax)."""
    from urllib.parse import quote

    return f"file:{quote(str(Path(path).absolute()), safe='/')}?mode={mode}"


class PostgresConnection(Connection):
    dialect = "postgresql"

    def __init__(self, url: str, readonly: bool):
        try:
            import psycopg
            from psycopg.rows import dict_row
        except ImportError:
            raise StoreError("A PostgreSQL store needs psycopg 3: pip install 'cpu-inference-workbench[fleet]'.") from None
        self.errors = (psycopg.Error,)
        # autocommit: reads never leave a transaction open; writes open one explicitly.
        self.conn = psycopg.connect(url, autocommit=True, row_factory=dict_row, connect_timeout=10)
        self.conn.read_only = readonly

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("%", "%%").replace("?", "%s")

    def execute(self, sql, params=()):
        cur = self.conn.execute(self._sql(sql), params)
        return list(cur.fetchall()) if cur.description else []

    def execute_count(self, sql, params=()):
        return self.conn.execute(self._sql(sql), params).rowcount

    def script(self, sql: str) -> None:
        sql = sql.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
        with self.conn.transaction():
            # Coordinators opening a new database at once would race in CREATE TABLE IF NOT EXISTS
            # (a duplicate key in PostgreSQL's catalog): one creates, the others wait and find it done.
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            for stmt in filter(str.strip, sql.split(";")):
                self.conn.execute(stmt)

    def columns(self, table):
        rows = self.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?", (table,))
        return {r["column_name"] for r in rows}

    def prepare_writes(self) -> None:
        pass

    def tables(self) -> set[str]:
        rows = self.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
        return {r["table_name"] for r in rows}

    def application_id(self) -> int:
        return 0

    def set_application_id(self, value: int) -> None:
        pass

    @contextmanager
    def transaction(self):
        with self.conn.transaction():
            yield self

    def close(self):
        self.conn.close()


def connect(target, readonly: bool) -> tuple[Connection, str]:
    """A connection to a database file or URL, and how to name it in messages."""
    from wb_core.paths import given_path

    given_path(target, "The results database")  # an int or a list is a sentence, not pathlib's TypeError
    if is_url(target):
        url = normalise_url(target)
        try:
            return PostgresConnection(url, readonly), redact(url)
        except StoreError:
            raise
        except Exception as e:  # psycopg.OperationalError and friends: one clear sentence
            raise StoreError(f"Cannot open results database '{redact(url)}': {str(e).strip()}.") from None
    from wb_core.streams import refuse_special

    path = Path(target)
    refuse_special(path, "Results database", StoreError)
    if path.is_dir():
        raise StoreError(f"Results database '{path}' is a folder; give a file, such as {path / 'wb.db'}.")
    if readonly and not path.exists():
        raise StoreError(f"Results database '{path}' does not exist.")
    if not readonly and path.parent and not path.parent.exists():
        raise StoreError(f"The folder for results database '{path}' does not exist.")
    try:
        return SQLiteConnection(path, readonly), str(path)
    except sqlite3.DatabaseError as e:
        raise StoreError(f"Cannot open results database '{path}': {e}.") from None
