"""``maka doctor``: an integrity report of a data directory, from a read-only connection.

Checks, each reported with a stable code (``DoctorCode``, a scanner issue code, a bundle code or
a ``WorkspaceMarkerCode``):

- the schema version equals the program's;
- ``PRAGMA integrity_check`` and ``PRAGMA foreign_key_check``;
- every run: each row decodes and agrees with its columns and header (``event_unreadable``,
  ``invocation_identity_conflict``), ``event_seq`` is 1..n without gaps, the shared scanner finds
  no issue, every recovery tail interprets as valid, nothing follows a terminal event, and the
  header is terminal exactly when the ledger holds the terminal event, with the matching status;
- the projections rebuilt from the events equal the stored ones (``projection_mismatch``);
- the workspace marker of every session folder that exists is valid (a missing marker is fine:
  it is created when a run starts there).

Nothing is written; the doctor works while another process owns the directory. Everything
after the SQLite checks is ``check_ledger``, which the ledger on PostgreSQL runs too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runtime.ledger.attestation import attestation_suffix_ok
from runtime.ledger.codes import BranchCode, DoctorCode, ParkReason, ScanIssueCode
from runtime.ledger.event_model import is_terminal
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.recovery_bundle import RecoveryCorruption, interpret_scanned_recovery
from runtime.ledger.store_ports import (
    EVENT_STATUS_TO_RUN,
    TERMINAL_RUN_STATUSES,
    RunHeader,
    StoredEvent,
    StoreRefusal,
    ToolJournalRecord,
    ToolOperationRecord,
)
from runtime.ledger.tool_ledger_scanner import scan_tool_ledger
from storage.ledger import branch_store as branches
from storage.ledger.event_rows import EVENT_COLUMNS, decode_row
from storage.ledger.ledger_schema import SCHEMA_VERSION, read_user_version
from storage.ledger.run_header_store import list_headers, list_sessions
from storage.ledger.tool_projection import derive_run_projection, read_all_projection_rows
from storage.sessions.workspace_identity import read_workspace_identity


@dataclass(frozen=True, slots=True)
class DoctorProblem:
    code: str
    message: str
    run_id: str | None = None
    event_id: str | None = None


@dataclass(slots=True)
class DoctorReport:
    schema_version: int
    program_schema_version: int
    integrity: list[str] = field(default_factory=list)
    sessions: int = 0
    runs: int = 0
    events: int = 0
    operations: int = 0
    workspaces: list[dict[str, str]] = field(default_factory=list)
    problems: list[DoctorProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "schemaVersion": self.schema_version,
            "programSchemaVersion": self.program_schema_version,
            "integrityCheck": self.integrity,
            "sessions": self.sessions,
            "runs": self.runs,
            "events": self.events,
            "toolOperations": self.operations,
            "workspaces": self.workspaces,
            "problems": [
                {
                    key: value
                    for key, value in (
                        ("code", problem.code),
                        ("message", problem.message),
                        ("runId", problem.run_id),
                        ("eventId", problem.event_id),
                    )
                    if value is not None
                }
                for problem in self.problems
            ],
        }


def _ends_at(terminal: StoredEvent, events: Sequence[StoredEvent]) -> bool:
    """The run ends with ``terminal``, or with it and the user's attestations (the only facts
    allowed after it)."""
    index = next(i for i, stored in enumerate(events) if stored is terminal)
    return attestation_suffix_ok([stored.event for stored in events[index + 1 :]])


def _read_run(
    conn: sqlite3.Connection, header: RunHeader, report: DoctorReport
) -> list[StoredEvent] | None:
    rows = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM runtime_events WHERE invocation_id = ? OR run_id = ?"
        " ORDER BY event_seq",
        (header.invocation_id, header.run_id),
    ).fetchall()
    events: list[StoredEvent] = []
    for row in rows:
        try:
            events.append(decode_row(row))
        except StoreRefusal as error:
            report.problems.append(
                DoctorProblem(DoctorCode.EVENT_UNREADABLE, error.message, header.run_id, row[0])
            )
            return None
    report.events += len(events)
    return events


def _check_run(header: RunHeader, events: Sequence[StoredEvent], report: DoctorReport) -> bool:
    """Per-run checks; True when the run's tool ledger is clean enough to project."""
    run_id = header.run_id
    problems = report.problems
    for index, stored in enumerate(events, start=1):
        event = stored.event
        if (event["sessionId"], event["invocationId"], event["runId"], event["turnId"]) != (
            header.session_id,
            header.invocation_id,
            header.run_id,
            header.turn_id,
        ):
            problems.append(
                DoctorProblem(
                    ScanIssueCode.INVOCATION_IDENTITY_CONFLICT,
                    "the event does not carry its run header's identity",
                    run_id,
                    event["id"],
                )
            )
        if stored.seq != index:
            problems.append(
                DoctorProblem(
                    DoctorCode.EVENT_SEQ_GAP,
                    f"event_seq {stored.seq} where {index} was expected",
                    run_id,
                    event["id"],
                )
            )
            break
    terminals = [stored for stored in events if is_terminal(stored.event)]
    if terminals and not _ends_at(terminals[0], events):
        problems.append(
            DoctorProblem(
                DoctorCode.EVENT_AFTER_TERMINAL,
                "events follow the run's terminal event",
                run_id,
                terminals[0].event["id"],
            )
        )
    _check_header(header, terminals[0] if terminals else None, report)
    scan = scan_tool_ledger(stored.event for stored in events)
    for issue in scan.issues:
        problems.append(
            DoctorProblem(issue.code, f"tool ledger issue {issue.code}", run_id, issue.event_id)
        )
    clean = not scan.issues
    order = {stored.event["id"]: index for index, stored in enumerate(events)}
    for op in scan.operations:
        meaning = interpret_scanned_recovery(op, order)
        if isinstance(meaning, RecoveryCorruption):
            clean = False
            problems.append(
                DoctorProblem(
                    meaning.code,
                    f"recovery bundle of {op.operation_id}: {meaning.message}",
                    run_id,
                    op.decision_events[-1]["id"] if op.decision_events else None,
                )
            )
    return clean


