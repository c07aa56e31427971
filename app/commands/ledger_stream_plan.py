"""``maka ledger plan --json`` in one streaming pass over the file, in little memory.

The file is read in blocks and decoded strictly a batch of lines at a time (the same decoder as
every ledger tool, so the same refusals with the same line numbers); each event is folded into
what the plan's document needs and then dropped: a small record per tool operation while it is
open, the operation's JSON text once its response settles it, and the replay list as JSON text
with a hole for each call still waiting for its response. Nothing holds the file's bytes or its
decoded events, so the peak memory is a fraction of the file's size.

The pass folds the ledgers this product writes: ordinary events, and calls, dispatches and
responses in their plain shapes (``plain_lane``), each operation called, dispatched and
answered once, in that order, with consistent identities; one protocol marker, on the first
event. Any other fact (a duplicate, a conflict, a recovery fact, a hidden or partial tool
event, a workspace fact, a tool-call id used twice) ends the pass with ``NotStreamable``, and
the caller plans the file on the general path (``ledger_plan_parts``), which gives the document
for every ledger; for the ledgers folded here both give the same text (tests compare them on
random ledgers and on every refusal the pass makes).

What the general path would compute for such a ledger, and so what this pass writes: no scan
issue and no corrupt decision; an operation answered is ``succeeded`` (or ``failed`` when its
response says ``isError: true``); one left open is ``indeterminate`` when dispatched, else
``not_dispatched`` under the T1 protocol and ``indeterminate`` without it, with its diagnostic;
every response pairs its call, so the replay list is every event but the partial and hidden
ones and the calls never answered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from app.commands.ledger_json import (
    operations_json_text,
    replay_ids_json_text,
    write_plan_json,
)
from runtime.ledger.codes import (
    RESOLVER_REASON,
    DiagnosticCode,
    Lane,
    LedgerFileCode,
    OperationStatus,
    ResolverReason,
)
from runtime.ledger.event_model import TOOL_BOUNDARY_PROTOCOL_V1, RuntimeEvent, decode_event_lines
from runtime.ledger.ledger_file import (
    MAX_LINE_BYTES,
    LedgerFileError,
    open_ledger_file,
    raise_line_error,
)
from runtime.ledger.tool_ledger_scanner import (
    _args_hash_or_none,
    _execution_identity,
    plain_lane,
)
from runtime.ledger.workspace_facts import WORKSPACE_FACT_KEYS
from runtime.recovery.resume_plan import PlanFacts, ResumeDiagnostic, ToolOperation, plan_verdict

BLOCK_BYTES = 4 << 20
"""How much of the file is read at a time."""

BATCH_LINES = 4096
"""How many lines are decoded and folded at a time (their events are dropped after)."""

_CALL, _DISPATCH, _RESPONSE = Lane.FUNCTION_CALL, Lane.TOOL_DISPATCH, Lane.FUNCTION_RESPONSE
_TOOL_CONTENT = frozenset({"function_call", "function_response"})
_SUCCEEDED, _FAILED = OperationStatus.SUCCEEDED, OperationStatus.FAILED

# An operation left open at the end of the file: (status, reason) as the resolver decides it.
_DISPATCHED_OPEN = (OperationStatus.INDETERMINATE, ResolverReason.DISPATCH_WITHOUT_RESPONSE)
_UNDISPATCHED_OPEN_T1 = (
    OperationStatus.NOT_DISPATCHED,
    ResolverReason.NEW_PROTOCOL_BEFORE_DISPATCH,
)
_UNDISPATCHED_OPEN_LEGACY = (OperationStatus.INDETERMINATE, ResolverReason.LEGACY_DISPATCH_UNKNOWN)
_OPEN_DIAGNOSTIC = {
    OperationStatus.INDETERMINATE: (
        DiagnosticCode.PENDING_TOOL_RESULT,
        "function_call has no matching committed function_response",
    ),
    OperationStatus.NOT_DISPATCHED: (
        DiagnosticCode.TOOL_NOT_DISPATCHED,
        "function_call did not cross the durable tool dispatch boundary",
    ),
}
"""The plan's diagnostics for these statuses (``resume_plan``; a test checks they agree)."""


class NotStreamable(Exception):
    """The file holds a fact this pass does not fold: plan it on the general path."""


