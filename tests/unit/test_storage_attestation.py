"""Recording the user's attestation (docs/design/recovery.md section 8) in a real store, on both
engines (SQLite, and PostgreSQL on a real server): one bundle after the run's recovered terminal
event, settled ``completed`` / ``user_attestation``; every refusal with its code and nothing
written; an identical retry is a no-op; doctor stays clean (SQLite: the doctor does not check
PostgreSQL yet); export and import carry it (SQLite)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.codes import ResolverStatus, SettlementOrigin
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import StoreRefusal
from runtime.recovery.recovery_resolver import resolve_recovery
from runtime.recovery.settle_verdict import judge_settlement
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    operation_of,
    reconcile_event,
    terminal,
    user_text,
)
from tests.helpers.store_engines import ENGINES, store_state
from tests.helpers.store_workloads import add_run, commit_ledger, fixed_clock

IDS = RunIds("sess-a", "inv-a", "run-a", "turn-a")
CRASHED = terminal(IDS, status="failed", state_delta={"failureClass": "app_restarted"}, ts=90)


def _no_process(_operation_id: str) -> str | None:
    return None


def _bash(call_id: str = "c1") -> tuple[RuntimeEvent, RuntimeEvent]:
    call = call_event(call_id, "bash", {"command": "make migrate"}, ids=IDS)
    return call, dispatch_event(call, recovery_mode="never_auto_retry")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[SqliteLedgerStore]:
    if request.param == "sqlite":
        opened = open_store(data_dir, clock=fixed_clock())
    else:
        from storage.ledger.postgres_store import open_postgres_store

        opened = open_postgres_store(request.getfixturevalue("postgres_url"), clock=fixed_clock())
    yield opened
    opened.close()


def _doctor_clean(store: SqliteLedgerStore) -> None:
    if getattr(store, "url", None) is None:
        assert store.diagnose().problems == []


def _crashed_run(store: SqliteLedgerStore, *middle: RuntimeEvent, close: bool = True) -> None:
    """A run of epoch 1 holding ``middle``; then a new owner (epoch 2) closes it as recovery
    does."""
    store.bump_owner_epoch()
    add_run(store, IDS, epoch=store.read_owner_epoch())
    commit_ledger(store, [user_text(ids=IDS, marker=True), *middle])
    store.bump_owner_epoch()
    if close:
        commit_ledger(store, [CRASHED])


def _events(store: SqliteLedgerStore) -> list[RuntimeEvent]:
    return [row.event for row in store.read_run_events(IDS.run_id)]


def _refusal(store: SqliteLedgerStore, data_dir: Path, operation_id: str, **kwargs: object) -> str:
    before = store_state(store)
    with pytest.raises(StoreRefusal) as raised:
        store.commit_attestation(
            operation_id,
            bool(kwargs.get("ran", True)),
            kwargs.get("note"),  # type: ignore[arg-type]
            kwargs.get("surviving", _no_process),  # type: ignore[arg-type]
            judge_settlement,
        )
    assert store_state(store) == before
    _doctor_clean(store)
    return str(raised.value.code)


@pytest.mark.parametrize("ran", [True, False])
def test_an_attestation_settles_the_call_after_the_terminal_event(
    store: SqliteLedgerStore, data_dir: Path, ran: bool
) -> None:
    call, dispatch = _bash()
    _crashed_run(store, call, dispatch)
    result = store.commit_attestation(
        operation_of(call), ran, "checked the table", _no_process, judge_settlement
    )
    assert result.created
    events = _events(store)
    assert [event["id"] for event in events[-4:]] == [
        CRASHED["id"],
        result.reconcile_event_id,
        result.outcome_event_id,
        result.decision_event_id,
    ]
    (decision,) = resolve_recovery(events).decisions
    assert decision.status is ResolverStatus.COMPLETED
    assert decision.settlement_origin is SettlementOrigin.USER_ATTESTATION
    assert decision.response_is_error is (not ran)
    outcome: Any = events[-2]["content"]
    assert outcome["result"]["attestation"] == ("ran" if ran else "not_run")
    assert outcome["result"]["note"] == "checked the table"
    reconcile = events[-3]["actions"]["toolRecovery"]["payload"]
    assert reconcile["ownerEpoch"] == store.read_owner_epoch()
    assert reconcile["attestedAt"] == result.attested_at
    record = store.read_tool_operation(operation_of(call))
    assert record is not None and record.current_state == "recovery_completed"
    _doctor_clean(store)
    # The same choice and note again: nothing new, the first record stands.
    before = store_state(store)
    again = store.commit_attestation(
        operation_of(call), ran, "checked the table", _no_process, judge_settlement
    )
    assert not again.created and again.attested_at == result.attested_at
    assert store_state(store) == before
    # Anything else is refused: a settlement is final.
    assert _refusal(store, data_dir, operation_of(call), ran=not ran) == "operation_settled"
    assert _refusal(store, data_dir, operation_of(call), ran=ran, note="other") == (
        "operation_settled"
    )
    # The run stays sealed against everything else.
    with pytest.raises(StoreRefusal) as sealed:
        store.append_event(user_text("more", event_id="evt-late", ids=IDS))
    assert str(sealed.value.code) == "run_sealed"


def test_an_attestation_may_come_before_the_run_is_closed(
    store: SqliteLedgerStore, data_dir: Path
) -> None:
    """An orphaned run not yet repaired (older epoch, no terminal event): recovery then closes
    it after the attestation, as it closes any run."""
    call, dispatch = _bash()
    _crashed_run(store, call, dispatch, close=False)
    assert store.commit_attestation(
        operation_of(call), True, None, _no_process, judge_settlement
    ).created
    commit_ledger(store, [CRASHED])
    _doctor_clean(store)


def test_unknown_operation(store: SqliteLedgerStore, data_dir: Path) -> None:
    call, dispatch = _bash()
    _crashed_run(store, call, dispatch)
    assert _refusal(store, data_dir, "toolop_nope") == "operation_not_found"


def test_a_note_too_long_or_empty(store: SqliteLedgerStore, data_dir: Path) -> None:
    call, dispatch = _bash()
    _crashed_run(store, call, dispatch)
    op = operation_of(call)
    assert _refusal(store, data_dir, op, note="x" * 501) == "attestation_note_too_long"
    assert _refusal(store, data_dir, op, note="  ") == "attestation_note_empty"
    assert store.commit_attestation(op, True, "x" * 500, _no_process, judge_settlement).created


def test_a_call_whose_outcome_was_recorded(store: SqliteLedgerStore, data_dir: Path) -> None:
    call, dispatch = _bash()
    _crashed_run(store, call, dispatch, bound_response(call))
    assert _refusal(store, data_dir, operation_of(call)) == "attestation_not_applicable"


def test_a_parked_write_is_final(store: SqliteLedgerStore, data_dir: Path) -> None:
    call = call_event("w1", "Write", ids=IDS)
    dispatch = dispatch_event(call)
    observed = reconcile_event(call, "diverged")
    _crashed_run(store, call, dispatch, observed, decision_event(call, dispatch, observed))
    assert _refusal(store, data_dir, operation_of(call)) == "operation_settled"


def test_a_write_left_prepared_is_decided_by_its_evidence(
    store: SqliteLedgerStore, data_dir: Path
) -> None:
    call = call_event("w1", "Write", ids=IDS)
    _crashed_run(store, call, dispatch_event(call))
    code = _refusal(store, data_dir, operation_of(call))
    assert code == "attestation_not_offered_for_reconcile"


def test_a_run_of_the_current_owner(store: SqliteLedgerStore, data_dir: Path) -> None:
    call, dispatch = _bash()
    store.bump_owner_epoch()
    add_run(store, IDS, epoch=store.read_owner_epoch())
    commit_ledger(store, [user_text(ids=IDS, marker=True), call, dispatch])
    assert _refusal(store, data_dir, operation_of(call)) == "run_not_orphaned"


def test_a_process_still_recorded_alive(store: SqliteLedgerStore, data_dir: Path) -> None:
    call, dispatch = _bash()
    _crashed_run(store, call, dispatch)
    asked: list[str] = []

    def alive(operation_id: str) -> str | None:
        asked.append(operation_id)
        return "pid 4242"

    code = _refusal(store, data_dir, operation_of(call), surviving=alive)
    assert code == "background_operation_pending"
    assert asked == [operation_of(call)]


def test_a_run_with_a_ledger_issue_is_not_settled(store: SqliteLedgerStore, data_dir: Path) -> None:
    """A corrupt operation is not an unknown one: the run's scanner issue is the refusal."""
    call, dispatch = _bash()
    _crashed_run(store, call, dispatch)
    with store._write() as tx:  # a damaged ledger: the call's event copied under a new id
        tx.conn.execute(
            "INSERT INTO runtime_events SELECT 'evt-copy', session_id, invocation_id, run_id,"
            " turn_id, 99, lane, terminal, payload, committed_at FROM runtime_events"
            " WHERE event_id = ?",
            (call["id"],),
        )
    store._cache.clear()
    with pytest.raises(StoreRefusal) as raised:
        store.commit_attestation(operation_of(call), True, None, _no_process, judge_settlement)
    assert str(raised.value.code) not in ("", "operation_settled")


