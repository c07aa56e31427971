"""The timeline's index of a run, answered in SQL, and the run's events read back by seq.

The desktop's Timeline view opens a run without decoding its events in Python
(``runtime.ledger.timeline_lazy``). One query gives each event's ``event_seq``, the tool call
id it names when it is on a tool lane (the ``lane`` column the writers set; the id by
``tool_call_id``'s rule, in ``json_extract``) and whether it may end the run (an ordinary
event that is ``terminal`` or names ``endInvocation``: those few are decoded, the run's ending
decides a tool row's status); ``row_slots`` groups them into rows as ``build_run`` does. A
page's events are then read by ``event_seq`` and decoded with the store's checks
(``decode_row``). Read-only; no table or index is added.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runtime.ledger.codes import Lane
from runtime.ledger.event_model import TERMINAL_STATUSES
from runtime.ledger.lane_rules import classify_lane
from runtime.ledger.store_ports import StoredEvent
from runtime.ledger.timeline_events import ToolFact, tool_call_id
from runtime.ledger.timeline_lazy import TimelineIndex, row_slots
from storage.ledger.event_rows import EVENT_COLUMNS, decode_row

_ORDINARY = Lane.ORDINARY.value

_FACTS = f"""
SELECT event_seq,
    CASE WHEN lane = '{_ORDINARY}' THEN NULL
        ELSE coalesce(
            json_extract(payload, '$.refs.toolCallId'),
            CASE WHEN lane IN ('{Lane.FUNCTION_CALL.value}', '{Lane.FUNCTION_RESPONSE.value}')
                THEN json_extract(payload, '$.content.id') END
        )
    END,
    CASE WHEN lane <> '{_ORDINARY}' THEN 0
        ELSE (terminal = 1 OR instr(payload, CAST('endInvocation' AS BLOB)) > 0)
            + 2 * (instr(payload, CAST('workspaceCheckpoint' AS BLOB)) > 0)
    END
