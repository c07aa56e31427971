"""Every code the runtime can report has a severity and a sentence in the renderer's table."""

from __future__ import annotations

import pytest

from renderer import park_text
from renderer.park_text import Severity, describe, highest_severity, next_step
from runtime.ledger.codes import DiagnosticCode, ParkReason, RevalidationCode

pytestmark = pytest.mark.gui

# docs/design/codes.md's severity column, restated so a table edit that changes one is caught.
EXPECTED_SEVERITY = {
    "resume_feature_disabled": Severity.INFO,
    "resume_candidate_missing": Severity.INFO,
    "session_busy": Severity.INFO,
    "continuation_already_exists": Severity.INFO,
    "dangling_tool_state": Severity.WARN,
    "pending_permission": Severity.WARN,
    "background_operation_pending": Severity.WARN,
    "workspace_identity_mismatch": Severity.WARN,
    "workspace_identity_missing": Severity.WARN,
    "tool_catalog_mismatch": Severity.WARN,
    "workspace_folder_missing": Severity.WARN,
    "workspace_drift": Severity.WARN,
    "workspace_checkpoint_stale": Severity.WARN,
    "workspace_checkpoint_failed": Severity.WARN,
    "provider_history_too_long": Severity.WARN,
}


@pytest.mark.parametrize("reason", list(ParkReason), ids=str)
def test_every_park_reason_has_a_severity_and_a_sentence(reason: ParkReason) -> None:
    text = describe(reason.value)
    assert text.known
    assert reason.value in park_text.PARK_REASONS
    assert text.severity is EXPECTED_SEVERITY.get(reason.value, Severity.ERROR)
    assert text.sentence.endswith(".") and len(text.sentence) > 15
    assert "_" not in text.sentence, "sentences are for people, not codes"


@pytest.mark.parametrize(
    "code",
    [
        *(c.value for c in DiagnosticCode),
        *(c.value for c in RevalidationCode),
        "reconcile_matches_prior_state",
        "reconcile_diverged",
        "reconcile_unreadable",
    ],
)
def test_diagnostics_and_revalidation_codes_have_sentences(code: str) -> None:
    text = describe(code)
    assert text.known
    assert text.sentence and "_" not in text.sentence


def test_reconcile_matches_prior_state_says_redo_is_left_to_the_user() -> None:
    assert describe("reconcile_matches_prior_state").sentence == (
        "The write did not happen; redo is left to you."
    )


def test_workspace_location_changed_is_informational_only() -> None:
    assert describe("workspace_location_changed").severity is Severity.INFO


def test_unknown_codes_fall_back_to_error_and_name_the_code() -> None:
    text = describe("something_new_from_a_later_version")
    assert not text.known
    assert text.severity is Severity.ERROR
    assert "something_new_from_a_later_version" in text.sentence


def test_sentences_are_unique_per_table() -> None:
    for table in (park_text.PARK_REASONS, park_text.DIAGNOSTICS, park_text.REVALIDATION):
        sentences = [record.sentence for record in table.values()]
        assert len(sentences) == len(set(sentences))


def test_highest_severity() -> None:
    assert highest_severity([]) is Severity.INFO
    assert highest_severity(["session_busy"]) is Severity.INFO
    assert highest_severity(["session_busy", "pending_permission"]) is Severity.WARN
    assert highest_severity(["pending_permission", "runtime_lineage_cycle"]) is Severity.ERROR
    assert highest_severity(["unknown_code_x"]) is Severity.ERROR


def test_a_warning_park_says_how_to_carry_on_and_when_try_again_helps() -> None:
    for reasons in (("dangling_tool_state",), ("background_operation_pending",)):
        sentence = next_step(reasons)
        assert "send a new message to carry on" in sentence.lower() and "Try again" in sentence
        assert sentence.endswith(".") and sentence.count(". ") == 0, "one sentence"
    assert "Check the files that tool call may have changed" in next_step(
        ("workspace_identity_mismatch", "dangling_tool_state")
    )
    assert "Copy diagnostics" in next_step(("runtime_ledger_empty",))
    # a warning the user cannot change says how to carry on, and promises no Try again
    assert next_step(("workspace_checkpoint_failed",)) == "Send a new message to carry on."


def test_an_informational_park_adds_no_next_step() -> None:
    assert next_step(("session_busy",)) == ""
    assert next_step(("continuation_already_exists",)) == ""
