"""What to do about a park, in plain words: the next step, whether Try again can help, and the
parks that need their own words (a damaged record of the tool history, a write that did not
happen), plus which diagnostics' messages only name a code whose sentence stands for them.

The sentences for the codes themselves are the one table, ``app/code_text.py``; this module
reads it and, like it, imports only the standard library, so the CLI, the TUI and the renderer
(through ``renderer/park_text.py``, which translates with Qt's ``tr``) say the same words. The
strings here are the English sources the renderer passes to ``tr`` in the ``ParkText`` context.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.code_text import PARK_REASONS, Severity, describe, highest_severity

_I, _W, _E = Severity.INFO, Severity.WARN, Severity.ERROR

# The history replay's codes (``runtime.continuation.provider_replay.BLOCKING_REPLAY_CODES``):
# their messages name only the code and the generation, so their sentence in the table stands
# for them wherever a diagnostic is printed (``maka plan``, the banner's details); a test holds
# the two sets equal.
HISTORY_REPLAY_CODES: frozenset[str] = frozenset(
    {
        "partial_skipped",
        "unmatched_tool_result",
        "tool_id_mismatch",
        "unsupported_role",
        "unsupported_content",
    }
)

# The ledger check's codes (the tool-ledger scanner's issues, docs/design/ledger.md section 4, and
# the resolver's corruption reasons): a damaged record. A park lists one under
# ``tool_ledger_corruption`` or ``tool_recovery_corruption`` with a message naming only the code
# carrying the code in a field (``issueCode`` / ``resolverReason``, the wire's ``sub_code``;
# never read out of the message), so ``maka plan`` and the banner's details say its sentence
# and ``LEDGER_DAMAGED`` instead; a test holds the set equal to the codes that can reach a park.
LEDGER_CHECK_CODES: frozenset[str] = frozenset(
    {
        "duplicate_event_id",
        "semantic_lane_conflict",
        "duplicate_call",
        "duplicate_operation",
        "duplicate_dispatch",
        "duplicate_response",
        "orphan_dispatch",
        "orphan_response",
        "canonical_args_hash_conflict",
        "invocation_identity_conflict",
        "identity_conflict",
        "event_order_conflict",
        "protocol_marker_invalid",
        "workspace_fact_malformed",
        "recovery_fact_corruption",
    }
)
LEDGER_DAMAGED = "The saved history is damaged there, so Maka will not resume over it."
_LEDGER_DAMAGE_DIAGNOSTICS = frozenset({"tool_ledger_corruption", "tool_recovery_corruption"})


def ledger_check_code(code: str, sub_code: str | None) -> str | None:
    """The ledger check's code a ``tool_ledger_corruption`` / ``tool_recovery_corruption``
    diagnostic stands for (its ``sub_code`` field), ``code`` itself when that names no ledger
    check, or ``None`` for any other diagnostic."""
    if code not in _LEDGER_DAMAGE_DIAGNOSTICS:
        return None
    return sub_code if sub_code in LEDGER_CHECK_CODES else code


# What the user can do about a park: one sentence under the reasons, from each reason's record
# (``app.code_text.PARK_REASONS``). A new message always carries the session on; Try again only
# helps once a reason the user can change has changed. When several reasons have one, the most
# serious reason's wins, then the first in this order.
NEXT_STEP_ORDER: tuple[str, ...] = (
    "resume_feature_disabled",
    "workspace_folder_missing",
    "dangling_tool_state",
    "workspace_identity_mismatch",
    "workspace_identity_missing",
    "tool_catalog_mismatch",
    "background_operation_pending",
    "pending_permission",
    "workspace_drift",
    "workspace_checkpoint_stale",
    "workspace_checkpoint_missing",
    "provider_history_too_long",
)
NEXT_STEPS: dict[str, str] = {code: PARK_REASONS[code].next_step for code in NEXT_STEP_ORDER}
NEXT_STEP_BY_SEVERITY: dict[Severity, str] = {
    _I: "",  # the reason itself says what to do (wait, or nothing to resume)
    _W: "Send a new message to carry on.",
    _E: "Send a new message to carry on, and use Copy diagnostics to report the problem.",
}

# The files' park reasons a decision answers (continue in a restored copy, or with the current
# files; docs/design/workspace.md section 4). When other reasons park too, the files' reason is
# listed with them and this follows the other reasons' next step: a decision never waives
# another gate.
FILES_DECISION_CODES: frozenset[str] = frozenset(
    {
        "workspace_drift",
        "workspace_checkpoint_stale",
        "workspace_checkpoint_failed",
        "workspace_checkpoint_missing",
    }
)
FILES_DECISION_LATER = (
    "After that, the files in the folder still need your decision on how to continue with them."
)
# Instead of that, when the calls asked about are writing calls of a run that takes snapshots
# (the plan's ``workspace_settle_takes_folder`` note): the answer takes the folder as it is.
FILES_TAKEN_BY_ANSWER = (
    "Your answer also takes the folder as it is now as the new starting point, so the files "
    "need no other decision."
)

DANGLING_NOTHING_TO_CONFIRM = (
    "Check the files that tool call may have changed, then send a new message to carry on."
)
TRY_AGAIN_NEXT_STEP = (
    "Send a new message to carry on, or choose Try again once what is listed above has changed."
)

# Reasons the user can change from outside Maka's history (marker, folder, tool catalog,
# background work, a turn still running): only then does checking again mean something.
CHANGEABLE: frozenset[str] = frozenset(
    {
        "workspace_identity_mismatch",
        "workspace_folder_missing",
        "tool_catalog_mismatch",
        "background_operation_pending",
        "session_busy",
        "safety_observation_unavailable",
        "workspace_drift",
    }
)
# Not here: ``workspace_checkpoint_stale`` comes from the ledger alone (a writing call after the
# last snapshot), so checking again can never clear it; its way on is "Continue with my current
# files" or a new message.


def next_step_source(codes: Iterable[str], diagnostic_codes: Iterable[str] | None = None) -> str:
    """The (untranslated) sentence saying what to do after a park with ``codes``."""
    codes = tuple(codes)
    worst = highest_severity(codes)
    diagnostic_codes = None if diagnostic_codes is None else tuple(diagnostic_codes)
    if (
        diagnostic_codes is not None
        and record_damaged(codes, diagnostic_codes)
        and "background_operation_pending" not in codes
        and "workspace_folder_missing" not in codes
    ):
        # (a command still running, or a folder that is gone, comes first)
        return DAMAGED_RECORD_NEXT_STEP
    if (
        "background_operation_pending" in codes
        and describe("background_operation_pending").severity is worst
    ):
        # Nothing else can be done while a command from before the restart still runs.
        return NEXT_STEPS["background_operation_pending"]
    stepped = [c for c in NEXT_STEPS if c in codes and describe(c).severity is worst]
    if stepped:
        if (
            stepped[0] == "dangling_tool_state"
            and diagnostic_codes is not None
            and not can_try_again(codes, diagnostic_codes)
        ):
            return DANGLING_NOTHING_TO_CONFIRM  # e.g. a parked write: nothing to confirm
        if (
            stepped[0] == "dangling_tool_state"
            and diagnostic_codes is not None
            and _only_writes_not_done(diagnostic_codes)
        ):
            return WRITE_NOT_DONE_CONFIRM_STEP
        return NEXT_STEPS[stepped[0]]
    if worst is Severity.WARN and can_try_again(codes):
        return TRY_AGAIN_NEXT_STEP
    return NEXT_STEP_BY_SEVERITY[worst]


def can_try_again(codes: Iterable[str], diagnostic_codes: Iterable[str] = ()) -> bool:
    """True when at least one reason is one the user can change, so checking again may help:
    the listed ones, or an unknown tool outcome (``pending_tool_result``) the user can settle by
    confirming whether the call ran, or a write recovery found not done that the user can
    confirm (unless a record is damaged too: confirming cannot lift that)."""
    codes, diagnostic_codes = tuple(codes), tuple(diagnostic_codes)
    if any(code in CHANGEABLE for code in codes):
        return True
    return (
        "dangling_tool_state" in codes
        and (
            "pending_tool_result" in diagnostic_codes
            or "reconcile_matches_prior_state" in diagnostic_codes
        )
        and not record_damaged(codes, diagnostic_codes)
    )


def _only_writes_not_done(diagnostic_codes: Iterable[str]) -> bool:
    """Every unsettled call the diagnostics name is a write recovery found not to have
    happened (its card offers "Confirm: it did not run"), and none has an unknown outcome."""
    codes = set(diagnostic_codes)
    return "reconcile_matches_prior_state" in codes and not codes & {
        "pending_tool_result",
        "reconcile_diverged",
        "reconcile_unreadable",
    }


# A park whose tool calls include a damaged record (the ledger check found an issue): its
# ``dangling_tool_state`` is not an outcome to settle but a history Maka will not resume over, so
# the headline, the reason, the next step and the severity say so. The code stays the same.
DAMAGED_RECORD_DIAGNOSTICS: frozenset[str] = frozenset(
    {
        "tool_recovery_corruption",
        "tool_ledger_corruption",
        "duplicate_event_id",
        "semantic_lane_conflict",
        "protocol_marker_invalid",
        "unmatched_tool_result",
        "tool_name_mismatch",
    }
)
DAMAGED_RECORD_HEADLINE = "The saved history is damaged, so this run cannot be resumed."
DAMAGED_RECORD_REASON = (
    "A tool call's saved record is damaged, and Maka will not resume over it; saying whether "
    "the call ran cannot repair it."
)
DOCTOR_COMMAND = "maka doctor"
"""The command ``DAMAGED_RECORD_NEXT_STEP`` names; the window words it for its data folder
(``renderer.park_text.next_step``)."""
DAMAGED_RECORD_NEXT_STEP = (
    "Check what the interrupted tool calls may have changed, then send a new message to carry "
    f"on. {DOCTOR_COMMAND} (in a terminal) lists every damaged record; only a backup of Maka's "
    "data folder from before the damage could resume this run."
)


def record_damaged(reasons: Iterable[str], diagnostic_codes: Iterable[str]) -> bool:
    """True when the park's unsettled tool state includes a damaged record."""
    return "dangling_tool_state" in tuple(reasons) and any(
        code in DAMAGED_RECORD_DIAGNOSTICS for code in diagnostic_codes
    )


