"""``PostgresLedgerStore``: the ledger on a PostgreSQL server, sessions leased to one host.

The store keeps every writer, reader and validation of the SQLite store (``ledger_store.py``:
the narrow writers, ``event_writer``'s checks in their order, the per-run scanner, the exact-retry
rule) and changes only what is the engine's: the connection (``postgres_connection``), the schema
(``postgres_schema``), and the write transaction:

- ``READ COMMITTED``; locks are taken in one order, session lease then run, so two hosts never
  deadlock: the first statement of a write on a session reads its lease ``FOR SHARE`` and refuses
  with ``session_lease_lost`` unless the epoch and owner are this store's (a T1 and an admission
  also need ``expires_at > now() + margin``: a side effect needs runway); then the run's row is
  locked ``FOR UPDATE`` and its ``next_seq`` read;
- ``event_seq`` is computed from ``runs.next_seq`` under that lock and written back before
  ``COMMIT``: gap-free, as a rollback leaves the column as it was;
- the per-run state cache is checked against ``next_seq`` under the lock (another host's write
  moves it) instead of SQLite's ``data_version``.

A lease is taken with ``take_session_lease`` (creating a session takes it too): the epoch goes up
by one, so once a takeover commits, no write of the older epoch can (``FOR SHARE`` conflicts with
the takeover's ``UPDATE``). ``renew_session_leases`` extends every held lease in one statement and
names those that were lost (``session_lease_heartbeat`` calls it every ttl/3). All lease times are
the database's clock.

A COMMIT that fails on the network may have committed: the writer reports ``store_io_failed``, and
a blind retry of the same facts is safe (the same id and bytes answer ``created=False``).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext, suppress
from pathlib import Path
from typing import NamedTuple, TypeVar, cast

from runtime.ledger.codes import StoreCode
from runtime.ledger.continuation_ports import ContinuationClaim
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.process_records import ToolProcessRecord
from runtime.ledger.store_ports import (
    CommitResult,
    RunHeader,
    RunStatus,
    SessionLease,
    SessionRecord,
    StoreRefusal,
)
from runtime.ledger.timeline_events import ToolFact
from runtime.ledger.timeline_lazy import TimelineIndex
from storage.ledger import run_header_store as headers
from storage.ledger import tool_process_store as tool_processes
from storage.ledger.event_writer import (
    LedgerTransaction,
    append_generic,
    check_generic,
    prepare_candidate,
)
from storage.ledger.postgres_connection import CALL_TIMEOUT_MS, PostgresConnection, connect
from storage.ledger.postgres_diagnose import diagnose_postgres
from storage.ledger.postgres_schema import (
    SCHEMA_VERSION,
    check_tables,
    migrate,
    read_version,
    refuse_foreign,
    refuse_if_newer,
)
from storage.ledger.run_ledger_state import RunLedgerState, RunStateCache
from storage.ledger.session_lease_heartbeat import SessionLeaseHeartbeat
from storage.ledger.sqlite_connection import (
    ConnectionSettings,
    Synchronous,
    sqlite_errors,
    translate_sqlite_error,
)
from storage.ledger.sqlite_store import SqliteLedgerStore
from storage.ledger.store_doctor import DoctorReport
from storage.ledger.timeline_index import timeline_index_of
from storage.sessions import session_admin
from storage.sessions.session_export import ParsedExport
from storage.sessions.session_import import ImportReport

T = TypeVar("T")

LEASE_TTL_MS = 30_000
"""How long a taken or renewed lease lasts (the database's clock)."""
LEASE_RENEW_MS = LEASE_TTL_MS // 3
T1_RUNWAY_MS = 10_000
"""A T1 or an admission needs the lease to last at least this much longer."""


TAKEOVER_GRACE_MS = 2_000
"""A takeover waits this much past a lease's expiry: the dead host's own conservative clock
(last renewal + ttl - runway) ran out well before."""
LEASE_TTL_ENV = "MAKA_SESSION_LEASE_TTL_MS"
LEASE_RUNWAY_ENV = "MAKA_SESSION_LEASE_RUNWAY_MS"
TAKEOVER_GRACE_ENV = "MAKA_SESSION_TAKEOVER_GRACE_MS"
CALL_TIMEOUT_ENV = "MAKA_DATABASE_CALL_TIMEOUT_MS"


class LeaseSettings(NamedTuple):
    ttl_ms: int = LEASE_TTL_MS
    runway_ms: int = T1_RUNWAY_MS
    grace_ms: int = TAKEOVER_GRACE_MS
    call_timeout_ms: int = CALL_TIMEOUT_MS
    """The longest one statement waits for the server (``MAKA_DATABASE_CALL_TIMEOUT_MS``)."""

    def call_bound_ms(self) -> int:
        """The deadline of one call: ``call_timeout_ms``, never longer than the runway (a call
        stuck longer would outlast the margin a T1 keeps before the lease may run out)."""
        if self.runway_ms > 0:
            return max(1, min(self.call_timeout_ms, self.runway_ms))
        return max(1, self.call_timeout_ms)

    def server_timeout_ms(self) -> int:
        """What the server allows a statement, or a transaction left idle, of this store: the
        host's own clock gives up after ttl - runway, and a silent client's row locks must free
        up before another host could take a session over (ttl + grace). At least a second and
        never less than the call bound (the client gives up first)."""
        return max(1000, self.call_bound_ms() + 500, self.ttl_ms - self.runway_ms)


def lease_settings_from_env(environ: Mapping[str, str] | None = None) -> LeaseSettings:
    """The lease numbers, from ``MAKA_SESSION_LEASE_TTL_MS``, ``MAKA_SESSION_LEASE_RUNWAY_MS`` and
    ``MAKA_SESSION_TAKEOVER_GRACE_MS`` when set (short leases for tests and drills), and the call
    deadline from ``MAKA_DATABASE_CALL_TIMEOUT_MS``. A value that is not a whole number of
    milliseconds, a zero call deadline, or a runway not shorter than the ttl, is refused
    (``store_io_failed``) before anything is opened."""
    env = os.environ if environ is None else environ
    defaults = LeaseSettings()
    values: list[int] = []
    for name, default in (
        (LEASE_TTL_ENV, defaults.ttl_ms),
        (LEASE_RUNWAY_ENV, defaults.runway_ms),
        (TAKEOVER_GRACE_ENV, defaults.grace_ms),
        (CALL_TIMEOUT_ENV, defaults.call_timeout_ms),
    ):
        raw = env.get(name, "").strip()
        if not raw:
            values.append(default)
            continue
        if not raw.isdigit():
            raise StoreRefusal(
                StoreCode.STORE_IO_FAILED, f"{name} must be a whole number of milliseconds"
            )
        values.append(int(raw))
    settings = LeaseSettings(*values)
    if settings.call_timeout_ms <= 0:
        raise StoreRefusal(
            StoreCode.STORE_IO_FAILED,
            f"{CALL_TIMEOUT_ENV} must be a positive number of milliseconds",
        )
    if settings.ttl_ms <= 0 or settings.runway_ms >= settings.ttl_ms:
        raise StoreRefusal(
            StoreCode.STORE_IO_FAILED,
            f"{LEASE_RUNWAY_ENV} ({settings.runway_ms}) must be shorter than "
            f"{LEASE_TTL_ENV} ({settings.ttl_ms}), which must be positive",
        )
    return settings


def host_owner() -> str:
    """This store's owner name in ``session_leases``: the machine, the process and a nonce (two
    stores of one process are two owners)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _lease_lost(session_id: str, why: str) -> StoreRefusal:
    return StoreRefusal(
        StoreCode.SESSION_LEASE_LOST,
        f"this Maka process does not hold the lease of session {session_id} ({why}); nothing "
        "was committed",
    )


def _holder_words(conn: sqlite3.Connection, session_id: str) -> str:
    """Who holds the live lease another host's write ran into, and for how long yet: a
    running host renews the leases it holds, so the way on is that host's data folder, or
    stopping it (its lease then runs out)."""
    row = conn.execute(
        "SELECT owner, ceil(extract(epoch FROM expires_at - now()))::bigint"
        " FROM session_leases WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    if row is None or row[0] is None:
        return "another host holds a live lease"
    return (
        f"host {row[0]} holds a live lease, running out in {max(int(row[1]), 0)} s unless it "
        "renews it, as a running host or a maka command running a turn does; use that host's "
        "data folder or wait for that command to end, or stop it"
    )


def _lost_words(conn: sqlite3.Connection, session_id: str) -> str:
    """Why a host that lost a session's lease (taken over, or missing from a renewal: it was
    stopped or cut off past it) still may not write to it: another host holds it now (named),
    or nobody does, and a lost session is never taken back by a write (a turn of this host
    stopped at the loss must not go on): restarting this host takes it back cleanly."""
    row = conn.execute(
        "SELECT owner IS NOT NULL AND expires_at > now() FROM session_leases WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    if row is not None and row[0]:
        return f"it lost the lease earlier, and {_holder_words(conn, session_id)}"
    return (
        "it lost the lease earlier (it was stopped or cut off past the lease) and never takes a "
        "lost session back by itself, so that a turn it had running cannot go on; no host holds "
        "it now: restart this process (maka host or the desktop; a command: run it again) to "
        "carry on with it here, or use another host's data folder"
    )


class _LeaseFence:
    """The leases this store holds and the check every write transaction runs first.

    A session this store never held a lease on is acquired by its first write, in that write's
    transaction, when the lease is free or expired (a command continuing an existing session);
    one it held and lost (taken over, or missing from a renewal) is never taken back that way:
    only an explicit ``take_session_lease`` does."""

    def __init__(self, owner: str, settings: LeaseSettings) -> None:
        self.owner = owner
        self.settings = settings
        self.held: dict[str, int] = {}
        self.lost: set[str] = set()
        # Acquired by the open transaction; held once it commits.
        self.pending: dict[str, int] = {}
        self.fenced: set[str] = set()
        self.need_runway = False

    def acquire(self, conn: sqlite3.Connection, session_id: str) -> SessionLease:
        """Take the lease (free, expired or already this owner's): the epoch goes up by one."""
        row = conn.execute(
            "INSERT INTO session_leases AS lease (session_id, epoch, owner, expires_at,"
            " acquired_at) VALUES (?, 1, ?, now() + make_interval(secs => ?), now())"
            " ON CONFLICT (session_id) DO UPDATE SET epoch = lease.epoch + 1,"
            " owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, acquired_at = now()"
            " WHERE lease.owner IS NULL OR lease.expires_at < now()"
            " OR lease.owner = EXCLUDED.owner"
            " RETURNING epoch, (extract(epoch FROM expires_at) * 1000)::bigint",
            (session_id, self.owner, self.settings.ttl_ms / 1000),
        ).fetchone()
        if row is None:
            raise _lease_lost(session_id, _holder_words(conn, session_id))
        return SessionLease(session_id, int(row[0]), self.owner, int(row[1]))

    def check(self, conn: sqlite3.Connection, session_id: str) -> None:
        if session_id in self.fenced:
            return
        epoch = self.held.get(session_id, self.pending.get(session_id))
        if epoch is None:
            if headers.read_session(conn, session_id) is None:
                raise StoreRefusal(StoreCode.SESSION_NOT_FOUND, f"session {session_id} not found")
            if session_id in self.lost:
                raise _lease_lost(session_id, _lost_words(conn, session_id))
            epoch = self.acquire(conn, session_id).epoch
            self.pending[session_id] = epoch
        row = conn.execute(
            "SELECT epoch, owner, expires_at > now() + make_interval(secs => ?)"
            " FROM session_leases WHERE session_id = ? FOR SHARE",
            (self.settings.runway_ms / 1000 if self.need_runway else 0.0, session_id),
        ).fetchone()
        if row is None:
            raise _lease_lost(session_id, "the session has no lease")
        if int(row[0]) != epoch or row[1] != self.owner:
            raise _lease_lost(
                session_id, f"another host took it over: epoch {row[0]}, held {epoch}"
            )
        if self.need_runway and not row[2]:
            raise _lease_lost(session_id, "the lease runs out before a tool could finish")
        self.fenced.add(session_id)


class PostgresRunStateCache(RunStateCache):
    """``RunStateCache`` kept true by the run's row lock: every run a transaction touches is
    fenced (its session's lease), locked ``FOR UPDATE`` and its ``next_seq`` compared with the
    cached one; ``next_seq_updates`` names what to write back before ``COMMIT``."""

    def __init__(self, fence: _LeaseFence) -> None:
        super().__init__()
        self._fence = fence
        self._locked: dict[str, int] = {}

    def begin(self, conn: sqlite3.Connection | sqlite3.Cursor) -> None:
        del conn
        self._touched.clear()
        self._locked.clear()
        self._fence.fenced.clear()
        self._fence.pending.clear()

    def committed(self) -> None:
        super().committed()
        self._locked.clear()
        self._fence.held.update(self._fence.pending)
        self._fence.pending.clear()

    def abandon(self) -> None:
        for run_id in self._locked:
            self._entries.pop(run_id, None)
        super().abandon()
        self._locked.clear()
        self._fence.pending.clear()

    def state(self, conn: sqlite3.Connection, run_id: str) -> RunLedgerState:
        if run_id not in self._locked:
            row = conn.execute("SELECT session_id FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                self._entries.pop(run_id, None)
                return super().state(conn, run_id)  # run_not_found
            self._fence.check(conn, str(row[0]))
            locked = conn.execute(
                "SELECT next_seq FROM runs WHERE run_id = ? FOR UPDATE", (run_id,)
            ).fetchone()
            next_seq = int(locked[0])
            cached = self._entries.get(run_id)
            if cached is not None and cached.next_seq != next_seq:
                self._entries.pop(run_id)  # another host wrote to the run: load it again
            self._locked[run_id] = next_seq
            fresh = run_id not in self._entries
            state = super().state(conn, run_id)
            if fresh:
                state.next_seq = next_seq
            return state
        return super().state(conn, run_id)

    def next_seq_updates(self) -> list[tuple[int, str]]:
        updates = []
        for run_id, before in self._locked.items():
            entry = self._entries.get(run_id)
            if entry is not None and entry.next_seq != before:
                updates.append((entry.next_seq, run_id))
        return updates


class PostgresLedgerStore(SqliteLedgerStore):
    """The ledger store on PostgreSQL (implements ``LedgerStore`` and ``SessionLeaseStore``).
    Create it with ``open_postgres_store``."""

    def __init__(
        self,
        conn: PostgresConnection,
        url: str,
        *,
        read_only: bool,
        clock: Callable[[], int] | None = None,
        owner: str | None = None,
        lease_settings: LeaseSettings | None = None,
    ) -> None:
        super().__init__(
            cast(sqlite3.Connection, conn), Path(os.devnull), read_only=read_only, clock=clock
        )
        self.url = url
        self._pg = conn
        self._fence = _LeaseFence(owner or host_owner(), lease_settings or LeaseSettings())
        self._cache = PostgresRunStateCache(self._fence)
        self._heartbeat: SessionLeaseHeartbeat | None = None
        self._runway_lost: Callable[[], None] | None = None
        self._started: dict[tuple[str, int], ToolProcessRecord] = {}
        self._started_lock = threading.Lock()
        self._started_epoch: int | None = None

    @property
    def owner(self) -> str:
        return self._fence.owner

    # ---- plumbing -----------------------------------------------------------------------------

    def start_lease_heartbeat(self) -> None:
        """Renew this store's leases every ttl/3 on a thread of its own until ``close``
        (``open_postgres_store`` starts it for a writer). Lost sessions stay refused."""
        if self._heartbeat is None and not self.read_only:
            settings = self._fence.settings
            self._heartbeat = SessionLeaseHeartbeat(
                self,
                ttl_s=settings.ttl_ms / 1000,
                margin_s=settings.runway_ms / 1000,
                on_lost=_ignore_lost,
            )
            self._heartbeat.on_expired = self._runway_lost
            self._heartbeat.start()

    def close(self) -> None:
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()  # before the lock: a beat may be waiting for it
        with self._lock:
            if not self._closed:
                if not self.read_only:
                    with suppress(StoreRefusal):  # another host may take them at once
                        self._release_all()
                self._closed = True
                self._cache.clear()
                self._pg.close()

    def _write(self, *, assume_new: bool = False) -> _PostgresWriteScope:  # type: ignore[override]
        return _PostgresWriteScope(self, assume_new)

    def _lease_write(self) -> _PostgresWriteScope:
        """A transaction that writes only leases: it records no commit time (the store's clock
        is not read, so a heartbeat never moves the times of the facts)."""
        return _PostgresWriteScope(self, False, timed=False)

    def _bulk_cache(self) -> AbstractContextManager[None]:
        return nullcontext()

    def _ensure_connected(self) -> None:
        """Before a transaction (the lock held): a connection the server or the network dropped
        is replaced, and the run-state cache forgotten (what it knew may be stale). The call that
        met the loss answered ``store_io_failed``; if that was a COMMIT, the write may have
        committed, and retrying the same facts answers ``created=False``."""
        if self._pg.lost:
            with sqlite_errors():
                self._pg.reconnect()
            self._cursor = cast(sqlite3.Cursor, self._pg.cursor())
            self._cache.clear()

    def _read(self, action: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if not self._closed:
                self._ensure_connected()
            return super()._read(action)

    def schema_version(self) -> int:
        return self._read(lambda conn: read_version(cast(PostgresConnection, conn)))

    def journal_mode(self) -> str:
        return "postgresql"

    def connection_settings(self) -> ConnectionSettings:
        def action(conn: sqlite3.Connection) -> ConnectionSettings:
            sync = str(conn.execute("SHOW synchronous_commit").fetchone()[0])
            read_only = str(conn.execute("SHOW default_transaction_read_only").fetchone()[0])
            return ConnectionSettings(
                journal_mode="postgresql",
                synchronous=Synchronous.FULL if sync == "on" else Synchronous.OFF,
                foreign_keys=True,
                busy_timeout_ms=0,
                cache_size=0,
                query_only=read_only == "on",
                user_version=read_version(cast(PostgresConnection, conn)),
            )

        return self._read(action)

    def set_synchronous(self, mode: Synchronous) -> None:
        """``synchronous_commit``: ``on`` for FULL and EXTRA (the product's), ``off`` below."""
        value = "on" if Synchronous(mode) in (Synchronous.FULL, Synchronous.EXTRA) else "off"
        with self._lock, sqlite_errors():
            self._check_open()
            self._conn.execute(f"SET synchronous_commit = {value}")

    def read_run_timeline_index(self, run_id: str) -> TimelineIndex:
        """The timeline's index made from the run's events in Python (the SQLite store's query
        uses ``json_extract``, which PostgreSQL does not have)."""
        return timeline_index_of(self.read_run_events(run_id))

    def read_run_tool_facts(self, run_id: str, high_water: int) -> Mapping[int, ToolFact] | None:
        """None: no reading in SQL here (``json_extract`` again); the timeline's first filter
        makes the rows from their events."""
        return None

    def list_tool_processes(
        self, *, session_id: str | None = None, operation_id: str | None = None
    ) -> Sequence[ToolProcessRecord]:
        with self._lock:
            if not self._closed and self._pg.in_transaction:
                with sqlite_errors():
                    return tool_processes.select(self._conn, session_id, operation_id)
        return self._read(lambda conn: tool_processes.select(conn, session_id, operation_id))

    # ---- session leases -----------------------------------------------------------------------

    def take_session_lease(self, session_id: str) -> SessionLease:
        """Acquire the session's lease, or take it over once it expired: the epoch goes up by
        one. ``session_lease_lost`` while another owner's lease is live."""
        with self._lease_write() as tx:
            lease = self._fence.acquire(tx.conn, session_id)
        self._fence.held[session_id] = lease.epoch
        self._fence.lost.discard(session_id)
        self._cache.clear()  # whatever another owner wrote meanwhile is read again
        return lease

    def renew_session_leases(self) -> Sequence[str]:
        """Extend every held lease by the ttl in one statement; returns the sessions whose lease
        was lost (taken over), which this store stops writing to at once. The store's lock is
        waited for no longer than one call's deadline (a turn's call stuck on a silent network
        holds it): then this renewal fails (``store_io_failed``) and the next beat tries again."""
        if not self._lock.acquire(timeout=self._fence.settings.call_bound_ms() / 1000):
            raise StoreRefusal(
                StoreCode.STORE_IO_FAILED,
                "the session leases were not renewed: the store stayed busy past the call deadline",
            )
        try:
            return self._renew_locked()
        finally:
            self._lock.release()

    last_renewal_empty = False
    """The last renewal held no lease, so it asked the server nothing (the heartbeat does not
    say the leases were "renewed again" then)."""

    def _renew_locked(self) -> Sequence[str]:
        held = dict(self._fence.held)
        self.last_renewal_empty = not held
        if not held:
            return []
        with self._lease_write() as tx:
            rows = tx.conn.execute(
                "UPDATE session_leases AS lease"
                " SET expires_at = now() + make_interval(secs => ?)"
                " FROM unnest(?::text[], ?::bigint[]) AS held (session_id, epoch)"
                " WHERE lease.session_id = held.session_id AND lease.epoch = held.epoch"
                " AND lease.owner = ? RETURNING lease.session_id",
                (
                    self._fence.settings.ttl_ms / 1000,
                    list(held),
                    list(held.values()),
                    self._fence.owner,
                ),
            ).fetchall()
        kept = {str(row[0]) for row in rows}
        lost = sorted(set(held) - kept)
        for session_id in lost:
            self._fence.held.pop(session_id, None)
            self._fence.lost.add(session_id)
        return lost

    def claim_expired_sessions(self, limit: int = 20) -> list[SessionLease]:
        """Takeover (docs/design/hosts.md section 2): take the leases of sessions that have an
        unfinished run and whose lease ran out more than the grace ago (its host stopped
        renewing: dead, stopped or cut off) or was given up, at most ``limit`` of them, in one
        transaction. Candidates are locked ``FOR UPDATE SKIP LOCKED``: two hosts sweeping at once
        claim disjoint sessions, and a lease a writer is still checking (``FOR SHARE``) is left
        for the next sweep. Each epoch goes up by one, so no write of the older epoch can commit
        from now on. A lease this store holds itself is never claimed."""
        settings = self._fence.settings
        with self._lock:
            with self._lease_write() as tx:
                rows = tx.conn.execute(
                    "WITH due AS (SELECT lease.session_id FROM session_leases AS lease"
                    " WHERE (lease.owner IS NULL"
                    " OR lease.expires_at < now() - make_interval(secs => ?))"
                    " AND lease.owner IS DISTINCT FROM ?"
                    " AND EXISTS (SELECT 1 FROM runs WHERE runs.session_id = lease.session_id"
                    " AND runs.status IN ('created', 'running'))"
                    " ORDER BY lease.expires_at, lease.session_id LIMIT ?"
                    " FOR UPDATE OF lease SKIP LOCKED)"
                    " UPDATE session_leases AS lease SET epoch = lease.epoch + 1, owner = ?,"
                    " expires_at = now() + make_interval(secs => ?), acquired_at = now()"
                    " FROM due WHERE lease.session_id = due.session_id"
                    " RETURNING lease.session_id, lease.epoch,"
                    " (extract(epoch FROM lease.expires_at) * 1000)::bigint",
                    (
                        settings.grace_ms / 1000,
                        self._fence.owner,
                        limit,
                        self._fence.owner,
                        settings.ttl_ms / 1000,
                    ),
                ).fetchall()
            claimed = sorted(
                (
                    SessionLease(str(row[0]), int(row[1]), self._fence.owner, int(row[2]))
                    for row in rows
                ),
                key=lambda lease: lease.session_id,
            )
            for lease in claimed:
                self._fence.held[lease.session_id] = lease.epoch
                self._fence.lost.discard(lease.session_id)
            if claimed:
                self._cache.clear()  # the dead owner's last writes are read again
            return claimed

    def lease_settings(self) -> LeaseSettings:
        return self._fence.settings

    def takeover_interval_s(self) -> float:
        """How often a host sweeps for expired leases: as often as it renews (ttl/3)."""
        return self._fence.settings.ttl_ms / 3000

    def on_runway_lost(self, callback: Callable[[], None]) -> None:
        """``callback`` runs (on the heartbeat's thread) once this host's own conservative clock
        says its leases may run out: it could not renew for ttl - runway. The host ends its tool
        processes there, before any other host may take a session over (ttl + grace)."""
        self._runway_lost = callback
        if self._heartbeat is not None:
            self._heartbeat.on_expired = callback

    def runway_deadline(self) -> float | None:
        """``time.monotonic()`` past which this host must not start or keep running a tool
        (the last successful renewal + ttl - runway); None without a heartbeat."""
        heartbeat = self._heartbeat
        return heartbeat.runway_deadline if heartbeat is not None else None

    def _refuse_without_own_runway(self, *, renew: bool = False) -> None:
        """A T1 or an admission needs runway on this host's own clock too: past the last
        successful renewal + ttl - runway, the server may already have let the lease go. With
        ``renew`` (only where the store's lock is not held), one renewal is tried first, as the
        heartbeat's next beat would: after an outage the first write need not wait for that
        beat, and a lease lost meanwhile is found and refused by the renewal itself."""
        heartbeat = self._heartbeat
        if heartbeat is None or time.monotonic() <= heartbeat.runway_deadline:
            return
        if renew:
            heartbeat.beat()
        if time.monotonic() > heartbeat.runway_deadline:
            raise StoreRefusal(
                StoreCode.SESSION_LEASE_LOST,
                "this host could not renew its session leases in time (its own clock says the"
                " lease may run out before a tool could finish); nothing was committed",
            )

    def held_session_leases(self) -> dict[str, int]:
        with self._lock:
            return dict(self._fence.held)

    def live_lease_holders(self) -> dict[str, str]:
        """Each session whose lease is held now, with its holder: this store's owner or another
        host's (``machine:pid:nonce``). A lease that ran out less than the takeover grace ago
        still counts: no other host may take the session over yet (``claim_expired_sessions``),
        so nothing here may repair or write its run either."""
        grace = self._fence.settings.grace_ms / 1000

        def read(conn: sqlite3.Connection) -> dict[str, str]:
            rows = conn.execute(
                "SELECT session_id, owner FROM session_leases"
                " WHERE owner IS NOT NULL AND expires_at > now() - make_interval(secs => ?)",
                (grace,),
            ).fetchall()
            return {str(row[0]): str(row[1]) for row in rows}

        return self._read(read)

    def release_session_lease(self, session_id: str) -> None:
        """Give the lease up (another host may take it at once)."""
        with self._lock:
            epoch = self._fence.held.pop(session_id, None)
            if epoch is None:
                return
            with self._lease_write() as tx:
                tx.conn.execute(
                    "UPDATE session_leases SET owner = NULL, expires_at = now()"
                    " WHERE session_id = ? AND epoch = ? AND owner = ?",
                    (session_id, epoch, self._fence.owner),
                )

    def _release_all(self) -> None:
        for session_id in list(self._fence.held):
            self.release_session_lease(session_id)

    # ---- writers that name their session before any run exists --------------------------------

    def create_session(self, session: SessionRecord) -> None:
        """Create the session and take its lease, in one transaction."""
        with self._write() as tx:
            created = headers.insert_session(tx.conn, session)
            lease = self._fence.acquire(tx.conn, session.session_id) if created else None
        if lease is not None:
            self._fence.held[session.session_id] = lease.epoch

    def name_new_session(self, session_id: str, title: str, default_title: str) -> bool:
        with self._write() as tx:
            self._fence.check(tx.conn, session_id)
            return headers.name_new_session(tx.conn, session_id, title, default_title)

    def relocate_session(self, session_id: str, cwd: str) -> None:
        with self._write() as tx:
            self._fence.check(tx.conn, session_id)
            session_admin.relocate_session(tx.conn, session_id, cwd)

    def rename_session(self, session_id: str, title: str) -> None:
        with self._write() as tx:
            self._fence.check(tx.conn, session_id)
            session_admin.rename_session(tx.conn, session_id, title)

    def remove_session(self, session_id: str) -> None:
        """Only the lease's holder removes a session; its lease goes with it."""
        with self._write() as tx:
            self._fence.check(tx.conn, session_id)
            tx.conn.execute("DELETE FROM session_leases WHERE session_id = ?", (session_id,))
            for run_id in session_admin.remove_session(tx.conn, session_id):
                self._cache.forget(run_id)
        self._fence.held.pop(session_id, None)

    def create_run(self, header: RunHeader) -> None:
        with self._write() as tx:
            self._fence.check(tx.conn, header.session_id)
            headers.insert_header(tx.conn, header)

    def start_run(self, header: RunHeader, first_event: RuntimeEvent) -> CommitResult:
        candidate = prepare_candidate(first_event)
        check_generic(candidate)
        with self._write() as tx:
            self._fence.check(tx.conn, header.session_id)
            headers.insert_header(tx.conn, header)
            failpoint(CrashPoint.RUN_START_AFTER_HEADER_INSERT)
            return append_generic(tx, candidate)

    def record_tool_process(self, record: ToolProcessRecord) -> None:
        # Kept here too before the server is asked: the process already runs, and a host that
        # loses its runway ends it from what it knows locally (the server may be unreachable).
        with self._started_lock:
            self._started[(record.operation_id, record.pid)] = record
        with self._write() as tx:
            self._fence.check(tx.conn, record.session_id)
            tool_processes.insert(tx.conn, record)

    def commit_tool_prepared(
        self, call_event: RuntimeEvent | None, dispatch_event: RuntimeEvent
    ) -> CommitResult:
        self._refuse_without_own_runway(renew=True)
        with self._lock, self._runway():
            self._refuse_without_own_runway()  # again: the lock may have been waited for
            return super().commit_tool_prepared(call_event, dispatch_event)

    def admit_continuation(
        self,
        claim: ContinuationClaim,
        target_header: RunHeader,
        start_event: RuntimeEvent,
        *,
        facts: Sequence[RuntimeEvent] = (),
    ) -> None:
        """As on SQLite, after the lease (with runway) and the source run's row lock: two
        admissions from one point queue on the source row, and the second meets the first's
        claim (``continuation_claim_conflict``) rather than a constraint."""
        self._refuse_without_own_runway(renew=True)
        with self._lock, self._runway():
            self._refuse_without_own_runway()  # again: the lock may have been waited for
            with self._write() as tx:
                self._fence.check(tx.conn, claim.session_id)
                tx.conn.execute(
                    "SELECT 1 FROM runs WHERE run_id = ? FOR UPDATE", (claim.source_run_id,)
                )
                from storage.ledger import continuation_claim_store as claims

                claims.admit(tx, claim, target_header, start_event, facts)
                failpoint(CrashPoint.CONTINUATION_ADMISSION_BEFORE_COMMIT, CrashPoint.P11)
            failpoint(CrashPoint.AFTER_CONTINUATION_ADMISSION_COMMITTED)

    def _runway(self) -> _Runway:
        return _Runway(self._fence)

    def _run_orphaned(self, conn: sqlite3.Connection, header: RunHeader) -> bool:
        """On a shared server the owner epoch is every host's, so it says nothing about who
        writes a run. The write asking is fenced by the session's lease (this store holds it),
        so a run no process writes any more is one that ended (startup or takeover recovery
        closed it) or one started under an owner epoch older than the one this store started
        with (a previous holder's, whose lease this store now holds)."""
        del conn
        if header.status not in (RunStatus.CREATED, RunStatus.RUNNING):
            return True
        return self._started_epoch is not None and header.owner_epoch < self._started_epoch

    def bump_owner_epoch(self) -> int:
        epoch = super().bump_owner_epoch()
        self._started_epoch = epoch
        return epoch

    def delete_tool_process(self, operation_id: str, pid: int) -> None:
        """Forget a tool process record, fenced like every other writer: only the holder of its
        session's lease may (``session_lease_lost`` otherwise, nothing deleted); a record that
        is not there is nothing to do. This host forgets it in memory either way (it stopped
        the process, or the process ended)."""
        with self._started_lock:
            self._started.pop((operation_id, pid), None)
        with self._write() as tx:
            row = tx.conn.execute(
                "SELECT session_id FROM tool_processes WHERE operation_id = ? AND pid = ?",
                (operation_id, pid),
            ).fetchone()
            if row is None:
                return
            self._fence.check(tx.conn, str(row[0]))
            tool_processes.delete(tx.conn, operation_id, pid)

    def started_tool_processes(self) -> list[ToolProcessRecord]:
        """The tool processes this store's host started and has not forgotten, from memory
        (no server round trip, and not behind a write stuck on the network)."""
        with self._started_lock:
            return list(self._started.values())

    def import_parsed(self, parsed: ParsedExport, *, bulk: bool = True) -> ImportReport:
        """As on SQLite, all or nothing in one transaction, every event through the per-event
        writers (``bulk`` is SQLite's fast path): the imported session's lease is taken in that
        transaction, by its first run's write."""
        del bulk
        from storage.sessions.session_import import import_parsed

        with self._lock, self._write() as tx:
            return import_parsed(tx, parsed, bulk=False)

    def diagnose(self) -> DoctorReport:
        """The doctor's report (reads only, one snapshot): the schema version against this
        program's, then the SQLite doctor's engine-free checks (``check_ledger``)."""
        return self._read(diagnose_postgres)


class _Runway:
    """Within: the lease checks of this store's writes require runway (T1, admission)."""

    def __init__(self, fence: _LeaseFence) -> None:
        self._fence = fence

    def __enter__(self) -> None:
        self._fence.need_runway = True

    def __exit__(self, *exc: object) -> None:
        self._fence.need_runway = False


class _PostgresWriteScope:
    """One ``READ COMMITTED`` write transaction holding the store's thread lock; writes the
    touched runs' ``next_seq`` back before ``COMMIT``."""

    __slots__ = ("_assume_new", "_store", "_timed")

    def __init__(self, store: PostgresLedgerStore, assume_new: bool, *, timed: bool = True) -> None:
        self._store = store
        self._assume_new = assume_new
        self._timed = timed

    def __enter__(self) -> LedgerTransaction:
        store = self._store
        if store.read_only:
            raise StoreRefusal(StoreCode.STORE_READ_ONLY, "this store was opened read-only")
        store._lock.acquire()
        try:
            store._check_open()
            store._ensure_connected()
            try:
                store._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as error:
                raise translate_sqlite_error(error) from error
            store._cache.begin(store._cursor)
        except BaseException:
            store._lock.release()
            raise
        return LedgerTransaction(
            store._conn,
            store._cache,
            store._clock() if self._timed else 0,
            assume_new=self._assume_new,
            cursor=store._cursor,
        )

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: object
    ) -> None:
        store = self._store
        cache = cast(PostgresRunStateCache, store._cache)
        conn = store._conn
        try:
            if kind is None:
                try:
                    for update in cache.next_seq_updates():
                        conn.execute("UPDATE runs SET next_seq = ? WHERE run_id = ?", update)
                    conn.execute("COMMIT")
                except sqlite3.Error as failure:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    cache.abandon()
                    raise translate_sqlite_error(failure) from failure
                cache.committed()
                return
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            cache.abandon()
            if isinstance(error, sqlite3.Error):
                raise translate_sqlite_error(error) from error
        finally:
            store._lock.release()


def open_postgres_store(
    url: str,
    *,
    read_only: bool = False,
    full_rescan: bool = False,
    clock: Callable[[], int] | None = None,
    owner: str | None = None,
    lease_settings: LeaseSettings | None = None,
    heartbeat: bool = True,
) -> PostgresLedgerStore:
    """Connect to the ledger's PostgreSQL database (a writer creates and migrates its schema and
    renews its session leases on a heartbeat unless ``heartbeat=False``; a reader refuses a
    schema that is missing, older or newer). Without ``lease_settings`` the lease numbers come
    from the environment (``lease_settings_from_env``)."""
    del full_rescan  # the row lock keeps the cache true; there is no rescan mode here
    if lease_settings is None:
        lease_settings = lease_settings_from_env()
    with sqlite_errors():
        conn = connect(
            url,
            read_only=read_only,
            call_timeout_ms=lease_settings.call_bound_ms(),
            server_timeout_ms=lease_settings.server_timeout_ms(),
        )
    try:
        with sqlite_errors():
            if read_only:
                _check_readable(conn)
            else:
                migrate(conn)
    except BaseException:
        conn.close()
        raise
    store = PostgresLedgerStore(
        conn, url, read_only=read_only, clock=clock, owner=owner, lease_settings=lease_settings
    )
    if heartbeat:
        store.start_lease_heartbeat()
    return store


def _ignore_lost(sessions: Sequence[str]) -> None:
    """The heartbeat's report of lost leases: the fence already refuses every write to them."""
    del sessions


def holds_no_ledger(url: str) -> bool:
    """Whether the database at ``url`` holds no Maka schema yet, by a read-only look. False
    when that cannot be told (the server is down, the URL is refused, a foreign table): the
    open that follows says why. A command that only names a session asks first, so that a
    mistyped database name does not get Maka's schema to answer ``session_not_found``."""
    try:
        with sqlite_errors():
            conn = connect(url, read_only=True)
    except (StoreRefusal, OSError):
        return False
    try:
        with sqlite_errors():
            if read_version(conn) != 0:
                return False
            refuse_foreign(conn)
            return True
    except (StoreRefusal, OSError):
        return False
    finally:
        conn.close()


def _check_readable(conn: PostgresConnection) -> None:
    """A reader's open: the ledger exists at this program's schema version."""
    version = read_version(conn)
    refuse_if_newer(version)
    if version == 0:
        refuse_foreign(conn)  # another application's tables: not an empty ledger
        raise StoreRefusal(StoreCode.STORE_NOT_FOUND, "no ledger in that database")
    if version != SCHEMA_VERSION:
        raise StoreRefusal(
            StoreCode.SCHEMA_UPGRADE_REQUIRED,
            f"the ledger's schema {version} needs an upgrade to {SCHEMA_VERSION}",
        )
    check_tables(conn)


def open_postgres_read_connection(url: str) -> sqlite3.Connection:
    """A read-only connection to the ledger's database for the header store's readers
    (``maka sessions``: ``storage/sessions/session_listing.py``), with a reader's checks."""
    settings = lease_settings_from_env()
    with sqlite_errors():
        conn = connect(
            url,
            read_only=True,
            call_timeout_ms=settings.call_bound_ms(),
            server_timeout_ms=settings.server_timeout_ms(),
        )
    try:
        with sqlite_errors():
            _check_readable(conn)
    except BaseException:
        conn.close()
        raise
    return cast(sqlite3.Connection, conn)
