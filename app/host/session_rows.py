"""The rows of ``maka sessions``: one function, whether the command reads the store itself or the
running host answers ``sessions.overview`` (the output must not depend on which served it).

Standard library only at import time (``maka sessions`` stays small); the wire model is imported
by the two functions that cross the wire."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.bridge_contract import SessionRow
    from runtime.agent.session_overview import SessionOverview
    from runtime.ledger.store_ports import LedgerReader


def session_row(
    overview: SessionOverview,
    unowned: bool,
    folders: dict[str, bool] | None = None,
    unreadable: bool = False,
) -> dict[str, Any]:
    """One session's ``--json`` row. ``unowned``: no process owns the data folder now, so a run
    still marked running or created belongs to a process that is gone (startup recovery ends it).
    ``folders``: whether each folder exists, filled as they are looked up (sessions often share
    a folder)."""
    session = overview.session
    present = None if folders is None else folders.get(session.cwd)
    if present is None:
        present = os.path.isdir(session.cwd)
        if folders is not None:
            folders[session.cwd] = present
    row: dict[str, Any] = {
        "sessionId": session.session_id,
        "cwd": session.cwd,
        "title": session.title,
        "createdAt": session.created_at,
        "interrupted": overview.interrupted,
        "runCount": overview.run_count,
        "folderMissing": not present,
        "resumable": overview.resumable,
    }
    if overview.last_run_status is not None:
        row["lastRunStatus"] = str(overview.last_run_status)
    if overview.failure_class is not None:
        row["failureClass"] = overview.failure_class
    if overview.branched_from is not None:
        row["branchedFrom"] = overview.branched_from.to_json()
    if overview.branches:
        row["branches"] = [
            {"sessionId": session_id, "boundaryEventId": event_id}
            for session_id, event_id in overview.branches
        ]
    if unowned and may_await_repair(overview):
        row["interrupted"] = True
        row["awaitingRepair"] = True
    if unreadable:  # (``quarantined_sessions``: never repaired, not awaiting it)
        row["interrupted"] = True
        row["recordUnreadable"] = True
        row.pop("awaitingRepair", None)
    return row


def may_await_repair(overview: SessionOverview) -> bool:
    """The session's last run is still marked created or running: when nobody owns the data
    folder, its process is gone and the row says it awaits repair (so only then does
    ``maka sessions`` test whether anybody owns it)."""
    return str(overview.last_run_status) in ("created", "running")


def wire_rows(overviews: Iterable[SessionOverview]) -> tuple[SessionRow, ...]:
    """The host's answer: its own store, which it owns (nothing is awaiting repair)."""
    from app.bridge_contract import SessionRow

    return tuple(
        SessionRow.model_validate(session_row(overview, unowned=False)) for overview in overviews
    )


def rows_from_wire(rows: Sequence[SessionRow]) -> list[dict[str, Any]]:
    """Back to the ``--json`` rows, key for key (absent fields stay absent)."""
    return [row.model_dump(mode="json", by_alias=True, exclude_none=True) for row in rows]


def nobody_owns(data_dir: Any) -> bool:
    """True when no process owns the data directory right now: then a run still marked
    running or created belongs to a process that is gone (startup recovery will end it).
    Never on a ledger shared by several hosts (PostgreSQL): a run marked running there may be
    running on another host, whatever this data folder's lock says (its lease says who)."""
    from storage.ledger.database_choice import uses_postgres

    return not uses_postgres(data_dir) and folder_free(data_dir)


def orphaned(
    data_dir: Any, marked: Iterable[tuple[str, str]], store: LedgerReader
) -> list[tuple[str, str]]:
    """Of the ``(session id, run id)`` read as still marked created or running, those whose
    process is gone: nobody owns the data folder now, and they are still marked when read
    again from ``store``. A run's process
    ends it before it lets go of the folder, and an ended run never runs again, so a run
    marked before the look at the lock and after it was running all along with nobody
    there; a run that ended in between (its turn finishing while it was read) is left out."""
    marked = list(marked)
    if not marked:
        return []
    from storage.ledger.database_choice import uses_postgres

    if uses_postgres(data_dir):
        # A ledger shared by several hosts: a run's process is gone when nobody holds its
        # session's lease any more (it ran out, or was given up), whatever this folder's lock.
        unheld = sessions_unheld(store, {session_id for session_id, _ in marked})
        marked = [(session_id, run_id) for session_id, run_id in marked if session_id in unheld]
        if not marked:
            return []
    elif not nobody_owns(data_dir):
        return []
    now: dict[str, dict[str, str]] = {}
    # A run of an earlier owner than the last start's is one that start's recovery could not
    # repair (quarantined: its record does not decode), not one awaiting repair.
    epoch = None if uses_postgres(data_dir) else _owner_epoch(store)
    for session_id, _ in marked:
        if session_id not in now:
            now[session_id] = {
                header.run_id: str(header.status)
                for header in store.list_session_runs(session_id)
                if epoch is None or header.owner_epoch >= epoch
            }
    return [
        (session_id, run_id)
        for session_id, run_id in marked
        if now[session_id].get(run_id) in ("created", "running")
    ]


