"""A PostgreSQL connection shaped like the ``sqlite3`` connection the shared writers speak to.

The writers, readers and projections of ``storage/ledger`` are plain DB-API code over
``conn.execute(sql, params)``; the validation they run is engine-free. So the PostgreSQL engine
keeps every one of them and changes only what is SQLite's own:

- placeholders: ``?`` becomes ``%s`` (and a literal ``%`` is doubled), once per statement text;
- four spellings: ``GLOB 'toolop_*'`` becomes ``starts_with(...)``, ``INSERT OR REPLACE INTO
  tool_processes`` an ``ON CONFLICT ... DO UPDATE``, a plain ``BEGIN`` (a reader's snapshot) a
  ``REPEATABLE READ READ ONLY`` transaction, the probe of ``sqlite_master`` for a table one of
  ``information_schema.tables``;
- parameters: a Python ``bool`` is sent as 0/1 (the columns are integers, as in SQLite);
- errors: a psycopg error leaves as the ``sqlite3`` exception of the same family (a constraint as
  ``IntegrityError``, everything else as ``OperationalError`` whose text the one translation point,
  ``translate_sqlite_error``, maps to the same ``StoreCode`` a SQLite failure of that kind gets),
  so the store's error handling is one code path for both engines.

psycopg is imported here and nowhere on the default (SQLite) path: ``open_store`` imports this
module only when ``MAKA_DATABASE_URL`` names a PostgreSQL server.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

RECONNECT_BACKOFF_S = (0.1, 0.2, 0.4, 0.8, 1.6)
"""Waits between attempts to reopen a lost connection: about 3 s in all, then the caller's
call answers ``store_io_failed`` (and the next one tries again)."""


_GLOB_TOOL = re.compile(r"(\w+) (NOT )?GLOB 'toolop_\*'")
_TOOL_PROCESS_UPSERT = "INSERT OR REPLACE INTO tool_processes"
_SQLITE_TABLE_PROBE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
_TABLE_PROBE = (
    "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema()"
    " AND table_name = ?"
)


class PostgresIntegrityError(sqlite3.IntegrityError):
    """A PostgreSQL constraint refused a row (unique, foreign key, check)."""


class PostgresOperationalError(sqlite3.OperationalError):
    """Any other PostgreSQL failure; the text decides its ``StoreCode``."""


@lru_cache(maxsize=512)
def translate_sql(sql: str) -> str:
    """The PostgreSQL spelling of one of the store's statements (cached per text)."""
    sql = sql.replace(_SQLITE_TABLE_PROBE, _TABLE_PROBE)
    text = _GLOB_TOOL.sub(
        lambda match: f"{'NOT ' if match.group(2) else ''}starts_with({match.group(1)}, 'toolop_')",
        sql,
    )
    upsert = text.lstrip().startswith(_TOOL_PROCESS_UPSERT)
    if upsert:
        text = text.replace(_TOOL_PROCESS_UPSERT, "INSERT INTO tool_processes", 1)
    out: list[str] = []
    quoted = False
    for char in text:
        if char == "'":
            quoted = not quoted
            out.append(char)
        elif char == "%":
            out.append("%%")
        elif char == "?" and not quoted:
            out.append("%s")
        else:
            out.append(char)
    result = "".join(out)
    if upsert:
        result += _tool_process_conflict_clause()
    return result


@lru_cache(maxsize=1)
def _tool_process_conflict_clause() -> str:
    from storage.ledger.tool_process_store import COLUMN_NAMES

    keys = ("operation_id", "pid")
    updates = ", ".join(f"{name} = EXCLUDED.{name}" for name in COLUMN_NAMES if name not in keys)
    return f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"


def _params(params: Sequence[Any] | None) -> tuple[Any, ...]:
    if not params:
        return ()
    return tuple(int(value) if isinstance(value, bool) else value for value in params)


# SQLite's primary result codes the translation reads (https://sqlite.org/rescode.html).
_BUSY, _READONLY, _IOERR, _FULL = 5, 8, 10, 13


