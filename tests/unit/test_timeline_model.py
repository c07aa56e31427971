"""The ledger timeline's pure model: rows on the event_seq axis, tool facts grouped per call,
lineage order, problem statuses, and planner reasons pinned to rows or the outside lane."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.timeline_model import (
    RunSource,
    TimelineKind,
    TimelineStatus,
    build_run,
    build_timeline,
)
from runtime.ledger.timeline_pins import (
    ParkHeader,
    TimelineReason,
    only_problems,
    pin_reasons,
    timeline_json,
)
from tests.helpers.ledger_builders import (
    RunIds,
    attestation_bundle,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    reconcile_event,
    terminal,
    user_text,
    with_changes,
)


def _run(events: Sequence[RuntimeEvent], status: str = "failed", **kw: object) -> RunSource:
    return RunSource(
        events[0]["runId"],
        list(enumerate(events, 1)),
        status,
        **kw,  # type: ignore[arg-type]
    )


def test_a_tool_calls_facts_are_one_row_at_its_first_fact() -> None:
    call = call_event("call-1", event_id="evt-call")
    dispatch = dispatch_event(call)
    events = [user_text(), call, dispatch, bound_response(call), terminal(status="completed")]
    run = build_run(_run(events, "completed"))
    assert [row.kind for row in run.rows] == [
        TimelineKind.MESSAGE,
        TimelineKind.TOOL,
        TimelineKind.RUN_END,
    ]
    tool = run.rows[1]
    assert tool.seq == 2
    assert tool.tool_call_id == "call-1"
    assert tool.tool_name == "Write"
    assert tool.status is TimelineStatus.OK
    assert [entry.kind for entry in tool.entries] == [
        TimelineKind.TOOL_CALL,
        TimelineKind.TOOL_DISPATCH,
        TimelineKind.TOOL_RESPONSE,
    ]
    assert [entry.seq for entry in tool.entries] == [2, 3, 4]


def test_rows_follow_event_seq_not_timestamps() -> None:
    late = user_text("first by seq", event_id="a", ts=900)
    early = user_text("second by seq", event_id="b", ts=1)
    run = build_run(RunSource("run-1", [(2, early), (1, late)], "running"))
    assert [row.entries[0].event_id for row in run.rows] == ["a", "b"]


def test_a_dispatch_with_nothing_after_it_in_an_ended_run_is_an_unknown_outcome() -> None:
    call = call_event("call-1")
    events = [user_text(), call, dispatch_event(call), terminal(status="failed")]
    row = build_run(_run(events)).rows[1]
    assert row.status is TimelineStatus.UNKNOWN
    assert row.problem
    still_running = build_run(_run(events[:3], "running")).rows[1]
    assert still_running.status is TimelineStatus.RUNNING
    assert not still_running.problem


def test_recovery_bundles_and_attestations_are_their_own_kinds_inside_the_tool_row() -> None:
    call = call_event("call-1")
    dispatch = dispatch_event(call)
    reconcile = reconcile_event(call, "diverged")
    parked = [call, dispatch, reconcile, decision_event(call, dispatch, reconcile)]
    row = build_run(_run([user_text(), *parked, terminal(status="failed")])).rows[1]
    assert row.status is TimelineStatus.PARKED
    assert [e.kind for e in row.entries][2:] == [TimelineKind.RECOVERY, TimelineKind.RECOVERY]

    other = call_event("call-2")
    other_dispatch = dispatch_event(other)
    settled = [other, other_dispatch, terminal(status="failed")]
    settled += attestation_bundle(other, other_dispatch, ran=False)
    row = build_run(_run([user_text(), *settled])).rows[1]
    assert TimelineKind.ATTESTATION in {entry.kind for entry in row.entries}
    assert row.status is TimelineStatus.OK  # settled by the user: not a problem any more
    assert row.summary.endswith(": did not run, settled by you")  # not "done": it never ran

    ran = call_event("call-3")
    ran_dispatch = dispatch_event(ran)
    confirmed = [ran, ran_dispatch, terminal(status="failed")]
    confirmed += attestation_bundle(ran, ran_dispatch, ran=True)
    row = build_run(_run([user_text(), *confirmed])).rows[1]
    assert row.summary.endswith(": ran, settled by you")


def test_workspace_facts_and_run_endings_have_their_own_kinds() -> None:
    checkpoint = user_text(
        event_id="evt-snap",
        extra={
            "actions": {
                "workspaceCheckpointFailed": {
                    "protocol": "workspace_checkpoint_v1",
                    "workspaceIdentity": "workspace:v1:x",
                    "runtimeHighWater": 1,
                    "reasonCode": "checkpoint_capture_failed",
                }
            }
        },
    )
    checkpoint = with_changes(checkpoint, role="system", author="system")
    run = build_run(_run([user_text(), checkpoint, terminal(status="cancelled")]))
    assert [(row.kind, row.status) for row in run.rows][1:] == [
        (TimelineKind.CHECKPOINT, TimelineStatus.FAILED),
        (TimelineKind.RUN_END, TimelineStatus.CANCELLED),
    ]


def test_a_continuation_sits_under_its_source_one_level_deeper() -> None:
    second = RunIds(run_id="run-2", invocation_id="inv-2")
    other = RunIds(run_id="run-3", invocation_id="inv-3")
    sources = [
        _run([user_text(ids=other, event_id="o")], "completed"),
        _run([user_text(ids=second, event_id="c")], "completed", parent_run_id="run-1"),
        _run([user_text(event_id="s")], "failed"),
    ]
    runs = build_timeline(sources)
    assert [(run.run_id, run.depth) for run in runs] == [("run-3", 0), ("run-1", 0), ("run-2", 1)]
    body = timeline_json(runs, None)
    assert body["runs"][2]["continues"] == {"runId": "run-1", "highWater": None}


def _parked_session() -> list[RuntimeEvent]:
    call = call_event("call-1", event_id="evt-call")
    return [user_text(), call, dispatch_event(call), terminal(status="failed")]


def test_reasons_pin_to_the_row_of_their_event_or_call_and_the_rest_go_outside() -> None:
    runs = build_timeline([_run(_parked_session())])
    diagnostics = [
        TimelineReason("pending_tool_result", "unknown", event_id="evt-call"),
        TimelineReason("tool_recovery_parked", "parked", tool_call_id="call-1"),
        TimelineReason("workspace_drift", "the files changed"),
        TimelineReason("tool_ledger_corruption", "gone", event_id="not-in-this-ledger"),
    ]
    pins = pin_reasons(runs, diagnostics, ("dangling_tool_state", "background_operation_pending"))
    placed = [(pin.reason.code, pin.lane, pin.seq) for pin in pins]
    assert placed == [
        ("pending_tool_result", "ledger", 2),
        ("tool_recovery_parked", "ledger", 2),
        ("workspace_drift", "outside", None),
        ("tool_ledger_corruption", "outside", None),
        ("background_operation_pending", "outside", None),
    ]
    body = timeline_json(runs, ParkHeader("park", ("dangling_tool_state",), pins))
    assert body["runs"][0]["rows"][1]["reasons"] == ["pending_tool_result", "tool_recovery_parked"]
    assert [item["code"] for item in body["plan"]["outside"]] == [
        "workspace_drift",
        "tool_ledger_corruption",
        "background_operation_pending",
    ]


def test_only_problems_keeps_problem_rows_and_pinned_rows_of_every_run() -> None:
    events = _parked_session()
    runs = build_timeline([_run(events)])
    pins = pin_reasons(runs, [TimelineReason("x", "y", event_id=events[0]["id"])])
    kept = only_problems(runs, pins)
    assert [(row.kind, row.seq) for row in kept[0].rows] == [
        (TimelineKind.MESSAGE, 1),  # pinned
        (TimelineKind.TOOL, 2),  # unknown outcome
        (TimelineKind.RUN_END, 4),  # failed
    ]
    assert only_problems(runs, ())[0].rows[0].kind is TimelineKind.TOOL


def test_a_damaged_event_is_flagged_not_hidden() -> None:
    call = call_event("call-1")
    both = with_changes(call, actions=dispatch_event(call)["actions"])
    row = build_run(_run([user_text(), both])).rows[1]
    assert row.status is TimelineStatus.DAMAGED
    assert row.problem


def test_the_terminal_text_is_coloured_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.delenv("NO_COLOR", raising=False)
    from app.commands.timeline_text import write_timeline

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    runs = build_timeline([_run(_parked_session())])
    pins = pin_reasons(runs, [TimelineReason("pending_tool_result", "", event_id="evt-call")])
    header = ParkHeader("park", ("dangling_tool_state",), pins)
    plain, coloured = io.StringIO(), Terminal()
    write_timeline(runs, header, plain)
    write_timeline(runs, header, coloured)
    assert "\033[" not in plain.getvalue()
    unknown = next(line for line in coloured.getvalue().splitlines() if "outcome unknown" in line)
    assert unknown.startswith("\033[33m") and unknown.endswith("\033[0m")
    pinned = plain.getvalue().splitlines()
    row = next(n for n, line in enumerate(pinned) if "outcome unknown" in line)
    assert pinned[row + 1].strip().startswith("[warn] pending_tool_result: ")


def test_a_pinned_reason_is_tagged_with_its_severity_as_maka_plan_tags_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Good news and notes (``workspace_verified``, ``workspace_settle_takes_folder``: info)
    read as information, not under the warning mark a parked call's reason has; a reason the
    table does not know is an error, as ``maka plan`` says. Colour follows the severity."""
    import io

    from app.commands.timeline_text import write_timeline

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    runs = build_timeline([_run(_parked_session())])
    reasons = [
        TimelineReason("workspace_settle_takes_folder", "", event_id="evt-call"),
        TimelineReason("pending_tool_result", "", event_id="evt-call"),
        TimelineReason("workspace_verified", "the files are as they were"),
        TimelineReason("no_such_code_anywhere", "odd"),
    ]
    header = ParkHeader("park", ("dangling_tool_state",), pin_reasons(runs, reasons))
    plain, coloured = io.StringIO(), Terminal()
    write_timeline(runs, header, plain)
    write_timeline(runs, header, coloured)
    lines = [line.strip() for line in plain.getvalue().splitlines()]
    assert not any(line.startswith("!") for line in lines), lines
    outside = lines.index("outside the record:")
    assert lines[outside + 1].startswith("[info] workspace_verified: The files in the folder")
    assert lines[outside + 2].startswith("[error] no_such_code_anywhere: ")
    row = next(n for n, line in enumerate(lines) if "outcome unknown" in line)
    assert lines[row + 1].startswith("[info] workspace_settle_takes_folder: Answering")
    assert lines[row + 2].startswith("[warn] pending_tool_result: ")
    painted = {
        line.split("] ")[0].split("[")[-1]: line
        for line in coloured.getvalue().splitlines()
        if "] " in line and "#" not in line
    }
    assert "\033[" not in painted["info"]
    assert painted["warn"].startswith("\033[33m")
    assert painted["error"].startswith("\033[31m")


