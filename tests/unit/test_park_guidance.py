"""What to do about a park (``app/park_guidance.py``): the next step, whether Try again can
help, a damaged record of the tool history and a write that did not happen, told apart from an
unknown outcome; and reading it needs no Qt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.code_text import PARK_REASONS, Severity, describe
from app.host.resume_wire import sub_code, wire_diagnostic
from app.park_guidance import (
    DAMAGED_RECORD_DIAGNOSTICS,
    DAMAGED_RECORD_NEXT_STEP,
    NEXT_STEP_ORDER,
    NEXT_STEPS,
    can_try_again,
    ledger_check_code,
    next_step_source,
    park_severity,
    record_damaged,
    write_did_not_happen,
)
from runtime.continuation.continuation_replay import (
    ImmutablePrefix,
    RunIdentity,
    SegmentBlocked,
    build_segment,
)
from runtime.ledger import codes
from runtime.ledger.event_model import RuntimeEvent
from tests.helpers.ledger_builders import (
    bound_response,
    call_event,
    dispatch_event,
    response_event,
    user_text,
    with_changes,
)

REPO = Path(__file__).resolve().parents[2]


def _segment_issues(*events: RuntimeEvent) -> list[tuple[str, str | None]]:
    """The planner's own issues: each code with the sub-code its detail field carries."""
    identity = RunIdentity("sess-1", "inv-1", "run-1", "turn-1")
    blocked = build_segment(ImmutablePrefix(identity, events, len(events), ""))
    assert isinstance(blocked, SegmentBlocked)
    return [(issue.code, sub_code(issue.detail)) for issue in blocked.issues]


def test_a_damaged_record_carries_its_ledger_check_code_in_a_field() -> None:
    """The planner's own issues, read back: the ledger check's code travels as a field."""
    user = user_text(marker=True)
    orphan = response_event(call_event("call-9"), ts=5)
    issues = _segment_issues(user, orphan)
    assert [code for code, _ in issues] == ["tool_recovery_corruption", "tool_ledger_corruption"]
    assert [ledger_check_code(*issue) for issue in issues] == ["orphan_response"] * 2

    call = call_event("call-1")
    model_side = with_changes(bound_response(call), role="model", author="agent")
    issues = _segment_issues(user, call, dispatch_event(call), model_side)
    assert ("tool_ledger_corruption", "semantic_lane_conflict") in issues
    assert ledger_check_code(*issues[-1]) == "semantic_lane_conflict"


@settings(max_examples=50, deadline=None)
@given(message=st.text(max_size=200))
def test_a_message_is_never_read_for_a_code(message: str) -> None:
    """Rewording a message changes nothing the banner or ``maka plan`` says: the wire carries
    the sub-code in a field, whatever the message (even one naming another code)."""
    wire = wire_diagnostic(
        "tool_ledger_corruption", message, detail={"issueCode": "orphan_dispatch"}
    )
    assert wire.sub_code == "orphan_dispatch"
    assert ledger_check_code(wire.code, wire.sub_code) == "orphan_dispatch"
    plain = wire_diagnostic("tool_ledger_corruption", f"{message} ledger issue orphan_response")
    assert plain.sub_code is None
    assert ledger_check_code(plain.code, plain.sub_code) == "tool_ledger_corruption"


def test_only_a_damaged_record_is_read_as_a_ledger_check_code() -> None:
    assert ledger_check_code("pending_tool_result", "orphan_response") is None
    assert ledger_check_code("unsupported_role", "unsupported_role") is None
    # A sub-code that is no ledger check: the diagnostic's own sentence stands for it.
    assert ledger_check_code("tool_ledger_corruption", "x") == "tool_ledger_corruption"
    assert ledger_check_code("tool_ledger_corruption", None) == "tool_ledger_corruption"