def _check_header(header: RunHeader, terminal: StoredEvent | None, report: DoctorReport) -> None:
    terminal_header = header.status in TERMINAL_RUN_STATUSES
    if terminal is None:
        if terminal_header:
            report.problems.append(
                DoctorProblem(
                    DoctorCode.HEADER_TERMINAL_MISMATCH,
                    f"the header says {header.status} but the ledger has no terminal event",
                    header.run_id,
                )
            )
        return
    expected = EVENT_STATUS_TO_RUN.get(terminal.event.get("status") or "")
    if not terminal_header or (expected is not None and expected is not header.status):
        report.problems.append(
            DoctorProblem(
                DoctorCode.HEADER_TERMINAL_MISMATCH,
                f"the header says {header.status} but the terminal event says "
                f"{terminal.event.get('status')}",
                header.run_id,
                terminal.event["id"],
            )
        )


def _compare_projections(
    derived: tuple[list[ToolOperationRecord], list[ToolJournalRecord]],
    stored: tuple[list[ToolOperationRecord], list[ToolJournalRecord]],
    skipped_runs: set[str],
    report: DoctorReport,
) -> None:
    """Compare rebuilt and stored rows, except for runs whose ledger could not be projected
    (those already carry their own problem)."""
    derived_ops = {record.operation_id: record for record in derived[0]}
    stored_ops = {
        record.operation_id: record for record in stored[0] if record.run_id not in skipped_runs
    }
    derived_journal: dict[str, list[ToolJournalRecord]] = {}
    stored_journal: dict[str, list[ToolJournalRecord]] = {}
    for rows, target in ((derived[1], derived_journal), (stored[1], stored_journal)):
        for row in rows:
            if row.run_id not in skipped_runs:
                target.setdefault(row.operation_id, []).append(row)
    for operation_id in sorted(set(derived_ops) | set(stored_ops)):
        if derived_ops.get(operation_id) != stored_ops.get(operation_id) or derived_journal.get(
            operation_id
        ) != stored_journal.get(operation_id):
            record = derived_ops.get(operation_id) or stored_ops.get(operation_id)
            report.problems.append(
                DoctorProblem(
                    DoctorCode.PROJECTION_MISMATCH,
                    f"stored projection of operation {operation_id} differs from the rebuilt one",
                    record.run_id if record is not None else None,
                )
            )


def _check_workspaces(conn: sqlite3.Connection, report: DoctorReport) -> None:
    seen: set[str] = set()
    for session in list_sessions(conn):
        if not session.cwd or session.cwd in seen:
            continue
        seen.add(session.cwd)
        folder = Path(session.cwd)
        if not folder.is_dir():
            report.workspaces.append({"cwd": session.cwd, "marker": "folder_missing"})
            continue
        try:
            identity = read_workspace_identity(folder)
        except LedgerError as error:
            report.workspaces.append({"cwd": session.cwd, "marker": str(error.code)})
            report.problems.append(
                DoctorProblem(str(error.code), f"{session.cwd}: {error.message}")
            )
            continue
        recorded = _recorded_identity(conn, session.cwd)
        if identity is None:
            report.workspaces.append({"cwd": session.cwd, "marker": "absent"})
        elif recorded is not None and recorded != identity.identity:
            # Replaced (or the folder is another one now): the runs there recorded another
            # workspace, so an interrupted one is not resumed there (workspace_identity_mismatch).
            report.workspaces.append(
                {
                    "cwd": session.cwd,
                    "marker": "replaced",
                    "identity": identity.identity,
                    "recordedIdentity": recorded,
                }
            )
        else:
            report.workspaces.append(
                {"cwd": session.cwd, "marker": "valid", "identity": identity.identity}
            )


