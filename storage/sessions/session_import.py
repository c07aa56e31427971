"""Importing an export file (format: ``session_export``): every fact through its writer.

The whole file is one write transaction. A run the store does not hold yet takes the fast path
(``bulk_run_writer``: the same rules checked once over the whole run, rows inserted in bulk) and
falls back to the per-event writers whenever the fast path declines. On the per-event path the
header is created non-terminal (a continuation run through the continuation admission, with its
claim and start event, exactly as Safe resume admits one), every event is committed by the
writer that owns its kind of fact (generic append, T1 for a dispatch, T2 for a bound response,
the recovery-bundle writer for reconcile [+ outcome] + decision, the run-ending writer for the
terminal event, with the exported header timestamps), and each event must land at the
``event_seq`` the file gives it. An identical file imports as a no-op (every write is an exact
retry); anything else stored under the same ids is a conflict and nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runtime.ledger.attestation import attestation_suffix_ok
from runtime.ledger.codes import Lane, TransferCode, TransitionKind, WriterRejectionCode
from runtime.ledger.command_words import maka_command
from runtime.ledger.crash_points import armed_crash_point
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.lane_rules import is_bound_response
from runtime.ledger.store_ports import (
    TERMINAL_RUN_STATUSES,
    CommitResult,
    RunHeader,
    RunStatus,
    StoreRefusal,
)
from runtime.ledger.workspace_facts import is_settled_baseline, is_workspace_fact
from storage.ledger import branch_store as branches
from storage.ledger import continuation_claim_store as claims
from storage.ledger.bulk_run_writer import bulk_commit_new_run
from storage.ledger.event_writer import (
    Candidate,
    LedgerTransaction,
    append_generic,
    check_generic,
    prepare_candidate,
)
from storage.ledger.recovery_bundle_writer import commit_bundle
from storage.ledger.run_ending_writer import check_ending, commit_ending
from storage.ledger.run_header_store import (
    insert_header,
    insert_session,
    raise_owner_epoch,
    read_header,
    read_session,
    restore_open_status,
)
from storage.ledger.tool_boundary_writer import check_shape, commit_outcome, commit_prepared
from storage.ledger.workspace_fact_writer import (
    check_workspace_fact,
    commit_settled_baseline,
    commit_workspace_fact,
)
from storage.sessions.session_export import ParsedExport, RunBlock, TransferError


@dataclass(frozen=True, slots=True)
class KeptValue:
    """A field of the session line that differs from the session stored here, which keeps its
    own (``field`` is ``title`` or ``cwd``)."""

    field: str
    here: str
    file: str


@dataclass(frozen=True, slots=True)
class ImportReport:
    session_id: str
    runs: int
    events_read: int
    events_created: int
    events_existing: int
    dropped_bytes: int
    kept: tuple[KeptValue, ...] = ()
    """The stored session's title or folder kept where the file's session line differs."""


def _import_branch(tx: LedgerTransaction, parsed: ParsedExport) -> None:
    """A branched session's ``branchStart``: its source prefix must be here, with the digest it
    recorded (the history is referred to, never carried). Idempotent."""
    record = parsed.branch
    assert record is not None
    stored = branches.read_branch(tx.conn, record.session_id)
    if stored is not None:
        if stored.fact_bytes != record.fact_bytes:
            raise StoreRefusal(
                WriterRejectionCode.IDENTITY_CONFLICT,
                f"session {record.session_id} is stored with another branch record",
            )
        return
    if branches.source_prefix_digest(tx.conn, record) != record.source_prefix_digest:
        raise TransferError(
            TransferCode.IMPORT_BRANCH_SOURCE_MISSING,
            f"session {record.session_id} was branched from session "
            f"{record.source_session_id} at event {record.boundary_event_id}, whose history is "
            f"not here as it was; import that session first (maka export "
            f"{record.source_session_id} in its data directory)",
        )
    branches.insert_fact(tx.conn, record)


def _import_session(tx: LedgerTransaction, parsed: ParsedExport) -> tuple[KeptValue, ...]:
    """The session's row: created, or already here. Its title and folder are the user's to
    change (``maka sessions rename`` / ``relocate``), so a session renamed or moved here since
    the export keeps them, and the report names each one kept (the import is not refused: the
    history is the same); a different creation time is another session with the same id."""
    session = parsed.session
    stored = read_session(tx.conn, session.session_id)
    if stored is None:
        insert_session(tx.conn, session)
        return ()
    if stored.created_at != session.created_at:
        raise StoreRefusal(
            WriterRejectionCode.IDENTITY_CONFLICT,
            f"session {session.session_id} is stored here with another creation time: it is "
            "another session with the same id",
        )
    pairs = (("title", stored.title, session.title), ("cwd", stored.cwd, session.cwd))
    return tuple(KeptValue(name, here, file) for name, here, file in pairs if here != file)


def _ends_with_terminal(events: Sequence[RuntimeEvent]) -> bool:
    """The run ends with its terminal event, or with it and the user's attestations that
    followed (docs/design/recovery.md section 8: the only facts allowed after it)."""
    for index in range(len(events) - 1, -1, -1):
        if is_terminal(events[index]):
            return attestation_suffix_ok(events[index + 1 :])
    return False


def _import_run(
    tx: LedgerTransaction, block: RunBlock, torn: bool, *, bulk: bool
) -> tuple[int, int]:
    """Commit one run through the writers; returns (events created, events already stored)."""
    header = block.header
    events = block.events
    final_status = RunStatus(header.status)
    ends = _ends_with_terminal(events)
    if final_status in TERMINAL_RUN_STATUSES and not ends and not torn:
        raise TransferError(
            TransferCode.IMPORT_STRUCTURE_INVALID,
            f"run {header.run_id} is {final_status} but its terminal event is missing",
        )
    if final_status not in TERMINAL_RUN_STATUSES and ends:
        raise TransferError(
            TransferCode.IMPORT_STRUCTURE_INVALID,
            f"run {header.run_id} has a terminal event but its header is {final_status}",
        )
    # The header as admitted: never terminal (the run-ending writer makes it terminal with its
    # terminal event); a continuation run is admitted ``created``, like Safe resume admits it.
    opening = RunStatus.RUNNING if final_status in TERMINAL_RUN_STATUSES else final_status
    if block.claim is not None:
        opening = RunStatus.CREATED
    admitted = _replace_status(header, opening)
    results: list[CommitResult] = []
    stored = read_header(tx.conn, header.run_id)
    if (
        stored is None
        and block.claim is None
        and bulk
        and bulk_commit_new_run(tx, header, admitted, events, block.payloads)
    ):
        return len(events), 0
    if stored is None:
        if block.claim is not None:
            if not events:
                raise TransferError(
                    TransferCode.IMPORT_STRUCTURE_INVALID,
                    f"continuation run {header.run_id} lacks its continuation-start event",
                )
            _check_claim_source(tx, block)
            claims.admit(tx, block.claim, admitted, events[0])
            results.append(CommitResult(created=True, event_seq=1))
        else:
            insert_header(tx.conn, admitted)
    else:
        torn_open = _replace_status(header, RunStatus.RUNNING)
        if (
            stored != header
            and not (torn and stored in (admitted, torn_open))
            and not _goes_on(stored, header)
            and not _goes_on(header, stored)
        ):
            raise StoreRefusal(
                WriterRejectionCode.IDENTITY_CONFLICT,
                _header_conflict(stored, header),
            )
        if block.claim is not None:
            results.append(_known_start(tx, block))
    position = len(results)
    while position < len(events):
        used, committed = _commit_next(tx, block, position)
        results.extend(committed)
        position += used
    for index, result in enumerate(results):
        if result.event_seq != index + 1:
            raise StoreRefusal(
                WriterRejectionCode.IDENTITY_CONFLICT,
                f"event {events[index]['id']} is stored at event_seq {result.event_seq}, "
                f"the file has it at {index + 1}",
            )
    if stored is None and final_status not in TERMINAL_RUN_STATUSES and final_status != opening:
        restore_open_status(tx.conn, header.run_id, final_status, header.updated_at)
    created = sum(1 for result in results if result.created)
    return created, len(results) - created


def _check_claim_source(tx: LedgerTransaction, block: RunBlock) -> None:
    """A continuation's claim names the history it continued (its source run's events 1..high
    water, by digest): that history must be here as it was, or the continuation would be
    replayed after a history it never followed (the file was changed)."""
    claim = block.claim
    assert claim is not None
    stored = branches.stored_prefix_digest(
        tx.conn, claim.source_run_id, claim.session_id, claim.source_high_water
    )
    if stored != claim.source_prefix_digest:
        raise TransferError(
            TransferCode.IMPORT_STRUCTURE_INVALID,
            f"continuation run {block.header.run_id} continues run {claim.source_run_id} after "
            f"event {claim.source_high_water}, but that run's history up to there is not the one "
            "the continuation recorded (the file was changed); nothing was imported",
        )


def _known_start(tx: LedgerTransaction, block: RunBlock) -> CommitResult:
    """A continuation run that is already stored: its claim and start event must be the file's."""
    stored_claim = claims.find_by_target(tx.conn, block.header.run_id)
    if stored_claim != block.claim or not block.events:
        raise StoreRefusal(
            WriterRejectionCode.IDENTITY_CONFLICT,
            f"run {block.header.run_id} is stored with another continuation claim",
        )
    start = prepare_candidate(block.events[0], decoded=True)
    new, retried = tx.split_retries([start])
    if new:
        raise StoreRefusal(
            WriterRejectionCode.IDENTITY_CONFLICT,
            f"continuation start {start.event_id} is not the stored one",
            start.event_id,
        )
    return CommitResult(created=False, event_seq=retried[start.event_id])


