"""Rows of ``runtime_events``: the one insert statement and the checked read.

Every read decodes the stored canonical bytes with the strict decoder and cross-checks them with
the row's id columns; a row whose payload disagrees with its columns (or does not decode) was
changed outside the store and is reported as ``store_corrupt``, never trusted.

Event ids are unique across the store without a global index on the derived ones (schema 4,
``storage/ledger/schema_v4.py``): ``insert_event_row`` checks an id shaped like a derived one
(``toolop_...``) that is not derived against every run and records it in
``chosen_tool_event_ids``, and a derived id against that table; ``find_event_row`` finds an
id in whichever run holds it the same way.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from runtime.ledger.codes import Lane, StoreCode
from runtime.ledger.event_model import RuntimeEvent, decode_event_json
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import StoredEvent, StoreRefusal
from storage.ledger.derived_ids import is_derived_event, operation_prefix
from storage.ledger.schema_v4 import NOT_TOOL_SHAPED, TOOL_ID_PREFIX

EVENT_COLUMNS = (
    "event_id, session_id, invocation_id, run_id, turn_id, event_seq, payload, committed_at"
)


def insert_event_row(
    conn: sqlite3.Connection | sqlite3.Cursor,
    event: RuntimeEvent,
    payload: bytes,
    *,
    seq: int,
    lane: Lane,
    terminal: bool,
    committed_at: int,
) -> None:
    chosen = event["id"].startswith(TOOL_ID_PREFIX) and _claim_tool_shaped_id(conn, event)
    conn.execute(
        "INSERT INTO runtime_events (event_id, session_id, invocation_id, run_id, turn_id,"
        " event_seq, lane, terminal, payload, committed_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event["id"],
            event["sessionId"],
            event["invocationId"],
            event["runId"],
            event["turnId"],
            seq,
            lane.value,
            1 if terminal else 0,
            payload,
            committed_at,
        ),
    )
    if chosen:
        conn.execute(
            "INSERT INTO chosen_tool_event_ids (event_id, run_id) VALUES (?, ?)",
            (event["id"], event["runId"]),
        )


def stored_call_of(
    conn: sqlite3.Connection | sqlite3.Cursor, run_id: str
) -> Callable[[str], str | None]:
    """``is_derived_event``'s ``call_of`` for a stored run: the provider call id of the run's
    function_call ``<operationId>_call``, if it has one."""

    def call_of(operation_id: str) -> str | None:
        row = conn.execute(
            "SELECT payload FROM runtime_events WHERE run_id = ? AND event_id = ?",
            (run_id, f"{operation_id}_call"),
        ).fetchone()
        if row is None:
            return None
        content = json.loads(row[0]).get("content") or {}
        call_id = content.get("id") if content.get("kind") == "function_call" else None
        return call_id if isinstance(call_id, str) else None

    return call_of


def _claim_tool_shaped_id(conn: sqlite3.Connection | sqlite3.Cursor, event: RuntimeEvent) -> bool:
    """An id shaped like a derived one. Another run can hold a derived id only as a chosen
    one, recorded in ``chosen_tool_event_ids`` (the insert's trigger checks it); a chosen id
    may be held by any run (a scan), and is then to be recorded (returns True). A clash raises
    ``IntegrityError``, as the primary key did (the writers' lookups name it first)."""
    event_id, run_id = event["id"], event["runId"]
    if is_derived_event(event, stored_call_of(conn, run_id)):
        return False
    clash = conn.execute(
        "SELECT 1 FROM runtime_events WHERE event_id = ? AND run_id <> ?", (event_id, run_id)
    ).fetchone()
    if clash is not None:
        raise sqlite3.IntegrityError(f"UNIQUE constraint failed: event id {event_id}")
    return True


def derived_in_run(events: Sequence[RuntimeEvent]) -> list[bool]:
    """``is_derived_event`` of each event of a whole run in order, each judged with the run's
    events before it (what ``insert_event_row`` finds stored when they come one by one)."""
    calls: dict[str, str] = {}
    flags: list[bool] = []
    for event in events:
        flags.append(event["id"].startswith(TOOL_ID_PREFIX) and is_derived_event(event, calls.get))
        content = event.get("content")
        # The call ``stored_call_of`` finds: the run's function_call ``<operationId>_call``.
        if (
            content is not None
            and content["kind"] == "function_call"
            and event["id"].endswith("_call")
        ):
            calls.setdefault(event["id"].removesuffix("_call"), content["id"])
    return flags


def any_event_stored(
    conn: sqlite3.Connection, events: Sequence[RuntimeEvent], derived: Sequence[bool]
) -> bool:
    """Whether any id of a run the store does not hold is held by another run (the bulk
    import's check, ``storage/ledger/bulk_run_writer.py``); ``derived``: ``derived_in_run``."""
    for event, flag in zip(events, derived, strict=True):
        event_id = event["id"]
        if not event_id.startswith(TOOL_ID_PREFIX):
            sql = f"SELECT 1 FROM runtime_events WHERE event_id = ? AND {NOT_TOOL_SHAPED}"
        elif flag:
            sql = "SELECT 1 FROM chosen_tool_event_ids WHERE event_id = ?"
        else:
            sql = "SELECT 1 FROM runtime_events WHERE event_id = ?"
        if conn.execute(sql, (event_id,)).fetchone() is not None:
            return True
    return False


def record_chosen_tool_ids(
    conn: sqlite3.Connection, events: Sequence[RuntimeEvent], derived: Sequence[bool]
) -> None:
    """After a bulk insert of a run: record its ids shaped like derived ones that are not
    (``insert_event_row`` does it per event)."""
    conn.executemany(
        "INSERT INTO chosen_tool_event_ids (event_id, run_id) VALUES (?, ?)",
        (
            (event["id"], event["runId"])
            for event, flag in zip(events, derived, strict=True)
            if event["id"].startswith(TOOL_ID_PREFIX) and not flag
        ),
    )


def find_event_row(
    conn: sqlite3.Connection, columns: str, event: RuntimeEvent | str, run_id: str | None = None
) -> Any:
    """The row (``columns``) of the event with this id in whichever run holds it. ``event`` is
    the id, or a candidate event (its run is searched first, and a derived id is never looked
    for by a scan: no other run can hold it but as a chosen id). ``run_id``: a run to search
    first."""
    candidate: RuntimeEvent | None = None
    if isinstance(event, str):
        event_id = event
    else:
        candidate, event_id, run_id = event, event["id"], event["runId"]
    if run_id is not None:
        row = conn.execute(
            f"SELECT {columns} FROM runtime_events WHERE run_id = ? AND event_id = ?",
            (run_id, event_id),
        ).fetchone()
        if row is not None:
            return row
    if not event_id.startswith(TOOL_ID_PREFIX):
        return conn.execute(
            f"SELECT {columns} FROM runtime_events WHERE event_id = ? AND {NOT_TOOL_SHAPED}",
            (event_id,),
        ).fetchone()
    chosen = conn.execute(
        "SELECT run_id FROM chosen_tool_event_ids WHERE event_id = ?", (event_id,)
    ).fetchone()
    if chosen is not None:
        return conn.execute(
            f"SELECT {columns} FROM runtime_events WHERE run_id = ? AND event_id = ?",
            (chosen[0], event_id),
        ).fetchone()
    if candidate is not None and is_derived_event(candidate, stored_call_of(conn, run_id or "")):
        return None
    if run_id is not None and _operation_derived_in_run(conn, run_id, event_id):
        # ``<operationId>_...`` of an operation derived in this run (a recovery or attestation
        # fact not written yet): no other run can hold it but as a chosen id, checked above.
        return None
    # A derived id of a run not known here (its invocation is inside the hash): a scan.
    return conn.execute(
        f"SELECT {columns} FROM runtime_events WHERE event_id = ?", (event_id,)
    ).fetchone()


def _operation_derived_in_run(conn: sqlite3.Connection, run_id: str, event_id: str) -> bool:
    """Whether ``event_id`` is ``<operationId>_...`` of an operation of ``run_id`` whose id is
    the reference's derivation (``operation_id_derived``)."""
    operation = operation_prefix(event_id)
    if operation is None:
        return False
    row = conn.execute(
        "SELECT 1 FROM runs JOIN tool_operations"
        " ON tool_operations.invocation_id = runs.invocation_id"
        " WHERE runs.run_id = ? AND tool_operations.operation_id = ?"
        " AND tool_operations.operation_id_derived = 1",
        (run_id, operation),
    ).fetchone()
    return row is not None


def _stored_bytes(event_id: str, payload: object) -> bytes:
    """An event's stored payload: the bytes Maka wrote. Any other value there (text, a number,
    NULL: the row was edited by hand, with a tool that stores text) is damage, said so with
    ``store_corrupt`` as a payload that no longer decodes is."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload)
    kind = "text" if isinstance(payload, str) else type(payload).__name__
    raise StoreRefusal(
        StoreCode.STORE_CORRUPT,
        f"stored event {event_id} does not decode: its payload is stored as {kind}, not as the "
        "bytes Maka writes (the row was changed outside Maka)",
        event_id,
    )


def decode_row(row: Sequence[Any]) -> StoredEvent:
    """A ``runtime_events`` row (``EVENT_COLUMNS`` order) as a checked ``StoredEvent``."""
    event_id, session_id, invocation_id, run_id, turn_id, seq, payload, committed_at = row
    payload_bytes = _stored_bytes(event_id, payload)
    try:
        event = decode_event_json(payload_bytes)
    except LedgerError as error:
        raise StoreRefusal(
            StoreCode.STORE_CORRUPT, f"stored event {event_id} does not decode: {error}", event_id
        ) from None
    if (
        event["id"] != event_id
        or event["sessionId"] != session_id
        or event["invocationId"] != invocation_id
        or event["runId"] != run_id
        or event["turnId"] != turn_id
    ):
        raise StoreRefusal(
            StoreCode.STORE_CORRUPT,
            f"stored event {event_id}: row and payload identities differ",
            event_id,
        )
    return StoredEvent(seq=seq, event=event, payload=payload_bytes, committed_at=committed_at)


def read_invocation_rows(conn: sqlite3.Connection, invocation_id: str) -> list[StoredEvent]:
    rows = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM runtime_events WHERE invocation_id = ? ORDER BY event_seq",
        (invocation_id,),
    ).fetchall()
    return [decode_row(row) for row in rows]


def lookup_payload(conn: sqlite3.Connection, event: RuntimeEvent) -> tuple[bytes, int] | None:
    """Stored ``(payload, event_seq)`` of ``event``'s id in any run, for the exact-retry check."""
    row = find_event_row(conn, "payload, event_seq", event)
    if row is None:
        return None
    return _stored_bytes(str(event["id"]), row[0]), int(row[1])


def read_event(
    conn: sqlite3.Connection, event_id: str, run_id: str | None = None
) -> StoredEvent | None:
    """The event with this id; ``run_id``, when the caller knows it, is searched first."""
    row = find_event_row(conn, EVENT_COLUMNS, event_id, run_id)
    return decode_row(row) if row is not None else None
