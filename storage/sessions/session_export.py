"""Session export and import: a JSONL file that is the session's committed ledger, run by run.

File format (``maka export SESSION -o FILE.jsonl``; UTF-8, one JSON value per line, every line
ending in ``\\n``, every line in canonical JSON (RFC 8785), none longer than ``MAX_LINE_BYTES``;
every ``cwd`` an absolute path):

1. one session line: ``{"kind":"maka.session.v1","sessionId","cwd","title","createdAt"}``;
   for a branched session (``maka branch``), then its ``branchStart`` fact:
   ``{"kind":"maka.branch_start.v1","fact":{...},"createdAt"}`` (the history it refers to is the
   source session's, which is exported and imported on its own, first);
2. for each run of the session, oldest first:

   - a header line ``{"kind":"maka.run_header.v1","runId","sessionId","invocationId","turnId",
     "status","cwd","ownerEpoch","createdAt","updatedAt"}`` plus, when set, ``"failureClass"``,
     ``"workspaceIdentity"``, ``"parentRunId"``, ``"continuationSource"``, ``"completedAt"``
     (absent means not set; never ``null``);
   - for a continuation run (one admitted by Safe resume), its claim line
     ``{"kind":"maka.continuation_claim.v1","claimId","sessionId","boundaryDigest","sourceRunId",
     "sourceHighWater","sourcePrefixDigest","sourceTerminalEventId","targetRunId","startEventId",
     "providerReplayDigest","automatic","createdAt"}``;
   - then the run's events in ``event_seq`` order: exactly the stored canonical bytes of each
     RuntimeEvent (a RuntimeEvent has no ``kind`` key, so the line types never mix up);
3. when the session's snapshots of its folder were exported beside the file, a last line
   ``{"kind":"maka.checkpoints.v1","bundle","sha256","bytes","refs":[{"ref","commitId",
   "treeId","workspaceIdentity"}]}`` naming that Git bundle (``checkpoint_transfer``). An export
   without it (older, ``--no-checkpoints``, standard output) imports the ledger alone.

Import (``maka import FILE.jsonl``, ``session_import``) is all-or-nothing, in one transaction,
and re-commits every event through the same writers as live code (generic append, T1, T2,
recovery bundle, run ending, continuation admission), so a file can never bring in a fact the
writers would refuse. It is idempotent (an
identical file again is a no-op), refuses a file that conflicts with what is stored (another
header or other bytes for a stored id), and refuses a torn last line (no final newline) unless
``accept_torn_tail``: then the valid prefix is imported and the report says how many bytes were
dropped; a run whose terminal event was in the dropped tail is imported as ``running`` (its
ending is not in the file, and a header never claims an ending the ledger lacks).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.ledger.branch_facts import BranchRecord, branch_record
from runtime.ledger.canonical_codec import (
    canonical_json_bytes,
    canonical_line_bytes,
    deeper_than,
    duplicate_key,
)
from runtime.ledger.codes import TransferCode
from runtime.ledger.continuation_ports import ContinuationClaim
from runtime.ledger.event_model import RuntimeEvent, decode_event_json
from runtime.ledger.file_names import file_kind
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from storage.ledger.branch_store import read_branch
from storage.ledger.continuation_claim_store import find_by_target
from storage.ledger.event_rows import EVENT_COLUMNS, decode_row
from storage.ledger.run_header_store import list_session_headers, read_session

SESSION_KIND = "maka.session.v1"
RUN_HEADER_KIND = "maka.run_header.v1"
CLAIM_KIND = "maka.continuation_claim.v1"
CHECKPOINTS_KIND = "maka.checkpoints.v1"
BRANCH_KIND = "maka.branch_start.v1"


MAX_LINE_BYTES = 64 << 20
"""The longest line an export file may hold (64 MiB, its newline not counted): far more than any
event Maka writes (a tool's result is capped at 128 KiB, a prompt at 100,000 characters), so a
longer line is no export, and reading stops there instead of holding an endless line in memory
(``/dev/zero``, a big file without a newline)."""

_READ_PIECE = 1 << 20


class TransferError(LedgerError):
    """An export or import refused; ``code`` is a ``TransferCode`` (``line`` is 1-based)."""

    def __init__(self, code: TransferCode, message: str, line: int | None = None) -> None:
        super().__init__(code, message)
        self.line = line


# ---- export -----------------------------------------------------------------------------------


def session_line(session: SessionRecord) -> bytes:
    return canonical_json_bytes(
        {
            "kind": SESSION_KIND,
            "sessionId": session.session_id,
            "cwd": session.cwd,
            "title": session.title,
            "createdAt": session.created_at,
        }
    )


def header_line(header: RunHeader) -> bytes:
    value: dict[str, Any] = {
        "kind": RUN_HEADER_KIND,
        "runId": header.run_id,
        "sessionId": header.session_id,
        "invocationId": header.invocation_id,
        "turnId": header.turn_id,
        "status": RunStatus(header.status).value,
        "cwd": header.cwd,
        "ownerEpoch": header.owner_epoch,
        "createdAt": header.created_at,
        "updatedAt": header.updated_at,
    }
    optional = {
        "failureClass": header.failure_class,
        "workspaceIdentity": header.workspace_identity,
        "parentRunId": header.parent_run_id,
        "continuationSource": dict(header.continuation_source)
        if header.continuation_source is not None
        else None,
        "completedAt": header.completed_at,
    }
    value.update({key: item for key, item in optional.items() if item is not None})
    return canonical_json_bytes(value)


def claim_line(claim: ContinuationClaim) -> bytes:
    return canonical_json_bytes(
        {
            "kind": CLAIM_KIND,
            "claimId": claim.claim_id,
            "sessionId": claim.session_id,
            "boundaryDigest": claim.boundary_digest,
            "sourceRunId": claim.source_run_id,
            "sourceHighWater": claim.source_high_water,
            "sourcePrefixDigest": claim.source_prefix_digest,
            "sourceTerminalEventId": claim.source_terminal_event_id,
            "targetRunId": claim.target_run_id,
            "startEventId": claim.start_event_id,
            "providerReplayDigest": claim.provider_replay_digest,
            "automatic": claim.automatic,
            "createdAt": claim.created_at,
        }
    )


def export_lines(conn: sqlite3.Connection, session_id: str) -> Iterator[bytes]:
    """Every line of the session's export (each without its newline). Call inside one read
    transaction so the file is one consistent snapshot."""
    session = read_session(conn, session_id)
    if session is None:
        raise TransferError(TransferCode.SESSION_NOT_FOUND, f"no session {session_id}")
    yield session_line(session)
    branch = read_branch(conn, session_id)
    if branch is not None:
        yield canonical_json_bytes(
            {"kind": BRANCH_KIND, "fact": dict(branch.fact), "createdAt": branch.created_at}
        )
    for header in list_session_headers(conn, session_id):
        yield header_line(header)
        claim = find_by_target(conn, header.run_id)
        if claim is not None:
            yield claim_line(claim)
        rows = conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM runtime_events WHERE invocation_id = ?"
            " ORDER BY event_seq",
            (header.invocation_id,),
        )
        for row in rows:
            yield decode_row(row).payload


# ---- reading ----------------------------------------------------------------------------------


def _size(count: int) -> str:
    return f"{count >> 20} MiB" if count and not count % (1 << 20) else f"{count} bytes"


def _refuse_special(mode: int) -> None:
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise TransferError(
            TransferCode.IMPORT_FILE_UNREADABLE,
            f"it is {file_kind(mode)}, not an export file (maka export SESSION -o FILE.jsonl "
            "writes one)",
        )


def read_export_file(path: Path, *, max_line: int = MAX_LINE_BYTES) -> bytes:
    """The bytes of an export file (a regular file, or a pipe such as ``<(...)``), read a piece
    at a time: a line longer than ``max_line`` bytes stops the reading with
    ``import_line_invalid``, so memory stays bounded by the file's lines, never by an endless
    one. A folder, a device or a socket is refused before anything is read
    (``import_file_unreadable``). Raises ``OSError`` when the file cannot be opened or read."""
    # Looked at before it is opened: a folder or a socket cannot be opened for reading at
    # all, and would be refused with the system's words instead of what it is.
    _refuse_special(os.stat(path).st_mode)
    with path.open("rb") as file:
        _refuse_special(os.fstat(file.fileno()).st_mode)
        pieces: list[bytes] = []
        lines = 0  # newlines before the open line
        open_line = 0  # bytes of the line not yet ended by a newline
        size = min(_READ_PIECE, max_line + 1)
        while piece := file.read(size):
            first = piece.find(b"\n")
            if first < 0:
                open_line += len(piece)
            else:
                # Every other line that ends in this piece is shorter than ``max_line``.
                if open_line + first > max_line:
                    break
                lines += piece.count(b"\n")
                open_line = len(piece) - piece.rfind(b"\n") - 1
            if open_line > max_line:
                break
            pieces.append(piece)
        else:
            return b"".join(pieces)
    raise TransferError(
        TransferCode.IMPORT_LINE_INVALID,
        f"line {lines + 1} is longer than {_size(max_line)}, longer than any line an export "
        "holds: this is not a Maka export file; nothing was imported",
        lines + 1,
    )


# ---- parsing ----------------------------------------------------------------------------------


@dataclass(slots=True)
class RunBlock:
    header: RunHeader
    claim: ContinuationClaim | None = None
    events: list[RuntimeEvent] = field(default_factory=list)
    # canonical bytes of each event (the line itself when it already was canonical)
    payloads: list[bytes] = field(default_factory=list)


@dataclass(slots=True)
class ParsedExport:
    session: SessionRecord
    runs: list[RunBlock]
    dropped_bytes: int
    event_count: int
    # The last line's record of the snapshots file beside the export (``checkpoint_transfer``),
    # None for an export without one.
    checkpoints: dict[str, Any] | None = None
    # A branched session's ``branchStart`` fact (the line after the session line), else None.
    branch: BranchRecord | None = None


def _record(value: Mapping[str, Any], keys: set[str], optional: set[str], line: int) -> None:
    present = set(value)
    if not keys <= present or not present <= keys | optional:
        raise TransferError(
            TransferCode.IMPORT_LINE_INVALID,
            f"line {line}: a {value.get('kind')} record needs keys {sorted(keys)}"
            f" (optional {sorted(optional)})",
            line,
        )


def _text(value: Mapping[str, Any], key: str, line: int, *, empty: bool = False) -> str:
    item = value.get(key)
    if not isinstance(item, str) or (not empty and not item):
        raise TransferError(TransferCode.IMPORT_LINE_INVALID, f"line {line}: bad {key}", line)
    return item


def _folder(value: Mapping[str, Any], key: str, line: int, what: str) -> str:
    """A folder the session's turns (or recovery) work in: an absolute path on this system. A
    relative one would be taken from whatever folder a later command runs in."""
    item = _text(value, key, line, empty=True)
    if not os.path.isabs(item) or "\x00" in item:
        raise TransferError(
            TransferCode.IMPORT_LINE_INVALID,
            f"line {line}: {what} ({key}) must be an absolute path on this system, not "
            f"{item!r}; nothing was imported",
            line,
        )
    return item


_IDENTIFIER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
# Where ``splitlines`` breaks a line: a session's title is one line (the first of a message).
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _identifier(value: Mapping[str, Any], key: str, line: int, what: str) -> str:
    """A session's or a run's id as Maka makes them: letters, digits, ``_``, ``.`` and ``-``
    (it names the session's snapshots in the checkpoint store, and its rows in every list)."""
    item = _text(value, key, line)
    if not _IDENTIFIER.fullmatch(item) or ".." in item or item.endswith((".", ".lock")):
        raise TransferError(
            TransferCode.IMPORT_LINE_INVALID,
            f"line {line}: {what} ({key}) {item!r} is not an id Maka makes (letters, digits, "
            "'_', '.' and '-'); nothing was imported",
            line,
        )
    return item


def _title(value: Mapping[str, Any], line: int) -> str:
    """A session's title: one line (a title Maka makes is the first line of a message)."""
    item = _text(value, "title", line, empty=True)
    if _LINE_BREAKS.search(item):
        raise TransferError(
            TransferCode.IMPORT_LINE_INVALID,
            f"line {line}: the session's title is more than one line; nothing was imported",
            line,
        )
    return item


def _int(value: Mapping[str, Any], key: str, line: int) -> int:
    item = value.get(key)
    if type(item) is not int or item < 0:
        raise TransferError(TransferCode.IMPORT_LINE_INVALID, f"line {line}: bad {key}", line)
    return item


def _parse_session(value: Mapping[str, Any], line: int) -> SessionRecord:
    _record(value, {"kind", "sessionId", "cwd", "title", "createdAt"}, set(), line)
    return SessionRecord(
        session_id=_identifier(value, "sessionId", line, "the session's id"),
        cwd=_folder(value, "cwd", line, "the session's folder"),
        title=_title(value, line),
        created_at=_int(value, "createdAt", line),
    )


_HEADER_KEYS = {
    "kind", "runId", "sessionId", "invocationId", "turnId", "status", "cwd", "ownerEpoch",
    "createdAt", "updatedAt",
}  # fmt: skip
_HEADER_OPTIONAL = {
    "failureClass", "workspaceIdentity", "parentRunId", "continuationSource", "completedAt",
}  # fmt: skip


def _parse_header(value: Mapping[str, Any], line: int) -> RunHeader:
    _record(value, _HEADER_KEYS, _HEADER_OPTIONAL, line)
    try:
        status = RunStatus(value["status"])
    except ValueError:
        raise TransferError(
            TransferCode.IMPORT_LINE_INVALID, f"line {line}: bad status", line
        ) from None
    source = value.get("continuationSource")
    if source is not None and not isinstance(source, dict):
        raise TransferError(
            TransferCode.IMPORT_LINE_INVALID, f"line {line}: bad continuationSource", line
        )
    optional_text = {
        key: _text(value, key, line) if key in value else None
        for key in ("failureClass", "workspaceIdentity", "parentRunId")
    }
    return RunHeader(
        run_id=_identifier(value, "runId", line, "the run's id"),
        session_id=_text(value, "sessionId", line),
        invocation_id=_text(value, "invocationId", line),
        turn_id=_text(value, "turnId", line),
        status=status,
        cwd=_folder(value, "cwd", line, "the run's folder"),
        owner_epoch=_int(value, "ownerEpoch", line),
        created_at=_int(value, "createdAt", line),
        updated_at=_int(value, "updatedAt", line),
        failure_class=optional_text["failureClass"],
        workspace_identity=optional_text["workspaceIdentity"],
        parent_run_id=optional_text["parentRunId"],
        continuation_source=source,
        completed_at=_int(value, "completedAt", line) if "completedAt" in value else None,
    )


_CLAIM_KEYS = {
    "kind", "claimId", "sessionId", "boundaryDigest", "sourceRunId", "sourceHighWater",
    "sourcePrefixDigest", "sourceTerminalEventId", "targetRunId", "startEventId",
    "providerReplayDigest", "automatic", "createdAt",
}  # fmt: skip


def _parse_claim(value: Mapping[str, Any], line: int) -> ContinuationClaim:
    _record(value, _CLAIM_KEYS, set(), line)
    if not isinstance(value["automatic"], bool):
        raise TransferError(TransferCode.IMPORT_LINE_INVALID, f"line {line}: bad automatic", line)
    return ContinuationClaim(
        claim_id=_text(value, "claimId", line),
        session_id=_text(value, "sessionId", line),
        boundary_digest=_text(value, "boundaryDigest", line),
        source_run_id=_text(value, "sourceRunId", line),
        source_high_water=_int(value, "sourceHighWater", line),
        source_prefix_digest=_text(value, "sourcePrefixDigest", line),
        source_terminal_event_id=_text(value, "sourceTerminalEventId", line),
        target_run_id=_text(value, "targetRunId", line),
        start_event_id=_text(value, "startEventId", line),
        provider_replay_digest=_text(value, "providerReplayDigest", line),
        automatic=value["automatic"],
        created_at=_int(value, "createdAt", line),
    )


def _invalid(line: int, message: str) -> TransferError:
    return TransferError(TransferCode.IMPORT_LINE_INVALID, f"line {line}: {message}", line)


def _structure(line: int, message: str) -> TransferError:
    return TransferError(TransferCode.IMPORT_STRUCTURE_INVALID, f"line {line}: {message}", line)


MAX_RECORD_DEPTH = 16
"""The deepest nesting of arrays and objects a record line (not an event) may hold: the deepest
record Maka writes (a ``branchStart`` fact's source) is 3 levels down, so a deeper line is no
export, and nothing after the parse walks a value deeper than this."""


def _record_value(raw: bytes, line: int) -> dict[str, Any] | None:
    """The record a line holds (None: not one of the records an export holds, also a line too
    deep for the JSON decoder). A record nested deeper than ``MAX_RECORD_DEPTH`` is refused."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    kinds = (SESSION_KIND, RUN_HEADER_KIND, CLAIM_KIND, CHECKPOINTS_KIND, BRANCH_KIND)
    if not isinstance(value, dict) or value.get("kind") not in kinds:
        return None
    if deeper_than(value, MAX_RECORD_DEPTH):
        raise _invalid(
            line, f"a {value['kind']} record nested deeper than {MAX_RECORD_DEPTH} levels"
        )
    return value


def _add_record(
    value: dict[str, Any],
    index: int,
    session: SessionRecord | None,
    runs: list[RunBlock],
    run_ids: set[str],
) -> SessionRecord | None:
    """Apply one record line; returns the session (set by the first line)."""
    if value["kind"] == SESSION_KIND:
        if index != 1:
            raise _structure(index, "the session line must be the first line")
        return _parse_session(value, index)
    if session is None:
        raise _structure(index, "a record before the session line")
    if value["kind"] == CLAIM_KIND:
        block = runs[-1] if runs else None
        if block is None or block.events or block.claim is not None:
            raise _structure(index, "a continuation claim must follow its run's header line")
        block.claim = _parse_claim(value, index)
        if block.claim.target_run_id != block.header.run_id:
            raise _structure(index, "the continuation claim names another run")
        return session
    header = _parse_header(value, index)
    if header.session_id != session.session_id:
        raise _structure(index, "a run of another session")
    if header.run_id in run_ids:  # a set: a search of ``runs`` is quadratic in the runs
        raise _structure(index, f"run {header.run_id} appears twice")
    run_ids.add(header.run_id)
    runs.append(RunBlock(header))
    return session


def parse_export(data: bytes, *, accept_torn_tail: bool = False) -> ParsedExport:
    """Decode and structurally check a whole export file (nothing is written)."""
    end = data.rfind(b"\n") + 1
    if end != len(data) and not accept_torn_tail:
        # The lines before the tear are checked first: a file that is not an export at all
        # (binary, another format) is reported as such, not as torn, and the torn tail is only
        # reported when dropping it would give a valid export.
        if end:
            parse_export(data[:end])
        line = data.count(b"\n") + 1
        raise TransferError(
            TransferCode.IMPORT_TORN_TAIL,
            f"line {line} is torn (the file does not end with a newline; "
            f"{len(data) - end} bytes); use --accept-torn-tail to import the lines before it",
            line,
        )
    dropped = len(data) - end
    lines = data[:end].split(b"\n")[:-1]
    if not lines:
        raise TransferError(TransferCode.IMPORT_STRUCTURE_INVALID, "the file holds no session")
    session: SessionRecord | None = None
    runs: list[RunBlock] = []
    run_ids: set[str] = set()
    events = 0
    checkpoints: dict[str, Any] | None = None
    branch: BranchRecord | None = None
    for index, raw in enumerate(lines, start=1):
        try:
            event = decode_event_json(raw)
        except LedgerError as error:
            # Not an event: a record line (a RuntimeEvent never has a top-level "kind").
            value = _record_value(raw, index)
            if value is None:
                raise _invalid(
                    index, f"not a RuntimeEvent ({error.code}): {error.message}"
                ) from None
            if value["kind"] == CHECKPOINTS_KIND:
                if index != len(lines) or session is None:
                    raise _structure(index, "the snapshots record must be the last line") from None
                checkpoints = value
                continue
            if value["kind"] == BRANCH_KIND:
                branch = _parse_branch(value, index, session)
                continue
            session = _add_record(value, index, session, runs, run_ids)
            continue
        if not runs:
            raise _structure(index, "an event before any run header")
        block = runs[-1]
        if event["runId"] != block.header.run_id:
            raise _structure(index, f"event {event['id']} belongs to another run than its header")
        block.events.append(event)
        canonical = _payload(raw, event, index)
        block.payloads.append(canonical)
        events += 1
    if session is None:
        raise _structure(1, "the first line must be the session line")
    return ParsedExport(session, runs, dropped, events, checkpoints, branch)


def _payload(raw: bytes, event: RuntimeEvent, index: int) -> bytes:
    """The canonical bytes line ``index`` stands for (``raw`` itself when it already is them)."""
    try:
        canonical = canonical_line_bytes(raw, event)
    except LedgerError as error:
        raise _invalid(index, f"not canonical JSON ({error.code}): {error.message}") from None
    if canonical is not raw:
        # Not the bytes Maka exports: a key written twice would have the last one win,
        # silently changing what the session's history holds.
        repeated = duplicate_key(raw)
        if repeated is not None:
            raise _invalid(
                index,
                f"event {event['id']} holds the key {repeated!r} twice in one object: which "
                "value it means cannot be told, and no export writes that",
            )
    return canonical


def _parse_branch(
    value: Mapping[str, Any], line: int, session: SessionRecord | None
) -> BranchRecord:
    """The ``branchStart`` line: second, after the session line, naming that session."""
    if line != 2 or session is None:
        raise _structure(line, "the branch record must follow the session line")
    _record(value, {"kind", "fact", "createdAt"}, set(), line)
    fact = value["fact"]
    if not isinstance(fact, dict):
        raise _invalid(line, "bad fact")
    try:
        record = branch_record(fact, _int(value, "createdAt", line))
    except ValueError as error:
        raise _invalid(line, f"not a branchStart fact: {error}") from None
    if record.session_id != session.session_id:
        raise _structure(line, "the branch record names another session")
    return record
