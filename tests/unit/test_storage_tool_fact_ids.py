"""T1 and T2 skip the exact-retry lookup for ids their run has never seen; an id stored in
*another* run must still get the answer of the exact order of checks (``identity_conflict``,
before the seal and the transition validation), leave nothing behind, and leave the run's
cached state (next ``event_seq``, scanner) as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.ledger.codes import WriterRejectionCode
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord, StoreRefusal
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    terminal,
    user_text,
    with_changes,
)

HOME = RunIds("sess-1", "inv-home", "run-home", "turn-home")
OTHER = RunIds("sess-1", "inv-other", "run-other", "turn-other")


def _store(data_dir: Path) -> SqliteLedgerStore:
    store = open_store(data_dir)
    store.create_session(SessionRecord("sess-1", "/work", "ids", 1))
    for ids in (OTHER, HOME):
        store.create_run(
            RunHeader(
                ids.run_id,
                ids.session_id,
                ids.invocation_id,
                ids.turn_id,
                RunStatus.RUNNING,
                "/work",
                1,
                1,
                1,
            )
        )
        store.append_event(user_text(ids=ids, marker=True, event_id=f"user-{ids.run_id}"))
    # The other run holds a tool call whose event ids the home run's candidates will reuse.
    other_call = call_event("call-o", ids=OTHER, event_id="taken-call")
    store.commit_tool_prepared(other_call, dispatch_event(other_call, event_id="taken-dispatch"))
    store.commit_tool_outcome(bound_response(other_call, event_id="taken-response"))
    return store


def _home_rows(store: SqliteLedgerStore) -> list[tuple[int, str]]:
    return [(row.seq, row.event["id"]) for row in store.read_run_events(HOME.run_id)]


def _code(action: object) -> str:
    assert callable(action)
    with pytest.raises(StoreRefusal) as refused:
        action()
    return str(refused.value.code)


@pytest.mark.parametrize("taken", ["call", "dispatch", "both"])
def test_t1_reusing_an_id_of_another_run_is_an_identity_conflict(
    data_dir: Path, taken: str
) -> None:
    with _store(data_dir) as store:
        call = call_event("call-h", ids=HOME)
        dispatch = dispatch_event(call)
        if taken in ("call", "both"):
            call = with_changes(call, id="taken-call")
            dispatch = dispatch_event(call)
        if taken in ("dispatch", "both"):
            dispatch = with_changes(dispatch, id="taken-dispatch")
        before = _home_rows(store)
        assert _code(lambda: store.commit_tool_prepared(call, dispatch)) == "identity_conflict"
        assert _home_rows(store) == before
        operation = dispatch["actions"]["toolDispatch"]["operationId"]
        assert store.read_tool_operation(operation) is None
        # The rolled-back attempt left no trace in the run's state: the next T1 and T2 land
        # at the next gap-free seqs and the projections agree with a rebuild.
        fresh = call_event("call-h2", ids=HOME)
        assert store.commit_tool_prepared(fresh, dispatch_event(fresh)).event_seq == 3
        assert store.commit_tool_outcome(bound_response(fresh)).event_seq == 4
        assert [seq for seq, _ in _home_rows(store)] == [1, 2, 3, 4]
        assert store.read_projections() == store.derive_projections()


def test_t2_reusing_an_id_of_another_run_is_an_identity_conflict(data_dir: Path) -> None:
    with _store(data_dir) as store:
        call = call_event("call-h", ids=HOME)
        store.commit_tool_prepared(call, dispatch_event(call))
        response = bound_response(call, event_id="taken-response")
        assert _code(lambda: store.commit_tool_outcome(response)) == "identity_conflict"
        assert [seq for seq, _ in _home_rows(store)] == [1, 2, 3]
        assert store.commit_tool_outcome(bound_response(call)).event_seq == 4


def test_the_id_check_comes_before_the_seal(data_dir: Path) -> None:
    """On a sealed run a candidate new to the run but stored elsewhere is refused as an
    identity conflict (step 4), not as ``run_sealed`` (step 5); a truly new one is sealed."""
    with _store(data_dir) as store:
        store.commit_run_ending(terminal(HOME, event_id="end-home"), RunStatus.COMPLETED, None)
        call = call_event("call-h", ids=HOME)
        taken = with_changes(call, id="taken-call")
        assert _code(lambda: store.commit_tool_prepared(taken, dispatch_event(taken))) == (
            "identity_conflict"
        )
        sealed = _code(lambda: store.commit_tool_prepared(call, dispatch_event(call)))
        assert sealed == WriterRejectionCode.RUN_SEALED


def test_an_exact_retry_after_a_refused_attempt_is_still_a_no_op(data_dir: Path) -> None:
    with _store(data_dir) as store:
        call = call_event("call-h", ids=HOME)
        dispatch = dispatch_event(call)
        first = store.commit_tool_prepared(call, dispatch)
        again = store.commit_tool_prepared(call, dispatch)
        assert (first.created, again.created, again.event_seq) == (True, False, first.event_seq)
        response = bound_response(call)
        assert store.commit_tool_outcome(response).created is True
        assert store.commit_tool_outcome(response).created is False
