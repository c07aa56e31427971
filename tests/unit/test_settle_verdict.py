"""Whether the user may settle a tool call (``runtime.recovery.settle_verdict``): one decision
from the run's committed events, the resolver's reading that ``maka plan`` shows. The store
refuses by it, the transcript card asks "Did it run?" by it, and ``maka plan``'s advice names
``maka settle`` by it; each agrees with the others here, on the same ledgers.

The damaged record that started it: a result whose call id was changed behind Maka's back
(an orphan response). The resolver finds the call ``c1`` dispatched without a result
(``indeterminate``) and the run damaged; settling is refused because the record is damaged
(``tool_ledger_corruption``), never with "its outcome was recorded"."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.agent.transcript_projection import transcript_of_run
from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.codes import ResolverStatus
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import StoreRefusal
from runtime.recovery.recovery_resolver import resolve_recovery
from runtime.recovery.settle_verdict import judge_settlement, verdicts_by_call
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.ledger_builders import (
    RunIds,
    attestation_bundle,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    operation_of,
    reconcile_event,
    terminal,
    user_text,
    with_changes,
)
from tests.helpers.store_workloads import add_run, commit_ledger, db_state, fixed_clock

IDS = RunIds("sess-v", "inv-v", "run-v", "turn-v")
CRASHED = terminal(IDS, status="failed", state_delta={"failureClass": "app_restarted"}, ts=90)


def _bash(call_id: str = "c1") -> tuple[RuntimeEvent, RuntimeEvent]:
    call = call_event(call_id, "bash", {"command": "make migrate"}, ids=IDS)
    return call, dispatch_event(call, recovery_mode="never_auto_retry")


def _orphaned(response: RuntimeEvent) -> RuntimeEvent:
    """The result now answers a call id no call has (as the e2e test damages it)."""
    return with_changes(response, content={"id": "c9"}, refs={"toolCallId": "c9"})


def _run(*middle: RuntimeEvent) -> list[RuntimeEvent]:
    return [user_text(ids=IDS, marker=True), *middle, CRASHED]


def _ledgers() -> dict[str, tuple[list[RuntimeEvent], str | None]]:
    """Named ledgers and the verdict's code on ``c1`` (None: the user may settle it)."""
    call, dispatch = _bash()
    response = bound_response(call)
    write = call_event("c1", "Write", ids=IDS)
    write_dispatch = dispatch_event(write)
    diverged = reconcile_event(write, "diverged")
    return {
        "unknown": (_run(call, dispatch), None),
        "recorded": (_run(call, dispatch, response), "attestation_not_applicable"),
        "orphan_response": (_run(call, dispatch, _orphaned(response)), "tool_ledger_corruption"),
        "lane_conflict": (
            _run(call, dispatch, with_changes(response, role="model")),
            "tool_ledger_corruption",
        ),
        "attested": (
            [
                user_text(ids=IDS, marker=True),
                call,
                dispatch,
                CRASHED,
                *attestation_bundle(call, dispatch),
            ],
            "operation_settled",
        ),
        "parked_write": (
            _run(write, write_dispatch, diverged, decision_event(write, write_dispatch, diverged)),
            "operation_settled",
        ),
        "unreconciled_write": (
            _run(write, write_dispatch),
            "attestation_not_offered_for_reconcile",
        ),
        "never_dispatched": (_run(call), "attestation_not_applicable"),
    }


LEDGERS = _ledgers()


@pytest.mark.parametrize("name", list(LEDGERS))
def test_the_verdict_on_c1(name: str) -> None:
    events, code = LEDGERS[name]
    verdict = verdicts_by_call(events)["c1"]
    assert verdict.code == code
    assert verdict.open is (code is None)
    if code is not None:
        assert verdict.message


def test_an_orphan_response_leaves_c1_unknown_and_the_record_damaged() -> None:
    """The plan's reading and the settle verdict at once: c1 is indeterminate (no result
    answers it) and the user may not settle it, because the record is damaged; the sentence
    says so and where, and does not claim that c1's outcome was recorded."""
    events, _ = LEDGERS["orphan_response"]
    resolution = resolve_recovery(events)
    [c1] = [d for d in resolution.decisions if d.tool_call_id == "c1"]
    assert c1.status is ResolverStatus.INDETERMINATE
    assert c1.reason.value == "dispatch_without_response"
    assert resolution.has_corruption
    verdict = judge_settlement(events, c1.operation_id or "")
    assert verdict.code == "tool_ledger_corruption"
    response_id = f"{c1.operation_id}_response"
    assert f"(orphan_response at event {response_id})" in verdict.message
    assert "saying whether bash c1 ran cannot make the run resumable" in verdict.message
    assert "was recorded" not in verdict.message


