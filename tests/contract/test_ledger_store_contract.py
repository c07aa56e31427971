"""The ledger store port contract (docs/design/ledger.md section 3, docs/design/recovery.md sections
1 and 3, docs/design/codes.md store refusals), run against both engines: the SQLite store on a real
database file and the PostgreSQL store on a real server (docs/postgres.md).

Each test names one rule; a refused write must change nothing (checked by snapshotting every
table before and after). Tests that edit the SQLite file behind the store's back, or open the data
folder read-only, run on SQLite only (``sqlite_store``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.codes import (
    BundleCode,
    ScanIssueCode,
    StoreCode,
    WriterRejectionCode,
)
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import (
    LedgerStore,
    RunHeader,
    RunStatus,
    SessionRecord,
    StoreRefusal,
)
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.ledger_builders import (
    DROP,
    RunIds,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    model_text,
    operation_of,
    reconcile_event,
    response_event,
    terminal,
    user_text,
    with_changes,
)
from tests.helpers.store_engines import ENGINES, engine_store, store_state
from tests.helpers.store_tampering import edit_behind_the_back
from tests.helpers.store_workloads import add_run, store_with_runs

IDS = RunIds()
OTHER = RunIds("sess-2", "inv-2", "run-2", "turn-2")


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest) -> Iterator[SqliteLedgerStore]:
    opened = engine_store(request, request.param, IDS, OTHER)
    yield opened
    opened.close()


@pytest.fixture
def sqlite_store(data_dir: Path) -> Iterator[SqliteLedgerStore]:
    opened = store_with_runs(data_dir, IDS, OTHER)
    yield opened
    opened.close()


def test_each_store_implements_the_port(store: SqliteLedgerStore) -> None:
    port: LedgerStore = store
    assert port.read_run_events(IDS.run_id) == []


def refused(store: SqliteLedgerStore, action: Callable[[], Any]) -> str:
    """Run a write that must be refused; assert the database is unchanged; return the code."""
    before = store_state(store)
    with pytest.raises(StoreRefusal) as error:
        action()
    assert store_state(store) == before, "a refused write changed the database"
    return str(error.value.code)


def seq_of(store: SqliteLedgerStore, run_id: str = IDS.run_id) -> list[str]:
    return [stored.event["id"] for stored in store.read_run_events(run_id)]


def prepared(store: SqliteLedgerStore, call_id: str = "call-1", **kw: Any) -> tuple[Any, Any]:
    call = call_event(call_id, ids=IDS, **kw)
    dispatch = dispatch_event(call)
    store.commit_tool_prepared(call, dispatch)
    return call, dispatch


# ---- generic append ---------------------------------------------------------------------------


def test_event_seq_is_gap_free_per_run_and_stored_bytes_are_canonical(
    store: SqliteLedgerStore,
) -> None:
    store.append_event(user_text(ids=IDS, marker=True))
    store.append_event(model_text(ids=OTHER, event_id="other-1"))
    store.append_event(model_text(ids=IDS, event_id="m-2", ts=3))
    store.append_event(model_text(ids=IDS, event_id="m-3", ts=4))
    rows = store.read_run_events(IDS.run_id)
    assert [row.seq for row in rows] == [1, 2, 3]
    assert [row.seq for row in store.read_run_events(OTHER.run_id)] == [1]
    from runtime.ledger.canonical_codec import canonical_bytes

    assert all(row.payload == canonical_bytes(row.event) for row in rows)


def test_exact_retry_is_a_no_op_and_other_bytes_are_an_identity_conflict(
    store: SqliteLedgerStore,
) -> None:
    event = user_text(ids=IDS)
    first = store.append_event(event)
    again = store.append_event(dict(event))  # type: ignore[arg-type]
    assert (first.created, again.created, again.event_seq) == (True, False, first.event_seq)
    changed = user_text("other words", ids=IDS)
    assert refused(store, lambda: store.append_event(changed)) == "identity_conflict"
    # An id is unique in the whole store: reusing it in another run is a conflict too.
    elsewhere = user_text(ids=OTHER)
    assert refused(store, lambda: store.append_event(elsewhere)) == "identity_conflict"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("dispatch", WriterRejectionCode.RESERVED_TOOL_BOUNDARY_FACT),
        ("bound_response", WriterRejectionCode.RESERVED_TOOL_BOUNDARY_FACT),
        ("reconcile", WriterRejectionCode.RESERVED_RECOVERY_FACT),
        ("decision", WriterRejectionCode.RESERVED_RECOVERY_FACT),
        ("continuation", WriterRejectionCode.RESERVED_CONTINUATION_FACT),
        ("terminal", WriterRejectionCode.RESERVED_RUN_ENDING_FACT),
        ("lane_conflict", ScanIssueCode.SEMANTIC_LANE_CONFLICT),
    ],
)
def test_generic_append_refuses_facts_that_have_their_own_writer(
    store: SqliteLedgerStore, name: str, code: str
) -> None:
    call = call_event(ids=IDS)
    dispatch = dispatch_event(call)
    reconcile = reconcile_event(call)
    candidates: dict[str, Any] = {
        "dispatch": dispatch,
        "bound_response": bound_response(call),
        "reconcile": reconcile,
        "decision": decision_event(call, dispatch, reconcile),
        "continuation": with_changes(
            user_text(ids=IDS),
            actions={
                "continuationStart": {
                    "protocol": "continuation_start_v2",
                    "provenance": "runtime_admission",
                    "claimId": "claim-1",
                    "boundaryDigest": "sha256:" + "a" * 64,
                    "immediateSource": {
                        "sessionId": "s",
                        "invocationId": "i",
                        "runId": "r",
                        "turnId": "t",
                        "highWater": 1,
                        "prefixDigest": "sha256:" + "b" * 64,
                    },
                    "replayManifestDigest": "sha256:" + "c" * 64,
                    "providerProjectionVersion": 1,
                    "providerReplayDigest": "sha256:" + "d" * 64,
                }
            },
        ),
        "terminal": terminal(IDS),
        "lane_conflict": with_changes(call, actions={"endInvocation": True}),
    }
    assert refused(store, lambda: store.append_event(candidates[name])) == code


@pytest.mark.parametrize(
    "changes",
    [
        {"ts": "1"},
        {"ts": 1.0},  # canonical JSON would write 1: the store must not re-type it
        {"ts": True},
        {"ts": None},
        {"unknown": 1},
        {"content": {"text": "\ud800"}},
        {"actions": {"stateDelta": {"x": float("nan")}}},
        {"actions": {"stateDelta": {"x": 2**60}}},
    ],
)
def test_generic_append_refuses_an_invalid_event_with_the_decoder_code(
    store: SqliteLedgerStore, changes: dict[str, Any]
) -> None:
    broken = with_changes(user_text(ids=IDS), **changes)
    assert refused(store, lambda: store.append_event(broken)) == "event_schema_invalid"


def test_a_run_needs_a_header_and_events_keep_the_invocation_spine(
    store: SqliteLedgerStore,
) -> None:
    ghost = RunIds("sess-1", "inv-x", "run-x", "turn-x")
    assert refused(store, lambda: store.append_event(user_text(ids=ghost))) == "run_not_found"
    wrong_turn = with_changes(user_text(ids=IDS), turnId="turn-other")
    assert refused(store, lambda: store.append_event(wrong_turn)) == "invocation_identity_conflict"
    wrong_invocation = with_changes(user_text(ids=IDS), invocationId=OTHER.invocation_id)
    code = refused(store, lambda: store.append_event(wrong_invocation))
    assert code == "invocation_identity_conflict"


def test_the_t1_marker_is_allowed_only_on_the_first_event(store: SqliteLedgerStore) -> None:
    store.append_event(user_text(ids=IDS))
    late = user_text(ids=IDS, event_id="late", marker=True)
    assert refused(store, lambda: store.append_event(late)) == "protocol_marker_invalid"


def test_a_terminal_event_seals_the_run(store: SqliteLedgerStore) -> None:
    store.append_event(user_text(ids=IDS))
    end = terminal(IDS)
    store.commit_run_ending(end, RunStatus.COMPLETED, None)
    late = model_text(ids=IDS, event_id="late")
    assert refused(store, lambda: store.append_event(late)) == "run_sealed"
    late_call = call_event("late-call", ids=IDS)
    assert refused(store, lambda: store.append_event(late_call)) == "run_sealed"
    assert store.commit_run_ending(end, RunStatus.COMPLETED, None).created is False


def test_generic_tool_facts_are_validated_by_the_scanner(store: SqliteLedgerStore) -> None:
    call = call_event(ids=IDS)
    store.append_event(call)
    again = call_event(ids=IDS, event_id="second-call")
    assert refused(store, lambda: store.append_event(again)) == "duplicate_call"
    orphan = response_event(call_event("never-called", ids=IDS), event_id="orphan")
    assert refused(store, lambda: store.append_event(orphan)) == "orphan_response"
    # A pre-T1 synthetic result settles the call through the generic path.
    store.append_event(response_event(call, "denied", is_error=True))
    assert len(seq_of(store)) == 2


# ---- T1 ---------------------------------------------------------------------------------------


def test_t1_commits_call_dispatch_and_the_prepared_projection(store: SqliteLedgerStore) -> None:
    store.append_event(user_text(ids=IDS, marker=True))
    call = call_event(ids=IDS)
    dispatch = dispatch_event(call)
    result = store.commit_tool_prepared(call, dispatch)
    assert (result.created, result.event_seq) == (True, 3)
    operation = store.read_tool_operation(operation_of(call))
    assert operation is not None
    assert (operation.current_state, operation.version, operation.result_event_id) == (
        "prepared",
        1,
        None,
    )
    assert (operation.call_event_id, operation.dispatch_event_id) == (call["id"], dispatch["id"])
    journal = store.read_tool_journal(operation.operation_id)
    assert [(row.journal_event_id, row.state, row.runtime_event_id) for row in journal] == [
        (f"{operation.operation_id}_prepared", "prepared", dispatch["id"])
    ]
    assert [op.operation_id for op in store.list_unsettled_tool_operations()] == [
        operation.operation_id
    ]
    retry = store.commit_tool_prepared(call, dispatch)
    assert (retry.created, retry.event_seq) == (False, 3)
    assert len(store.read_tool_journal(operation.operation_id)) == 1


def test_t1_claims_a_call_committed_during_a_permission_wait(store: SqliteLedgerStore) -> None:
    call = call_event(ids=IDS)
    store.append_event(call)
    result = store.commit_tool_prepared(call, dispatch_event(call))
    assert (result.created, result.event_seq) == (True, 2)
    other = call_event("call-2", ids=IDS, ts=5)
    store.append_event(other)
    assert store.commit_tool_prepared(None, dispatch_event(other)).event_seq == 4


def test_t1_recomputes_the_argument_hash_and_never_trusts_the_caller(
    store: SqliteLedgerStore,
) -> None:
    call = call_event(ids=IDS)
    forged = with_changes(
        dispatch_event(call), actions={"toolDispatch": {"canonicalArgsHash": "sha256:" + "0" * 64}}
    )
    code = refused(store, lambda: store.commit_tool_prepared(call, forged))
    assert code == "canonical_args_hash_conflict"


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("dispatch_without_call", "event_order_conflict"),
        ("after_synthetic_result", "event_order_conflict"),
        ("args_drift_same_call_id", "identity_conflict"),
        ("wrong_shape", "transition_shape_conflict"),
        ("other_run_identity", "invocation_identity_conflict"),
    ],
)
def test_t1_refusals(store: SqliteLedgerStore, case: str, code: str) -> None:
    call = call_event(ids=IDS)
    dispatch = dispatch_event(call)
    if case == "dispatch_without_call":
        action: Callable[[], Any] = partial(store.commit_tool_prepared, None, dispatch)
    elif case == "after_synthetic_result":
        store.append_event(call)
        store.append_event(response_event(call, "denied", is_error=True))
        action = partial(store.commit_tool_prepared, None, dispatch)
    elif case == "args_drift_same_call_id":
        store.append_event(call)
        drifted = call_event(ids=IDS, args={"path": "other.txt", "content": "x"})
        action = partial(store.commit_tool_prepared, drifted, dispatch_event(drifted))
    elif case == "wrong_shape":
        action = partial(store.commit_tool_prepared, call, user_text(ids=IDS))
    else:
        moved = with_changes(dispatch, turnId="turn-other")
        action = partial(store.commit_tool_prepared, call, moved)
    assert refused(store, action) == code


def test_a_damaged_run_refuses_even_an_exact_t1_retry(sqlite_store: SqliteLedgerStore) -> None:
    store = sqlite_store
    call, dispatch = prepared(store)
    # Damage the run behind the store's back: a second call for the same provider call id.
    duplicate = call_event(ids=IDS, event_id="injected")
    from runtime.ledger.canonical_codec import canonical_bytes

    edit_behind_the_back(
        store,
        "INSERT INTO runtime_events VALUES (?, ?, ?, ?, ?, 3, 'function_call', 0, ?, 1)",
        "injected", IDS.session_id, IDS.invocation_id, IDS.run_id, IDS.turn_id,
        canonical_bytes(duplicate),
    )  # fmt: skip
    reopened = open_store(store.path.parent)
    try:
        code = refused(reopened, lambda: reopened.commit_tool_prepared(call, dispatch))
        assert code == "duplicate_call"
        # Ordinary events still append: the damage is in the tool ledger only.
        assert reopened.append_event(model_text(ids=IDS, event_id="still-ok")).created
    finally:
        reopened.close()


def test_an_operation_id_is_unique_across_runs(store: SqliteLedgerStore) -> None:
    call, _ = prepared(store)
    other_call = call_event(ids=OTHER)
    forged = with_changes(
        dispatch_event(other_call),
        actions={"toolDispatch": {"operationId": operation_of(call)}},
        refs={"operationId": operation_of(call)},
    )
    code = refused(store, lambda: store.commit_tool_prepared(other_call, forged))
    assert code == "duplicate_operation"


# ---- T2 ---------------------------------------------------------------------------------------


def test_t2_settles_the_operation(store: SqliteLedgerStore) -> None:
    call, _ = prepared(store)
    response = bound_response(call)
    result = store.commit_tool_outcome(response)
    assert (result.created, result.event_seq) == (True, 3)
    operation = store.read_tool_operation(operation_of(call))
    assert operation is not None
    assert (operation.current_state, operation.version, operation.result_event_id) == (
        "outcome_committed",
        2,
        response["id"],
    )
    assert store.list_unsettled_tool_operations() == []
    retry = store.commit_tool_outcome(response)
    assert (retry.created, retry.event_seq) == (False, 3)
    second = bound_response(call, "again", event_id="second-response")
    assert refused(store, lambda: store.commit_tool_outcome(second)) == "duplicate_response"


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("unbound_after_t1", "identity_conflict"),
        ("lane_conflict", "semantic_lane_conflict"),
        ("unbound_through_t2", "transition_shape_conflict"),
        ("no_t1", "orphan_response"),
        ("call_without_dispatch", "operation_not_found"),
        ("bound_to_another_call", "operation_not_found"),
    ],
)
def test_t2_refusals(store: SqliteLedgerStore, case: str, code: str) -> None:
    call = call_event(ids=IDS)
    if case == "unbound_after_t1":
        store.commit_tool_prepared(call, dispatch_event(call))
        action: Callable[[], Any] = partial(store.append_event, response_event(call))
    elif case == "lane_conflict":
        store.commit_tool_prepared(call, dispatch_event(call))
        bad = with_changes(bound_response(call), actions={"endInvocation": True})
        action = partial(store.commit_tool_outcome, bad)
    elif case == "unbound_through_t2":
        store.commit_tool_prepared(call, dispatch_event(call))
        action = partial(store.commit_tool_outcome, response_event(call))
    elif case == "no_t1":
        action = partial(store.commit_tool_outcome, bound_response(call))
    elif case == "bound_to_another_call":
        # The response answers call-2 (committed without T1) but its refs name call-1's
        # prepared operation: it must not settle that operation.
        store.commit_tool_prepared(call, dispatch_event(call))
        other = call_event("call-2", ids=IDS, event_id="evt-call-2")
        store.append_event(other)
        action = partial(
            store.commit_tool_outcome,
            with_changes(bound_response(other), refs=dict(bound_response(call)["refs"])),
        )
    else:
        store.append_event(call)
        action = partial(store.commit_tool_outcome, bound_response(call))
    assert refused(store, action) == code


# ---- recovery bundle --------------------------------------------------------------------------


def test_completed_bundle_settles_with_its_outcome(store: SqliteLedgerStore) -> None:
    call, dispatch = prepared(store)
    reconcile = reconcile_event(call, "matches_expected_state")
    outcome = bound_response(call, duration_ms=None)
    decision = decision_event(call, dispatch, reconcile, outcome)
    result = store.commit_recovery_bundle(reconcile, outcome, decision)
    assert (result.created, result.event_seq) == (True, 5)
    operation = store.read_tool_operation(operation_of(call))
    assert operation is not None
    assert (operation.current_state, operation.version, operation.result_event_id) == (
        "recovery_completed",
        4,
        outcome["id"],
    )
    states = [row.state for row in store.read_tool_journal(operation.operation_id)]
    assert states == ["prepared", "reconcile_observed", "outcome_committed", "recovery_completed"]
    assert store.commit_recovery_bundle(reconcile, outcome, decision).created is False


def test_parked_is_final(store: SqliteLedgerStore) -> None:
    call, dispatch = prepared(store)
    reconcile = reconcile_event(call, "diverged")
    decision = decision_event(call, dispatch, reconcile)
    store.commit_recovery_bundle(reconcile, None, decision)
    assert store.commit_recovery_bundle(reconcile, None, decision).created is False
    operation = store.read_tool_operation(operation_of(call))
    assert operation is not None and operation.current_state == "recovery_parked"
    other = reconcile_event(call, "matches_expected_state", event_id="reconcile-2")
    outcome = bound_response(call, duration_ms=None)
    completed = decision_event(call, dispatch, other, outcome, event_id="decision-2")
    code = refused(store, lambda: store.commit_recovery_bundle(other, outcome, completed))
    assert code == "recovery_fact_shape_conflict"
    assert refused(store, lambda: store.commit_tool_outcome(outcome)) == "outcome_for_parked"


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("mode", BundleCode.RECOVERY_MODE_UNSUPPORTED),
        ("evidence", BundleCode.EVIDENCE_ORDER_CONFLICT),
        ("reason", BundleCode.RECONCILE_DECISION_CONFLICT),
        ("after_t2", BundleCode.OUTCOME_FOR_PARKED),
        ("sealed", WriterRejectionCode.RUN_SEALED),
        ("unknown_operation", StoreCode.OPERATION_NOT_FOUND),
    ],
)
def test_bundle_refusals(store: SqliteLedgerStore, case: str, code: str) -> None:
    call = call_event(ids=IDS)
    mode = "never_auto_retry" if case == "mode" else "reconcile"
    dispatch = dispatch_event(call, recovery_mode=mode)
    if case != "unknown_operation":
        store.commit_tool_prepared(call, dispatch)
    reconcile = reconcile_event(call, "diverged")
    decision = decision_event(call, dispatch, reconcile)
    if case == "evidence":
        decision = with_changes(
            decision,
            actions={
                "toolRecovery": {
                    "payload": {"evidenceEventIds": [dispatch["id"], call["id"], reconcile["id"]]}
                }
            },
        )
    elif case == "reason":
        decision = with_changes(
            decision,
            actions={"toolRecovery": {"payload": {"reasonCode": "reconcile_unreadable"}}},
        )
    elif case == "after_t2":
        store.commit_tool_outcome(bound_response(call))
    elif case == "sealed":
        ending = terminal(IDS, status="failed", state_delta={"failureClass": "app_restarted"})
        store.commit_run_ending(ending, RunStatus.FAILED, "app_restarted")
    action = partial(store.commit_recovery_bundle, reconcile, None, decision)
    assert refused(store, action) == code


# ---- run ending and headers -------------------------------------------------------------------


def test_run_ending_commits_event_and_header_together(store: SqliteLedgerStore) -> None:
    store.mark_run_running(IDS.run_id)
    store.append_event(user_text(ids=IDS))
    ending = terminal(IDS, status="failed", state_delta={"failureClass": "provider_error"})
    result = store.commit_run_ending(ending, RunStatus.FAILED, "provider_error")
    assert result.created and result.event_seq == 2
    header = store.read_run_header(IDS.run_id)
    assert header is not None
    assert (header.status, header.failure_class) == (RunStatus.FAILED, "provider_error")
    assert header.completed_at is not None
    other_end = terminal(IDS, event_id="second-end")
    code = refused(store, lambda: store.commit_run_ending(other_end, RunStatus.COMPLETED, None))
    assert code == "run_sealed"


@pytest.mark.parametrize(
    ("status", "failure", "event", "code"),
    [
        (RunStatus.COMPLETED, None, {"status": "failed"}, "transition_shape_conflict"),
        (
            RunStatus.FAILED,
            "app_restarted",
            {"status": "failed", "actions": {"stateDelta": {"failureClass": "provider_error"}}},
            "transition_shape_conflict",
        ),
        (RunStatus.RUNNING, None, {}, "run_status_conflict"),
        (RunStatus.COMPLETED, None, {"partial": True}, "transition_shape_conflict"),
        (RunStatus.COMPLETED, None, {"status": DROP, "actions": DROP}, "transition_shape_conflict"),
        (RunStatus.COMPLETED, "provider_error", {}, "transition_shape_conflict"),
    ],
)
def test_run_ending_refusals(
    store: SqliteLedgerStore,
    status: RunStatus,
    failure: str | None,
    event: dict[str, Any],
    code: str,
) -> None:
    ending: RuntimeEvent = with_changes(terminal(IDS), **event)
    assert refused(store, lambda: store.commit_run_ending(ending, status, failure)) == code
    header = store.read_run_header(IDS.run_id)
    assert header is not None and header.status is RunStatus.CREATED


def test_header_lifecycle(store: SqliteLedgerStore) -> None:
    header = store.read_run_header(IDS.run_id)
    assert header is not None
    store.create_run(header)  # the same admission again: a no-op
    moved = header._replace(cwd="/else")
    assert refused(store, lambda: store.create_run(moved)) == "identity_conflict"
    store.mark_run_running(IDS.run_id)
    store.mark_run_running(IDS.run_id)  # idempotent
    terminal_header = header._replace(
        run_id="run-new", invocation_id="inv-new", status=RunStatus.COMPLETED
    )
    assert refused(store, lambda: store.create_run(terminal_header)) == "run_status_conflict"
    homeless = RunHeader("run-y", "no-session", "inv-y", "turn-y", RunStatus.CREATED, "/w", 1, 1, 1)
    assert refused(store, lambda: store.create_run(homeless)) == "session_not_found"
    reused = RunHeader(
        "run-z", IDS.session_id, IDS.invocation_id, "turn-z", RunStatus.CREATED, "/w", 1, 1, 1
    )
    assert refused(store, lambda: store.create_run(reused)) == "invocation_identity_conflict"
    store.append_event(user_text(ids=IDS))
    store.commit_run_ending(terminal(IDS), RunStatus.COMPLETED, None)
    assert refused(store, lambda: store.mark_run_running(IDS.run_id)) == "run_status_conflict"


def test_session_records(store: SqliteLedgerStore) -> None:
    session = store.get_session(IDS.session_id)
    assert session is not None
    store.create_session(session)
    changed = SessionRecord(session.session_id, session.cwd, "renamed", session.created_at)
    assert refused(store, lambda: store.create_session(changed)) == "identity_conflict"
    assert {s.session_id for s in store.list_sessions()} == {IDS.session_id, OTHER.session_id}
    assert [h.run_id for h in store.list_session_runs(IDS.session_id)] == [IDS.run_id]
    assert [h.run_id for h in store.list_runs([RunStatus.CREATED])] == [IDS.run_id, OTHER.run_id]


def test_owner_epoch_is_durable_and_recorded_by_headers(data_dir: Path) -> None:
    with open_store(data_dir) as first:
        assert first.read_owner_epoch() == 0
        assert first.bump_owner_epoch() == 1
    with open_store(data_dir) as second:
        epoch = second.bump_owner_epoch()
        assert epoch == 2
        add_run(second, IDS, epoch=epoch)
        header = second.read_run_header(IDS.run_id)
        assert header is not None and header.owner_epoch == 2


def test_repair_run_header_follows_the_terminal_event(sqlite_store: SqliteLedgerStore) -> None:
    store = sqlite_store
    store.append_event(user_text(ids=IDS))
    ending = terminal(IDS, status="failed", state_delta={"failureClass": "app_restarted"})
    store.commit_run_ending(ending, RunStatus.FAILED, "app_restarted")
    edit_behind_the_back(
        store,
        "UPDATE runs SET status = 'running', failure_class = NULL WHERE run_id = ?",
        IDS.run_id,
    )
    repaired = store.repair_run_header(IDS.run_id)
    assert (repaired.status, repaired.failure_class) == (RunStatus.FAILED, "app_restarted")
    untouched = store.repair_run_header(OTHER.run_id)
    assert untouched.status is RunStatus.CREATED


def test_read_only_store_reads_while_a_writer_is_open(sqlite_store: SqliteLedgerStore) -> None:
    store = sqlite_store
    store.append_event(user_text(ids=IDS))
    with open_store(store.path.parent, read_only=True) as reader:
        assert seq_of(reader) == ["evt-user"]
        store.append_event(model_text(ids=IDS))
        assert seq_of(reader) == ["evt-user", "evt-model"]
        with pytest.raises(StoreRefusal) as error:
            reader.bump_owner_epoch()
        assert error.value.code is StoreCode.STORE_READ_ONLY
