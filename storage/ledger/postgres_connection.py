"""A PostgreSQL connection shaped like the ``sqlite3`` connection the shared writers speak to.

The writers, readers and projections of ``storage/ledger`` are plain DB-API code over
``conn.execute(sql, params)``; the validation they run is engine-free. So the PostgreSQL engine
keeps every one of them and changes only what is SQLite's own:

- placeholders: ``?`` becomes ``%s`` (and a literal ``%`` is doubled), once per statement text;
- four spellings: ``GLOB 'toolop_*'`` becomes ``starts_with(...)``, ``INSERT OR REPLACE INTO
  tool_processes`` an ``ON CONFLICT ... DO UPDATE``, a plain ``BEGIN`` (a reader's snapshot) a
  ``REPEATABLE READ READ ONLY`` transaction, the probe of ``sqlite_master`` for a table one of
  the catalog's ``pg_tables``;
- parameters: a Python ``bool`` is sent as 0/1 (the columns are integers, as in SQLite);
- errors: a psycopg error leaves as the ``sqlite3`` exception of the same family (a constraint as
  ``IntegrityError``, everything else as ``OperationalError`` whose text the one translation point,
  ``translate_sqlite_error``, maps to the same ``StoreCode`` a SQLite failure of that kind gets),
  so the store's error handling is one code path for both engines;
- a deadline on every call: a statement that gets no answer within ``call_timeout_ms`` (a network
  that stopped forwarding: a local proxy or a NAT keeps acknowledging the bytes, so no TCP timer
  ever fires) has its connection abandoned by a watchdog thread (the socket shut down under
  psycopg), and the call fails as an I/O error (``store_io_failed``); the connection is then
  ``lost`` and the store reopens it on a later call. The server is told to drop a transaction
  left idle, or a statement running, longer than ``server_timeout_ms``, so the row locks of a
  client gone silent free up; opening a connection is bounded too (``connect_timeout``, TCP
  keepalives, ``tcp_user_timeout``).

psycopg is imported here and nowhere on the default (SQLite) path: ``open_store`` imports this
module only when ``MAKA_DATABASE_URL`` names a PostgreSQL server.
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

from runtime.ledger.codes import StoreCode
from runtime.ledger.database_url import MASK, url_secrets
from runtime.ledger.store_ports import StoreRefusal

_log = logging.getLogger("maka.store")

RECONNECT_BACKOFF_S = (0.1, 0.2, 0.4, 0.8, 1.6)
"""Waits between attempts to reopen a lost connection: about 3 s in all, then the caller's
call answers ``store_io_failed`` (and the next one tries again)."""

CALL_TIMEOUT_MS = 5_000
"""The longest one statement may wait for the server's answer before its connection is
abandoned (``MAKA_DATABASE_CALL_TIMEOUT_MS``; the store never lets it exceed the lease runway)."""
MIGRATION_CALL_TIMEOUT_MS = 600_000
"""A schema migration's statements (``postgres_schema.migrate``) may take this long."""


_GLOB_TOOL = re.compile(r"(\w+) (NOT )?GLOB 'toolop_\*'")
_TOOL_PROCESS_UPSERT = "INSERT OR REPLACE INTO tool_processes"
_SQLITE_TABLE_PROBE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
# The catalog, not ``information_schema``: the latter hides the tables this database user has
# no rights on, so a ledger it may not read would be taken for none.
_TABLE_PROBE = (
    "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = ?"
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
_BUSY, _READONLY, _IOERR, _FULL, _AUTH = 5, 8, 10, 13, 23


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
    elif isinstance(error, pg_errors.InsufficientPrivilege):
        code, message = _AUTH, f"PostgreSQL: {text}"
    else:
        code, message = _IOERR, f"PostgreSQL: {text}"
    translated = PostgresOperationalError(message)
    translated.sqlite_errorcode = code
    return translated


class _Watchdog:
    """One thread for every connection of the process: a call arms it with its deadline before
    it is sent and disarms it once answered; a call still armed at its deadline has its
    connection abandoned (``PostgresConnection._abandon``). The thread sleeps until the earliest
    deadline, and is woken only when a call arms one earlier than that."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._armed: dict[int, tuple[float, PostgresConnection, psycopg.Connection[Any]]] = {}
        self._fired: set[int] = set()
        self._next = 0
        self._wake_at = math.inf
        self._thread: threading.Thread | None = None

    def arm(self, conn: PostgresConnection, raw: psycopg.Connection[Any], timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._next += 1
            token = self._next
            self._armed[token] = (deadline, conn, raw)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="maka-database-watchdog", daemon=True
                )
                self._thread.start()
            elif deadline < self._wake_at:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """True when the watchdog abandoned the call's connection (the deadline passed)."""
        with self._cond:
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for token, (deadline, conn, raw) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[token]
                        self._fired.add(token)
                        conn._abandon(raw)
                self._wake_at = min((entry[0] for entry in self._armed.values()), default=math.inf)
                self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)


