"""The one code table (``app/code_text.py``): every code has words, and reading them needs no Qt."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path

import pytest

from app import code_text
from app.bridge_contract import BridgeErrorCode
from app.code_text import (
    HISTORY_REPLAY_CODES,
    LEDGER_CHECK_CODES,
    Severity,
    can_try_again,
    describe,
    ledger_check_code,
    next_step_source,
    park_severity,
    record_damaged,
)
from runtime.continuation.continuation_replay import (
    ImmutablePrefix,
    RunIdentity,
    SegmentBlocked,
    SegmentBlockReason,
    build_segment,
)
from runtime.continuation.provider_replay import BLOCKING_REPLAY_CODES, ReplayDiagnosticCode
from runtime.ledger import codes
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.ledger_errors import DecodeCode
from runtime.providers.provider_port import ProviderErrorCode
from runtime.recovery.file_observation import ObservationProblem
from runtime.tools.tool_contract import ToolFailureCode, ToolRefusalCode
from tests.helpers.ledger_builders import (
    bound_response,
    call_event,
    dispatch_event,
    response_event,
    user_text,
    with_changes,
)

REPO = Path(__file__).resolve().parents[2]

# Backticked words of CODES.md that are not codes (file names, the Qt function).
NOT_CODES = {"tr"}


def _codes_md() -> Path | None:
    for folder in REPO.parents:
        candidate = folder / "shared" / "spec" / "CODES.md"
        if candidate.is_file():
            return candidate
    return None


def _spec_codes() -> list[str]:
    path = _codes_md()
    if path is None:
        return []
    words = set(re.findall(r"`([a-z][a-z0-9_]*)`", path.read_text(encoding="utf-8")))
    return sorted(words - NOT_CODES)


CODE_ENUMS: tuple[type[StrEnum], ...] = (
    codes.ParkReason,
    codes.DiagnosticCode,
    codes.RevalidationCode,
    codes.ResolverStatus,
    codes.ResolverReason,
    codes.SettlementOrigin,
    codes.WriterRejectionCode,
    codes.StoreCode,
    codes.WorkspaceMarkerCode,
    codes.FailureClass,
    codes.RecoveryReasonCode,
    codes.ScanIssueCode,
    codes.AttestationRefusal,
    codes.CheckpointUnavailableCode,
    codes.CheckpointFailureCode,
    codes.RestoreCode,
    codes.RecoveryDisposition,
    # Refusals of the desktop host and the CLI, and of export/import: the desktop's request
    # router sends their codes in ``error`` pushes, which the window words with this table.
    codes.HostCode,
    codes.TransferCode,
    ToolRefusalCode,
    ToolFailureCode,
    # Outside runtime/ledger/codes.py: a provider that cannot be built refuses ``maka run`` and
    # a message sent in the window; a line that does not decode refuses ``maka ledger`` and
    # ``maka import``; a history that cannot be replayed lists its codes in ``maka plan``.
    ProviderErrorCode,
    DecodeCode,
    ReplayDiagnosticCode,
)

_ENDS_THE_RUN = (
    "met while the model answers: the run ends as provider_error, shown with the provider's message"
)
_REPLAY_SILENT = "left out of the model's history without blocking resume: in no plan"

# Codes of the families above that never reach a person on their own, each with where it
# shows instead. Every other code of CODE_ENUMS needs its sentence.
NOT_SHOWN_ALONE: dict[str, str] = {
    "reconcile_matches_expected_state": "the completed path of a reconciled write: 'completed'",
    ProviderErrorCode.HTTP_ERROR: _ENDS_THE_RUN,
    ProviderErrorCode.TIMEOUT: _ENDS_THE_RUN,
    ProviderErrorCode.CONNECTION_LOST: _ENDS_THE_RUN,
    ProviderErrorCode.MALFORMED_STREAM: _ENDS_THE_RUN,
    ProviderErrorCode.EMPTY_STREAM: _ENDS_THE_RUN,
    ProviderErrorCode.CONTEXT_OVERFLOW: _ENDS_THE_RUN + " and the way on",
    ProviderErrorCode.SCRIPT_EXHAUSTED: _ENDS_THE_RUN,
    ProviderErrorCode.SCRIPTED_FAILURE: _ENDS_THE_RUN,
    ProviderErrorCode.CANCELLED: "a stopped answer ends the turn as cancelled_by_user",
    **{code: _REPLAY_SILENT for code in ReplayDiagnosticCode if code not in BLOCKING_REPLAY_CODES},
}

# The vocabularies of runtime/ledger/codes.py that never reach a person as a code on their own
# (each with where it shows instead). Any other enum there must be in CODE_ENUMS, so a new
# family of codes cannot arrive without its sentences.
NOT_SHOWN_BY_CODE: dict[type[StrEnum], str] = {
    codes.Lane: "ledger rows' lanes (the scanner's codes name what is wrong with them)",
    codes.TransitionKind: "the writer's kinds of transaction, never a refusal",
    codes.BundleCode: "recovery-bundle validation inside the store (a defect, in the log)",
    codes.ReconcileObservation: "what reconcile saw; the banner shows the resolver's codes",
    codes.OperationStatus: "a tool call's status in 'maka ledger plan' output",
    codes.Disposition: "the plan's disposition field in 'maka ledger plan' output",
    codes.LedgerFileCode: "'maka ledger plan FILE' diagnostics, printed with their messages",
    codes.DoctorCode: "'maka doctor' problems, printed with their messages",
}

# Families outside runtime/ledger/codes.py that never reach a person as a code on their own.
NOT_SHOWN_ELSEWHERE: dict[type[StrEnum], str] = {
    BridgeErrorCode: "a refused frame between Maka's own processes: the window words its "
    "connection state (renderer/connection_status.py), the code goes to the log",
    ObservationProblem: "why recovery could not look at an interrupted write's file: only "
    "hashed into the reconcile fact's observationDigest (the document is never stored, "
    "printed or logged); people see the observation's verdict, reconcile_unreadable",
    SegmentBlockReason: "why a generation cannot be replayed: the planner parks with the "
    "ParkReason it maps to (continuation_planner._UNSETTLED_TO_REASON), never with it",
}


def _enum_codes() -> list[str]:
    found = {member.value for enum in CODE_ENUMS for member in enum}
    return sorted(found - set(NOT_SHOWN_ALONE))


def _assert_plain(code: str) -> None:
    text = describe(code)
    assert text.known, f"{code} has no sentence in app/code_text.py"
    sentence = text.sentence
    assert sentence.endswith("."), code
    assert "_" not in sentence, f"{code}: sentences are for people, not codes"
    assert not re.search(r"[A-Z][a-z]+(Error|Exception)\b|Errno|Traceback", sentence), code


def test_codes_md_is_found_and_walked() -> None:
    assert _codes_md() is not None, "CODES.md (shared/spec) is next to the checkout"
    assert "workspace_folder_missing" in _spec_codes()


@pytest.mark.parametrize("code", _spec_codes(), ids=str)
def test_every_code_of_codes_md_has_a_plain_sentence(code: str) -> None:
    _assert_plain(code)


@pytest.mark.parametrize("code", _enum_codes(), ids=str)
def test_every_code_the_program_can_produce_has_a_plain_sentence(code: str) -> None:
    _assert_plain(code)


def test_every_code_enum_of_the_ledger_is_worded_or_named_as_never_shown() -> None:
    found = {
        value
        for value in vars(codes).values()
        if isinstance(value, type) and issubclass(value, StrEnum) and value is not StrEnum
    }
    unplaced = found - set(CODE_ENUMS) - set(NOT_SHOWN_BY_CODE)
    assert not unplaced, f"give these codes sentences in app/code_text.py: {unplaced}"


# The names a vocabulary of why something failed ends with: each one may reach a person.
CODE_FAMILY_SUFFIXES = ("Code", "Problem", "Reason", "Refusal")


def _code_enums_in_source() -> set[str]:
    """``module.Class`` of every ``StrEnum`` in the product's packages named ``...Code`` (or
    ``...Problem``, ``...Reason``, ``...Refusal``)."""
    found: set[str] = set()
    for package in ("app", "main_process", "renderer", "runtime", "storage"):
        for path in sorted((REPO / package).rglob("*.py")):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if (
                    isinstance(node, ast.ClassDef)
                    and node.name.endswith(CODE_FAMILY_SUFFIXES)
                    and any(isinstance(b, ast.Name) and b.id == "StrEnum" for b in node.bases)
                ):
                    found.add(f"{module}.{node.name}")
    return found


def _named(enums: Iterable[type[StrEnum]]) -> set[str]:
    return {f"{enum.__module__}.{enum.__qualname__}" for enum in enums}


def test_every_code_enum_anywhere_is_worded_or_named_as_never_shown() -> None:
    """A family of codes outside runtime/ledger/codes.py (the provider's, the decoder's...)
    cannot arrive without its sentences either."""
    found = _code_enums_in_source()
    assert {
        "runtime.providers.provider_port.ProviderErrorCode",
        "runtime.ledger.ledger_errors.DecodeCode",
        "runtime.recovery.file_observation.ObservationProblem",
    } <= found, "the walk finds the families outside codes.py"
    placed = _named(CODE_ENUMS) | _named(NOT_SHOWN_BY_CODE) | _named(NOT_SHOWN_ELSEWHERE)
    unplaced = found - placed
    assert not unplaced, f"give these codes sentences in app/code_text.py: {unplaced}"


def test_codes_named_as_never_shown_alone_are_codes_of_a_worded_family() -> None:
    every = {member.value for enum in CODE_ENUMS for member in enum}
    assert set(NOT_SHOWN_ALONE) <= every


@pytest.mark.parametrize(
    "code", [ProviderErrorCode.CONFIG_INVALID, ProviderErrorCode.SCRIPT_INVALID, *DecodeCode]
)
def test_a_refusal_of_the_provider_or_the_decoder_is_worded_as_itself(code: StrEnum) -> None:
    """``maka run`` with a provider that cannot be built, a message sent in the window then,
    and ``maka ledger`` / ``maka import`` on a line that does not decode refuse with these."""
    text = describe(code.value)
    assert text.known and "resume" not in text.sentence.lower(), text.sentence


def test_every_host_and_cli_refusal_has_a_plain_sentence() -> None:
    """The codes the host and the CLI refuse with reach the window's status bar and its
    refusal dialogs through ``describe``: none may fall back to the unknown-code sentence."""
    for family in (codes.HostCode, codes.TransferCode):
        for code in family:
            _assert_plain(code.value)


def test_the_history_replays_words_stand_for_exactly_the_codes_that_block_a_resume() -> None:
    """``maka plan`` and the banner's details say these codes' sentences instead of their
    messages, which name only the code."""
    assert {code.value for code in BLOCKING_REPLAY_CODES} == HISTORY_REPLAY_CODES
    for code in HISTORY_REPLAY_CODES:
        _assert_plain(code)


# The resolver's reasons that are not a damaged record: a settled, unknown or parked call.
NOT_DAMAGE = {
    "matching_response",
    "recovery_bundle_completed",
    "dispatch_without_response",
    "new_protocol_before_dispatch",
    "legacy_dispatch_unknown",
    "reconcile_matches_prior_state",
    "reconcile_diverged",
    "reconcile_unreadable",
    "user_attested_ran",
    "user_attested_not_run",
}


def test_every_ledger_check_code_that_can_park_has_words() -> None:
    """A park lists the scanner's issues under tool_ledger_corruption and a corrupt call's
    resolver reason under tool_recovery_corruption; ``maka plan`` and the banner say these
    codes' sentences instead of the messages, which name only the code."""
    scanner = {code.value for code in codes.ScanIssueCode}
    corrupt_calls = {reason.value for reason in codes.ResolverReason} - NOT_DAMAGE
    assert scanner | corrupt_calls == LEDGER_CHECK_CODES
    for code in LEDGER_CHECK_CODES:
        _assert_plain(code)
        assert "resume" not in describe(code).sentence, "the sentence says what is wrong only"


