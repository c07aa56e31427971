"""Pointing a session at its folder's new place, and removing a session (desktop and CLI).

Why the marker decides: a session's history is only meaningful in *its* workspace. A folder the
user picks is accepted only when its workspace marker (``.maka/workspace.json``, or the
``.maka-workspace.json`` of older versions) names the identity the session's runs recorded; the
marker is read, never created or moved (creating one would make any folder "match").
The move is recorded in the lifecycle log, and the session's next runs and Safe resume use the
new place (a run's header keeps the folder it ran in; the planner reports
``workspace_location_changed``).

One case gives a marker back instead of reading it: the session's own folder, at the place it
ran in, that lost its marker (``git clean -fdx`` deletes ``.maka``; a look of Safe resume then
made a new one, naming a workspace nothing recorded). Pointing the session at that folder puts
the session's identity back in it; Safe resume then compares the files with the last snapshot
as ever, so a different folder put at that place is still found out by its files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.ledger.branch_facts import BranchRecord
from runtime.ledger.coded_error import CodedError
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import LedgerReader, RunHeader, SessionRecord
from storage.sessions.workspace_identity import (
    WorkspaceIdentity,
    give_back_marker,
    read_workspace_identity,
)


class SessionAdminStore(LedgerReader, Protocol):
    """What moving or removing a session needs of the store (the narrow port it declares)."""

    def relocate_session(self, session_id: str, cwd: str) -> None: ...

    def read_branch(self, session_id: str) -> BranchRecord | None: ...

    def remove_session(self, session_id: str) -> None: ...


class SessionChangeRefused(CodedError):
    """A relocation or removal that was refused; nothing changed. ``code`` is stable."""

    def __init__(self, code: StrEnum, message: str) -> None:
        super().__init__(code, message, text=f"{code}: {message}")


def recorded_identity(runs: list[RunHeader] | tuple[RunHeader, ...]) -> str | None:
    """The workspace identity of the session's latest run that recorded one."""
    ordered = sorted(runs, key=lambda header: (header.created_at, header.run_id))
    return next((h.workspace_identity for h in reversed(ordered) if h.workspace_identity), None)


def _session(store: SessionAdminStore, session_id: str) -> SessionRecord:
    session = store.get_session(session_id)
    if session is None:
        raise SessionChangeRefused(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}")
    return session


def relocate_session(
    store: SessionAdminStore,
    session_id: str,
    folder: Path,
    lifecycle: LifecycleLog | None,
    *,
    on_marker_given_back: Callable[[], None] | None = None,
    follow_folder: Callable[[str, Path], None] | None = None,
) -> SessionRecord:
    """Move ``session_id`` to ``folder`` if its marker proves it is the same workspace (or
    give its own folder its lost marker back: ``on_marker_given_back`` is told);
    ``follow_folder(identity, folder)``: the snapshot store's ``follow_folder``, told where the
    workspace now is once the session moved."""
    session = _session(store, session_id)
    if not folder.is_absolute() or not folder.exists():
        raise SessionChangeRefused(
            HostCode.INVALID_CWD, f"{folder} does not exist; the session was not moved"
        )
    if not folder.is_dir():
        raise SessionChangeRefused(
            HostCode.INVALID_CWD, f"{folder} is a file, not a folder; the session was not moved"
        )
    real = Path(os.path.realpath(folder))
    expected = recorded_identity(list(store.list_session_runs(session_id)))
    if expected is None:
        # A branch with no run yet: its ``branchStart`` fact names the copy's workspace.
        branch = store.read_branch(session_id)
        named = branch.fact.get("workspaceIdentity") if branch is not None else None
        expected = named if isinstance(named, str) and named else None
    if expected is None:
        raise SessionChangeRefused(
            HostCode.WORKSPACE_IDENTITY_MISSING,
            "the session's runs recorded no workspace identity, so no folder can be proven to be "
            "its workspace; the session was not moved",
        )
    try:
        marker = read_workspace_identity(real)
    except LedgerError as error:
        raise SessionChangeRefused(
            error.code, f"{error.message}; the session was not moved"
        ) from None
    if _marker_lost(store, session, real, marker, expected):
        _give_back(session, real=real, marker=marker, expected=expected, lifecycle=lifecycle)
        if on_marker_given_back is not None:
            on_marker_given_back()
        return session
    if marker is None:
        raise SessionChangeRefused(
            HostCode.WORKSPACE_IDENTITY_DIFFERS,
            f"{real} has no workspace marker (.maka/workspace.json, or .maka-workspace.json "
            "from older versions), so it cannot be shown to be the session's workspace (Maka "
            "never worked there, or the marker was removed); the session was not moved",
        )
    if marker.identity != expected:
        by = _recorded_by(store, marker.identity)
        raise SessionChangeRefused(
            HostCode.WORKSPACE_IDENTITY_DIFFERS,
            f"{real} belongs to another workspace (its marker names {marker.identity}"
            + (f", which session {by} ran in" if by is not None else "")
            + f"; the session ran in {expected}); the session was not moved",
        )
    store.relocate_session(session_id, str(real))
    if lifecycle is not None:
        lifecycle.session_relocated(session_id, session.cwd, str(real), expected)
    if follow_folder is not None:
        follow_folder(expected, real)
    moved = store.get_session(session_id)
    assert moved is not None
    return moved


def _marker_lost(
    store: SessionAdminStore,
    session: SessionRecord,
    real: Path,
    marker: WorkspaceIdentity | None,
    expected: str,
) -> bool:
    """The session's own folder (the place it ran in, not moved) lost its marker: none is
    there (``git clean -fdx`` deletes ``.maka``), or the one there was made since and names a
    workspace no session, run or branch recorded (Safe resume's look makes one in a folder
    that has none). Pointing the session at its own folder then gives the marker back."""
    if os.path.realpath(session.cwd) != str(real):
        return False
    if marker is None:
        return True
    if marker.identity == expected:
        return False
    return not _recorded_anywhere(store, marker.identity)


def _recorded_anywhere(store: SessionAdminStore, identity: str) -> bool:
    return _recorded_by(store, identity) is not None


def _recorded_by(store: SessionAdminStore, identity: str) -> str | None:
    """A session whose runs (or branch record) name workspace ``identity``, or None."""
    for other in store.list_sessions():
        if any(h.workspace_identity == identity for h in store.list_session_runs(other.session_id)):
            return other.session_id
        branch = store.read_branch(other.session_id)
        if branch is not None and branch.fact.get("workspaceIdentity") == identity:
            return other.session_id
    return None


def _give_back(
    session: SessionRecord,
    *,
    real: Path,
    marker: WorkspaceIdentity | None,
    expected: str,
    lifecycle: LifecycleLog | None,
) -> None:
    try:
        give_back_marker(real, expected, marker)
    except LedgerError as error:
        raise SessionChangeRefused(
            error.code, f"{error.message}; the session was not changed"
        ) from None
    if lifecycle is not None:
        replaced = marker.identity if marker is not None else None
        lifecycle.workspace_marker_given_back(session.session_id, str(real), expected, replaced)


def remove_session(
    store: SessionAdminStore, session_id: str, lifecycle: LifecycleLog | None
) -> SessionRecord:
    """Delete ``session_id`` and its ledger (the caller asked the user first)."""
    session = _session(store, session_id)
    store.remove_session(session_id)
    if lifecycle is not None:
        lifecycle.session_removed(session_id, session.cwd)
    return session
