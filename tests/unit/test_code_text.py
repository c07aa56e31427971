"""The one code table (``app/code_text.py``): every code has words, and reading them needs no Qt."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path

import pytest

from app.bridge_contract import BridgeErrorCode
from app.code_text import describe
from app.host.since_shown import ShownChangedCode
from app.park_guidance import (
    HISTORY_REPLAY_CODES,
    LEDGER_CHECK_CODES,
)
from runtime.continuation.continuation_replay import (
    SegmentBlockReason,
)
from runtime.continuation.provider_replay import BLOCKING_REPLAY_CODES, ReplayDiagnosticCode
from runtime.ledger import codes
from runtime.ledger.ledger_errors import DecodeCode
from runtime.providers.provider_port import ProviderErrorCode
from runtime.recovery.file_observation import ObservationProblem
from runtime.tools.tool_contract import ToolFailureCode, ToolRefusalCode

REPO = Path(__file__).resolve().parents[2]

CODES_MD = REPO / "docs" / "design" / "codes.md"
"""The codes document of the repository: every backticked snake_case word in it is a code."""

# Backticked words of docs/design/codes.md that are not codes.
NOT_CODES: set[str] = set()


def _spec_codes() -> list[str]:
    """The codes ``CODES_MD`` names. Read at collection: a missing document is a collection
    error, never an empty parametrization."""
    words = set(re.findall(r"`([a-z][a-z0-9_]*)`", CODES_MD.read_text(encoding="utf-8")))
    found = sorted(words - NOT_CODES)
    if not found:
        raise AssertionError(f"{CODES_MD} names no code")
    return found


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
    codes.BranchCode,
    ToolRefusalCode,
    ToolFailureCode,
    # Outside runtime/ledger/codes.py: a provider that cannot be built refuses ``maka run`` and
    # a message sent in the window; a line that does not decode refuses ``maka ledger`` and
    # ``maka import``; a history that cannot be replayed lists its codes in ``maka plan``.
    ProviderErrorCode,
    DecodeCode,
    ReplayDiagnosticCode,
    # The desktop's refusals of a decision made on words that no longer hold (app/host).
    ShownChangedCode,
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
    """The document is in the checkout and its every table and list is read: a park reason, a
    diagnostic, a resolver reason, a store refusal and a failure class among them, and at
    least as many codes as there are park reasons."""
    assert CODES_MD.is_file()
    codes_named = _spec_codes()
    for code in (
        "workspace_folder_missing",
        "tool_name_mismatch",
        "reconcile_unreadable",
        "store_corrupt",
        "continuation_revalidation_failed",
    ):
        assert code in codes_named
    assert len(codes_named) >= len(codes.ParkReason)


def test_every_park_reason_is_in_the_codes_document() -> None:
    """The document keeps up with the program: each reason Safe resume can park with is in it."""
    missing = {reason.value for reason in codes.ParkReason} - set(_spec_codes())
    assert missing == set()


@pytest.mark.parametrize("code", _spec_codes(), ids=str)
def test_every_code_of_codes_md_has_a_plain_sentence(code: str) -> None:
    _assert_plain(code)


@pytest.mark.parametrize("code", _enum_codes(), ids=str)
def test_every_code_the_program_can_produce_has_a_plain_sentence(code: str) -> None:
    _assert_plain(code)


def test_every_code_enum_of_the_ledger_is_worded_or_named_as_never_shown() -> None:
    found = set(codes.code_enums())
    declared = {  # every enum of the modules codes.py loads its enums from
        value
        for path in sorted((REPO / "runtime" / "ledger").glob("codes_*.py"))
        for value in vars(importlib.import_module(f"runtime.ledger.{path.stem}")).values()
        if isinstance(value, type) and issubclass(value, StrEnum) and value is not StrEnum
    }
    assert found == declared, "codes.py names every enum of its modules"
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


def test_the_walk_catches_a_missing_sentence() -> None:
    with pytest.raises(AssertionError, match="no sentence"):
        _assert_plain("a_code_nobody_wrote_words_for")


def test_the_table_module_imports_no_qt() -> None:
    probe = (
        "import sys, app.code_text; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'renderer')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_upgrade_sentence_names_the_commands_that_upgrade_without_claiming_only_them() -> None:
    """Any writer upgrades an older data folder (``maka plan`` and ``maka settle`` too): the
    sentence names the usual ways and does not say no other does."""
    sentence = describe("schema_upgrade_required").sentence
    assert "only" not in sentence
    assert "desktop app" in sentence and "'maka run'" in sentence and "'maka resume'" in sentence