def _segment_issues(*events: RuntimeEvent) -> list[tuple[str, str]]:
    identity = RunIdentity("sess-1", "inv-1", "run-1", "turn-1")
    blocked = build_segment(ImmutablePrefix(identity, events, len(events), ""))
    assert isinstance(blocked, SegmentBlocked)
    return [(issue.code, f"generation 1: {issue.message}") for issue in blocked.issues]


def test_a_damaged_records_message_names_its_ledger_check_code() -> None:
    """The planner's own messages, read back: the code they end with is the one worded."""
    user = user_text(marker=True)
    orphan = response_event(call_event("call-9"), ts=5)
    issues = _segment_issues(user, orphan)
    assert [code for code, _ in issues] == ["tool_recovery_corruption", "tool_ledger_corruption"]
    assert [ledger_check_code(*issue) for issue in issues] == ["orphan_response"] * 2

    call = call_event("call-1")
    model_side = with_changes(bound_response(call), role="model", author="agent")
    issues = _segment_issues(user, call, dispatch_event(call), model_side)
    assert ("tool_ledger_corruption", "generation 1: ledger issue semantic_lane_conflict") in issues
    assert ledger_check_code(*issues[-1]) == "semantic_lane_conflict"


def test_only_a_damaged_record_is_read_as_a_ledger_check_code() -> None:
    assert ledger_check_code("pending_tool_result", "tool call (orphan_response)") is None
    assert ledger_check_code("unsupported_role", "provider replay: unsupported_role") is None
    # A message naming no code it knows: the diagnostic's own sentence stands for it.
    assert ledger_check_code("tool_ledger_corruption", "ledger issue x") == "tool_ledger_corruption"


