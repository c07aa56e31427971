"""What the user does to a whole session: rename it, point it at its folder's new place, or
remove it with its ledger.

Why these are not ledger events: a session's title and folder live in the ``sessions`` row (the
runs keep the folder they ran in, in their headers); removing a session is the user's explicit
choice to delete its history (the desktop offers an export first), so its events, run headers,
tool projections and continuation claims go in one transaction.
"""

from __future__ import annotations

import sqlite3

from runtime.ledger.codes import StoreCode, WriterRejectionCode
from runtime.ledger.session_title import MAX_TITLE_CHARS, title_allowed
from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.branch_store import has_table


def _require_session(conn: sqlite3.Connection, session_id: str) -> None:
    row = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        raise StoreRefusal(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}")


def relocate_session(conn: sqlite3.Connection, session_id: str, cwd: str) -> None:
    """The session's next runs use ``cwd`` (the caller proved it is the same workspace)."""
    if not isinstance(cwd, str) or not cwd or "\x00" in cwd:
        raise StoreRefusal(WriterRejectionCode.IDENTITY_CONFLICT, "a folder must be text")
    _require_session(conn, session_id)
    conn.execute("UPDATE sessions SET cwd = ? WHERE session_id = ?", (cwd, session_id))


def rename_session(conn: sqlite3.Connection, session_id: str, title: str) -> None:
    title = title.strip() if isinstance(title, str) else ""
    if not title_allowed(title):
        raise StoreRefusal(
            StoreCode.SESSION_TITLE_INVALID,
            f"a title is one line of 1 to {MAX_TITLE_CHARS} characters, with no control character",
        )
    _require_session(conn, session_id)
    conn.execute("UPDATE sessions SET title = ? WHERE session_id = ?", (title, session_id))


def remove_session(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """Delete the session and everything recorded for it; returns the removed run ids."""
    _require_session(conn, session_id)
    run_ids = [
        row[0]
        for row in conn.execute("SELECT run_id FROM runs WHERE session_id = ?", (session_id,))
    ]
    in_runs = "SELECT run_id FROM runs WHERE session_id = ?"
    _drop_branch(conn, session_id)
    for table in ("continuation_claims", "tool_processes"):  # tables of later schema versions
        if has_table(conn, table):
            conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
    conn.execute(f"DELETE FROM tool_journal_events WHERE run_id IN ({in_runs})", (session_id,))
    conn.execute(f"DELETE FROM chosen_tool_event_ids WHERE run_id IN ({in_runs})", (session_id,))
    conn.execute(f"DELETE FROM tool_operations WHERE run_id IN ({in_runs})", (session_id,))
    conn.execute(f"DELETE FROM runtime_events WHERE run_id IN ({in_runs})", (session_id,))
    conn.execute("DELETE FROM runs WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
    return run_ids


def _drop_branch(conn: sqlite3.Connection, session_id: str) -> None:
    """A branched session's ``branchStart`` fact goes with it; a session others branched from
    stays while they exist (their history is a prefix of its)."""
    if not has_table(conn, "session_branches"):
        return
    children = [
        str(row[0])
        for row in conn.execute(
            "SELECT session_id FROM session_branches WHERE source_session_id = ? "
            "ORDER BY created_at",
            (session_id,),
        )
    ]
    if children:
        raise StoreRefusal(
            StoreCode.SESSION_HAS_BRANCHES,
            f"sessions branched from {session_id} refer to its history: "
            f"{', '.join(children)}; remove them first",
        )
    conn.execute("DELETE FROM session_branches WHERE session_id = ?", (session_id,))
