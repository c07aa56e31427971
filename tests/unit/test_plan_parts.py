"""A run planned in two parts (``plan_part`` of the head, and of the tail with the tail's own
scan) gets the whole run's plan whenever the parts are independent: the tail's scan is
(``tail_is_independent``) and the parts share no tool-call id (``plan_parts_independent``)."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from runtime.fastplan.plan_parts import plan_part, plan_parts_independent
from runtime.fastplan.tail_scan import BatchScan, TailScan, tail_is_independent
from runtime.ledger.event_model import RuntimeEvent
from runtime.recovery.resume_plan import (
    PlanPart,
    ResumePlan,
    plan_resume,
    plan_verdict,
)
from tests.helpers.ledger_builders import (
    ALL_ENDINGS,
    ENDINGS,
    MIXED_EDITS,
    SECOND_INVOCATION,
    clean_ledger,
    mixed_ledger,
    with_changes,
)
from tests.unit.test_resume_plan_properties import ledgers


def _parts(events: list[RuntimeEvent], cut: int) -> tuple[PlanPart, PlanPart, bool]:
    """The head and tail parts of ``events`` cut before ``cut``, and whether they are
    independent, computed as ``maka ledger plan`` computes them in two processes."""
    head, tail = events[:cut], events[cut:]
    batch = BatchScan()
    batch.feed(head)
    tail_scan = TailScan(cut)
    tail_scan.feed(tail)
    summary = tail_scan.summary(operations=False)
    scan_independent = tail_is_independent(batch, summary, [e["id"] for e in tail])
    head_part = plan_part(head, batch.result_so_far(), collect_ids=True)
    tail_part = plan_part(tail, tail_scan.result(), run_first_event=events[0], collect_ids=True)
    independent = scan_independent and plan_parts_independent(head_part, tail_part.tool_call_ids)
    return head_part, tail_part, independent


def _combined(head: PlanPart, tail: PlanPart, expected: int | None) -> dict[str, Any]:
    verdict = plan_verdict([head.facts, tail.facts], expected)
    return {
        "disposition": verdict.disposition,
        "operations": head.operations + tail.operations,
        "diagnostics": verdict.diagnostics,
        "rejection_reasons": verdict.rejection_reasons,
        "requires_verification": verdict.requires_verification,
        "high_water": verdict.source_runtime_event_high_water,
        "directive": verdict.directive,
        "replay": head.replay + tail.replay,
    }


def _whole(plan: ResumePlan) -> dict[str, Any]:
    return {
        "disposition": plan.disposition,
        "operations": plan.operations,
        "diagnostics": plan.diagnostics,
        "rejection_reasons": plan.rejection_reasons,
        "requires_verification": plan.requires_verification,
        "high_water": plan.source_runtime_event_high_water,
        "directive": plan.directive,
        "replay": plan.replay_runtime_events,
    }


@settings(max_examples=400, deadline=None)
@given(st.data(), st.one_of(st.none(), st.integers(0, 60)))
def test_independent_parts_plan_as_the_whole_run(data: st.DataObject, expected: int | None) -> None:
    events: list[RuntimeEvent] = data.draw(
        st.one_of(
            ledgers(),
            st.builds(
                lambda d: mixed_ledger(d, edits=MIXED_EDITS, endings=ALL_ENDINGS),
                st.just(data.draw),
            ),
        )
    )
    if len(events) < 2:
        return
    cut = data.draw(st.integers(1, len(events) - 1))
    head, tail, independent = _parts(events, cut)
    event("independent" if independent else "dependent")
    if independent:
        assert _combined(head, tail, expected) == _whole(plan_resume(events, expected))


def _kind(item: RuntimeEvent) -> Any:
    content: Any = item.get("content")
    return content["kind"] if content is not None else None


def test_a_long_clean_run_cut_before_a_call_is_independent_and_plans_as_a_whole() -> None:
    events = list(clean_ledger(len(ENDINGS) * 4))
    cuts = [i for i, item in enumerate(events) if i > 0 and _kind(item) == "function_call"]
    assert len(cuts) > 10
    for cut in cuts:
        head, tail, independent = _parts(events, cut)
        assert independent, cut
        assert _combined(head, tail, None) == _whole(plan_resume(events))


def test_parts_that_share_a_tool_call_id_are_not_independent() -> None:
    """Another invocation in the tail reuses a call id of the head: the scans are independent
    (the operations differ), but the replay pairing and the response checks go by id."""
    events = list(clean_ledger(len(ENDINGS)))
    first_call = next(item for item in events if _kind(item) == "function_call")
    reused = with_changes(first_call, id="evt-reused", **_other_spine())
    events.append(reused)
    head, tail, independent = _parts(events, len(events) - 1)
    assert not independent
    assert not plan_parts_independent(head, tail.tool_call_ids)
    assert tail_is_independent(*_scan_check(events, len(events) - 1))


def _other_spine() -> dict[str, str]:
    ids = SECOND_INVOCATION
    return {
        "sessionId": ids.session_id,
        "invocationId": ids.invocation_id,
        "runId": ids.run_id,
        "turnId": ids.turn_id,
    }


def _scan_check(events: list[RuntimeEvent], cut: int) -> tuple[BatchScan, Any, list[str]]:
    batch = BatchScan()
    batch.feed(events[:cut])
    tail_scan = TailScan(cut)
    tail_scan.feed(events[cut:])
    return batch, tail_scan.summary(operations=False), [e["id"] for e in events[cut:]]
