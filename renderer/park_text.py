"""Every code the user can meet around Safe resume -> a severity and one sentence.

Why one table: CODES.md says the UI maps each stable code to a severity and a sentence in one
place, and tests assert codes, not sentences. The table is keyed by the code *strings* because
the renderer may not import the runtime's enums (a test cross-checks that every park reason the
runtime can produce is here). Sentences are English source strings, translated at lookup with
``QCoreApplication.translate("ParkText", ...)``, so a loaded ``QTranslator`` localises them.

Severity: ``info`` = an expected state the user can act on calmly; ``warn`` = the workspace or
session needs attention before resuming; ``error`` = the ledger or the host is not in a
trustworthy state. An unknown code is shown as ``error`` with its code, never hidden.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from PySide6.QtCore import QCoreApplication

CONTEXT = "ParkText"


class Severity(StrEnum):
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


_RANK = {Severity.INFO: 0, Severity.WARN: 1, Severity.ERROR: 2}

_I, _W, _E = Severity.INFO, Severity.WARN, Severity.ERROR

PARK_REASONS: dict[str, tuple[Severity, str]] = {
    "resume_feature_disabled": (_I, "Safe resume is turned off on this computer."),
    "resume_candidate_missing": (_I, "There is nothing interrupted to resume in this session."),
    "session_busy": (_I, "This session is running right now. Wait for it to finish."),
    "continuation_already_exists": (_I, "This interruption has already been resumed."),
    "dangling_tool_state": (
        _W,
        "A tool call's outcome is unknown or unsettled; resuming could repeat or hide "
        "its side effect.",
    ),
    "pending_permission": (_W, "A permission request was never answered."),
    "background_operation_pending": (_W, "A background command or child task is still running."),
    "workspace_identity_mismatch": (
        _W,
        "This folder is not the same workspace the session ran in.",
    ),
    "workspace_identity_missing": (
        _W,
        "The interrupted run did not record which workspace it used.",
    ),
    "tool_catalog_mismatch": (_W, "A tool used in this session is no longer available."),
    "runtime_offset_mismatch": (
        _E,
        "The saved history does not end where the checkpoint says it should.",
    ),
    "runtime_ledger_empty": (_E, "The interrupted run has no saved events to continue from."),
    "runtime_ledger_unreadable": (
        _E,
        "The run's saved history cannot be read or has been quarantined.",
    ),
    "runtime_identity_mismatch": (_E, "The run's saved history mixes events of different runs."),
    "continuation_identity_reused": (_E, "A new run would reuse the identity of an old one."),
    "terminal_repair_failed": (_E, "The run's recorded ending and its header disagree."),
    "provider_resume_head_unsupported": (
        _E,
        "The history does not start with a user message, so it cannot be continued.",
    ),
    "provider_resume_boundary_unsupported": (
        _E,
        "The history does not end at a user message or a tool result, so it cannot be continued.",
    ),
    "provider_replay_non_suffix_gap": (
        _E,
        "An unresolved tool call sits in the middle of the history.",
    ),
    "source_run_unreadable": (_E, "The interrupted run's record cannot be read."),
    "source_prefix_digest_mismatch": (_E, "An earlier part of the saved history has changed."),
    "runtime_lineage_cycle": (_E, "The chain of earlier resumes loops back on itself."),
    "runtime_lineage_depth_exceeded": (
        _E,
        "The chain of earlier resumes is longer than 64 links.",
    ),
    "runtime_lineage_missing": (_E, "A link in the chain of earlier resumes is missing."),
    "runtime_lineage_start_mismatch": (
        _E,
        "An earlier resume's starting point does not match its record.",
    ),
    "runtime_lineage_replay_mismatch": (
        _E,
        "The history replayed by an earlier resume has changed.",
    ),
    "runtime_lineage_claim_mismatch": (_E, "An earlier resume has no matching claim on record."),
    "continuation_authority_unavailable": (_E, "The record of earlier resumes cannot be read."),
    "continuation_claim_conflict": (_E, "Another resume claimed this point first."),
    "safety_observation_unavailable": (
        _E,
        "The workspace, tools or background work could not be inspected.",
    ),
}

DIAGNOSTICS: dict[str, tuple[Severity, str]] = {
    "pending_tool_result": (_W, "A tool call has no recorded result; its outcome is unknown."),
    "tool_not_dispatched": (_W, "A tool call was prepared but never started."),
    "tool_recovery_parked": (_W, "Recovery could not settle a tool call; it waits for you."),
    "tool_recovery_corruption": (_E, "A tool call's recovery record is inconsistent."),
    "tool_ledger_corruption": (_E, "The tool history is inconsistent."),
    "duplicate_event_id": (_E, "The same event appears twice in the history."),
    "semantic_lane_conflict": (_E, "An event is recorded in the wrong place for its kind."),
    "protocol_marker_invalid": (_E, "A tool call carries an invalid protocol marker."),
    "unmatched_tool_result": (_E, "A tool result has no matching call."),
    "tool_name_mismatch": (_E, "A tool result names a different tool than its call."),
    "workspace_location_changed": (
        _I,
        "The workspace folder has moved; it is still the same workspace.",
    ),
    "reconcile_matches_prior_state": (
        _W,
        "The write did not happen; redo is left to you.",
    ),
    "reconcile_diverged": (
        _W,
        "The file was changed by someone else since the tool ran; Maka will not overwrite it.",
    ),
    "reconcile_unreadable": (
        _W,
        "The file or the workspace could not be checked, so what happened is unknown.",
    ),
    "recovery_bundle_completed": (_I, "Completed after recovery: the write had happened."),
    "dispatch_without_response": (
        _W,
        "The call was dispatched but no result was recorded, so whether it ran is unknown; it "
        "is never retried or assumed.",
    ),
    "legacy_dispatch_unknown": (_W, "It is not known whether the tool started."),
    "orphan_dispatch": (_E, "A tool start was recorded without its call."),
    "recovery_fact_corruption": (_E, "A recovery record is inconsistent."),
}

REVALIDATION: dict[str, tuple[Severity, str]] = {
    "source_identity_changed": (_E, "The interrupted run changed while resume was starting."),
    "source_terminal_changed": (
        _E,
        "The interrupted run's ending changed while resume was starting.",
    ),
    "source_high_water_changed": (
        _E,
        "New events were saved to the interrupted run while resume was starting.",
    ),
    "source_ledger_identity_changed": (
        _E,
        "The interrupted run's history changed while resume was starting.",
    ),
    "source_replay_changed": (_E, "The history to replay changed while resume was starting."),
    "workspace_identity_changed": (
        _W,
        "The workspace changed while resume was starting.",
    ),
    "background_operation_started": (
        _W,
        "A background command started while resume was starting.",
    ),
    "tool_catalog_changed": (_W, "The available tools changed while resume was starting."),
    "target_run_conflict": (_E, "Another run already uses the new run's identity."),
}

FAILURES: dict[str, tuple[Severity, str]] = {
    "bridge_disconnected": (_E, "The window lost its connection to the Maka process."),
    "host_not_ready": (_W, "Maka is still starting up. Try again in a moment."),
    "host_draining": (_W, "Maka is shutting down."),
    "session_not_found": (_E, "This session no longer exists."),
    "operation_conflict": (_W, "A resume with different inputs is already under way."),
    "internal_failure": (_E, "Safe resume could not start because of an internal error."),
}

_TABLES = (PARK_REASONS, REVALIDATION, DIAGNOSTICS, FAILURES)

# What the user can do about a park, one sentence under the reasons. Try again plans from the same
# facts, so it only helps once something has changed; a new message always carries the session on.
NEXT_STEPS: dict[str, str] = {
    "dangling_tool_state": (
        "Check the files that tool call may have changed, then send a new message to carry on, "
        "or choose Try again after changing something."
    ),
}
NEXT_STEP_BY_SEVERITY: dict[Severity, str] = {
    _I: "",  # the reason itself says what to do (wait, or nothing to resume)
    _W: (
        "Send a new message to carry on, or choose Try again once what is listed above has changed."
    ),
    _E: "Send a new message to carry on, and use Copy diagnostics to report the problem.",
}


@dataclass(frozen=True, slots=True)
class CodeText:
    code: str
    severity: Severity
    sentence: str
    known: bool


def describe(code: str) -> CodeText:
    """Severity and translated sentence for ``code``; unknown codes fall back to ``error``."""
    for table in _TABLES:
        entry = table.get(code)
        if entry is not None:
            severity, source = entry
            return CodeText(code, severity, QCoreApplication.translate(CONTEXT, source), True)
    sentence = QCoreApplication.translate(
        CONTEXT, "Safe resume stopped for a reason this version does not know ({code})."
    ).replace("{code}", code)
    return CodeText(code, Severity.ERROR, sentence, False)


def next_step(codes: Iterable[str]) -> str:
    """The sentence saying what to do after a park with ``codes`` ("" when the reasons say it)."""
    codes = tuple(codes)
    source = next((NEXT_STEPS[c] for c in codes if c in NEXT_STEPS), None)
    if source is None:
        source = NEXT_STEP_BY_SEVERITY[highest_severity(codes)]
    return QCoreApplication.translate(CONTEXT, source) if source else ""


def highest_severity(codes: Iterable[str]) -> Severity:
    """The banner's colour: the most serious severity among ``codes`` (``info`` if none)."""
    return max((describe(code).severity for code in codes), key=_RANK.__getitem__, default=_I)