def test_an_operation_no_fact_names_is_damage() -> None:
    events, _ = LEDGERS["unknown"]
    verdict = judge_settlement(events, "toolop_nobody")
    assert verdict.code == "tool_ledger_corruption"
    assert "operation toolop_nobody" in verdict.message


@pytest.mark.parametrize("name", list(LEDGERS))
def test_the_card_asks_exactly_when_the_verdict_is_open(name: str) -> None:
    events, code = LEDGERS[name]
    [card] = [e for e in transcript_of_run(events) if e.type == "tool_card"]
    assert card.settleable is (code is None)


def test_the_damaged_card_still_reads_unknown_as_the_plan_says() -> None:
    events, _ = LEDGERS["orphan_response"]
    cards = {e.tool_call_id: e for e in transcript_of_run(events) if e.type == "tool_card"}
    assert cards["c1"].status == "indeterminate" and not cards["c1"].settleable


def test_a_live_run_asks_nothing() -> None:
    call, dispatch = _bash()
    [card] = [
        e
        for e in transcript_of_run([user_text(ids=IDS, marker=True), call, dispatch])
        if e.type == "tool_card"
    ]
    assert card.status == "running" and not card.settleable


_CHOICES = st.lists(
    st.sampled_from(["unknown", "recorded", "orphan", "never"]), min_size=1, max_size=5
)


@settings(max_examples=60, deadline=None)
@given(_CHOICES)
def test_cards_and_verdicts_agree_on_any_mix_of_calls(kinds: list[str]) -> None:
    """Several calls in one run, each left unknown, recorded, orphaned or never dispatched:
    every card asks exactly when its verdict is open, and one orphan closes them all."""
    middle: list[RuntimeEvent] = []
    for index, kind in enumerate(kinds):
        call = call_event(f"c{index}", "bash", {"command": f"step {index}"}, ids=IDS, ts=index)
        if kind == "never":
            middle.append(call)
            continue
        dispatch = dispatch_event(call, recovery_mode="never_auto_retry")
        middle += [call, dispatch]
        if kind == "recorded":
            middle.append(bound_response(call))
        elif kind == "orphan":
            middle.append(
                with_changes(
                    bound_response(call),
                    content={"id": f"x{index}"},
                    refs={"toolCallId": f"x{index}"},
                )
            )
    events = _run(*middle)
    verdicts = verdicts_by_call(events)
    for card in (e for e in transcript_of_run(events) if e.type == "tool_card"):
        assert card.settleable is verdicts[card.tool_call_id].open
    opened = {call for call, verdict in verdicts.items() if verdict.open}
    expected = (
        set() if "orphan" in kinds else {f"c{i}" for i, k in enumerate(kinds) if k == "unknown"}
    )
    assert opened == expected


# ---- the store refuses by the same verdict -----------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    opened = open_store(tmp_path, clock=fixed_clock())
    yield opened
    opened.close()


def _no_process(_operation_id: str) -> str | None:
    return None


def test_the_store_refuses_a_damaged_record_the_projection_calls_recorded(
    store: SqliteLedgerStore, tmp_path: Path
) -> None:
    """The result's call id edited in the SQLite file: the ``tool_operations`` projection still
    says the outcome was committed, the events say c1 has no result and the run is damaged.
    The store refuses by the events (``tool_ledger_corruption``), and writes nothing."""
    call, dispatch = _bash()
    response = bound_response(call)
    store.bump_owner_epoch()
    add_run(store, IDS, epoch=store.read_owner_epoch())
    commit_ledger(store, [user_text(ids=IDS, marker=True), call, dispatch, response])
    store.bump_owner_epoch()
    commit_ledger(store, [CRASHED])
    record = store.find_session_operations(IDS.session_id)[0]
    assert record.current_state == "outcome_committed"
    with closing(sqlite3.connect(tmp_path / DATABASE_NAME, isolation_level=None)) as conn:
        changed = conn.execute(
            "UPDATE runtime_events SET payload = ? WHERE event_id = ?",
            (canonical_json_bytes(_orphaned(response)), response["id"]),
        ).rowcount
    assert changed == 1
    before = db_state(tmp_path / DATABASE_NAME)
    with pytest.raises(StoreRefusal) as raised:
        store.commit_attestation(operation_of(call), True, None, _no_process, judge_settlement)
    assert str(raised.value.code) == "tool_ledger_corruption"
    assert "is damaged (orphan_response at event" in raised.value.message
    assert db_state(tmp_path / DATABASE_NAME) == before