class _Operation:
    """A tool operation: its call's facts while it is open, its response's once answered."""

    __slots__ = (
        "args",
        "call_content",
        "call_event_id",
        "call_id",
        "identity",
        "invocation",
        "is_error",
        "name",
        "operation_id",
        "response_id",
    )

    def __init__(self, event: dict[str, Any], content: dict[str, Any]) -> None:
        self.call_id: str = content["id"]
        self.name: str = content["name"]
        self.args: Any = content["args"]
        self.call_content: dict[str, Any] | None = content
        self.call_event_id: str = event["id"]
        self.invocation: str = event["invocationId"]
        self.identity: tuple[str, str, str, str] | None = _execution_identity(event)
        self.operation_id: str | None = None
        self.response_id: str | None = None
        self.is_error = False

    def settled(self) -> ToolOperation:
        status = _FAILED if self.is_error else _SUCCEEDED
        return ToolOperation(
            self.call_id,
            self.name,
            self.args,
            status,
            self.call_event_id,
            self.response_id,
            self.is_error,
        )


Render = Callable[[Sequence[ToolOperation]], str]
"""Text for consecutive operations of the plan (``operations_json_text``...)."""
RenderIds = Callable[[Sequence[str]], str]
"""Text for consecutive event ids of the replay list (``replay_ids_json_text``...)."""