_WATCHDOG = _Watchdog()


def _shut_down_socket(raw: psycopg.Connection[Any]) -> None:
    """Shut the connection's socket down under psycopg (a duplicate of its descriptor, so the
    descriptor psycopg waits on stays its own): the call waiting on it sees the connection end
    at once, and the connection is broken from then on."""
    with suppress(OSError, psycopg.Error, ValueError):
        duplicate = socket.socket(fileno=os.dup(raw.pgconn.socket))
        try:
            duplicate.shutdown(socket.SHUT_RDWR)
        finally:
            duplicate.close()


class PostgresCursor:
    """The part of ``sqlite3.Cursor`` the store uses."""

    __slots__ = ("_cursor", "_owner")

    def __init__(self, cursor: psycopg.Cursor[Any], owner: PostgresConnection) -> None:
        self._cursor = cursor
        self._owner = owner

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PostgresCursor:
        text, values = translate_sql(sql), _params(params)
        self._owner.call(lambda: self._cursor.execute(text, values, prepare=None))
        return self

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> PostgresCursor:
        text, values = translate_sql(sql), [_params(row) for row in rows]
        self._owner.call(lambda: self._cursor.executemany(text, values))
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

    def __init__(
        self,
        raw: psycopg.Connection[Any],
        url: str,
        *,
        read_only: bool,
        call_timeout_ms: int = CALL_TIMEOUT_MS,
        server_timeout_ms: int = 0,
    ) -> None:
        self.raw = raw
        self._url = url
        self._read_only = read_only
        self.call_timeout_ms = call_timeout_ms
        self._server_timeout_ms = server_timeout_ms
        self._abandoned: psycopg.Connection[Any] | None = None
        self.abandoned_calls = 0
        """How many calls got no answer in time (their connection was abandoned)."""

    @property
    def lost(self) -> bool:
        """The server or the network dropped the connection, or a call on it got no answer in
        time and it was abandoned."""
        return self.raw.closed or self.raw.broken or self._abandoned is self.raw

    def call(self, action: Callable[[], object]) -> None:
        """Run one round trip (a statement) under the call deadline: past ``call_timeout_ms``
        without an answer the connection is abandoned and the call fails as an I/O error (the
        ``sqlite3`` family, ``store_io_failed``)."""
        raw = self.raw
        token = _WATCHDOG.arm(self, raw, self.call_timeout_ms / 1000)
        try:
            action()
        except psycopg.Error as error:
            if _WATCHDOG.disarm(token):
                raise self._timed_out() from error
            raise as_sqlite_error(error) from error
        except BaseException:
            _WATCHDOG.disarm(token)
            raise
        # Answered: even if the watchdog fired a moment later, this answer is the server's (the
        # connection is lost for the next call, which reopens it).
        _WATCHDOG.disarm(token)

    @contextmanager
    def longer_calls(self, call_timeout_ms: int) -> Iterator[None]:
        """Within: every call may take up to ``call_timeout_ms`` (a schema migration's
        statements, which may rewrite a large table, or wait for another host's)."""
        before, self.call_timeout_ms = self.call_timeout_ms, call_timeout_ms
        try:
            yield
        finally:
            self.call_timeout_ms = before

    def _timed_out(self) -> sqlite3.Error:
        error = PostgresOperationalError(
            f"PostgreSQL: no answer within {self.call_timeout_ms} ms; the connection was"
            " abandoned (the network or the server stopped answering). If this was a COMMIT,"
            " it may have committed."
        )
        error.sqlite_errorcode = _IOERR
        return error

    def _abandon(self, raw: psycopg.Connection[Any]) -> None:
        """The watchdog's step (its lock held): give the connection up under the waiting call.
        Logged every time: the caller may report only its code (a turn's ``store_io_failed``),
        and an operator looking at a host that stalled wants to see the network went silent."""
        self._abandoned = raw
        self.abandoned_calls += 1
        _log.warning(
            "PostgreSQL: a call got no answer within %d ms; its connection was abandoned (the"
            " network or the server stopped answering)",
            self.call_timeout_ms,
        )
        _shut_down_socket(raw)

    def reconnect(self, backoff_s: Sequence[float] = RECONNECT_BACKOFF_S) -> None:
        """Open a fresh connection in place of a lost one (no transaction was open on it),
        trying again after each of ``backoff_s`` (a server restarting, a network coming back);
        the last failure is raised."""
        with suppress(psycopg.Error):
            self.raw.close()
        # On a silent network every attempt waits its whole ``connect_timeout``: the attempts
        # stop once the backoff's own total has passed, so one call is not held much longer
        # than the backoff (the next call tries again).
        budget = time.monotonic() + sum(backoff_s) + 1.0
        for delay in backoff_s:
            try:
                self.raw = self._open()
                return
            except sqlite3.Error:
                if time.monotonic() + delay > budget:
                    break
                time.sleep(delay)
        self.raw = self._open()

    def _open(self) -> psycopg.Connection[Any]:
        return _raw_connection(
            self._url,
            read_only=self._read_only,
            call_timeout_ms=self.call_timeout_ms,
            server_timeout_ms=self._server_timeout_ms,
        )

    def cursor(self) -> PostgresCursor:
        """A cursor; a connection already closed (the server ended it) is the same
        ``sqlite3``-family error as a failed statement, so every caller's handling applies."""
        try:
            return PostgresCursor(self.raw.cursor(), self)
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