def _goes_on(stored: RunHeader, header: RunHeader) -> bool:
    """The run is stored open (an export made while it ran was imported, and nothing here
    repaired it since) and the file holds more of the same run: its later events, its ending.
    The import then carries it on, as its own process would have (the events stored are
    checked to be the file's first ones, each at its place). The other way round (the file is
    the export made while it ran, this data folder has more of it) the file's events are
    found already present, and the run stays as stored."""
    return stored.status in (RunStatus.CREATED, RunStatus.RUNNING) and _same_run(stored, header)


def _same_run(stored: RunHeader, header: RunHeader) -> bool:
    """The two headers name the same run, whatever each says of how far it got."""
    return (
        stored._replace(
            status=header.status,
            failure_class=header.failure_class,
            updated_at=header.updated_at,
            completed_at=header.completed_at,
        )
        == header
    )


def _header_conflict(stored: RunHeader, header: RunHeader) -> str:
    """Why the run stored here is not the file's, and the way on when it is the same run
    ended differently (imported while it ran, then repaired here as interrupted)."""
    if not _same_run(stored, header) or stored.status in (RunStatus.CREATED, RunStatus.RUNNING):
        return f"run {header.run_id} is stored with another header than the file's"
    return (
        f"run {header.run_id} is stored here as {stored.status} (an export made while it ran was "
        f"imported, and this data folder ended it as interrupted) while the file has its own "
        f"ending ({header.status}); a recorded ending is never replaced. To have the file's "
        "record here, remove the session "
        f"({maka_command(f'export {header.session_id} -o FILE')} keeps this one; "
        f"{maka_command(f'sessions remove {header.session_id} --yes')}) and import the file "
        "again, or import it into another data folder"
    )