def park_severity(reasons: Iterable[str], diagnostic_codes: Iterable[str]) -> Severity:
    """The park's severity: its most serious reason's, or ``error`` when a record is damaged
    (docs/design/codes.md: the ledger is not in a trustworthy state)."""
    reasons = tuple(reasons)
    return _E if record_damaged(reasons, diagnostic_codes) else highest_severity(reasons)


# A park whose only unsettled tool calls are file writes that recovery found did not happen: the
# banner says so in its headline instead of the generic unknown-outcome sentence.
WRITE_NOT_DONE_HEADLINE = "The write did not happen."
WRITE_NOT_DONE_REASON = (
    "Maka stopped before the file changed, so the file is as it was; the write is not redone "
    "on its own."
)
WRITE_NOT_DONE_NEXT_STEP = (
    "Check the file, then confirm on its card below that the write did not happen (Confirm: it "
    "did not run): Safe resume then checks again by itself, and the model is told. Or send a "
    "new message to carry on, and ask for the write again if you still want it."
)
# The same write beside other reasons (changed files, say): the call's step, as for an unknown
# outcome, with the card's one answer.
WRITE_NOT_DONE_CONFIRM_STEP = (
    "Check the file that write was to change, then send a new message to carry on, or confirm "
    "on its card below that the write did not happen (Confirm: it did not run): Safe resume "
    "then checks again by itself, as Try again does,"
    " and offers Safe resume if nothing else stands in the way."
)
_UNSETTLED_CALL_CODES = frozenset(
    {"pending_tool_result", "tool_not_dispatched", "tool_recovery_parked"}
)


_BESIDE_A_WRITE_NOT_DONE = frozenset(
    {
        "reconcile_matches_prior_state",
        "write_temp_file_left",
        # The workspace gate's notes that park nothing (it runs beside the unsettled calls).
        "workspace_checkpoint_unavailable",
        "workspace_verified",
    }
)
"""Diagnostics that may come with a write recovery found not to have happened without making
it anything else."""


def write_did_not_happen(
    reasons: Iterable[str], diagnostics: Iterable[tuple[str, str | None]]
) -> bool:
    """True when the park is ``dangling_tool_state`` alone and every unsettled call it names is a
    write recovery found not to have happened (``diagnostics``: ``(code, tool call id)``)."""
    if tuple(reasons) != ("dangling_tool_state",):
        return False
    pairs = tuple(diagnostics)
    not_done = {call for code, call in pairs if code == "reconcile_matches_prior_state"}
    unsettled = {call for code, call in pairs if code in _UNSETTLED_CALL_CODES}
    other = any(
        code not in _UNSETTLED_CALL_CODES and code not in _BESIDE_A_WRITE_NOT_DONE
        for code, _call in pairs
    )
    return bool(not_done) and unsettled <= not_done and not other