def as_sqlite_error(error: psycopg.Error) -> sqlite3.Error:
    """The ``sqlite3`` exception a PostgreSQL error leaves the adapter as (see the module), with
    the SQLite result code of its kind."""
    text = str(error).strip() or type(error).__name__
    if isinstance(error, pg_errors.IntegrityError):
        return PostgresIntegrityError(f"PostgreSQL constraint: {text}")
    if isinstance(
        error,
        pg_errors.LockNotAvailable
        | pg_errors.DeadlockDetected
        | pg_errors.SerializationFailure
        | pg_errors.QueryCanceled,
    ):
        code, message = _BUSY, f"database is locked (PostgreSQL: {text})"
    elif isinstance(error, pg_errors.ReadOnlySqlTransaction):
        code, message = _READONLY, f"the PostgreSQL session is read-only: {text}"
    elif isinstance(error, pg_errors.DiskFull):
        code, message = _FULL, f"the PostgreSQL server's disk is full: {text}"
    else:
        code, message = _IOERR, f"PostgreSQL: {text}"
    translated = PostgresOperationalError(message)
    translated.sqlite_errorcode = code
    return translated


class PostgresCursor:
    """The part of ``sqlite3.Cursor`` the store uses."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PostgresCursor:
        try:
            self._cursor.execute(translate_sql(sql), _params(params), prepare=None)
        except psycopg.Error as error:
            raise as_sqlite_error(error) from error
        return self

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> PostgresCursor:
        try:
            self._cursor.executemany(translate_sql(sql), [_params(row) for row in rows])
        except psycopg.Error as error:
            raise as_sqlite_error(error) from error
        return self

    def fetchone(self) -> Any:
        if self._cursor.description is None:
            return None
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        if self._cursor.description is None:
            return []
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def close(self) -> None:
        self._cursor.close()


class PostgresConnection:
    """The part of ``sqlite3.Connection`` the store uses, over one psycopg connection in
    autocommit mode (every transaction is an explicit ``BEGIN`` ... ``COMMIT``)."""

    def __init__(self, raw: psycopg.Connection[Any], url: str, *, read_only: bool) -> None:
        self.raw = raw
        self._url = url
        self._read_only = read_only

    @property
    def lost(self) -> bool:
        """The server or the network dropped the connection."""
        return self.raw.closed or self.raw.broken

    def reconnect(self, backoff_s: Sequence[float] = RECONNECT_BACKOFF_S) -> None:
        """Open a fresh connection in place of a lost one (no transaction was open on it),
        trying again after each of ``backoff_s`` (a server restarting, a network coming back);
        the last failure is raised."""
        with suppress(psycopg.Error):
            self.raw.close()
        for delay in backoff_s:
            try:
                self.raw = _raw_connection(self._url, read_only=self._read_only)
                return
            except sqlite3.Error:
                time.sleep(delay)
        self.raw = _raw_connection(self._url, read_only=self._read_only)

    def cursor(self) -> PostgresCursor:
        """A cursor; a connection already closed (the server ended it) is the same
        ``sqlite3``-family error as a failed statement, so every caller's handling applies."""
        try:
            return PostgresCursor(self.raw.cursor())
        except psycopg.Error as error:
            raise as_sqlite_error(error) from error

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PostgresCursor:
        stripped = sql.strip().upper()
        if stripped in ("BEGIN", "BEGIN DEFERRED"):
            sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        elif stripped == "BEGIN IMMEDIATE":
            sql = "BEGIN ISOLATION LEVEL READ COMMITTED"
        return self.cursor().execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> PostgresCursor:
        return self.cursor().executemany(sql, rows)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def close(self) -> None:
        self.raw.close()


def _raw_connection(url: str, *, read_only: bool) -> psycopg.Connection[Any]:
    options = "-c synchronous_commit=on -c TimeZone=UTC"
    if read_only:
        options += " -c default_transaction_read_only=on"
    try:
        # The URL's own ``options`` (a ``search_path``, say) are kept, ours added after them.
        given = str(conninfo_to_dict(url).get("options") or "")
        options = f"{given} {options}".strip()
        return psycopg.connect(url, autocommit=True, options=options, connect_timeout=10)
    except psycopg.Error as error:
        raise as_sqlite_error(error) from error


def connect(url: str, *, read_only: bool = False) -> PostgresConnection:
    """A connection to the ledger's database: autocommit (explicit transactions), UTC,
    ``synchronous_commit = on``; read-only when asked (the server refuses every write)."""
    return PostgresConnection(_raw_connection(url, read_only=read_only), url, read_only=read_only)
