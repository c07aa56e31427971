"""The ledger side of branching a session (issue #36), on real SQLite files: schema version 5
adds ``session_branches`` to an older database; the ``branchStart`` fact is written with its new
session in one transaction and never changes; removing sessions keeps every branch's source;
the points a session can be branched from, the gates on them, and the snapshot retention keeps
for a branch."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from runtime.continuation.branch_prefix import (
    RUN_ENDING,
    TOOL_RESULT,
    USER_MESSAGE,
    BranchRefused,
    find_boundary,
    list_boundaries,
    resolve_prefix,
    resolve_recorded,
)
from runtime.ledger.branch_facts import BRANCH_START_V1, BranchRecord, branch_record
from runtime.ledger.codes import BranchCode, StoreCode, WriterRejectionCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunStatus, SessionRecord
from storage.checkpoints.checkpoint_retention import refs_to_keep
from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.ledger_builders import (
    RunIds,
    call_event,
    model_text,
    terminal,
    tool_turn,
    user_text,
)
from tests.helpers.resume_fixtures import seed_interrupted_run
from tests.helpers.schema_v3 import rewind_to_schema_5
from tests.helpers.store_tampering import edit_behind_the_back

pytestmark = pytest.mark.unit

SOURCE = RunIds("session_src", "inv-src", "run-src", "turn-src")
CHECKPOINT = {
    "checkpointRef": "refs/maka/session_src/run-src/1",
    "commitId": "c" * 40,
    "treeId": "d" * 40,
    "workspaceIdentity": "workspace:v1:11111111-1111-4111-8111-111111111111",
}


def _finished_run(
    store: SqliteLedgerStore, ids: RunIds, events: Sequence[RuntimeEvent], status: str
) -> None:
    seed_interrupted_run(store, ids, events, cwd="/work")
    store.commit_run_ending(terminal(ids, status=status, ts=90), RunStatus(status), None)


def _source(store: SqliteLedgerStore, ending: str = "response") -> None:
    events = [
        user_text("do it", ids=SOURCE, marker=True),
        *tool_turn("c1", ids=SOURCE, ending=ending),
        model_text("done", ids=SOURCE, ts=50),
    ]
    _finished_run(store, SOURCE, events, "completed" if ending == "response" else "failed")


def _fact(session_id: str, run_id: str, seq: int, event_id: str, digest: str) -> dict[str, Any]:
    return {
        "protocol": BRANCH_START_V1,
        "sessionId": session_id,
        "source": {
            "sessionId": SOURCE.session_id,
            "invocationId": SOURCE.invocation_id,
            "runId": run_id,
            "turnId": SOURCE.turn_id,
            "highWater": seq,
            "prefixDigest": digest,
            "boundaryEventId": event_id,
            "boundaryKind": RUN_ENDING,
        },
        "snapshot": CHECKPOINT,
        "currentFiles": False,
        "workspacePath": "/copy",
        "workspaceIdentity": "workspace:v1:22222222-2222-4222-8222-222222222222",
        "workspaceEpoch": 1,
        "decidedBy": "local_user",
        "decidedAt": 5,
    }


def _branch(store: SqliteLedgerStore, session_id: str = "session_new") -> BranchRecord:
    [boundary] = [b for b in list_boundaries(store, SOURCE.session_id) if b.kind == RUN_ENDING]
    header = store.read_run_header(SOURCE.run_id)
    assert header is not None
    prefix = resolve_prefix(store, header, boundary.seq)
    fact = _fact(session_id, SOURCE.run_id, boundary.seq, boundary.event_id, "")
    fact["source"]["prefixDigest"] = prefix.prefix.prefix_digest
    fact["providerReplayDigest"] = prefix.replay.provider_replay_digest
    record = branch_record(fact, 7)
    store.admit_branch(SessionRecord(session_id, "/copy", "copy", 7), record)
    return record


def test_an_older_database_gains_the_branch_table_and_keeps_its_rows(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        _source(store)
    rewind_to_schema_5(tmp_path / "runtime.sqlite")
    conn = sqlite3.connect(tmp_path / "runtime.sqlite")
    conn.execute("DROP TABLE session_branches")
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    before = conn.execute("SELECT count(*) FROM runtime_events").fetchone()
    conn.close()
    with open_store(tmp_path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 6
        assert store.list_branches() == []
        record = _branch(store)
        assert store.read_branch("session_new") == record
    conn = sqlite3.connect(tmp_path / "runtime.sqlite")
    assert conn.execute("SELECT count(*) FROM runtime_events").fetchone() == before
    conn.close()


def test_the_fact_is_stored_once_with_its_session_and_never_changes(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        _source(store)
        events_before = len(store.read_run_events(SOURCE.run_id))
        record = _branch(store)
        assert [b.session_id for b in store.list_branches()] == ["session_new"]
        session = store.get_session("session_new")
        assert session is not None and session.cwd == "/copy"
        # The history is referred to, not copied: the new session has no run and no event.
        assert store.list_session_runs("session_new") == []
        assert len(store.read_run_events(SOURCE.run_id)) == events_before
        assert resolve_recorded(store, record).prefix.prefix_digest == record.source_prefix_digest
    conn = sqlite3.connect(tmp_path / "runtime.sqlite")
    with pytest.raises(sqlite3.IntegrityError, match="never changes"):
        conn.execute("UPDATE session_branches SET source_high_water = 1")
    conn.close()


def test_a_fact_naming_a_run_of_another_session_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    other = RunIds("session_other", "inv-o", "run-o", "turn-o")
    with open_store(tmp_path) as store:
        _source(store)
        first = user_text(ids=other, marker=True, event_id="evt-other")
        seed_interrupted_run(store, other, [first], cwd="/work")
        store.commit_run_ending(
            terminal(other, event_id="evt-other-end", ts=90), RunStatus.COMPLETED, None
        )
        record = branch_record(_fact("session_new", "run-o", 1, "evt-other", "sha256:x"), 7)
        with pytest.raises(LedgerError) as refused:
            store.admit_branch(SessionRecord("session_new", "/copy", "copy", 7), record)
        assert refused.value.code == WriterRejectionCode.IDENTITY_CONFLICT
        assert store.get_session("session_new") is None and store.list_branches() == []


def test_a_source_stays_while_its_branches_exist(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        _source(store)
        _branch(store)
        with pytest.raises(LedgerError) as refused:
            store.remove_session(SOURCE.session_id)
        assert refused.value.code == StoreCode.SESSION_HAS_BRANCHES
        assert store.get_session(SOURCE.session_id) is not None
        store.remove_session("session_new")
        assert store.list_branches() == []
        store.remove_session(SOURCE.session_id)
        assert store.list_sessions() == []


def test_boundaries_are_user_messages_tool_results_and_endings(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        _source(store)
        kinds = [b.kind for b in list_boundaries(store, SOURCE.session_id)]
        assert kinds == [USER_MESSAGE, TOOL_RESULT, RUN_ENDING]
        events: list[Any] = [row.event for row in store.read_run_events(SOURCE.run_id)]
        model = next(
            e["id"]
            for e in events
            if e["role"] == "model" and (e.get("content") or {}).get("kind") == "text"
        )
        with pytest.raises(BranchRefused) as refused:
            find_boundary(store, SOURCE.session_id, str(model))
        assert refused.value.code == BranchCode.BRANCH_BOUNDARY_INVALID
        with pytest.raises(BranchRefused) as missing:
            find_boundary(store, "session_other", "evt-user")
        assert missing.value.code == BranchCode.BRANCH_EVENT_NOT_FOUND


def test_a_call_without_a_settled_outcome_holds_the_points_after_it(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        _source(store, ending="dangling")
        boundaries = list_boundaries(store, SOURCE.session_id)
        assert [(b.kind, b.unsettled) for b in boundaries] == [
            (USER_MESSAGE, False),
            (RUN_ENDING, True),
        ]
        header = store.read_run_header(SOURCE.run_id)
        assert header is not None
        with pytest.raises(BranchRefused) as refused:
            resolve_prefix(store, header, boundaries[-1].seq)
        assert refused.value.code == BranchCode.BRANCH_BOUNDARY_UNSETTLED
        # Before the call, the history is whole.
        assert resolve_prefix(store, header, boundaries[0].seq).prefix.last_event_seq == 1


def test_a_call_never_dispatched_holds_nothing_and_the_listing_says_so(tmp_path: Path) -> None:
    """The listing asks the gate a branch meets: a call the model asked for and the run never
    sent is trimmed from the history, so the ending after it is a point to branch from (the
    listing once called it "not branchable" while ``--at`` took it)."""
    with open_store(tmp_path) as store:
        events = [
            user_text("do it", ids=SOURCE, marker=True),
            call_event("c1", "Write", None, ids=SOURCE),
        ]
        _finished_run(store, SOURCE, events, "failed")
        boundaries = list_boundaries(store, SOURCE.session_id)
        assert [(b.kind, b.unsettled) for b in boundaries] == [
            (USER_MESSAGE, False),
            (RUN_ENDING, False),
        ]
        assert boundaries[-1].to_json()["branchable"] is True
        header = store.read_run_header(SOURCE.run_id)
        assert header is not None
        # The branch there replays the user's message alone: the unsent call is trimmed.
        replay = resolve_prefix(store, header, boundaries[-1].seq).replay
        assert [item.kind.value for item in replay.provider_items] == ["text"]


def test_a_run_without_snapshot_facts_binds_no_snapshot_to_its_points(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        _source(store)
        # No snapshot fact in this run: no point has one bound.
        assert [b.snapshot for b in list_boundaries(store, SOURCE.session_id)] == [None] * 3


def test_retention_keeps_the_snapshot_a_branch_was_copied_from(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        _source(store)
        keep, _ = refs_to_keep(store)
        assert CHECKPOINT["checkpointRef"] not in keep
        _branch(store)
        keep, _ = refs_to_keep(store)
        assert CHECKPOINT["checkpointRef"] in keep


def test_a_changed_fact_body_is_not_read_as_a_branch() -> None:
    good = _fact("session_new", "run-src", 3, "evt", "sha256:x")
    assert branch_record(good, 1).source_high_water == 3
    for bad in (
        with_changes_dict(good, protocol="branch_start_v0"),
        with_changes_dict(good, sessionId=SOURCE.session_id),
        {**good, "source": {**good["source"], "highWater": 0}},
    ):
        with pytest.raises(ValueError):
            branch_record(bad, 1)


def with_changes_dict(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**body, **changes}


def _snap(n: int) -> dict[str, Any]:
    return {"actions": {"workspaceCheckpoint": {"checkpointRef": f"ref-{n}"}}}


def _dispatch(tool: str) -> dict[str, Any]:
    return {"actions": {"toolDispatch": {"toolName": tool}}}


NEW_RUN: dict[str, Any] = {"new run": True}


def _bound(events: list[tuple[dict[str, Any], bool]]) -> list[str | None]:
    """The snapshot bound to each boundary of a sequence of (event, is a boundary); the event
    ``NEW_RUN`` starts the next run."""
    from runtime.continuation.branch_prefix import _Binder

    binder = _Binder()
    positions = []
    for position, (event, boundary) in enumerate(events):
        if event is NEW_RUN:
            binder.new_run()
            continue
        binder.see(position, cast(RuntimeEvent, event), boundary)
        if boundary:
            positions.append(position)
    found = [binder.bound.get(p) for p in positions]
    return [str(s["checkpointRef"]) if s is not None else None for s in found]


def test_a_point_is_bound_to_the_snapshot_of_the_folder_as_it_was_there() -> None:
    plain: dict[str, Any] = {}
    assert _bound(
        [
            (plain, True),  # the first message: the run's first capture follows it
            (_snap(1), False),
            (_dispatch("read_file"), False),
            (plain, True),  # a read changes nothing: still snapshot 1
            (_dispatch("bash"), False),
            (plain, True),  # the bash call's result: its capture follows
            (_snap(2), False),
            (plain, True),  # the run's ending
        ]
    ) == ["ref-1", "ref-1", "ref-2", "ref-2"]
    # A writing call with no capture after it (snapshots stopped, a failed capture): the points
    # after it have no snapshot, those before keep theirs.
    failed = {"actions": {"workspaceCheckpointFailed": {"code": "checkpoint_git_failed"}}}
    assert _bound(
        [
            (_snap(1), False),
            (plain, True),
            (_dispatch("write_file"), False),
            (plain, True),
            (failed, False),
            (plain, True),
        ]
    ) == ["ref-1", None, None]


def test_a_snapshot_of_another_run_never_stands_for_a_point() -> None:
    """Between two runs the user may change the folder: a run without snapshots (a nested
    repository turned them off) binds none to its points, not the next run's first capture,
    and a run's first message waits for its own run's capture, not the last run's."""
    plain: dict[str, Any] = {}
    assert _bound(
        [
            (plain, True),  # run 1, snapshots off: its message
            (_dispatch("bash"), False),
            (plain, True),  # the bash call's result
            (plain, True),  # run 1's ending
            (NEW_RUN, False),
            (plain, True),  # run 2's message: its first capture follows
            (_snap(1), False),
            (plain, True),  # run 2's ending
            (NEW_RUN, False),
            (plain, True),  # run 3's message: not run 2's snapshot
            (_snap(2), False),
            (plain, True),
        ]
    ) == [None, None, None, "ref-1", "ref-1", "ref-2", "ref-2"]


def test_the_doctor_checks_each_branch_against_its_source(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        _source(store)
        record = _branch(store)
        assert store.diagnose().ok
        # Another program rewrites an event of the prefix: the branch no longer matches it.
        edit_behind_the_back(
            store,
            "UPDATE runtime_events SET payload = "
            "CAST(replace(CAST(payload AS TEXT), 'do it', 'do that') AS BLOB) "
            "WHERE run_id = ? AND event_seq = 1",
            SOURCE.run_id,
        )
        codes = [(p.code, p.event_id) for p in store.diagnose().problems]
        assert (BranchCode.BRANCH_SOURCE_CHANGED, record.boundary_event_id) in codes
        with pytest.raises(BranchRefused) as refused:
            resolve_recorded(store, record)
        assert refused.value.code == BranchCode.BRANCH_SOURCE_CHANGED