def _replace_status(header: RunHeader, status: RunStatus) -> RunHeader:
    return header._replace(status=status, failure_class=None, completed_at=None)


def _commit_next(
    tx: LedgerTransaction, block: RunBlock, position: int
) -> tuple[int, list[CommitResult]]:
    """Commit the transition starting at ``position``; returns (events used, results)."""
    events = block.events
    candidate = prepare_candidate(events[position], decoded=True)
    lane = candidate.lane
    if candidate.terminal:
        if not attestation_suffix_ok(events[position + 1 :]):
            raise StoreRefusal(
                WriterRejectionCode.RUN_SEALED,
                f"event {events[position + 1]['id']} follows the terminal event",
                events[position + 1]["id"],
            )
        header = block.header
        check_ending(candidate, RunStatus(header.status), header.failure_class)
        completed_at = header.completed_at if header.completed_at is not None else header.updated_at
        result = commit_ending(
            tx,
            candidate,
            RunStatus(header.status),
            header.failure_class,
            updated_at=header.updated_at,
            completed_at=completed_at,
        )
        return 1, [result]
    if lane is Lane.TOOL_DISPATCH:
        check_shape([candidate], TransitionKind.T1_PREPARE)
        return 1, [commit_prepared(tx, None, candidate, armed_crash_point())]
    if lane is Lane.FUNCTION_RESPONSE and is_bound_response(candidate.event):
        check_shape([candidate], TransitionKind.T2_OUTCOME)
        return 1, [commit_outcome(tx, candidate, armed_crash_point())]
    if lane is Lane.RECONCILE_RESULT:
        return _commit_bundle(tx, events, position, candidate)
    if is_settled_baseline(candidate.event):
        # A settled call's baseline: only right after its attestation bundle (docs/design/
        # workspace.md section 3), which may follow the run's terminal event.
        decision_id = candidate.event_id.removesuffix("_attest_baseline") + "_attest_decision"
        if position == 0 or events[position - 1]["id"] != decision_id:
            raise StoreRefusal(
                WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
                "a settled call's baseline follows its attestation",
                candidate.event_id,
            )
        return 1, [commit_settled_baseline(tx, candidate)]
    if is_workspace_fact(candidate.event):  # through the workspace-fact writer's own checks
        check_workspace_fact(candidate)
        return 1, [commit_workspace_fact(tx, candidate)]
    check_generic(candidate)
    return 1, [append_generic(tx, candidate)]


