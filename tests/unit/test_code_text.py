"""The one code table (``app/code_text.py``): every code has words, and reading them needs no Qt."""

from __future__ import annotations

import re
import subprocess
import sys
from enum import StrEnum
from pathlib import Path

import pytest

from app import code_text
from app.code_text import Severity, can_try_again, describe, next_step_source
from runtime.ledger import codes
from runtime.tools.tool_contract import ToolFailureCode, ToolRefusalCode

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
)

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


def _enum_codes() -> list[str]:
    found = {member.value for enum in CODE_ENUMS for member in enum}
    # reconcile_matches_expected_state is the "completed" path, never shown on its own.
    return sorted(found - {"reconcile_matches_expected_state"})


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


def test_every_host_and_cli_refusal_has_a_plain_sentence() -> None:
    """The codes the host and the CLI refuse with reach the window's status bar and its
    refusal dialogs through ``describe``: none may fall back to the unknown-code sentence."""
    for family in (codes.HostCode, codes.TransferCode):
        for code in family:
            _assert_plain(code.value)


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


def test_the_table_module_imports_no_qt() -> None:
    probe = (
        "import sys, app.code_text; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'renderer')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
