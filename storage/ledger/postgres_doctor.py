"""``maka doctor`` against the ledger on PostgreSQL (docs/postgres.md): the schema version, the
session leases and the SQLite doctor's engine-free checks, read-only.

Reported: the server (its URL without a password), the schema version against this program's, how
many sessions and unfinished runs the ledger holds, every lease held now (session, epoch, owner:
the host's machine, pid and nonce, and how long it still lasts by the server's clock), and every
lease that ran out or was given up, marking those whose session has an unfinished run: a running
``maka host`` takes them over on its next sweep.

``PostgresLedgerStore.diagnose`` (``postgres_diagnose.py``) runs the SQLite doctor's own checks
over every run, its events and the workspace facts (``store_doctor.check_ledger``: rows that do
not decode, ``event_seq`` gaps, the tool-ledger scanner, recovery tails, header and terminal
event, the projections, the workspace markers, the branches) through the ``sqlite3``-shaped
connection, so a damaged row is reported with the same code on both engines. Only SQLite's own
``integrity_check`` and ``foreign_key_check`` have no counterpart: the server enforces its
constraints itself. ``maka doctor`` then audits the workspace checkpoints against this host's
data folder as on SQLite (``app/commands/doctor_cmd.py``); ``probe_server`` is the Settings
dialog's "Test connection".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from runtime.ledger.database_url import masked_database_url
from storage.ledger.postgres_connection import PostgresConnection
from storage.ledger.postgres_schema import SCHEMA_VERSION, read_version
from storage.ledger.postgres_store import open_postgres_read_connection
from storage.ledger.sqlite_connection import sqlite_errors


@dataclass(frozen=True, slots=True)
class LeaseRow:
    session_id: str
    epoch: int
    owner: str | None
    expires_in_ms: int
    unfinished: bool

    @property
    def held(self) -> bool:
        return self.owner is not None and self.expires_in_ms > 0

    def as_json(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "epoch": self.epoch,
            "owner": self.owner,
            "expiresInMs": self.expires_in_ms,
            "unfinishedRun": self.unfinished,
        }


@dataclass(frozen=True, slots=True)
class PostgresReport:
    server: str
    schema_version: int
    sessions: int
    unfinished_runs: int
    leases: tuple[LeaseRow, ...]

    @property
    def held(self) -> tuple[LeaseRow, ...]:
        return tuple(lease for lease in self.leases if lease.held)

    @property
    def expired(self) -> tuple[LeaseRow, ...]:
        return tuple(lease for lease in self.leases if not lease.held)

    @property
    def awaiting_takeover(self) -> tuple[LeaseRow, ...]:
        return tuple(lease for lease in self.expired if lease.unfinished)


def probe_server(url: str) -> tuple[str, int]:
    """The Settings dialog's "Test connection": connect read-only and read the server's version
    and the ledger's schema version there (0: no Maka ledger yet). Refusals are the reader's:
    ``store_io_failed`` for a server that cannot be reached or refuses the login."""
    from storage.ledger.postgres_connection import connect

    with sqlite_errors():
        conn = connect(url, read_only=True)
    try:
        with sqlite_errors():
            version = str(conn.execute("SHOW server_version").fetchone()[0])
            return version, read_version(conn)
    finally:
        conn.close()


def redacted(url: str) -> str:
    """The URL without its passwords (a doctor report may be pasted anywhere): the desktop's
    mask, ``****`` after ``user:`` and for ``?password=`` and the other secret parameters."""
    return masked_database_url(url)


def postgres_report(url: str) -> PostgresReport:
    """Read-only; refusals (no ledger, an older or newer schema, an unreachable server) are the
    reader's ``StoreRefusal``."""
    conn = open_postgres_read_connection(url)
    try:
        with sqlite_errors():
            version = read_version(cast(PostgresConnection, conn))
            sessions = int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
            unfinished = int(
                conn.execute(
                    "SELECT count(*) FROM runs WHERE status IN ('created', 'running')"
                ).fetchone()[0]
            )
            rows = conn.execute(
                "SELECT lease.session_id, lease.epoch, lease.owner,"
                " (extract(epoch FROM lease.expires_at - now()) * 1000)::bigint,"
                " EXISTS (SELECT 1 FROM runs WHERE runs.session_id = lease.session_id"
                " AND runs.status IN ('created', 'running'))"
                " FROM session_leases AS lease ORDER BY lease.session_id"
            ).fetchall()
    finally:
        conn.close()
    leases = tuple(
        LeaseRow(str(row[0]), int(row[1]), row[2], int(row[3]), bool(row[4])) for row in rows
    )
    return PostgresReport(redacted(url), version, sessions, unfinished, leases)


def report_lines(report: PostgresReport) -> list[str]:
    lines = [
        f"database: {report.server} (PostgreSQL)",
        f"schema version {report.schema_version} (this program's: {SCHEMA_VERSION})",
        f"sessions: {report.sessions}, unfinished runs: {report.unfinished_runs}",
        f"leases held: {len(report.held)}",
    ]
    lines.extend(
        f"  {lease.session_id}  epoch {lease.epoch}  host {lease.owner}"
        f"  expires in {lease.expires_in_ms / 1000:.1f} s"
        for lease in report.held
    )
    lines.append(
        f"leases run out or given up: {len(report.expired)}"
        f" ({len(report.awaiting_takeover)} with an unfinished run: a running maka host takes"
        " them over)"
    )
    lines.extend(
        f"  {lease.session_id}  epoch {lease.epoch}  last host {lease.owner or '(given up)'}"
        + (f"  ran out {-lease.expires_in_ms / 1000:.1f} s ago" if lease.owner else "")
        + ("  [unfinished run]" if lease.unfinished else "")
        for lease in report.expired
    )
    return lines


def report_json(report: PostgresReport) -> dict[str, Any]:
    return {
        "ok": report.schema_version == SCHEMA_VERSION,
        "engine": "postgresql",
        "database": report.server,
        "schemaVersion": report.schema_version,
        "programSchemaVersion": SCHEMA_VERSION,
        "sessions": report.sessions,
        "unfinishedRuns": report.unfinished_runs,
        "leasesHeld": [lease.as_json() for lease in report.held],
        "leasesExpired": [lease.as_json() for lease in report.expired],
        "awaitingTakeover": [lease.session_id for lease in report.awaiting_takeover],
        "problems": [],
    }


def lease_holders(url: str) -> dict[str, str]:
    """Each session whose lease is held now, with its holder (``machine:pid:nonce``): what
    ``maka sessions`` shows as the session's host."""
    return {lease.session_id: str(lease.owner) for lease in postgres_report(url).held}
