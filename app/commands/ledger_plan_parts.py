"""``maka ledger plan --json`` on a long run, planned in two processes.

The child process that decodes the ledger's tail (``parallel_decode``) also scans and plans it
(``TailPlan``) and sends back the tail's plan facts with its two long lists already written as
JSON text, while this process decodes, scans and plans the head. When the two parts are
independent (``tail_scan.tail_is_independent`` and ``plan_parts.plan_parts_independent``, in
``runtime/fastplan``), the document is their verdict (``plan_verdict``) and their lists joined,
and the tail's events are never loaded here. Otherwise the tail's events come over from the
child after all and the whole run is planned here, so the document is the same either way
(tests compare both paths with the serial plan).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.commands.ledger_json import (
    compose_plan_json_text,
    join_json_items,
    operations_json_text,
    plan_json_text,
    replay_json_text,
)
from app.process_exit import request_fast_exit
from runtime.fastplan.parallel_decode import TailHooks, decode_ledger_pieces
from runtime.fastplan.plan_parts import (
    facts_from_plain,
    facts_to_plain,
    plan_part,
    plan_parts_independent,
)
from runtime.fastplan.tail_scan import (
    TAIL_START_MARKER,
    TAIL_START_NOT_AFTER,
    LedgerReading,
    TailScan,
)
from runtime.ledger.event_model import RuntimeEvent, decode_event_json
from runtime.ledger.ledger_file import LedgerFileError, read_file_bytes
from runtime.recovery.resume_plan import PlanFacts, PlanPart, plan_resume, plan_verdict

PARENT_SHARE = 0.55
"""The share of the file this process decodes: the child's events cost it nothing here, but
the child also copies them out for the case where the parts turn out not to be independent."""

# ---- the child's work -----------------------------------------------------------------------


class TailPlan:
    """The tail's scan and, once all of it arrived, its plan part (``summary``)."""

    __slots__ = ("_data", "_events", "_scan")

    def __init__(self, first_position: int, data: bytes) -> None:
        self._scan = TailScan(first_position)
        self._events: list[RuntimeEvent] = []
        self._data = data

    def feed(self, events: list[RuntimeEvent]) -> None:
        self._scan.feed(events)
        self._events.extend(events)

    def summary(self) -> tuple[Any, ...]:
        """(scan summary, the tail's event ids, its tool-call ids, its plan facts, its
        operations' and replay ids' JSON items). Raises when the run's first line does not
        decode (the parent then reports it)."""
        first_line = self._data[: self._data.find(b"\n")]
        scan_summary = self._scan.summary(operations=False)
        part = plan_part(
            self._events,
            self._scan.result(),
            run_first_event=decode_event_json(first_line),
            collect_ids=True,
        )
        return (
            scan_summary,
            [event["id"] for event in self._events],
            list(part.tool_call_ids),
            facts_to_plain(part.facts),
            operations_json_text(part.operations),
            replay_json_text(part.replay),
        )


# ---- this process ---------------------------------------------------------------------------


class _PlanInParts:
    """The head planned here as soon as it is scanned; the tail's part taken from the child
    when independent of it."""

    def __init__(self) -> None:
        self.reading = LedgerReading()
        self.head: PlanPart | None = None
        self.head_text: tuple[str, str] = ("", "")
        self.tail: tuple[PlanFacts, str, str] | None = None

    def head_consumed(self) -> None:
        self.head = plan_part(self.reading.events, self.reading.scan_so_far(), collect_ids=True)
        self.head_text = (
            operations_json_text(self.head.operations),
            replay_json_text(self.head.replay),
        )

    def take_summary(self, summary: Any) -> bool:
        try:
            scan_summary, tail_ids, tool_call_ids, facts, operations, replay = summary
            tail_facts = facts_from_plain(facts)
        except (TypeError, ValueError, KeyError):
            return False
        if self.head is None or not (
            self.reading.tail_is_independent(scan_summary, tail_ids)
            and plan_parts_independent(self.head, tool_call_ids)
        ):
            return False
        self.tail = (tail_facts, operations, replay)
        return True

    def consume_tail(self, piece: list[RuntimeEvent]) -> None:
        self.tail = None  # the tail's events are needed after all: it is planned here
        self.reading.consume_tail(piece)


def plan_json_text_in_parts(path: Path, expected_high_water: int | None) -> str:
    """The ``maka ledger plan --json`` text of ``path``; an undecodable line exits 2."""
    parts = _PlanInParts()
    try:
        data = read_file_bytes(path)
        exits = request_fast_exit(data, parts)
        hooks = TailHooks(
            lambda first: TailPlan(first, data),
            parts.consume_tail,
            parts.take_summary,
            start_marker=TAIL_START_MARKER,
            start_not_after=TAIL_START_NOT_AFTER,
            defer_pieces=True,
            head_consumed=parts.head_consumed,
            parent_share=PARENT_SHARE,
        )
        decode_ledger_pieces(data, parts.reading.consume, tail_hooks=hooks, linger=exits)
    except LedgerFileError as error:
        from app.commands.ledger_lines import reading_error  # only a refused file needs it

        raise reading_error(path, error) from None
    if parts.head is not None and parts.tail is not None:
        facts, operations, replay = parts.tail
        head_operations, head_replay = parts.head_text
        return compose_plan_json_text(
            plan_verdict([parts.head.facts, facts], expected_high_water),
            join_json_items(head_operations, operations),
            join_json_items(head_replay, replay),
        )
    scanned = parts.reading.finish()
    plan = plan_resume(parts.reading.events, expected_high_water, scan=scanned)
    request_fast_exit(scanned, plan)
    return plan_json_text(plan)