def test_the_walk_catches_a_missing_sentence() -> None:
    with pytest.raises(AssertionError, match="no sentence"):
        _assert_plain("a_code_nobody_wrote_words_for")


def test_every_warn_or_error_park_reason_has_a_next_step() -> None:
    for code, (severity, _sentence) in code_text.PARK_REASONS.items():
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
    assert errors - {"runtime_offset_mismatch"} == code_text.DAMAGED_RECORD_DIAGNOSTICS


def test_a_damaged_record_changes_the_next_step_the_severity_and_try_again() -> None:
    damaged = ["pending_tool_result", "tool_ledger_corruption"]
    assert record_damaged(["dangling_tool_state"], damaged)
    assert not record_damaged(["dangling_tool_state"], ["pending_tool_result"])
    assert not record_damaged(["workspace_drift"], damaged), "only an unsettled tool state"
    step = next_step_source(["dangling_tool_state"], damaged)
    assert step == code_text.DAMAGED_RECORD_NEXT_STEP
    assert "new message" in step and "maka doctor" in step and "backup" in step
    assert "confirm whether it ran" not in step
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
    assert next_step_source(["dangling_tool_state"]) == code_text.NEXT_STEPS["dangling_tool_state"]


def test_the_table_module_imports_no_qt() -> None:
    probe = (
        "import sys, app.code_text; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'renderer')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


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
    assert code_text.write_did_not_happen(("dangling_tool_state",), diagnostics) is expected
    assert not code_text.write_did_not_happen(
        ("dangling_tool_state", "workspace_drift"), diagnostics
    )