class StreamPlan:
    """The fold: ``feed`` decoded events in file order, ``close_batch`` after each batch (it
    turns what the batch settled into text with ``render`` and ``render_ids``), then
    ``finish``."""

    def __init__(
        self, render: Render = operations_json_text, render_ids: RenderIds = replay_ids_json_text
    ) -> None:
        self._render, self._render_ids = render, render_ids
        self.count = 0
        self.replayed = 0
        """How many events the replay list holds (known once finished)."""
        self._seen: set[int] = set()  # hashes of event ids (a collision only ends the pass)
        self._call_ids: set[int] = set()
        self._operation_ids: set[int] = set()
        self._spines: dict[str, tuple[str, str, str]] = {}
        self._t1 = False
        self._open: dict[str, _Operation] = {}
        # This batch: the operations called in it, the replay ids and where its calls are.
        self._batch_operations: list[_Operation] = []
        self._batch_ids: list[str] = []
        self._batch_calls: list[tuple[int, _Operation]] = []
        # The document's two lists so far: text pieces, and the operations still open when
        # their batch closed (settled or not at the end).
        self.operation_pieces: list[str | _Operation] = []
        self.replay_pieces: list[str | _Operation] = []

    def feed(self, events: list[RuntimeEvent]) -> None:
        """Fold events (the per-event hot path: one branch per lane, inlined)."""
        seen, spines, open_operations = self._seen, self._spines, self._open
        replay = self._batch_ids
        add_id = replay.append
        position = self.count
        for event in events:
            raw: dict[str, Any] = event  # type: ignore[assignment]
            event_id: str = raw["id"]
            key = hash(event_id)
            if key in seen:
                raise NotStreamable("duplicate event id")
            seen.add(key)
            invocation: str = raw["invocationId"]
            spine = (raw["sessionId"], raw["runId"], raw["turnId"])
            known = spines.get(invocation)
            if known is None:
                spines[invocation] = spine
            elif known != spine:
                raise NotStreamable("invocation identity conflict")
            actions: Any = raw.get("actions")
            content: Any = raw.get("content")
            lane_signal = False
            if actions is not None:
                if "runtimeProtocol" in actions:
                    marker = actions["runtimeProtocol"]
                    if position != 0 or marker.get("toolBoundary") != TOOL_BOUNDARY_PROTOCOL_V1:
                        raise NotStreamable("protocol marker")
                    self._t1 = True
                if not WORKSPACE_FACT_KEYS.isdisjoint(actions):
                    raise NotStreamable("workspace fact")
                lane_signal = "toolDispatch" in actions or "toolRecovery" in actions
            position += 1
            if not lane_signal and (content is None or content["kind"] not in _TOOL_CONTENT):
                # An ordinary event: replayed unless partial or hidden.
                if not raw["partial"] and raw.get("modelVisibility") != "hidden":
                    add_id(event_id)
                continue
            lane = plain_lane(raw)
            if lane is None or raw.get("modelVisibility") == "hidden":
                raise NotStreamable("a tool fact in another shape")
            if lane is _CALL:
                call_key = hash(content["id"])
                if call_key in self._call_ids:
                    raise NotStreamable("tool-call id used again")
                self._call_ids.add(call_key)
                operation = _Operation(raw, content)
                open_operations[operation.call_id] = operation
                self._batch_operations.append(operation)
                self._batch_calls.append((len(replay), operation))
                add_id(event_id)
            elif lane is _DISPATCH:
                self._dispatch(raw, actions["toolDispatch"])
                add_id(event_id)
            else:
                self._respond(raw, content)
                add_id(event_id)
        self.count = position

    def _dispatch(self, event: dict[str, Any], fact: dict[str, Any]) -> None:
        call_id: str = fact["providerToolCallId"]
        operation = self._open.get(call_id)
        if (
            operation is None
            or operation.invocation != event["invocationId"]
            or operation.operation_id is not None
            or operation.call_content is None
        ):
            raise NotStreamable("dispatch without its open call")
        operation_id: str = fact["operationId"]
        key = hash(operation_id)
        if key in self._operation_ids:
            raise NotStreamable("operation id used again")
        refs = event["refs"]
        if (
            operation.name != fact["toolName"]
            or refs["operationId"] != operation_id
            or refs["toolCallId"] != call_id
            or operation.identity != _execution_identity(event)
            or _args_hash_or_none({"content": operation.call_content}) != fact["canonicalArgsHash"]
        ):
            raise NotStreamable("dispatch does not match its call")
        self._operation_ids.add(key)
        operation.operation_id = operation_id
        operation.call_content = None

    def _respond(self, event: dict[str, Any], content: dict[str, Any]) -> None:
        call_id: str = content["id"]
        operation = self._open.pop(call_id, None)
        if operation is None or operation.invocation != event["invocationId"]:
            raise NotStreamable("response without its open call")
        refs = event.get("refs") or {}
        if (
            operation.name != content["name"]
            or operation.identity != _execution_identity(event)
            or (
                operation.operation_id is not None
                and (
                    refs.get("operationId") != operation.operation_id
                    or refs.get("toolCallId") != call_id
                )
            )
        ):
            raise NotStreamable("response does not match its call")
        operation.response_id = event["id"]
        operation.is_error = content.get("isError") is True
        operation.identity = operation.call_content = None

    def close_batch(self) -> None:
        """Turn what this batch holds into text: its settled operations' and its replay ids'
        runs; an operation still open keeps its place in both lists."""
        settled: list[ToolOperation] = []
        for operation in self._batch_operations:
            if operation.response_id is not None:
                settled.append(operation.settled())
                continue
            if settled:
                self.operation_pieces.append(self._render(settled))
                settled = []
            self.operation_pieces.append(operation)
        if settled:
            self.operation_pieces.append(self._render(settled))
        ids = self._batch_ids
        self.replayed += len(ids)
        start = 0
        for index, operation in self._batch_calls:
            if operation.response_id is None:
                if index > start:
                    self.replay_pieces.append(self._render_ids(ids[start:index]))
                self.replay_pieces.append(operation)
                self.replayed -= 1
                start = index + 1
        if start < len(ids):
            self.replay_pieces.append(self._render_ids(ids[start:] if start else ids))
        self._batch_operations = []
        self._batch_ids = []
        self._batch_calls = []

    def finish(self, expected_high_water: int | None) -> tuple[Any, Iterator[str], Iterator[str]]:
        """The plan's verdict and its two lists' text pieces."""
        self.close_batch()
        self.replayed += sum(
            1
            for piece in self.replay_pieces
            if not isinstance(piece, str) and piece.response_id is not None
        )
        diagnostics: list[ResumeDiagnostic] = []
        indeterminate = False
        unanswered = _UNDISPATCHED_OPEN_T1 if self._t1 else _UNDISPATCHED_OPEN_LEGACY
        for piece in self.operation_pieces:
            if isinstance(piece, str) or piece.response_id is not None:
                continue
            status, reason = _DISPATCHED_OPEN if piece.operation_id is not None else unanswered
            indeterminate = indeterminate or status is OperationStatus.INDETERMINATE
            code, message = _OPEN_DIAGNOSTIC[status]
            diagnostics.append(
                ResumeDiagnostic(
                    code,
                    message,
                    piece.call_event_id,
                    piece.call_id,
                    piece.name,
                    detail=MappingProxyType({RESOLVER_REASON: reason.value}),
                )
            )
        facts = PlanFacts(
            event_count=self.count,
            operation_diagnostics=tuple(diagnostics),
            marker_issues=(),
            scan_issues=(),
            corrupt_decision=False,
            indeterminate_operation=indeterminate,
            orphan_facts=(),
            hidden_pending=(),
            response_diagnostics=(),
        )
        verdict = plan_verdict([facts], expected_high_water)
        return verdict, self._operation_texts(), self._replay_texts()

    def _operation_texts(self) -> Iterator[str]:
        unanswered = _UNDISPATCHED_OPEN_T1 if self._t1 else _UNDISPATCHED_OPEN_LEGACY
        for piece in self.operation_pieces:
            if isinstance(piece, str):
                yield piece
            elif piece.response_id is not None:
                yield self._render([piece.settled()])
            else:
                status = (_DISPATCHED_OPEN if piece.operation_id is not None else unanswered)[0]
                yield self._render(
                    [
                        ToolOperation(
                            piece.call_id, piece.name, piece.args, status, piece.call_event_id
                        )
                    ]
                )

    def _replay_texts(self) -> Iterator[str]:
        for piece in self.replay_pieces:
            if isinstance(piece, str):
                yield piece
            elif piece.response_id is not None:  # the call was answered: it is replayed
                yield self._render_ids([piece.call_event_id])