def test_a_snapshot_row_names_its_commit_as_such() -> None:
    """The id a snapshot row shows says which id it is: ``maka checkpoints`` lists the
    commit and the tree of each snapshot, which differ."""
    from tests.unit.test_workspace_facts import _fact

    row = build_run(_run([user_text(), _fact("evt-snap")], "completed")).rows[1]
    assert row.kind is TimelineKind.CHECKPOINT
    assert row.summary == f"snapshot at event 1 (commit {'b' * 12})"


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_ledger_shows_every_event_once_in_seq_order_and_never_hides_damage(
    data: st.DataObject,
) -> None:
    """Whatever a file holds (repeated, dropped, swapped events, orphan dispatches, stray
    recovery facts, any ending), the timeline holds each event exactly once, rows start in
    ``event_seq`` order, a tool row's facts are in order, and every event the lane rules refuse
    is a damaged entry on a problem row."""
    from runtime.ledger.lane_rules import LaneConflict, classify_lane
    from tests.helpers.ledger_builders import ENDINGS, mixed_ledger

    events = mixed_ledger(
        data.draw,
        edits=("dup", "drop", "swap", "mark", "spine", "orphan", "stray"),
        endings=ENDINGS,
    )
    pairs = list(enumerate(events, 1))
    run = build_run(RunSource("run-x", pairs, "failed"))
    seen = [entry.seq for row in run.rows for entry in row.entries]
    assert sorted(seen) == list(range(1, len(events) + 1))
    assert [row.seq for row in run.rows] == sorted(row.seq for row in run.rows)
    for row in run.rows:
        assert [e.seq for e in row.entries] == sorted(e.seq for e in row.entries)
        for entry in row.entries:
            if isinstance(classify_lane(entry.event), LaneConflict):
                assert entry.status is TimelineStatus.DAMAGED
                assert row.problem