def opening_parameters(
    url: str, *, read_only: bool, call_timeout_ms: int, server_timeout_ms: int
) -> dict[str, Any]:
    """The connection parameters added to the URL's: ours after its ``options`` (a
    ``search_path``, say, is kept); the timeouts of opening only where the URL names none."""
    options = "-c synchronous_commit=on -c TimeZone=UTC"
    if read_only:
        options += " -c default_transaction_read_only=on"
    if server_timeout_ms > 0:
        options += (
            f" -c statement_timeout={server_timeout_ms}"
            f" -c idle_in_transaction_session_timeout={server_timeout_ms}"
        )
    given = conninfo_to_dict(url)
    params: dict[str, Any] = {"options": f"{given.get('options') or ''} {options}".strip()}
    seconds = max(1, math.ceil(call_timeout_ms / 1000))
    defaults: dict[str, Any] = {
        # libpq waits at least 2 s whatever is asked; without it, forever.
        "connect_timeout": max(2, seconds),
        # A peer that stops acknowledging (a real network gone) ends the connection; a local
        # proxy that acknowledges and forwards nothing is the call deadline's to catch.
        "tcp_user_timeout": call_timeout_ms,
        "keepalives": 1,
        "keepalives_idle": seconds,
        "keepalives_interval": 1,
        "keepalives_count": 3,
    }
    for name, value in defaults.items():
        if name not in given:
            params[name] = value
    return params


def _raw_connection(
    url: str, *, read_only: bool, call_timeout_ms: int, server_timeout_ms: int
) -> psycopg.Connection[Any]:
    try:
        params = opening_parameters(
            url,
            read_only=read_only,
            call_timeout_ms=call_timeout_ms,
            server_timeout_ms=server_timeout_ms,
        )
        return psycopg.connect(url, autocommit=True, **params)
    except psycopg.Error as error:
        translated = as_sqlite_error(error)
        # What libpq says of a URL may quote it: no password leaves in a refusal (after user:
        # or in the query, as written or decoded).
        secrets = url_secrets(url)
        if any(secret in str(arg) for secret in secrets for arg in translated.args):
            args = [str(arg) for arg in translated.args]
            for secret in secrets:
                args = [arg.replace(secret, MASK) for arg in args]
            translated.args = tuple(args)
        raise translated from None


def _refuse_without_schema(raw: psycopg.Connection[Any]) -> None:
    """A ``search_path`` (the URL's ``options``) that names no schema of the database: every
    table Maka reads or makes would have nowhere to be. ``maka sessions`` said "no sessions
    yet", then the first run failed with the server's own words about ``CREATE TABLE``."""
    try:
        row = raw.execute("SELECT current_schema(), current_setting('search_path')").fetchone()
    except psycopg.Error as error:
        raw.close()
        raise as_sqlite_error(error) from None
    if row is not None and row[0] is None:
        raw.close()
        raise StoreRefusal(
            StoreCode.DATABASE_URL_INVALID,
            f"the connection's search_path ({str(row[1])[:200]}) names no schema that exists "
            "in that database: create that schema, or name one that does (or none, for "
            "public) in the URL's options",
        )


def connect(
    url: str,
    *,
    read_only: bool = False,
    call_timeout_ms: int = CALL_TIMEOUT_MS,
    server_timeout_ms: int = 0,
) -> PostgresConnection:
    """A connection to the ledger's database: autocommit (explicit transactions), UTC,
    ``synchronous_commit = on``; read-only when asked (the server refuses every write). Every
    call is bounded by ``call_timeout_ms``; ``server_timeout_ms`` (0: the server's own
    settings) bounds, on the server, a statement and a transaction left idle."""
    raw = _raw_connection(
        url,
        read_only=read_only,
        call_timeout_ms=call_timeout_ms,
        server_timeout_ms=server_timeout_ms,
    )
    _refuse_without_schema(raw)
    return PostgresConnection(
        raw,
        url,
        read_only=read_only,
        call_timeout_ms=call_timeout_ms,
        server_timeout_ms=server_timeout_ms,
    )
