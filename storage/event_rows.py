"""Rows of ``runtime_events``: the one insert statement and the checked read.

Every read decodes the stored canonical bytes with the strict decoder and cross-checks them with
the row's id columns; a row whose payload disagrees with its columns (or does not decode) was
changed outside the store and is reported as ``store_corrupt``, never trusted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from runtime.ledger.codes import Lane, StoreCode
from runtime.ledger.event_model import RuntimeEvent, decode_event_json
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import StoredEvent, StoreRefusal

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


def decode_row(row: Sequence[Any]) -> StoredEvent:
    """A ``runtime_events`` row (``EVENT_COLUMNS`` order) as a checked ``StoredEvent``."""
    event_id, session_id, invocation_id, run_id, turn_id, seq, payload, committed_at = row
    payload_bytes = bytes(payload)
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


def lookup_payload(conn: sqlite3.Connection, event_id: str) -> tuple[bytes, int] | None:
    """Stored ``(payload, event_seq)`` of ``event_id``, for the exact-retry check."""
    row = conn.execute(
        "SELECT payload, event_seq FROM runtime_events WHERE event_id = ?", (event_id,)
    ).fetchone()
    if row is None:
        return None
    return bytes(row[0]), int(row[1])


def read_event(conn: sqlite3.Connection, event_id: str) -> StoredEvent | None:
    row = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM runtime_events WHERE event_id = ?", (event_id,)
    ).fetchone()
    return decode_row(row) if row is not None else None