def _commit_bundle(
    tx: LedgerTransaction, events: list[RuntimeEvent], position: int, reconcile: Candidate
) -> tuple[int, list[CommitResult]]:
    following = [
        prepare_candidate(event, decoded=True) for event in events[position + 1 : position + 3]
    ]
    if following and following[0].lane is Lane.RECOVERY_DECISION:
        parts = [reconcile, following[0]]
        outcome = None
    elif len(following) == 2 and following[1].lane is Lane.RECOVERY_DECISION:
        parts = [reconcile, following[0], following[1]]
        outcome = following[0]
    else:
        raise StoreRefusal(
            WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
            "a reconcile fact must be followed by [outcome,] decision",
            reconcile.event_id,
        )
    check_shape(parts, TransitionKind.RECOVERY_BUNDLE)
    result = commit_bundle(tx, reconcile, outcome, parts[-1])
    # The bundle answers for its decision; the facts before it got consecutive seqs.
    first = result.event_seq - len(parts) + 1
    return len(parts), [CommitResult(result.created, first + index) for index in range(len(parts))]


def import_parsed(
    tx: LedgerTransaction, parsed: ParsedExport, *, bulk: bool = True
) -> ImportReport:
    """Import a parsed file inside ``tx`` (the caller's one write transaction). ``bulk=False``
    commits every event through the per-event writers even for new runs (the reference the
    fast path is tested against)."""
    highest = max((block.header.owner_epoch for block in parsed.runs), default=0)
    # An imported run must never look like it belongs to a live owner from the future.
    raise_owner_epoch(tx.conn, at_least=highest)
    session_kept = _import_session(tx, parsed)
    if parsed.branch is not None:
        _import_branch(tx, parsed)
    created = existing = 0
    torn = parsed.dropped_bytes > 0
    for index, block in enumerate(parsed.runs):
        last = index == len(parsed.runs) - 1
        made, kept = _import_run(tx, block, torn and last, bulk=bulk)
        created += made
        existing += kept
    return ImportReport(
        session_id=parsed.session.session_id,
        runs=len(parsed.runs),
        events_read=parsed.event_count,
        events_created=created,
        events_existing=existing,
        dropped_bytes=parsed.dropped_bytes,
        kept=session_kept,
    )
