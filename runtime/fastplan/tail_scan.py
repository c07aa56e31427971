"""A ledger scanned in two parts at once: the head here, the tail in another process.

``parallel_decode`` lets the child process that decodes a large ledger's tail do the consumer's
work on it too. For the tool-ledger scan, the child scans the tail from an empty scanner
(``TailScan``) and sends a summary; ``adopt_tail`` finishes the head's ``BatchScan`` with it, but
only when the tail scanned alone provably gives what scanning it after the head gives; otherwise
the caller scans the tail itself; ``LedgerReading`` does all this for the ledger tools. A
property test checks that any split scan equals the whole
scan, event positions included.

This module works on the scanner's state directly (``runtime/ledger/tool_ledger_scanner.py``);
nothing else outside the scanner reads it. A change to the scanner's state shows up here first:
the property tests compare every split scan with ``scan_tool_ledger``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from runtime.ledger.codes import ScanIssueCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.tool_ledger_scanner import (
    ScanIssue,
    ScannedOperation,
    ToolLedgerScan,
    ToolLedgerScanner,
)


class BatchScan:
    """The batch form of ``ToolLedgerScanner`` for a caller that receives a ledger in pieces
    (``feed`` each piece in ledger order, then ``finish`` once): the same result as
    ``scan_tool_ledger`` over the pieces joined, without per-event issue tuples."""

    __slots__ = ("_scanner",)

    def __init__(self) -> None:
        self._scanner: ToolLedgerScanner | None = ToolLedgerScanner()

    def feed(self, events: Iterable[RuntimeEvent]) -> None:
        scanner = self._scanner
        if scanner is None:
            raise RuntimeError("this scan is finished")
        apply = scanner._apply
        for event in cast(Iterable[dict[str, Any]], events):
            apply(event)

    def take_scanner(self) -> ToolLedgerScanner:
        """Finish by handing over the scanner itself (``adopt_tail`` builds the result
        from it and a tail's summary)."""
        scanner = self._scanner
        if scanner is None:
            raise RuntimeError("this scan is finished")
        self._scanner = None
        return scanner

    def scanner_view(self) -> ToolLedgerScanner:
        """The scanner, to be read only (``adopt_tail`` checks a tail against it)."""
        scanner = self._scanner
        if scanner is None:
            raise RuntimeError("this scan is finished")
        return scanner

    def result_so_far(self) -> ToolLedgerScan:
        """The scan of what was fed so far; feeding may go on."""
        scanner = self._scanner
        if scanner is None:
            raise RuntimeError("this scan is finished")
        return scanner.result()

    def finish(self) -> ToolLedgerScan:
        scanner = self._scanner
        if scanner is None:
            raise RuntimeError("this scan is finished")
        self._scanner = None
        # The scanner goes away here, so its operations' containers can be handed over uncopied.
        return scanner.result(copy=False)


TAIL_START_MARKER = b'"function_call"'
TAIL_START_NOT_AFTER = (b'"function_call"', b'"toolDispatch"')
"""Where a tail to be scanned apart should preferably start (``TailHooks.start_marker`` and
``start_not_after``): at a tool call's line that follows neither another call nor a
dispatch, that is at a model step's first call. Then the head keeps whole every operation that
started in it (this product settles each call before the next, and a writer that batches a
step's calls writes them before their dispatches), the tail touches none of them and its scan
can be adopted. Any line may hold these bytes (a user's text); a cut elsewhere only costs the
adoption, never correctness."""


class TailScan:
    """A scan of a ledger's *tail* started from an empty scanner, in another process, while the
    head is scanned here (``parallel_decode``); ``adopt_tail`` takes its summary only
    when feeding the tail after the head could not have given anything else.

    A tail scanned alone differs from the same tail scanned after the head only through state
    the head left behind: an event id seen in the head, an operation key or operation id the
    head created, or an invocation the head already opened (its recorded spine, and whether the
    tail's first event of it is judged as a first event or as a late marker). The summary
    carries what the tail touched of each, so the head's side can check there is no overlap.
    """

    __slots__ = ("_first_marked", "_first_position", "_recovery_opids", "_scanner")

    def __init__(self, first_position: int) -> None:
        self._scanner = ToolLedgerScanner()
        self._scanner._count = self._first_position = first_position
        self._first_marked: dict[str, bool] = {}
        self._recovery_opids: set[str] = set()

    def feed(self, events: Iterable[RuntimeEvent]) -> None:
        scanner = self._scanner
        spines, first_marked, recovery_opids = (
            scanner._spines,
            self._first_marked,
            self._recovery_opids,
        )
        apply = scanner._apply
        for event in cast(Iterable[dict[str, Any]], events):
            actions = event.get("actions")
            if event["invocationId"] not in spines:
                first_marked[event["invocationId"]] = (
                    actions is not None and "runtimeProtocol" in actions
                )
            if actions is not None and "toolRecovery" in actions:
                payload = actions["toolRecovery"].get("payload")
                operation_id = payload.get("operationId") if isinstance(payload, dict) else None
                if isinstance(operation_id, str):
                    recovery_opids.add(operation_id)
            apply(event)

    def summary(self, *, operations: bool = True) -> tuple[Any, ...]:
        """Plain data (``marshal``-able): event positions stand for the events.
        ``operations=False``: without the operations (for ``tail_is_independent`` alone)."""
        scanner = self._scanner
        issue_index = {id(issue): index for index, issue in enumerate(scanner._issues)}
        rows = []
        for op in scanner._operations if operations else ():
            positions = op.positions
            rows.append(
                (
                    op.key[0],
                    op.key[1],
                    op.tool_name,
                    op.operation_id,
                    positions[op.call["id"]] if op.call is not None else -1,
                    positions[op.dispatch["id"]] if op.dispatch is not None else -1,
                    positions[op.response["id"]] if op.response is not None else -1,
                    [positions[event["id"]] for event in op.reconciles],
                    [positions[event["id"]] for event in op.decisions],
                    [issue_index[id(issue)] for issue in op.issues],
                    positions,
                )
            )
        return (
            self._first_position,
            scanner._count,
            {invocation: list(spine) for invocation, spine in scanner._spines.items()},
            self._first_marked,
            [list(key) for key in scanner._by_key],
            list(scanner._by_opid.keys() | self._recovery_opids),
            [
                (issue.code.value, issue.event_id, issue.operation_id, issue.tool_call_id)
                for issue in scanner._issues
            ],
            rows,
            scanner._markers,
        )

    def result(self) -> ToolLedgerScan:
        """The tail's scan, as it is within the scan of the whole ledger when the tail is
        independent of the head (``tail_is_independent``); positions count from the ledger's
        start. Ends this scan."""
        return self._scanner.result(copy=False)


def _adopted_operations(
    rows: list[Any], tail: list[RuntimeEvent], base: int, issues: list[ScanIssue]
) -> list[ScannedOperation]:
    """The tail's operations from the summary's rows (event positions stand for the tail's
    events; each row carries its operation's positions map as the child built it)."""
    adopted: list[ScannedOperation] = []
    add = adopted.append
    for row in rows:
        invocation, call_id, tool_name, operation_id, call, dispatch, response = row[:7]
        recs, decs, refs, positions = row[7:]
        add(
            ScannedOperation(
                call_id,
                invocation,
                tool_name,
                operation_id,
                tail[call - base] if call >= 0 else None,
                tail[dispatch - base] if dispatch >= 0 else None,
                tail[response - base] if response >= 0 else None,
                tuple([tail[position - base] for position in recs]) if recs else (),
                tuple([tail[position - base] for position in decs]) if decs else (),
                tuple([issues[index] for index in refs]) if refs else (),
                positions,
            )
        )
    return adopted


def tail_is_independent(batch: BatchScan, summary: Any, tail_ids: Sequence[str]) -> bool:
    """Whether scanning the tail that ``summary`` (``TailScan.summary``) describes after the
    events fed to ``batch`` gives exactly its scan alone (``tail_ids``: its events' ids): the
    head left nothing behind that the tail touches."""
    scanner = batch.scanner_view()
    try:
        first, count, spines, first_marked, keys, opids = summary[:6]
    except (TypeError, ValueError):
        return False
    if first != scanner._count or count != first + len(tail_ids):
        return False
    for invocation, spine in spines.items():
        known = scanner._spines.get(invocation)
        if known is not None and (list(known) != spine or first_marked.get(invocation)):
            return False
    seen = scanner._seen
    return (
        scanner._by_key.keys().isdisjoint(tuple(key) for key in keys)
        and scanner._by_opid.keys().isdisjoint(opids)
        and seen.isdisjoint(tail_ids)
    )


def adopt_tail(batch: BatchScan, summary: Any, tail: list[RuntimeEvent]) -> ToolLedgerScan | None:
    """Finish ``batch`` with a ``TailScan`` summary of ``tail`` (the events that come after
    everything fed to ``batch``) instead of feeding them, when that gives exactly what feeding
    them would: nothing the tail touched was left behind by the events fed before. Returns None
    and changes nothing otherwise (the caller then feeds ``tail`` and finishes)."""
    try:
        first, _, _, _, _, _, issue_rows, rows, markers = summary
    except (TypeError, ValueError):
        return None
    if not tail_is_independent(batch, summary, [event["id"] for event in tail]):
        return None
    scanner = batch.take_scanner()
    issues = [
        ScanIssue(ScanIssueCode(code), event_id, operation_id, call_id)
        for code, event_id, operation_id, call_id in issue_rows
    ]
    head = [op.freeze(copy=False) for op in scanner._operations]
    head.extend(_adopted_operations(rows, tail, first, issues))
    return ToolLedgerScan(
        tuple(head),
        (*scanner._issues, *issues),
        (*scanner._markers, *[(position, event_id) for position, event_id in markers]),
    )


class LedgerReading:
    """The decoded events and their tool-ledger scan, built as the pieces of a file arrive.

    The scan runs on each piece this process decoded as soon as it arrives; the pieces a child
    process decoded (``parallel_decode``) were already scanned there, and that scan is adopted
    when it provably equals scanning them here (``adopt_tail``); otherwise, or when
    the child's summary never came, they are scanned here, in order."""

    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []
        self._scan = BatchScan()
        self._unscanned: list[RuntimeEvent] = []
        self._summary: Any = None

    def consume(self, piece: list[RuntimeEvent]) -> None:
        self._flush()
        self.events.extend(piece)
        self._scan.feed(piece)

    def consume_tail(self, piece: list[RuntimeEvent]) -> None:
        self.events.extend(piece)
        self._unscanned.extend(piece)

    def take_summary(self, summary: Any) -> None:
        self._summary = summary

    def scan_so_far(self) -> ToolLedgerScan:
        """The scan of the pieces consumed here so far (the head, while the child works)."""
        self._flush()
        return self._scan.result_so_far()

    def tail_is_independent(self, summary: Any, tail_ids: Sequence[str]) -> bool:
        """Whether the tail a ``TailScan`` summary describes scans alone as after what was
        consumed here (``tail_is_independent``)."""
        return tail_is_independent(self._scan, summary, tail_ids)

    def _flush(self) -> None:
        if self._unscanned:
            self._scan.feed(self._unscanned)
            self._unscanned = []
        self._summary = None

    def finish(self) -> ToolLedgerScan:
        if self._unscanned and self._summary is not None:
            adopted = adopt_tail(self._scan, self._summary, self._unscanned)
            if adopted is not None:
                return adopted
        self._flush()
        return self._scan.finish()