def test_every_warn_or_error_park_reason_has_a_next_step() -> None:
    for code, (severity, _sentence, *_rest) in PARK_REASONS.items():
        if severity is not Severity.INFO or code == "resume_feature_disabled":
            step = next_step_source([code])
            assert step.endswith("."), code
            assert "MAKA_" not in step, "the next step points at Settings, not at a variable"


def test_the_flag_off_next_step_points_at_settings() -> None:
    assert "Settings" in next_step_source(["resume_feature_disabled"])


def test_a_stale_snapshot_does_not_say_a_command_after_a_write() -> None:
    """A crash right after a write parks with it as well as after a command."""
    step = next_step_source(["workspace_checkpoint_stale"])
    assert "write" in step and not step.startswith("A command may")


def test_a_missing_folder_offers_locate_and_remove() -> None:
    assert describe("workspace_folder_missing").severity is Severity.WARN
    step = next_step_source(["workspace_folder_missing"])
    assert "Locate folder" in step and "Remove session" in step


def test_try_again_is_only_for_reasons_the_user_can_change() -> None:
    assert can_try_again(["workspace_identity_mismatch"])
    assert can_try_again(["dangling_tool_state", "background_operation_pending"])
    assert not can_try_again(["dangling_tool_state"])
    assert not can_try_again(["workspace_identity_missing"])
    assert not can_try_again(["runtime_lineage_cycle"])
    assert not can_try_again([])
    assert can_try_again(["workspace_drift"])  # putting the files back clears it
    # decided by the ledger alone: a later check can never come out differently
    assert not can_try_again(["workspace_checkpoint_stale"])
    assert not can_try_again(["dangling_tool_state", "workspace_checkpoint_stale"])


def test_a_damaged_record_is_every_error_diagnostic_of_an_unsettled_tool_state() -> None:
    """The diagnostics that come with ``dangling_tool_state`` and mean the ledger is not in a
    trustworthy state (error) are the damaged records; the one other error diagnostic is a
    park reason's own note."""
    errors = {c.value for c in codes.DiagnosticCode if describe(c.value).severity is Severity.ERROR}
    assert errors - {"runtime_offset_mismatch"} == DAMAGED_RECORD_DIAGNOSTICS


def test_a_damaged_record_changes_the_next_step_the_severity_and_try_again() -> None:
    damaged = ["pending_tool_result", "tool_ledger_corruption"]
    assert record_damaged(["dangling_tool_state"], damaged)
    assert not record_damaged(["dangling_tool_state"], ["pending_tool_result"])
    assert not record_damaged(["workspace_drift"], damaged), "only an unsettled tool state"
    step = next_step_source(["dangling_tool_state"], damaged)
    assert step == DAMAGED_RECORD_NEXT_STEP
    assert "new message" in step and "maka doctor" in step and "backup" in step
    assert "It ran / It did not run" not in step
    # Confirming whether a call ran cannot lift the damage; a reason the user can change can.
    assert can_try_again(["dangling_tool_state"], ["pending_tool_result"])
    assert not can_try_again(["dangling_tool_state"], damaged)
    assert can_try_again(["dangling_tool_state", "tool_catalog_mismatch"], damaged)
    assert park_severity(["dangling_tool_state"], damaged) is Severity.ERROR
    assert park_severity(["dangling_tool_state"], ["pending_tool_result"]) is Severity.WARN
    # A command still running, or a folder that is gone, is still said first.
    for first in ("background_operation_pending", "workspace_folder_missing"):
        assert next_step_source(["dangling_tool_state", first], damaged) == next_step_source(
            [first]
        )
    # Without the diagnostics (the folder's own headline, say) nothing changes.
    assert next_step_source(["dangling_tool_state"]) == NEXT_STEPS["dangling_tool_state"]


