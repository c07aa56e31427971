"""A terminal's workspace decision that the plan does not carry out (``maka resume --rebaseline``
or ``--restore-to`` when there is nothing to decide, ``--restore-to`` when no snapshot is left to
copy from): refused with its code and sentence, whether the command or a host plans it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.ledger.codes import RestoreCode
from runtime.ledger.command_words import maka_command

DECISION_NOT_OFFERED = RestoreCode.WORKSPACE_DECISION_NOT_OFFERED.value
"""A refusal of the terminal's own request, not a park of the session: the windows are not told
it and it is not remembered as the session's verdict."""

if TYPE_CHECKING:
    from runtime.continuation.continuation_planner import ContinuationPlan
    from runtime.continuation.workspace_decision import WorkspaceDecision


def unanswered_decision(
    plan: ContinuationPlan, decision: WorkspaceDecision | None, cwd: str
) -> tuple[str, str] | None:
    """The refusal for a decision the plan does not carry out (no workspace park to answer)."""
    details = plan.continuation
    if decision is None or details is None or details.workspace_decision is not None:
        return None
    flag = "--rebaseline" if decision.value == "rebaseline" else "--restore-to"
    return (
        RestoreCode.WORKSPACE_DECISION_NOT_OFFERED.value,
        f"{flag} answers a park on changed files, and this resume has none (see the notes "
        f"above); nothing was done. Resume without {flag} to continue in {cwd}.",
    )


def restore_unavailable(
    plan: ContinuationPlan, decision: WorkspaceDecision | None
) -> tuple[str, str] | None:
    """The refusal for ``--restore-to`` on a workspace park no snapshot is left to copy from
    (only the rebaseline is offered)."""
    options = plan.workspace_options
    if decision is None or decision.value != "isolated_restore" or not options:
        return None
    if "isolated_restore" in options:
        return None
    why = "no snapshot of the folder is left in the checkpoint store to make a restored copy from"
    if any(diagnostic.detail.get("damagedAside") for diagnostic in plan.diagnostics):
        # (the plan's look at the folder would have written the objects again had it held them)
        why = (
            "the snapshot a restored copy would be made from was found damaged and its objects "
            f"were moved aside ({maka_command(f'plan {plan.session_id}')} says where); a look at "
            "the folder writes them again only while it holds those files as the snapshot had "
            "them, and it does not now"
        )
    return (
        RestoreCode.WORKSPACE_RESTORE_UNAVAILABLE.value,
        f"{why}; nothing was done. Continue with your current files instead: "
        f"{maka_command(f'resume {plan.session_id} --rebaseline')}",
    )
