"""ToolRuntime: preflight, T1, the implementation, T2 (docs/design/recovery.md section 1).

For one tool call from the model:

1. **Preflight**, in this order: the tool exists in the catalog; the arguments validate against
   its schema; the loop gate (the same call failed twice back-to-back: blocked); permission
   (``ask`` commits the call and a ``permissionRequest``, waits, commits the
   ``permissionDecision``); workspace confinement and state checks (the tool's ``prepare``).
   A refusal commits the call (unless already committed) and an *unbound* error response through
   the generic append, and the tool runs zero times.
2. **T1** commits ``[function_call, tool_dispatch]`` (or only the dispatch when the call was
   committed during the permission wait), with file evidence for reconcilable tools. If T1 fails
   the tool runs zero times.
3. The implementation runs outside any transaction. Exceptions become an ``isError`` result;
   oversized results are cut with a visible marker.
4. **T2** commits the bound response. Only then is the result published and handed back to the
   model; if T2 fails, the result is never shown to anyone.

Crash points (``MAKA_FAILPOINT``): P0 before anything of this call is committed; P1 after the call
was committed (during a permission wait) and before T1; P2 after T1; P3 inside the tool (before its
side effect); P4 after the side effect, before T2; P5 right after T2 commits (the response and the
outcome journal row commit in one transaction, so "response before journal" is this instant);
P6 after the result was published to observers, before it is returned to the model loop.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from runtime.agent.event_builders import EventBuilder
from runtime.agent.permission_policy import (
    PermissionAsker,
    PermissionPolicy,
    PermissionQuestion,
    PolicyVerdict,
)
from runtime.agent.text_limits import PROMPT_CHARS, shorten
from runtime.agent.write_question import write_question
from runtime.base.cancel_token import HOST_STOPPED_AT_QUESTION, STOPPED_BY_HOST, CancelToken
from runtime.ledger.canonical_codec import canonical_args_hash, canonical_json_bytes, operation_id
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import MAX_SAFE_INTEGER, RuntimeEvent
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import CommitResult
from runtime.providers.provider_port import ToolResult
from runtime.tools.args_schema import schema_errors
from runtime.tools.tool_catalog import ToolCatalog
from runtime.tools.tool_contract import (
    PreparedCall,
    Tool,
    ToolContext,
    ToolFailure,
    ToolFailureCode,
    ToolOutput,
    ToolRefusal,
    ToolRefusalCode,
)
from runtime.tools.undecodable_text import escape_undecodable
from runtime.tools.workspace_paths import path_error_sentence

DEFAULT_RESULT_CAP_BYTES = 128 * 1024
LOOP_GATE_THRESHOLD = 2  # this many identical failures in a row block the next identical call


class ToolEventWriter(Protocol):
    def append_event(self, event: RuntimeEvent) -> CommitResult: ...

    def commit_tool_prepared(
        self, call_event: RuntimeEvent | None, dispatch_event: RuntimeEvent
    ) -> CommitResult: ...

    def commit_tool_outcome(self, response_event: RuntimeEvent) -> CommitResult: ...


class ToolBoundaryError(Exception):
    """T1 or T2 could not commit; the run ends ``tool_boundary_failed``."""

    def __init__(self, boundary: str, cause: BaseException | str) -> None:
        super().__init__(f"{boundary} runtime commit failed: {cause}")
        self.boundary = boundary


@dataclass(slots=True)
class _PendingCall:
    call: ModelToolCall
    op_id: str
    call_event: RuntimeEvent
    committed: bool = False


MAX_ARGS_BYTES = 32 << 20
"""The largest arguments a call may carry (32 MiB of canonical JSON): its event must fit, with
room to spare, in one line of an export (64 MiB), or the session could be exported but never
imported again."""


def _oversized(args: Any) -> str:
    """Why ``args`` are too large to record (their size said), or "" when they are not."""
    try:
        size = len(canonical_json_bytes(args))
    except LedgerError:
        return ""  # refused by schema checks as before, with its own words
    if size <= MAX_ARGS_BYTES:
        return ""
    return (
        f"the arguments are {size / (1 << 20):.1f} MiB, more than the "
        f"{MAX_ARGS_BYTES >> 20} MiB a call may carry"
    )


def _as_recorded(call: ModelToolCall) -> tuple[ModelToolCall, str]:
    """``call`` as it can be recorded, and why it is refused ("" when it is whole): numbers no
    record can hold (NaN, an infinity, an integer past 2^53) recorded as text; arguments past
    ``MAX_ARGS_BYTES`` left out."""
    recordable, unrecordable = recordable_args(call.args)
    if unrecordable:
        call = replace(call, args=recordable)
    oversized = _oversized(call.args)
    if oversized:
        return replace(call, args={"omitted": oversized}), (
            f"invalid arguments: {oversized}; the call did not run, and its arguments are not "
            "recorded. Write large content in parts (several smaller calls)"
        )
    if unrecordable:
        return call, (
            f"invalid arguments: {', '.join(unrecordable[:5])} held a number no record can "
            "hold (not finite, or an integer beyond +-(2^53-1)); the call did not run, and "
            "those values are recorded as text. Send them as finite numbers within that "
            "range, or as strings"
        )
    return call, ""


def recordable_args(args: Any) -> tuple[Any, list[str]]:
    """``args`` with every number canonical JSON cannot carry (NaN, an infinity, an integer, or
    an integral float, beyond +-(2^53-1)) replaced by its text, and where each was (``$`` is
    the arguments themselves); ``(args, [])`` when there is none."""
    found: list[str] = []

    def walk(value: Any, where: str) -> Any:
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return value
        if isinstance(value, int):
            if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                return value
            found.append(where)
            return str(value)
        if isinstance(value, float):
            if math.isfinite(value) and not (
                value.is_integer() and MAX_SAFE_INTEGER < abs(value) < 1e21
            ):
                return value
            found.append(where)
            return "NaN" if math.isnan(value) else repr(value).replace("inf", "Infinity")
        if isinstance(value, dict):
            return {key: walk(child, f"{where}.{key}") for key, child in value.items()}
        if isinstance(value, list):
            return [walk(child, f"{where}[{index}]") for index, child in enumerate(value)]
        return value

    try:
        walked = walk(args, "$")
    except RecursionError:  # nested past what any record holds: refused whole
        return {}, ["$ (nested too deeply)"]
    return (walked, found) if found else (args, [])


@dataclass(frozen=True, slots=True)
class ModelToolCall:
    call_id: str
    name: str
    args: Any
    step_id: str


def cap_result(result: Any, is_error: bool, cap_bytes: int) -> Any:
    """Keep a result under ``cap_bytes`` of canonical JSON, with a marker saying so."""
    size = len(canonical_json_bytes(result))
    if size <= cap_bytes:
        return result
    if isinstance(result, dict):
        trimmed = dict(result)
        for key in ("output", "content"):
            value = trimmed.get(key)
            if isinstance(value, str):
                keep = max(0, len(value) - (size - cap_bytes) - 200)
                trimmed[key] = (
                    value[:keep] + f"\n[result truncated: {size} bytes exceeded the "
                    f"{cap_bytes}-byte limit]"
                )
        if len(canonical_json_bytes(trimmed)) <= cap_bytes:
            trimmed["truncated"] = True
            return trimmed
    text = json.dumps(result, ensure_ascii=False)[: max(0, cap_bytes - 300)]
    marker = {
        "truncated": True,
        "originalBytes": size,
        "preview": text,
        "note": f"[result truncated: {size} bytes exceeded the {cap_bytes}-byte limit]",
    }
    if is_error:
        marker["error"] = "the tool failed and its error output was too large to keep"
    return marker


class ToolRuntime:
    def __init__(
        self,
        *,
        writer: ToolEventWriter,
        builder: EventBuilder,
        catalog: ToolCatalog,
        policy: PermissionPolicy,
        asker: PermissionAsker,
        tool_context: ToolContext,
        clock: Callable[[], int],
        publish: Callable[[RuntimeEvent], None],
        result_cap_bytes: int = DEFAULT_RESULT_CAP_BYTES,
        effects_done: Callable[[str], None] | None = None,
    ) -> None:
        self._writer = writer
        self._builder = builder
        self._catalog = catalog
        self._policy = policy
        self._asker = asker
        self._ctx = tool_context
        self._clock = clock
        self._publish = publish
        self._cap = result_cap_bytes
        # Told a dispatched tool's name the moment it returned (its process exited), before
        # T2 is written: the workspace snapshot after it starts then (docs/design/workspace.md
        # section 3).
        self._effects_done = effects_done
        self._last_failure: tuple[str, int] | None = None  # (identity key, consecutive count)

    @property
    def cancel(self) -> CancelToken:
        return self._ctx.cancel

    # ---- committing ---------------------------------------------------------------------------

    def _append(self, event: RuntimeEvent) -> None:
        try:
            self._writer.append_event(event)
        except LedgerError as error:
            raise ToolBoundaryError("preflight", error) from error
        self._publish(event)

    def _refuse(
        self,
        pending: _PendingCall,
        code: ToolRefusalCode,
        message: str,
        *,
        detail: str | None = None,
    ) -> ToolResult:
        call = pending.call
        if not pending.committed:
            self._append(pending.call_event)
        result: dict[str, Any] = {"error": message, "code": code.value}
        if detail is not None:
            result["detail"] = detail
        if code is ToolRefusalCode.CANCELLED and self.cancel.reason in STOPPED_BY_HOST:
            # Maka, not the user, stopped the turn (a question nobody could answer, a shutdown):
            # the record says so, as for a command Maka ended (``stoppedByHost``).
            result["stoppedByHost"] = True
        self._append(
            self._builder.unbound_error_response(
                pending.op_id, call.call_id, name=call.name, result=result, ts=self._now()
            )
        )
        self._note_outcome(call, failed=True)
        return ToolResult(call.call_id, call.name, result, is_error=True)

    def _now(self) -> int:
        return self._clock()

    # ---- loop gate ----------------------------------------------------------------------------

    @staticmethod
    def _identity(call: ModelToolCall) -> str:
        try:
            return canonical_args_hash(call.name, call.args)
        except LedgerError:
            return f"{call.name}:unhashable"

    def _note_outcome(self, call: ModelToolCall, *, failed: bool) -> None:
        if not failed:
            self._last_failure = None
            return
        key = self._identity(call)
        if self._last_failure is not None and self._last_failure[0] == key:
            self._last_failure = (key, self._last_failure[1] + 1)
        else:
            self._last_failure = (key, 1)

    def _loop_gate_blocks(self, call: ModelToolCall) -> bool:
        last = self._last_failure
        return (
            last is not None
            and last[0] == self._identity(call)
            and (last[1] >= LOOP_GATE_THRESHOLD)
        )

    # ---- the path -----------------------------------------------------------------------------

    def settle(self, call: ModelToolCall) -> ToolResult:
        """Run one model tool call through preflight, T1, the tool and T2; return the result
        the model may see (committed before it is returned)."""
        failpoint(CrashPoint.P0)
        # Arguments no record can hold: the call is recorded without them and refused, so the
        # model hears why; the turn goes on.
        call, unrecordable = _as_recorded(call)
        identity = self._builder.identity
        op_id = operation_id(identity.invocation_id, call.call_id)
        call_event = self._builder.function_call(
            op_id,
            call.call_id,
            name=call.name,
            args=call.args,
            step_id=call.step_id,
            ts=self._now(),
        )
        pending = _PendingCall(call, op_id, call_event)
        if unrecordable:
            return self._refuse(pending, ToolRefusalCode.ARGUMENTS_INVALID, unrecordable)
        tool = self._catalog.get(call.name)
        if tool is None:
            known = ", ".join(self._catalog.names())
            return self._refuse(
                pending,
                ToolRefusalCode.UNKNOWN_TOOL,
                f"there is no tool named {call.name!r}; available tools: {known}",
            )
        errors = schema_errors(tool.parameters, call.args)
        if errors:
            return self._refuse(
                pending,
                ToolRefusalCode.ARGUMENTS_INVALID,
                "invalid arguments: " + "; ".join(errors),
            )
        if self._loop_gate_blocks(call):
            self._last_failure = None  # the block itself records no outcome
            return self._refuse(
                pending,
                ToolRefusalCode.LOOP_GATE_BLOCKED,
                "this exact call already failed twice in a row; change the arguments or "
                "try something else",
            )
        verdict = self._policy.verdict(tool.read_only)
        if verdict is PolicyVerdict.DENY:
            return self._refuse(
                pending,
                ToolRefusalCode.PERMISSION_DENIED,
                f"permission to run {call.name} was denied by the permission mode",
            )
        if verdict is PolicyVerdict.ASK:
            self._append(call_event)
            pending.committed = True
            decision = self._ask(call, op_id)
            if decision is None:
                said = (
                    f"Maka stopped the turn at this permission question: no window or terminal "
                    f"was there to answer it, so {call.name} did not run; call it again once "
                    "the user can answer, and the question is asked again"
                    if self.cancel.reason == HOST_STOPPED_AT_QUESTION
                    else "the turn was cancelled while waiting for permission"
                )
                return self._refuse(pending, ToolRefusalCode.CANCELLED, said)
            if decision != "allow":
                return self._refuse(
                    pending,
                    ToolRefusalCode.PERMISSION_DENIED,
                    f"the user denied permission to run {call.name}",
                )
        try:
            prepared = tool.prepare(call.args, self._ctx)
        except ToolRefusal as refusal:
            return self._refuse(pending, refusal.code, refusal.message)
        except OSError as error:  # a path the operating system refuses: the model can fix it
            return self._refuse(
                pending,
                ToolRefusalCode.PATH_UNUSABLE,
                f"cannot use this path: {path_error_sentence(error)}",
            )
        except Exception as error:  # a defect in preflight ends this call, never the turn
            return self._refuse(
                pending,
                ToolRefusalCode.PREFLIGHT_FAILED,
                "the tool could not be prepared because of an unexpected problem in Maka; "
                "it did not run",
                detail=_exception_detail(error),
            )
        if self.cancel.is_cancelled():
            return self._refuse(
                pending, ToolRefusalCode.CANCELLED, "the turn was cancelled before the tool started"
            )
        return self._dispatch(tool, pending, prepared)

    def _ask(self, call: ModelToolCall, op_id: str) -> str | None:
        identity = self._builder.identity
        request_id = f"{op_id}_permission"
        args = call.args if isinstance(call.args, dict) else {}
        summary = write_question(call.name, args, self._ctx.cwd) or _summarize_args(call)
        self._append(
            self._builder.permission_request(
                request_id,
                tool_name=call.name,
                call_id=call.call_id,
                summary=summary,
                ts=self._now(),
            )
        )
        question = PermissionQuestion(
            request_id, identity.session_id, identity.run_id, call.name, call.call_id, summary
        )
        decision = self._asker(question, self.cancel)
        # A cancelled wait is answered "deny", so no request stays open in a finished run; the
        # host, not the user, writes that answer.
        self._append(
            self._builder.permission_decision(
                request_id,
                decision or "deny",
                self._now(),
                author="user" if decision is not None else "host",
            )
        )
        return decision

    def _dispatch(
        self, tool: Tool[Any], pending: _PendingCall, prepared: PreparedCall[Any]
    ) -> ToolResult:
        call, op_id, call_event, call_committed = (
            pending.call,
            pending.op_id,
            pending.call_event,
            pending.committed,
        )
        dispatch = self._builder.tool_dispatch(
            op_id,
            call.call_id,
            name=call.name,
            args_hash=canonical_args_hash(call.name, call.args),
            recovery_mode=tool.recovery_mode,
            evidence=prepared.evidence,
            ts=self._now(),
        )
        if call_committed:
            failpoint(CrashPoint.P1)
        try:
            committed = self._writer.commit_tool_prepared(
                None if call_committed else call_event, dispatch
            )
        except LedgerError as error:
            raise ToolBoundaryError("T1", error) from error
        if not committed.created:
            raise ToolBoundaryError("T1", f"tool operation {op_id} is already claimed")
        if not call_committed:
            self._publish(call_event)
        self._publish(dispatch)
        failpoint(CrashPoint.P2)
        started = time.monotonic()
        output = self._run_tool(tool, prepared, op_id)
        failpoint(CrashPoint.P4)
        if self._effects_done is not None:
            self._effects_done(call.name)
        duration = int((time.monotonic() - started) * 1000)
        result = cap_result(escape_undecodable(output.result), output.is_error, self._cap)
        response = self._builder.bound_response(
            op_id,
            call.call_id,
            name=call.name,
            result=result,
            is_error=output.is_error,
            duration_ms=duration,
            ts=self._now(),
        )
        try:
            self._writer.commit_tool_outcome(response)
        except LedgerError as error:
            raise ToolBoundaryError("T2", error) from error
        failpoint(CrashPoint.P5)
        self._publish(response)
        failpoint(CrashPoint.P6)
        self._note_outcome(call, failed=output.is_error)
        return ToolResult(call.call_id, call.name, result, is_error=output.is_error)

    def _run_tool(self, tool: Tool[Any], prepared: PreparedCall[Any], op_id: str) -> ToolOutput:
        try:
            return tool.run(prepared, replace(self._ctx, operation_id=op_id))
        except ToolFailure as failure:
            return ToolOutput(failure.result, is_error=True)
        except Exception as error:  # a tool bug must still settle the operation
            text = str(error)[:2000]
            sentence = "the tool failed because of an unexpected problem in Maka"
            return ToolOutput(
                {
                    "error": f"{sentence}: {text}" if text else sentence,
                    "code": ToolFailureCode.TOOL_INTERNAL_ERROR.value,
                    "detail": _exception_detail(error),
                },
                is_error=True,
            )


def _exception_detail(error: BaseException) -> str:
    """The raw exception, for the ledger and "Copy diagnostics": never the sentence a card or
    a terminal shows (those read ``error``)."""
    return f"{type(error).__name__}: {str(error)[:2000]}"


def _summarize_args(call: ModelToolCall) -> str:
    """What a permission question shows: the whole command (up to ``PROMPT_CHARS``, then
    shortened with "(N more characters)"), never a silent cut."""
    args = call.args if isinstance(call.args, dict) else {}
    if call.name == "bash":
        return f"run: {shorten(str(args.get('command', '')), PROMPT_CHARS)}"
    if "path" in args:
        verb = {"write_file": "write", "edit_file": "edit"}.get(call.name, call.name)
        return f"{verb} {shorten(str(args['path']), PROMPT_CHARS)}"
    return f"{call.name} {shorten(json.dumps(call.args, ensure_ascii=False), PROMPT_CHARS)}"
