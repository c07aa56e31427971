"""``maka doctor [--json]``: an integrity report of the data directory (exit 1 on any problem).

Opens the database read-only (it works while the desktop app runs) and reports the schema
version, SQLite's integrity check, the tool-ledger scanner over every run, header/terminal
agreement, rebuilt-versus-stored projections and the workspace markers of session folders
(``storage/ledger/store_doctor.py``), and whether other users could read the data directory
(``data_not_private``: a folder wider than 0700 or a file wider than 0600), and the workspace
checkpoints: every ``workspaceCheckpoint`` fact against its Git objects (a missing one is a
problem, ``workspace_checkpoint_missing``) and every checkpoint ref against the facts (an orphan
ref, left by a capture killed before its fact, is reported, not a problem). Restored copies a
resume made but never started in (``workspace_restore_abandoned``, as ``maka plan`` names them)
are listed as notes, not problems: Maka never uses them and the user may remove them. So are
the snapshots of a session imported without them (``workspace_checkpoints_not_carried``: an
older export or ``--no-checkpoints``); resume offers to continue with the current files.
So is a run still marked running while no Maka process has the data folder open
(``run_awaiting_repair``: its process was stopped; a plan or the next start ends it).
With ``MAKA_DATABASE_URL`` (or the data folder's Database setting) it checks the ledger on that
PostgreSQL server instead, with the same checks and codes but SQLite's own integrity and foreign
key checks (the server enforces its constraints), plus its session leases, held and run out
(``storage/ledger/postgres_doctor.py``); the workspace checkpoints are this host's data folder's.
``--verify-snapshots`` also re-hashes every present snapshot's stored objects against its
recorded tree, the check a restore makes before it writes (``workspace_checkpoint_damaged``), and
moves each damaged loose object of a private store aside (``<store>.git/maka-damaged/``, kept),
so that the next capture of the folder writes it again from the folder's files instead of
reusing it; it says which it moved and where. A snapshot missing objects a check moved aside is
reported damaged (not missing) by every ``maka doctor``. With ``--json`` exactly one JSON
document is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli_errors import EXIT_ERROR, EXIT_OK
from app.code_text import describe
from app.park_guidance import LEDGER_CHECK_CODES
from runtime.ledger.command_words import maka_command
from runtime.ledger.file_names import shown_name

if TYPE_CHECKING:
    from runtime.ledger.checkpoint_ports import CheckpointCarrier
    from runtime.ledger.store_ports import LedgerReader
    from storage.checkpoints.checkpoint_audit import (
        CheckpointAudit,
        CheckpointRow,
        SnapshotVerification,
    )
    from storage.ledger.store_doctor import DoctorProblem


def data_dir_from(args: argparse.Namespace) -> Path:
    """``--data-dir`` > ``MAKA_DATA_DIR`` > the per-user data directory."""
    from app.data_paths import resolve_data_dir

    return resolve_data_dir(getattr(args, "data_dir", None))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--verify-snapshots",
        action="store_true",
        help="also re-hash every workspace snapshot's stored files against what it recorded "
        "(the check a restore makes; reads every snapshot, so it takes longer)",
    )


def _emit(args: argparse.Namespace, document: dict[str, Any], lines: list[str]) -> None:
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print("\n".join(lines))


def _privacy_problems(data_dir: Path) -> list[dict[str, str]]:
    from runtime.ledger.codes import DoctorCode
    from storage.private_files import wider_modes

    problems = []
    for path, mode in wider_modes(data_dir):
        wanted = "700" if path.is_dir() else "600"
        name = shown_name(str(path))
        # (a name that is not one printable line is quoted: no command to paste is made of it)
        fix = f"run 'chmod {wanted} {path}'" if name == str(path) else f"chmod it to {wanted}"
        problems.append(
            {
                "code": str(DoctorCode.DATA_NOT_PRIVATE),
                "message": f"{name} has mode {mode:o}: other users can read it; {fix}",
            }
        )
    return problems


def _abandoned_copies(store: LedgerReader, carrier: CheckpointCarrier) -> list[dict[str, str]]:
    """The restored copies a resume made but never started in, by session (the ones ``maka
    plan`` names): notes, not problems."""
    from runtime.continuation.checkpoint_evidence import abandoned_restores
    from runtime.ledger.codes import DiagnosticCode

    sessions = list(store.list_sessions())
    return [
        {
            "code": DiagnosticCode.WORKSPACE_RESTORE_ABANDONED.value,
            "sessionId": session.session_id,
            "path": path,
            "message": f"a restored copy at {shown_name(path)} was made by a resume that did not "
            "start; Maka will not use it. If you do not need it, you may remove that folder.",
        }
        for session in sessions
        for path in abandoned_restores(store, carrier, session.session_id)
    ] + [
        {
            "code": DiagnosticCode.WORKSPACE_RESTORE_ABANDONED.value,
            "path": path,
            "message": f"a restored copy at {shown_name(path)} belongs to no session of this data "
            "folder: the branch or resume that made it did not finish (Maka stopped while making "
            "it), or its session was removed; Maka will not use it. If you do not need it, you may "
            "remove that folder.",
        }
        for path in _copies_of_no_session(carrier, {s.session_id for s in sessions})
    ]


def _still_borrowing(carrier: CheckpointCarrier) -> list[dict[str, str]]:
    """The snapshot stores that still read objects from their folder's Git repository: a
    command was killed before it copied them in (the next command that owns the data folder
    does). Notes: every snapshot reads whole now, but a ``git gc`` that prunes in that folder
    before then can make some read missing."""
    from runtime.ledger.codes import DiagnosticCode
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    if not isinstance(carrier, GitCheckpointStore):
        return []
    notes = []
    for git_dir, source in carrier.borrowing_stores():
        notes.append(
            {
                "code": DiagnosticCode.WORKSPACE_STORE_BORROWING.value,
                "path": str(git_dir),
                "message": f"the snapshot store {shown_name(git_dir.name)} still reads objects "
                f"from {shown_name(str(source))} (a Maka command is copying them in, or was "
                "stopped before it finished): the next maka run, resume or tui, or the "
                "desktop, copies them when it opens this data folder; until then a `git gc` "
                "that prunes in that repository can leave snapshots reading missing (never "
                "restored wrong)",
            }
        )
    return notes


def _copies_of_no_session(carrier: CheckpointCarrier, sessions: set[str]) -> list[str]:
    """The folders still there that a restore was attempted into for a session the ledger does
    not hold (a branch killed before its session was recorded, or a session removed since),
    each once."""
    found: list[str] = []
    for owner, path in carrier.restore_log():
        if owner not in sessions and path not in found and os.path.isdir(path):
            found.append(path)
    return found


def _awaiting_repair(store: LedgerReader, data_dir: Path) -> list[dict[str, str]]:
    """One note per run still marked created or running while no Maka process owns the data
    folder: its process is gone (killed, or the machine stopped) and the next start repairs it
    (``maka sessions`` says "INTERRUPTED (repaired at the next start)"). A note, not a
    problem: nothing is damaged, and startup recovery will end it with what the ledger proves."""
    marked = [
        (session.session_id, header.run_id)
        for session in store.list_sessions()
        for header in store.list_session_runs(session.session_id)
        if str(header.status) in ("created", "running")
    ]
    from app.host.session_rows import orphaned

    # (A Maka process has the folder, or the run ended while it was read: nothing to say.)
    marked = orphaned(data_dir, marked, store)
    return [
        {
            "code": "run_awaiting_repair",
            "sessionId": session_id,
            "runId": run_id,
            "message": f"run {run_id} is still marked running, but no Maka process has this "
            "data folder open: its process was stopped before it could end the run. "
            f"{maka_command(f'plan {session_id}')} ends it as interrupted (as the next start of "
            "the desktop or maka host does) and says whether Safe resume can continue it",
        }
        for session_id, run_id in marked
    ]


def _workspace_line(item: dict[str, str]) -> str:
    line = f"workspace {shown_name(item['cwd'])}: marker {item['marker']}"
    if item["marker"] == "folder_missing":  # gone, or a file (or a link) has its name now
        from runtime.continuation.continuation_planner import folder_gone

        line += f" (the folder {folder_gone(item['cwd'])})"
    if item["marker"] == "replaced":
        line += (
            f" (it names {item['identity']}, but the latest run there recorded "
            f"{item['recordedIdentity']}: the marker was replaced, or another folder stands at "
            "this path now; Safe resume does not continue an interrupted run there, a new "
            "message carries on)"
        )
    return line


def _folders_named(message: str, folders: list[str]) -> str:
    """``message`` with each of ``folders`` in it (a session's folder, named by a workspace
    marker's problem) as one line: quoted when it holds a newline or another character that
    does not print, as ``_workspace_line`` names it."""
    for folder in folders:
        if folder and not folder.isprintable() and folder in message:
            message = message.replace(folder, shown_name(folder))
    return message


def _not_carried(uncarried: list[CheckpointRow], not_carried: set[str]) -> list[dict[str, str]]:
    """One note per session imported without its snapshots, or without some of them (the
    export left them out): their absence is expected."""
    from runtime.ledger.codes import DiagnosticCode

    counts: dict[str, int] = {}
    for row in uncarried:
        counts[row.session_id] = counts.get(row.session_id, 0) + 1
    return [
        {
            "code": DiagnosticCode.WORKSPACE_CHECKPOINTS_NOT_CARRIED.value,
            "sessionId": session_id,
            "message": (
                f"the session was imported without its snapshots of the folder ({count} recorded)"
                if session_id in not_carried
                else f"the session was imported without {count} of its snapshots of the "
                "folder (the exported file did not hold them)"
            )
            + "; if a turn of it was interrupted, Safe resume compares the folder with "
            "the tree they recorded, and when it changed, "
            f"{maka_command(f'resume {session_id} --rebaseline')} continues with the current files",
        }
        for session_id, count in counts.items()
    ]


def _unnamed(unnamed: list[CheckpointRow]) -> list[dict[str, str]]:
    """One note per session with kept snapshots whose ref is gone (deleted by hand, a damaged
    ref file) while their objects are still there: nothing is lost yet, and retention names
    each again before it prunes."""
    from runtime.ledger.codes import DiagnosticCode

    by_session: dict[str, list[str]] = {}
    for row in unnamed:
        by_session.setdefault(row.session_id, []).append(str(row.body.get("checkpointRef")))
    return [
        {
            "code": DiagnosticCode.WORKSPACE_CHECKPOINT_UNNAMED.value,
            "sessionId": session_id,
            "message": f"{len(refs)} snapshot(s) of the session's folder have lost their name "
            f"in the checkpoint store ({', '.join(refs[:3])}{', ...' if len(refs) > 3 else ''}; "
            "deleted by hand?) while their files are still there: Maka names them again when it "
            "next trims the store (the desktop or maka host when it starts, else a command that "
            "runs a turn), before it removes anything",
        }
        for session_id, refs in by_session.items()
    ]


def _superseded(rows: list[CheckpointRow]) -> list[dict[str, str]]:
    """One note per session whose lost snapshots a later, whole one has superseded: no resume
    compares the folder with them any more (a ``--rebaseline`` or a later turn took its own),
    so they are no problem; only a branch from one of their points lacks its files."""
    by_session: dict[str, list[CheckpointRow]] = {}
    for row in rows:
        by_session.setdefault(row.session_id, []).append(row)
    return [
        {
            "code": "workspace_checkpoint_missing",
            "sessionId": session_id,
            "message": f"{len(lost)} earlier snapshot(s) of the session's folder are gone from "
            "the checkpoint store, and a later snapshot, whole, has taken their place: resume "
            "is unaffected; a branch from one of those earlier points can take only the current "
            "files (maka branch --current-files)",
        }
        for session_id, lost in by_session.items()
    ]


def _kept_elsewhere(missing: list[CheckpointRow]) -> list[dict[str, str]]:
    """One note per session whose snapshots are not in this data folder, on a ledger shared by
    several hosts: each host keeps the snapshots it took in its own data folder."""
    counts: dict[str, int] = {}
    for row in missing:
        counts[row.session_id] = counts.get(row.session_id, 0) + 1
    return [
        {
            "code": "workspace_checkpoint_missing",
            "sessionId": session_id,
            "message": f"{count} snapshot(s) of the session's folder are not in this data "
            "folder: the ledger is shared by several hosts and each keeps the snapshots it took "
            "in its own data folder, so another host's may hold them; a resume here compares "
            "the folder with the tree they recorded, and when it changed, "
            f"{maka_command(f'resume {session_id} --rebaseline')} continues with the current files "
            "if a turn of it was interrupted",
        }
        for session_id, count in counts.items()
    ]


def _damage_problems(
    checkpoints: CheckpointAudit, verification: SnapshotVerification | None
) -> list[DoctorProblem]:
    """``workspace_checkpoint_damaged``: each snapshot missing objects a check moved aside
    (every doctor), and each one this check found damaged (``--verify-snapshots``), saying
    what became of those objects."""
    from runtime.ledger.codes import DoctorCode
    from storage.checkpoints.checkpoint_audit import damaged_names
    from storage.checkpoints.checkpoint_verify import damage_told
    from storage.ledger.store_doctor import DoctorProblem

    code = DoctorCode.WORKSPACE_CHECKPOINT_DAMAGED.value
    problems = [
        DoctorProblem(
            code,
            f"checkpoint {row.body.get('checkpointRef')} of session {row.session_id} is "
            f"damaged in the checkpoint store: {damaged_names(objects)} held bytes that are not "
            "what it recorded and were moved aside (to "
            f"{shown_name(os.path.dirname(objects[0].moved_to))}); a restore from it is refused "
            "until a capture of the folder writes them again (the next one does, if the folder "
            "still holds those bytes)"
            if objects[0].moved_to
            else f"checkpoint {row.body.get('checkpointRef')} of session {row.session_id} is "
            f"damaged in the checkpoint store: the stored bytes of {damaged_names(objects)} "
            "cannot be read; a restore from it is refused and Safe resume cannot compare the "
            "folder with it"
            + (
                " (maka doctor --verify-snapshots moves the damaged object aside, and the next "
                "capture of a folder still holding those files writes it again)"
                if not any(damaged.packed for damaged in objects)
                else damage_told(objects)
            ),
            row.run_id,
            row.event_id,
        )
        for row, objects in checkpoints.damaged_aside
    ]
    problems.extend(
        DoctorProblem(
            code,
            f"checkpoint {row.body.get('checkpointRef')} of session {row.session_id} is "
            f"damaged in the checkpoint store (stored bytes that are not what it "
            f"recorded: {damaged_names(objects)}); a restore from it is refused"
            + damage_told(objects),
            row.run_id,
            row.event_id,
        )
        for row, objects in (verification.damaged if verification is not None else [])
    )
    return problems


def _verification_lines(verification: SnapshotVerification | None, aside: int) -> list[str]:
    """What ``--verify-snapshots`` re-hashed and found (with the ``aside`` snapshots missing
    objects an earlier check moved aside), and what it moved aside, where."""
    if verification is None:
        return []
    lines = [
        f"  snapshots re-hashed: {verification.verified}, damaged: "
        f"{len(verification.damaged) + aside}"
        + (f" ({aside} found damaged before: not re-hashed)" if aside else "")
    ]
    lines.extend(
        f"  moved aside: {damaged.object_id} "
        f"({shown_name(damaged.path) if damaged.path else 'a top folder'}) of "
        f"{shown_name(store_name)} to {shown_name(damaged.moved_to)}"
        for store_name, damaged in verification.moved[:20]
    )
    if verification.moved:
        lines.append(
            f"  {len(verification.moved)} damaged object(s) moved aside, kept: the next "
            "capture of each folder writes them again from its files if it still holds "
            "those bytes, and the snapshots that name them are whole again then"
        )
    return lines


def _postgres_leases(args: argparse.Namespace, url: str) -> tuple[dict[str, Any], list[str]] | None:
    """The ledger on PostgreSQL: the server, its schema and its session leases, as the report's
    JSON and lines (docs/postgres.md); None after reporting a refusal (no ledger there, an older
    or newer schema, an unreachable server)."""
    from runtime.ledger.store_ports import StoreRefusal
    from storage.ledger.postgres_doctor import (
        postgres_report,
        redacted,
        report_json,
        report_lines,
    )

    try:
        report = postgres_report(url)
    except StoreRefusal as refusal:
        problem = {"code": str(refusal.code), "message": refusal.message}
        _emit(
            args,
            {"ok": False, "engine": "postgresql", "database": redacted(url), "problems": [problem]},
            [
                f"database: {redacted(url)} (PostgreSQL)",
                f"PROBLEM [{refusal.code}] {refusal.message}",
            ],
        )
        return None
    document = report_json(report)
    for key in ("ok", "problems", "schemaVersion", "programSchemaVersion", "sessions"):
        document.pop(key)  # the whole report's, below
    return document, [f"unfinished runs: {report.unfinished_runs}", *report_lines(report)[3:]]


def _what_to_do(refusal: Any, sqlite: bool) -> str:
    """``refusal``'s message, with what to do about a damaged database file: the other commands
    send the user here, so it is said here, never "run maka doctor" again."""
    from runtime.ledger.codes import StoreCode
    from storage.ledger.sqlite_connection import DATABASE_NAME

    message = str(refusal.message)
    whole_file = "database file is damaged" in message or "database is damaged (" in message
    if refusal.code is not StoreCode.STORE_CORRUPT or not sqlite or not whole_file:
        return message  # (one event that does not decode: its run is quarantined, not the file)
    if "backup" in message:
        return message
    return (
        f"{message.rstrip('.')}. Nothing was changed. Restore the data folder from a backup; or "
        f"move {DATABASE_NAME} (with its -wal and -shm files) aside, and Maka starts a new, empty "
        "database at its next start, into which 'maka import' brings back the sessions you "
        "exported"
    )


def run(args: argparse.Namespace) -> int:
    from runtime.ledger.codes import StoreCode
    from runtime.ledger.store_ports import StoreRefusal
    from storage.ledger.ledger_store import open_store
    from storage.ledger.sqlite_connection import DATABASE_NAME
    from storage.ledger.store_open import database_url

    data_dir = data_dir_from(args)
    try:
        url = database_url(data_dir)
    except StoreRefusal as refusal:
        bad_url = {"code": str(refusal.code), "message": refusal.message}
        _emit(
            args,
            {"ok": False, "problems": [bad_url]},
            [f"PROBLEM [{refusal.code}] {refusal.message}"],
        )
        return EXIT_ERROR
    server: tuple[dict[str, Any], list[str]] | None = None
    if url is not None:
        server = _postgres_leases(args, url)
        if server is None:
            return EXIT_ERROR
        from storage.ledger.postgres_doctor import redacted

        database: Path | str = f"{redacted(url)} (PostgreSQL)"
    else:
        database = data_dir / DATABASE_NAME
    shown = shown_name(str(database))  # in the text: a folder name is one line, quoted if need be
    privacy = _privacy_problems(data_dir)
    privacy_lines = [f"PROBLEM [{p['code']}] {p['message']}" for p in privacy]
    try:
        store = open_store(data_dir, read_only=True)
    except StoreRefusal as refusal:
        if refusal.code is StoreCode.STORE_NOT_FOUND and server is None:
            # No database, or an empty file (SQLite creates one before its first write; Maka
            # sets it up at its next start): either way there is nothing to check yet.
            present = (data_dir / DATABASE_NAME).exists()
            _emit(
                args,
                {
                    "ok": not privacy,
                    "database": str(database),
                    "present": present,
                    "problems": privacy,
                },
                [
                    f"the database {shown} is empty: nothing to check"
                    if present
                    else f"no database at {shown}: nothing to check",
                    *privacy_lines,
                ],
            )
            return EXIT_ERROR if privacy else EXIT_OK
        message = _what_to_do(refusal, server is None)
        refused = {"code": str(refusal.code), "message": message}
        _emit(
            args,
            {
                "ok": False,
                "database": str(database),
                "present": True,
                "problems": [refused, *privacy],
            },
            [
                f"database: {shown}",
                f"PROBLEM [{refusal.code}] {message}",
                *privacy_lines,
            ],
        )
        return EXIT_ERROR
    from storage.checkpoints.checkpoint_audit import (
        audit_checkpoints,
        objects_json,
        verify_snapshots,
    )
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    with store:
        try:
            report = store.diagnose()
            carrier = GitCheckpointStore(data_dir)
            checkpoints = audit_checkpoints(store, carrier)
            notes = _abandoned_copies(store, carrier) + _still_borrowing(carrier)
            if server is None:  # (on a shared ledger another host may be running it)
                notes.extend(_awaiting_repair(store, data_dir))
            verification = None
            if getattr(args, "verify_snapshots", False) and carrier.usable:
                # Snapshots whose stored bytes Git cannot read are checked too: the check
                # moves a damaged loose object aside, as it does for a present snapshot's.
                unreadable = [
                    row
                    for row, objects in checkpoints.damaged_aside
                    if not any(damaged.moved_to for damaged in objects)
                ]
                verification = verify_snapshots(store, carrier, also=unreadable)
                checked = {row.event_id for row in unreadable}
                checkpoints.damaged_aside = [
                    (row, objects)
                    for row, objects in checkpoints.damaged_aside
                    if row.event_id not in checked
                ]
        except StoreRefusal as refusal:
            message = _what_to_do(refusal, server is None)
            failed = {"code": str(refusal.code), "message": message}
            _emit(
                args,
                {
                    "ok": False,
                    "database": str(database),
                    "present": True,
                    "problems": [failed, *privacy],
                },
                [
                    f"database: {shown}",
                    f"PROBLEM [{refusal.code}] {message}",
                    *privacy_lines,
                ],
            )
            return EXIT_ERROR
    from runtime.ledger.codes import CheckpointFailureCode
    from storage.ledger.store_doctor import DoctorProblem

    report.problems.extend(DoctorProblem(p["code"], p["message"]) for p in privacy)
    from storage.checkpoints.checkpoint_transfer import (
        imported_left_out,
        imported_without_snapshots,
    )

    not_carried = imported_without_snapshots(data_dir)
    # Refs an import left out while it brought the others: their absence is expected too.
    left_out = imported_left_out(data_dir)

    def carried_not(row: CheckpointRow) -> bool:
        return row.session_id in not_carried or str(row.body.get("checkpointRef")) in left_out.get(
            row.session_id, frozenset()
        )

    # On a shared ledger (PostgreSQL) each host keeps its snapshots in its own data folder: one
    # recorded by another host is expected to be missing here (docs/postgres.md).
    shared = server is not None
    elsewhere = [row for row in checkpoints.missing if shared and not carried_not(row)]
    superseded = {row.event_id for row in checkpoints.superseded}
    lost = [
        row
        for row in checkpoints.missing
        if not carried_not(row) and not shared and row.event_id not in superseded
    ]
    # (no whole snapshot came after any of them: the newest is the session's latest one)
    newest = {row.session_id: row.event_id for row in sorted(lost, key=lambda row: row.ts)}
    report.problems.extend(
        DoctorProblem(
            "workspace_checkpoint_missing",
            f"checkpoint {row.body.get('checkpointRef')} of session {row.session_id} is recorded "
            "but its Git objects are gone from the checkpoint store; "
            + (
                "it is the session's latest snapshot, so a resume cannot compare the folder with "
                f"it: {maka_command(f'resume {row.session_id} --rebaseline')} continues with the "
                "current files if a turn of it was interrupted, and the next turn's snapshot "
                "replaces it"
                if newest[row.session_id] == row.event_id
                else "so are those of every later snapshot of the session; a branch from its "
                "point can take only the current files "
                f"({maka_command(f'branch {row.session_id} --current-files')})"
            ),
            row.run_id,
            row.event_id,
        )
        for row in lost
    )
    notes.extend(
        _superseded([row for row in checkpoints.superseded if not carried_not(row) and not shared])
    )
    notes.extend(
        _not_carried([row for row in checkpoints.missing if carried_not(row)], not_carried)
    )
    notes.extend(_kept_elsewhere(elsewhere))
    notes.extend(_unnamed(checkpoints.unnamed))
    uncarried = sum(1 for row in checkpoints.missing if carried_not(row))
    report.problems.extend(_damage_problems(checkpoints, verification))
    if verification is not None:
        report.problems.extend(
            DoctorProblem(CheckpointFailureCode.CHECKPOINT_GIT_FAILED.value, error)
            for error in verification.errors
        )
    document = {
        "database": str(database),
        "present": True,
        **(server[0] if server is not None else {}),
        **report.to_json(),
        "workspaceCheckpoints": {
            **checkpoints.to_json(),
            **(
                {
                    "verified": verification.verified,
                    # (with those missing objects an earlier check moved aside)
                    "damaged": len(verification.damaged) + len(checkpoints.damaged_aside),
                    "movedAside": [
                        {"store": store_name, **item}
                        for store_name, damaged in verification.moved
                        for item in objects_json([damaged])
                    ],
                }
                if verification is not None
                else {}
            ),
        },
        "notes": notes,
    }
    lines = [
        f"database: {shown}",
        f"schema version: {report.schema_version} (program {report.program_schema_version})",
        f"integrity check: {', '.join(report.integrity)}",
        f"sessions: {report.sessions}, runs: {report.runs}, events: {report.events}, "
        f"tool operations: {report.operations}",
        *(server[1] if server is not None else []),
    ]
    lines.extend(_workspace_line(item) for item in report.workspaces)
    lines.append(
        f"workspace checkpoints: {checkpoints.facts} recorded, {checkpoints.refs} refs, "
        f"{len(checkpoints.missing) - uncarried - len(elsewhere)} missing"
        + (f" ({uncarried} not carried by an import)" if uncarried else "")
        + (
            f", {len(checkpoints.trimmed)} removed by retention (no longer needed)"
            if checkpoints.trimmed
            else ""
        )
        + (
            f", {len(elsewhere)} not in this data folder (another host's may keep them)"
            if elsewhere
            else ""
        )
        + (f", {len(checkpoints.damaged_aside)} damaged" if checkpoints.damaged_aside else "")
        + f", {len(checkpoints.orphans)} orphan refs"
        + (
            " (no snapshot fact names them: a capture cut off before its fact, or a session"
            " removed since; retention removes them: the desktop or maka host when it"
            " starts, else a command that runs a turn, at most once a day)"
            if checkpoints.orphans
            else ""
        )
        + (
            f", {len(checkpoints.foreign)} refs of sessions this ledger does not hold (kept: "
            "another database's, or the one this data folder used before)"
            if checkpoints.foreign
            else ""
        )
    )
    lines.extend(_verification_lines(verification, len(checkpoints.damaged_aside)))
    if checkpoints.unchecked:
        lines.append(
            f"  {checkpoints.unchecked} not checked: no git 2.25 or newer on PATH "
            "(checkpoint_git_missing)"
        )
    lines.extend(f"  orphan ref: {orphan}" for orphan in checkpoints.orphans[:20])
    lines.extend(
        f"note [{note['code']}]"
        + (f" session {note['sessionId']}" if "sessionId" in note else "")
        + f": {note['message']}"
        for note in notes
    )
    for problem in report.problems:
        where = " ".join(
            part
            for part in (
                f"run {problem.run_id}" if problem.run_id else "",
                f"event {problem.event_id}" if problem.event_id else "",
            )
            if part
        )
        message = problem.message
        if message == f"tool ledger issue {problem.code}" and problem.code in LEDGER_CHECK_CODES:
            message = describe(problem.code).sentence  # the scanner's message is only its code
        message = _folders_named(message, [item["cwd"] for item in report.workspaces])
        lines.append(f"PROBLEM [{problem.code}] {where + ': ' if where else ''}{message}")
    lines.append("ok" if report.ok else f"{len(report.problems)} problem(s) found")
    _emit(args, document, lines)
    if not report.ok:
        print(f"maka doctor: {len(report.problems)} problem(s) found", file=sys.stderr)
    return EXIT_OK if report.ok else EXIT_ERROR