@pytest.mark.parametrize(
    ("diagnostics", "expected"),
    [
        ([("tool_recovery_parked", "w1"), ("reconcile_matches_prior_state", "w1")], True),
        (
            [
                ("tool_recovery_parked", "w1"),
                ("workspace_checkpoint_unavailable", None),
                ("reconcile_matches_prior_state", "w1"),
            ],
            True,
        ),
        (
            [
                ("tool_recovery_parked", "w1"),
                ("workspace_verified", None),
                ("reconcile_matches_prior_state", "w1"),
                ("write_temp_file_left", "w1"),
            ],
            True,
        ),
        ([("tool_recovery_parked", "w1"), ("pending_tool_result", "b2")], False),
        ([("pending_tool_result", "w1"), ("reconcile_matches_prior_state", "w1")], True),
        ([("tool_recovery_parked", "w1")], False),
    ],
)
def test_a_write_that_did_not_happen_is_told_apart_from_an_unknown_outcome(
    diagnostics: list[tuple[str, str | None]], expected: bool
) -> None:
    """The workspace gate's notes that park nothing (no checkpoints, files verified) do not
    turn a write recovery found not done into an unknown outcome."""
    assert write_did_not_happen(("dangling_tool_state",), diagnostics) is expected
    assert not write_did_not_happen(("dangling_tool_state", "workspace_drift"), diagnostics)


def test_the_guidance_module_imports_no_qt() -> None:
    probe = (
        "import sys, app.park_guidance; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'renderer')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_park_reasons_next_step_lives_in_its_record() -> None:
    """One record per code: the next step a park shows is the reason's own record's, and every
    reason ordered for a next step has one."""
    for code in NEXT_STEP_ORDER:
        record = PARK_REASONS[code]
        assert record.next_step, code
        assert describe(code).next_step == record.next_step
        assert next_step_source([code]) == record.next_step


def test_every_diagnostic_carries_only_the_fields_its_record_names() -> None:
    """The detail a diagnostic carries (codes and paths as data) is declared in its code's
    record: the workspace gate's findings, the resolver's operations, a damaged record."""
    from runtime.continuation.workspace_gate import CheckpointEvidence, workspace_gate
    from runtime.ledger.checkpoint_ports import PathChange, TreeChange
    from runtime.recovery.resume_plan import plan_resume
    from tests.unit.test_resume_plan import _turn
    from tests.unit.test_workspace_facts import IDS, _fact, _git_v1_first

    write = call_event("w1", "bash", {"command": "x"}, ids=IDS)
    stale = [_git_v1_first(), _fact("ck1"), write, dispatch_event(write)]
    clean = [_git_v1_first(), _fact("ck1")]
    changes = (TreeChange("a.txt", PathChange.MODIFIED),)
    found: list[tuple[str, dict[str, object]]] = []
    for events, evidence in (
        (stale, None),
        (stale, CheckpointEvidence(True, changes, stale_compared=True)),
        (clean, None),
        (clean, CheckpointEvidence(True)),
        (clean, CheckpointEvidence(True, changes)),
        ([_git_v1_first(), _fact("ck1"), _fact("ck2", failed=True)], None),
        ([_git_v1_first()], None),
    ):
        found += [(f.code, dict(f.detail)) for f in workspace_gate(events, evidence)]
    for ending in ("dangling", "call", "parked", "bad-bundle"):
        ledger = [user_text(marker=True), *_turn("c1", ending)]
        found += [(str(d.code), dict(d.detail or {})) for d in plan_resume(ledger).diagnostics]
    orphan = response_event(call_event("call-9"), ts=5)
    found += [
        (str(d.code), dict(d.detail or {}))
        for d in plan_resume([user_text(marker=True), orphan]).diagnostics
    ]
    assert {code for code, _ in found} >= {
        "workspace_checkpoint_stale",
        "workspace_drift",
        "workspace_verified",
        "workspace_checkpoint_missing",
        "workspace_checkpoint_failed",
        "tool_recovery_parked",
        "tool_ledger_corruption",
    }
    for code, detail in found:
        undeclared = set(detail) - set(describe(code).fields)
        assert not undeclared, f"{code} carries {sorted(undeclared)} its record does not name"