@pytest.mark.parametrize("bulk", [True, False])
def test_export_and_import_carry_the_attestation(
    store: SqliteLedgerStore, tmp_path: Path, bulk: bool
) -> None:
    """From either engine into a SQLite data folder (an export is the same bytes from both)."""
    call, dispatch = _bash()
    _crashed_run(store, call, dispatch)
    store.commit_attestation(
        operation_of(call), False, "nothing in the log", _no_process, judge_settlement
    )
    out = io.BytesIO()
    store.export_session(IDS.session_id, out)
    other = open_store(tmp_path / "other", clock=fixed_clock())
    try:
        report = other.import_session(out.getvalue(), bulk=bulk)
        assert report.events_created == len(_events(store))
        imported = [row.event for row in other.read_run_events(IDS.run_id)]
        assert imported == _events(store)
        (decision,) = resolve_recovery(imported).decisions
        assert decision.settlement_origin is SettlementOrigin.USER_ATTESTATION
        assert other.diagnose().problems == []
        record = other.read_tool_operation(operation_of(call))
        assert record is not None and record.current_state == "recovery_completed"
    finally:
        other.close()


def test_a_live_process_of_the_call_waits_the_attestation_until_it_ends(
    store: SqliteLedgerStore, data_dir: Path
) -> None:
    """The real check (docs/design/recovery.md section 9): the call's process recorded in the host
    table and still running (a real child) refuses; once it has ended the answer is recorded."""
    import subprocess

    from runtime.ledger.process_records import ToolProcessRecord
    from runtime.recovery.settlement import settle
    from runtime.tools.process_identity import identify

    call, dispatch = _bash()
    _crashed_run(store, call, dispatch)
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        identity = identify(child.pid, child.pid)
        store.record_tool_process(
            ToolProcessRecord(
                operation_id=operation_of(call),
                session_id=IDS.session_id,
                run_id=IDS.run_id,
                tool_name="bash",
                command="make migrate",
                pid=identity.pid,
                process_group=identity.process_group,
                create_time=identity.create_time,
                boot_id=identity.boot_id,
                owner_epoch=1,
                started_at=1,
            )
        )
        before = store_state(store)
        with pytest.raises(StoreRefusal) as raised:
            settle(store, IDS.session_id, "c1", ran=True, note=None, shells=None)
        assert str(raised.value.code) == "background_operation_pending"
        assert str(child.pid) in raised.value.message
        assert store_state(store) == before
    finally:
        child.kill()
        child.wait()
    settled = settle(store, IDS.session_id, "c1", ran=True, note=None, shells=None)
    assert settled.created and settled.operation_id == operation_of(call)
    _doctor_clean(store)