FROM runtime_events WHERE invocation_id = ?
ORDER BY event_seq
"""
"""Each event's ``(event_seq, tool call id, 1 if it may end the run + 2 if it may be a
workspace snapshot)``. ``tool_call_id``'s rule: a
``refs.toolCallId``, else a call's or a response's ``content.id``. Only an event on a tool lane
names one (``build_run`` groups only those), and a stored event decodes only with both ids
strings (a ``null`` is refused), so ``json_extract``'s NULL means "none"; the call and
response lanes are the events whose ``content.kind`` is ``function_call`` or
``function_response`` (the writers refuse an event with two lane signals)."""

_CALL, _DISPATCH, _RESPONSE, _OBSERVED, _DECIDED = (
    Lane.FUNCTION_CALL.value,
    Lane.TOOL_DISPATCH.value,
    Lane.FUNCTION_RESPONSE.value,
    Lane.RECONCILE_RESULT.value,
    Lane.RECOVERY_DECISION.value,
)
_RECOVERY = "'$.actions.toolRecovery.payload'"

_TOOL_FACTS = f"""
SELECT event_seq, event_id, lane,
    json_type(payload, '$.content.name'),
    json_extract(payload, '$.content.name'),
    CASE lane
        WHEN '{_DISPATCH}' THEN json_extract(payload, '$.actions.toolDispatch.recoveryMode')
        WHEN '{_RESPONSE}' THEN json_extract(payload, '$.content.isError')
        WHEN '{_OBSERVED}' THEN json_type(payload, {_RECOVERY})
        WHEN '{_DECIDED}' THEN json_type(payload, {_RECOVERY})
    END,
    CASE lane
        WHEN '{_DISPATCH}' THEN json_type(payload, '$.actions.toolDispatch.recoveryMode')
        WHEN '{_RESPONSE}' THEN CASE
            WHEN json_type(payload, '$.content.result') <> 'object' THEN NULL
            WHEN json_type(payload, '$.content.result.stoppedByHost') = 'true' THEN 'host'
            WHEN json_type(payload, '$.content.result.cancelled') = 'true'
                OR (json_type(payload, '$.content.result.code') = 'text'
                    AND json_extract(payload, '$.content.result.code') = 'cancelled')
                THEN 'cancelled'
        END
        WHEN '{_OBSERVED}' THEN json_type(payload, {_RECOVERY[:-1]}.observation')
        WHEN '{_DECIDED}' THEN json_type(payload, {_RECOVERY[:-1]}.reasonCode')
    END,
    CASE lane
        WHEN '{_DISPATCH}' THEN json_extract(payload, '$.actions.toolDispatch.toolName')
        WHEN '{_OBSERVED}' THEN json_extract(payload, {_RECOVERY[:-1]}.observation')
        WHEN '{_DECIDED}' THEN json_extract(payload, {_RECOVERY[:-1]}.reasonCode')
    END,
    CASE lane
        WHEN '{_DISPATCH}' THEN json_type(payload, '$.actions.toolDispatch.toolName')
        WHEN '{_DECIDED}' THEN json_type(payload, {_RECOVERY[:-1]}.disposition')
    END,
    CASE lane WHEN '{_DECIDED}' THEN json_extract(payload, {_RECOVERY[:-1]}.disposition') END
FROM runtime_events
WHERE invocation_id = ? AND event_seq <= ? AND lane <> '{_ORDINARY}'
ORDER BY event_seq
"""
"""What a filter reads of each event on a tool lane (``ToolFact``), in one parse of its JSON
(SQLite keeps a payload's parse for the row's other paths); the columns after the content's
name depend on the lane."""


def _text(kind: str | None, value: object) -> str | None:
    """``str(payload.get(key, "?"))`` of a string or a missing key (None: another type, which
    the caller decodes in full)."""
    if kind is None:
        return "?"
    return value if kind == "text" and type(value) is str else None


_MAX_PARAMETERS = 900
"""Seqs asked for per query (well under SQLite's bound on parameters)."""


def read_timeline_index(conn: sqlite3.Connection, invocation_id: str) -> TimelineIndex:
    facts: list[tuple[int, str | None, int]] = conn.execute(_FACTS, (invocation_id,)).fetchall()
    ending = [seq for seq, _, marks in facts if marks & 1]
    endings = read_events_at(conn, invocation_id, ending) if ending else []
    high_water = facts[-1][0] if facts else 0
    rows, calls = row_slots(facts)
    snapshots = [seq for seq, _, marks in facts if marks & 2]
    return TimelineIndex(rows, calls, len(facts), high_water, endings, snapshots)


def read_tool_facts(
    conn: sqlite3.Connection, invocation_id: str, high_water: int
) -> dict[int, ToolFact]:
    """Each event of the run on a tool lane up to ``high_water`` as a filter reads it, by
    ``event_seq``, without decoding it in Python. A stored event passed the strict decoder when
    written (its content and recovery payload objects, a call's name and a dispatch's mode and
    tool name strings); one whose values are not of the types that give the same text here as
    in ``entry_of`` and ``tool_row`` (a name that is JSON null, an ``isError`` that is a string
    or an array, a reason that is a number) is left out, and the caller decodes it in full."""
    facts: dict[int, ToolFact] = {}
    for seq, event_id, lane, name_type, name, c, d, e, f, g in conn.execute(
        _TOOL_FACTS, (invocation_id, high_water)
    ):
        if name_type is not None and (name_type != "text" or type(name) is not str):
            continue  # ``str(content["name"])`` of a non-string: decoded in full
        own = name  # the row's tool name from this fact: its content's name first
        first: str | None = None
        second: str | None = None
        error = False
        if lane == _CALL:
            if name is None:
                continue
            first = name
        elif lane == _DISPATCH:  # c the mode, d its JSON type, e the tool name, f its type
            if d != "text" or f != "text" or type(c) is not str or type(e) is not str:
                continue  # an object or array would come back as its JSON text
            first, own = c, (e if name is None else name)
        elif lane == _RESPONSE:
            if c is not None and type(c) is not int and type(c) is not float:
                continue  # JSON true/false come back as 1/0; a string or array may not
            error = bool(c)
            first = d  # why an error result was stopped (``stop_of``): "host", "cancelled"
        else:  # an observation or a decision: its recovery payload an object, or none
            if c is not None and c != "object":
                continue
            first = _text(d, e)  # d the observation's or reason's JSON type, e its value
            if lane == _DECIDED:
                second = _text(f, g)  # f the disposition's JSON type, g its value
                if second is None:
                    continue
            if first is None:
                continue
        facts[seq] = ToolFact(event_id, lane, first, second, error, own)
    return facts


def timeline_index_of(events: Sequence[StoredEvent]) -> TimelineIndex:
    """The same index made in Python from a run's decoded events, for an engine whose SQL has
    no ``json_extract`` (PostgreSQL): each event's lane by its one lane signal, its tool call id
    by ``tool_call_id``'s rule, and the same marks (terminal, or naming ``endInvocation``;
    naming ``workspaceCheckpoint``)."""
    facts: list[tuple[int, str | None, int]] = []
    for row in events:
        if classify_lane(row.event) is Lane.ORDINARY:  # stored events have one lane signal
            ending = row.event.get("status") in TERMINAL_STATUSES
            marks = int(ending or b"endInvocation" in row.payload)
            marks += 2 * (b"workspaceCheckpoint" in row.payload)
            facts.append((row.seq, None, marks))
        else:
            facts.append((row.seq, tool_call_id(row.event), 0))
    endings = {seq for seq, _, marks in facts if marks & 1}
    rows, calls = row_slots(facts)
    return TimelineIndex(
        rows,
        calls,
        len(facts),
        facts[-1][0] if facts else 0,
        [row for row in events if row.seq in endings],
        [seq for seq, _, marks in facts if marks & 2],
    )


def read_events_at(
    conn: sqlite3.Connection, invocation_id: str, seqs: Sequence[int]
) -> list[StoredEvent]:
    """The run's events at these ``event_seq``s (those it has), decoded and checked."""
    found: list[StoredEvent] = []
    wanted = sorted(set(seqs))
    for start in range(0, len(wanted), _MAX_PARAMETERS):
        part = wanted[start : start + _MAX_PARAMETERS]
        low, high = part[0], part[-1]
        if high - low + 1 <= 2 * len(part):  # mostly contiguous: one range, filtered here
            rows = conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM runtime_events"
                " WHERE invocation_id = ? AND event_seq BETWEEN ? AND ?",
                (invocation_id, low, high),
            ).fetchall()
            keep = set(part)
            found += [decode_row(row) for row in rows if row[5] in keep]
        else:
            marks = ", ".join("?" * len(part))
            rows = conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM runtime_events"
                f" WHERE invocation_id = ? AND event_seq IN ({marks})",
                (invocation_id, *part),
            ).fetchall()
            found += [decode_row(row) for row in rows]
    return found


def read_event_in(conn: sqlite3.Connection, run_id: str, event_id: str) -> StoredEvent | None:
    """The run's event with this id (None: the run has none)."""
    row = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM runtime_events WHERE run_id = ? AND event_id = ?",
        (run_id, event_id),
    ).fetchone()
    return decode_row(row) if row is not None else None