def _owner_epoch(store: Any) -> int | None:
    """The data folder's owner epoch (the last start's), or None when the reader cannot say."""
    read = getattr(store, "read_owner_epoch", None)
    if read is None:
        return None
    try:
        return int(read())
    except Exception:
        return None


def quarantined_sessions(store: Any, session_ids: Iterable[str]) -> set[str]:
    """Of ``session_ids`` (their last run still marked created or running, nobody owning the
    data folder), those whose last run is of an owner before the last start's: that start's
    recovery could not repair it (its record does not decode), so no later start will either;
    it is not awaiting repair. The data folder's own ledger only."""
    epoch = _owner_epoch(store)
    if epoch is None:
        return set()
    found = set()
    for session_id in session_ids:
        runs = store.list_session_runs(session_id)
        if runs and max(runs, key=lambda h: (h.created_at, h.run_id)).owner_epoch < epoch:
            found.add(session_id)
    return found


def sessions_unheld(store: Any, session_ids: Iterable[str]) -> set[str]:
    """Of ``session_ids``, those no host holds the lease of now on a shared ledger (none when
    the store cannot say: never a guess that a live run is gone)."""
    holders = getattr(store, "live_lease_holders", None)
    if holders is None:
        return set()
    try:
        live = holders()
    except Exception:
        return set()
    return {session_id for session_id in session_ids if session_id not in live}


def gone_words(data_dir: Any) -> str:
    """Why a run still marked running has no process, said for the ledger in use."""
    from storage.ledger.database_choice import uses_postgres

    if uses_postgres(data_dir):
        return "no Maka process holds its session any more (its lease ran out or was given up)"
    return "no Maka process has this data folder open"


def folder_free(data_dir: Any) -> bool:
    """No Maka process holds the data folder's instance lock right now."""
    from storage.instance_lock import InstanceLock, LockOutcome

    lock = InstanceLock(data_dir)
    outcome = lock.acquire().outcome
    if outcome is LockOutcome.UNAVAILABLE:
        # A folder this process cannot write (a read-only mount): the lock cannot be taken,
        # but whether a live process holds it can still be told (a killed one holds nothing).
        return lock.unheld()
    if outcome is not LockOutcome.ACQUIRED:
        return False
    lock.release()
    return True


def host_fields(holder: str | None) -> dict[str, Any]:
    """A ``maka sessions`` row's ``host`` on a shared ledger: the process holding the session's
    lease now (None: no host holds it), and ``hostGone`` when that is a process of this computer
    that is gone (a killed ``maka run`` or host, whose lease has not run out yet)."""
    from runtime.continuation.resume_gates import holder_gone_here

    fields: dict[str, Any] = {"host": holder}
    if holder is not None and holder_gone_here(holder):
        fields["hostGone"] = True
    return fields


def host_flag(row: dict[str, Any]) -> str:
    """The end of a ``maka sessions`` line naming the host holding the session's lease."""
    holder = row.get("host")
    if not holder:
        return ""
    if row.get("hostGone"):
        from runtime.continuation.resume_gates import gone_holder_words

        return (
            f"  host {gone_holder_words(str(holder))}: nothing runs its turn; its lease has not "
            "run out yet"
        )
    return f"  host {holder}"


def held_by_gone_words(run_id: str, holder: str) -> str:
    """Of a run still marked running whose session's lease ``holder`` is gone (``maka
    timeline``)."""
    from runtime.continuation.resume_gates import gone_holder_words, lease_wait_words

    return (
        f"run {run_id} is still marked running, but its session's lease is held by "
        f"{gone_holder_words(holder)}: nothing runs it. Once the lease runs out "
        f"({lease_wait_words()}), a running host or the next command takes the "
        "session over and repairs it."
    )
