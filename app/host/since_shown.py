"""What the user was shown when they decided, checked against the folder as it is now.

The user decides on what the window says: a tool card's note on what answering does to the
folder ("No file changed since the last snapshot"), the banner's list of changed files beside
"Continue with my current files". Both were computed when they were shown; the folder may have
changed since (the user edited a file, a build wrote one). The renderer sends what it showed
with the decision; before anything is recorded or captured the main process compares it with
what holds now and, when they differ, records nothing and shows the new words instead, so the
user decides again on what is there (docs/design/workspace.md sections 3 and 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from app.bridge_contract import ChangedFilesShown

__all__ = ["ShownChangedCode", "drift_changed_words"]


class ShownChangedCode(StrEnum):
    """The folder changed between what the window showed and the user's decision: nothing was
    recorded, and the window shows the new words (docs/design/codes.md)."""

    # "It ran" / "It did not run" on a card whose note on the folder no longer holds.
    SETTLE_FOLDER_CHANGED = "settle_folder_changed"
    # "Continue with my current files" on a list of changed files that is not the list now.
    WORKSPACE_DRIFT_CHANGED = "workspace_drift_changed"


def _count(lists: Sequence[ChangedFilesShown]) -> int:
    return sum(len(shown.changed_paths) + shown.more_changed_paths for shown in lists)


def _paths(lists: Sequence[ChangedFilesShown]) -> set[str]:
    return {entry.path for shown in lists for entry in shown.changed_paths}


def drift_changed_words(
    shown: Sequence[ChangedFilesShown], now: Sequence[ChangedFilesShown]
) -> str | None:
    """None when the lists the banner showed are the lists now; else what changed, in words
    (the message of ``workspace_drift_changed``)."""
    if tuple(shown) == tuple(now):
        return None
    before, after = _paths(shown), _paths(now)
    new = sorted(after - before)
    gone = sorted(before - after)
    parts: list[str] = []
    if new:
        parts.append("now also changed: " + ", ".join(new[:10]) + _more(len(new)))
    if gone:
        parts.append("no longer changed: " + ", ".join(gone[:10]) + _more(len(gone)))
    if not parts:
        parts.append("the same files changed in another way")
    return (
        f"the files changed after the list was shown ({_count(shown)} listed then, "
        f"{_count(now)} now; {'; '.join(parts)}); nothing was done: check the new list and "
        "choose again"
    )


def _more(count: int) -> str:
    return f" and {count - 10} more" if count > 10 else ""
