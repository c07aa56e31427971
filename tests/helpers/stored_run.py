"""One run's events imported as a stored session, through the store's own import (the
timeline's tests and bench read a real store without driving a turn)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from storage.ledger.ledger_store import open_store
from storage.sessions.session_export import header_line, session_line


def import_run(data_dir: Path, events: Sequence[RuntimeEvent], title: str = "t") -> str:
    """Store ``events`` (one run, first event first) as a session in ``data_dir``; the run's
    status and failure class come from its ending, if any (facts of settling a call may follow
    the ending). Returns the session id."""
    first = events[0]
    ending = next((e for e in reversed(events) if e.get("status") is not None), events[-1])
    ended = ending.get("status")
    delta: dict[str, Any] = dict((ending.get("actions") or {}).get("stateDelta") or {})
    session = SessionRecord(first["sessionId"], "/work", title, 1)
    header = RunHeader(
        run_id=first["runId"],
        session_id=first["sessionId"],
        invocation_id=first["invocationId"],
        turn_id=first["turnId"],
        status=RunStatus(ended) if ended is not None else RunStatus.RUNNING,
        cwd="/work",
        owner_epoch=1,
        created_at=1,
        updated_at=1,
        completed_at=1 if ended is not None else None,
        failure_class=delta.get("failureClass") if ended is not None else None,
    )
    lines = [session_line(session), header_line(header), *map(canonical_bytes, events)]
    with open_store(data_dir) as store:
        store.import_session(b"\n".join(lines) + b"\n")
    return str(first["sessionId"])