def _recorded_identity(conn: sqlite3.Connection, cwd: str) -> str | None:
    """The workspace identity the latest run in ``cwd`` recorded (None: none did)."""
    row = conn.execute(
        "SELECT workspace_identity FROM runs WHERE cwd = ? AND workspace_identity IS NOT NULL "
        "ORDER BY created_at DESC, run_id DESC LIMIT 1",
        (cwd,),
    ).fetchone()
    return str(row[0]) if row is not None else None


def diagnose(conn: sqlite3.Connection) -> DoctorReport:
    """Run every check over ``conn`` (read-only is enough): SQLite's own (the schema version in
    ``PRAGMA user_version``, ``integrity_check``, ``foreign_key_check``), then ``check_ledger``."""
    report = DoctorReport(read_user_version(conn), SCHEMA_VERSION)
    if report.schema_version != SCHEMA_VERSION:
        report.problems.append(
            DoctorProblem(
                DoctorCode.SCHEMA_VERSION_MISMATCH,
                f"schema {report.schema_version}, program {SCHEMA_VERSION}",
            )
        )
    report.integrity = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    if report.integrity != ["ok"]:
        for line in report.integrity:
            report.problems.append(DoctorProblem(DoctorCode.INTEGRITY_CHECK_FAILED, line))
    for row in conn.execute("PRAGMA foreign_key_check"):
        report.problems.append(
            DoctorProblem(DoctorCode.FOREIGN_KEY_VIOLATION, f"table {row[0]} row {row[1]}")
        )
    check_ledger(conn, report)
    return report


def check_ledger(conn: sqlite3.Connection, report: DoctorReport) -> None:
    """The engine-free checks, added to ``report``: every run's rows, sequence, scanner,
    recovery tails and header, the projections rebuilt against the stored ones, the workspace
    markers of the session folders and the branches' source prefixes. Plain SQL through the
    shared readers, so the PostgreSQL doctor runs them over its ``sqlite3``-shaped connection
    (``storage/ledger/postgres_doctor.py``)."""
    report.sessions = len(list_sessions(conn))
    derived_ops: list[ToolOperationRecord] = []
    derived_journal: list[ToolJournalRecord] = []
    skipped: set[str] = set()
    for header in list_headers(conn):
        report.runs += 1
        events = _read_run(conn, header, report)
        if events is None or not _check_run(header, events, report):
            skipped.add(header.run_id)
            continue
        try:
            operations, journal = derive_run_projection(events)
        except StoreRefusal as error:
            skipped.add(header.run_id)
            report.problems.append(DoctorProblem(str(error.code), error.message, header.run_id))
            continue
        derived_ops.extend(operations)
        derived_journal.extend(journal)
    stored = read_all_projection_rows(conn)
    report.operations = len(stored[0])
    _compare_projections((derived_ops, derived_journal), stored, skipped, report)
    _check_workspaces(conn, report)
    _check_branches(conn, report)
    _check_continuations(conn, report, skipped)


def _check_continuations(conn: sqlite3.Connection, report: DoctorReport, skipped: set[str]) -> None:
    """Every continuation's source history still hashes to the digest it recorded: Safe resume
    of its lineage, and ``maka import`` of the session's export, would refuse otherwise (the
    import blamed the file for a database changed underneath)."""
    for header in list_headers(conn):
        source = header.continuation_source or {}
        if source.get("protocol") != "continuation_source_v2" or header.run_id in skipped:
            continue
        run_id, high_water = source.get("sourceRunId"), source.get("sourceRuntimeEventHighWater")
        if not isinstance(run_id, str) or not isinstance(high_water, int) or run_id in skipped:
            continue
        try:
            now = branches.stored_prefix_digest(conn, run_id, header.session_id, high_water)
        except StoreRefusal:
            continue  # the source run's own problem is reported with it
        if now is not None and now != source.get("sourcePrefixDigest"):
            report.problems.append(
                DoctorProblem(
                    ParkReason.SOURCE_PREFIX_DIGEST_MISMATCH,
                    f"continuation run {header.run_id} continues run {run_id} after its event "
                    f"{high_water}, but that run's history up to there is no longer the one the "
                    "continuation recorded: it was changed in the database after",
                    header.run_id,
                )
            )


def _check_branches(conn: sqlite3.Connection, report: DoctorReport) -> None:
    """Every branched session's source prefix still hashes to the digest its ``branchStart``
    fact recorded (its next turn would refuse otherwise)."""
    try:
        records = branches.list_branches(conn)
    except StoreRefusal as error:
        report.problems.append(DoctorProblem(str(error.code), error.message))
        return
    for record in records:
        if branches.source_prefix_digest(conn, record) != record.source_prefix_digest:
            report.problems.append(
                DoctorProblem(
                    BranchCode.BRANCH_SOURCE_CHANGED,
                    f"session {record.session_id} was branched from {record.source_session_id} "
                    f"at {record.boundary_event_id}, whose history no longer matches",
                    record.source_run_id,
                    record.boundary_event_id,
                )
            )