def _blocks(path: Path) -> Iterator[tuple[list[bytes], bool]]:
    """The file's lines without their newlines, a block at a time, each with whether its last
    line ended with a newline (only the file's last line may not)."""
    read = 0  # the lines before ``rest``
    try:
        with open_ledger_file(path) as file:
            rest = b""
            while block := file.read(BLOCK_BYTES):
                lines = (rest + block).split(b"\n") if rest else block.split(b"\n")
                rest = lines.pop()
                # (an endless line: a file of zeros, a binary). Only the first line of a block
                # can be long: it carries what the blocks before left unfinished, up to the
                # limit, so a line up to one block longer than that ended in this one.
                if len(rest) > MAX_LINE_BYTES or (lines and len(lines[0]) > MAX_LINE_BYTES):
                    number = read + 1 if lines and len(lines[0]) > MAX_LINE_BYTES else 0
                    raise LedgerFileError(
                        LedgerFileCode.LEDGER_FILE_UNREADABLE,
                        f"cannot read {path}: line {number or read + len(lines) + 1} is longer "
                        f"than {MAX_LINE_BYTES >> 20} MiB, longer than any ledger line; this is "
                        "not a ledger file",
                    )
                if lines:
                    read += len(lines)
                    yield lines, True
    except OSError as error:
        raise LedgerFileError(
            LedgerFileCode.LEDGER_FILE_UNREADABLE, f"cannot read {path}: {error.strerror}"
        ) from None
    if rest:
        yield [rest], False


def stream_plan(path: Path, plan: StreamPlan | None = None) -> StreamPlan:
    """Decode ``path`` strictly and fold it (into ``plan``, or a JSON-rendering fold). Raises
    ``LedgerFileError`` at the first line that does not decode (exactly as the whole-file
    decoder does) and ``NotStreamable``."""
    plan = plan if plan is not None else StreamPlan()
    line_number = 1
    for lines, terminated in _blocks(path):
        for start in range(0, len(lines), BATCH_LINES):
            batch = lines[start : start + BATCH_LINES]
            events, stopped = decode_event_lines(batch)
            if stopped < len(batch):
                last = stopped == len(batch) - 1 and start + BATCH_LINES >= len(lines)
                raise_line_error(line_number + stopped, batch[stopped], not last or terminated)
            plan.feed(events)
            plan.close_batch()
            line_number += len(batch)
    return plan


def write_streamed_plan(
    path: Path, expected_high_water: int | None, write: Callable[[str], Any]
) -> None:
    """Write the ``maka ledger plan --json`` text of ``path`` (and a newline) through
    ``write``, a piece at a time. Raises as ``stream_plan`` does, before writing anything."""
    verdict, operations, replay = stream_plan(path).finish(expected_high_water)
    write_plan_json(verdict, operations, replay, write)
    write("\n")


def operation_lines(operations: Sequence[ToolOperation]) -> str:
    """The text form's lines of operations (none of them settled by the user)."""
    return "".join(
        f"  {operation.tool_name} {operation.tool_call_id}: {operation.status.value}\n"
        for operation in operations
    )


def no_text(ids: Sequence[str]) -> str:
    return ""
