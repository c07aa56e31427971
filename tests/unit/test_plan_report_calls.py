"""``maka plan``'s list of a run's tool calls (``app/host/plan_report.py``) says what the record
says of each: a call whose result says it was stopped (the turn cancelled by Ctrl+C or Stop, or
ended by Maka) has a whole record, but it did not run to its end, so its line says how it ended,
in the words of ``maka timeline``'s row, not "completed"."""

from __future__ import annotations

from pathlib import Path

from app.host.plan_report import OperationView, plan_summary, source_operations
from runtime.continuation.continuation_planner import ContinuationPlan
from runtime.ledger.codes import ParkReason, ResolverReason, ResolverStatus
from runtime.ledger.event_model import RuntimeEvent
from runtime.recovery.recovery_resolver import ToolRecoveryDecision
from storage.ledger.ledger_store import open_store
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    response_event,
    terminal,
    user_text,
)
from tests.helpers.stored_run import import_run

IDS = RunIds("sess-plan", "inv-plan", "run-plan", "turn-plan")


def test_a_call_stopped_by_a_cancel_or_by_maka_is_listed_as_stopped_not_completed(
    tmp_path: Path,
) -> None:
    results: list[tuple[object, bool]] = [
        ({"cancelled": True, "exitCode": -15, "error": "the command was cancelled"}, True),
        ({"stoppedByHost": True, "cancelled": True, "exitCode": -15}, True),
        ({"cancelled": "yes", "exitCode": 1}, True),  # only looks alike: a failure
        ({"cancelled": True, "exitCode": 0}, False),  # not an error result
        ({"code": "cancelled", "error": "the turn was cancelled"}, True),
    ]
    events: list[RuntimeEvent] = [user_text(ids=IDS, marker=True, ts=1)]
    for index, (result, error) in enumerate(results):
        call = call_event(f"c{index}", "bash", {"command": "sleep 9"}, ids=IDS, ts=10 * index + 2)
        if index == 4:  # refused before its T1: never dispatched
            events += [call, response_event(call, result, is_error=error)]
        else:
            events += [call, dispatch_event(call), bound_response(call, result, is_error=error)]
    events.append(terminal(IDS, status="cancelled", ts=999, state_delta={"abortSource": "user"}))
    session_id = import_run(tmp_path / "data", events)
    plan = ContinuationPlan(session_id, IDS.run_id, (), ())
    with open_store(tmp_path / "data", read_only=True) as store:
        operations = source_operations(store, plan)
    assert [op.line() for op in operations] == [
        "  bash c0: stopped when the turn was cancelled (matching_response)",
        "  bash c1: stopped by Maka (matching_response)",
        "  bash c2: completed (matching_response)",
        "  bash c3: completed (matching_response)",
        "  bash c4: not run (the turn was cancelled) (matching_response)",
    ]
    documents = [op.to_json() for op in operations]
    assert [d.get("stopped") for d in documents] == ["cancelled", "host", None, None, "cancelled"]
    assert {d["status"] for d in documents} == {"completed"}  # the resolver's status, kept


def _parked(call_id: str, reason: str, not_run_only: bool = False) -> OperationView:
    """A call the user may settle (``not_run_only``: only "it did not run" can be said)."""
    status = ResolverStatus.PARKED if not_run_only else ResolverStatus.INDETERMINATE
    decision = ToolRecoveryDecision(call_id, status, ResolverReason(reason), "write_file")
    return OperationView("run-plan", decision, settleable=True, not_run_only=not_run_only)


def test_a_write_recovery_found_not_done_is_confirmed_first_and_a_new_message_offered_after() -> (
    None
):
    """The one answer there is (it did not run) is the way Safe resume goes on: it is the next
    step, and a new message the other way; not "check what the calls may have changed, then
    carry on with a new message" followed by the answer."""
    plan = ContinuationPlan("sess-plan", "run-plan", (ParkReason.DANGLING_TOOL_STATE,), ())
    found = _parked("w1", "reconcile_matches_prior_state", not_run_only=True)
    lines = plan_summary(plan, [found])
    step = next(n for n, line in enumerate(lines) if line.startswith("What next: "))
    assert lines[step] == (
        "What next: recovery found the file of write_file w1 as it was before the write, so the "
        "write did not happen. Confirm that on the record (the model is then told so): maka "
        "settle sess-plan w1 --not-run [--note TEXT]. Safe resume can then continue from there."
    )
    assert lines[step + 1] == (
        "Or carry on with a new message (maka run --session sess-plan MESSAGE, or the desktop), "
        "and ask for that write again if you still want it; the model is told the write did not "
        "happen."
    )
    assert not any("check what the interrupted calls" in line for line in lines)


def test_answering_about_one_of_two_unknown_calls_does_not_promise_a_resume() -> None:
    plan = ContinuationPlan("sess-plan", "run-plan", (ParkReason.DANGLING_TOOL_STATE,), ())
    calls = [_parked(call_id, "dispatch_without_response") for call_id in ("a", "b")]
    [advice] = [line for line in plan_summary(plan, calls) if "say so on the record" in line]
    assert advice.endswith("Safe resume can continue once each of the 2 calls below is settled.")
    [alone] = [line for line in plan_summary(plan, calls[:1]) if "on the record" in line]
    assert alone.endswith("Safe resume can then continue from there.")
