"""The RuntimeEvent v1 shape (docs/design/ledger.md section 1) and its strict decoder.

An event is represented as the JSON object itself, typed with ``TypedDict`` s: that is what the
store persists, what the codec hashes and what every pure decision function reads. Treat decoded
events as immutable; nothing in the contract mutates one.

Decoding is closed everywhere: unknown keys, wrong types (no coercion: ``"1"`` is not ``1``,
``1.0`` is not an integer timestamp), ``null`` for an absent optional field, lone surrogates,
non-finite floats and integers outside +-(2^53-1) are rejected with an ``EventDecodeError`` that
names the field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, TypeVar, cast

from typing_extensions import TypedDict

from runtime.ledger.ledger_errors import DecodeCode, EventDecodeError

if TYPE_CHECKING:
    from pydantic_core import SchemaValidator, ValidationError

MAX_SAFE_INTEGER = 2**53 - 1
TOOL_BOUNDARY_PROTOCOL_V1 = "t1_after_preflight_v1"

_T = TypeVar("_T")


def _closed(cls: _T) -> _T:
    """Every event object is closed and strict: unknown keys are refused, nothing is coerced.
    (The setting pydantic reads from a TypedDict; see ``event_schema_derivation``.)"""
    setattr(cls, "__pydantic_config__", {"extra": "forbid", "strict": True})  # noqa: B010
    return cls


class _Constrained:
    """Constraints on a string or integer field, as pydantic's schema derivation reads them."""

    __slots__ = ("constraints",)

    def __init__(self, **constraints: object) -> None:
        self.constraints = constraints

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        schema.update(self.constraints)
        return schema


class _TaggedBy:
    """A union of closed objects told apart by the literal value of one key (a tagged union, so
    a wrong object is reported against the variant its tag names, not against all of them)."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        union = handler(source)
        choices = {}
        for choice in union["choices"]:
            variant = handler.resolve_ref_schema(choice)
            choices[variant["fields"][self.key]["schema"]["expected"][0]] = choice
        return {
            "type": "tagged-union",
            "choices": choices,
            "discriminator": self.key,
            "strict": False,
            "from_attributes": True,
        }


NonEmpty = Annotated[str, _Constrained(min_length=1)]
Digest = Annotated[str, _Constrained(pattern=r"^sha256:[0-9a-f]{64}$")]
SafeInt = Annotated[int, _Constrained(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
NonNegativeSafeInt = Annotated[int, _Constrained(ge=0, le=MAX_SAFE_INTEGER)]

Role = Literal["user", "model", "tool", "system"]
Author = Literal["user", "host", "agent", "tool", "system"]
Status = Literal["streaming", "completed", "failed", "aborted", "cancelled"]
ModelVisibility = Literal["visible", "hidden"]
RecoveryMode = Literal["replay_safe", "idempotent", "reconcile", "never_auto_retry"]

TERMINAL_STATUSES = frozenset({"completed", "failed", "aborted", "cancelled"})


# ---- content variants -------------------------------------------------------------------------


@_closed
class TextContent(TypedDict):
    kind: Literal["text"]
    text: str
    displayText: NotRequired[str]


@_closed
class ThinkingContent(TypedDict):
    kind: Literal["thinking"]
    text: str
    signature: NotRequired[str]


@_closed
class FunctionCallContent(TypedDict):
    kind: Literal["function_call"]
    id: str
    name: str
    args: Any


@_closed
class FunctionResponseContent(TypedDict):
    kind: Literal["function_response"]
    id: str
    name: str
    result: Any
    isError: NotRequired[bool]


@_closed
class ErrorContent(TypedDict):
    kind: Literal["error"]
    message: str
    code: NotRequired[str]
    reason: NotRequired[str]


Content = Annotated[
    TextContent | ThinkingContent | FunctionCallContent | FunctionResponseContent | ErrorContent,
    _TaggedBy("kind"),
]


# ---- actions ----------------------------------------------------------------------------------


@_closed
class TokenUsage(TypedDict):
    input: NonNegativeSafeInt
    output: NonNegativeSafeInt


@_closed
class PermissionRequest(TypedDict):
    requestId: NonEmpty
    toolName: NonEmpty
    toolCallId: NonEmpty
    summary: str


@_closed
class PermissionDecision(TypedDict):
    requestId: NonEmpty
    decision: Literal["allow", "deny"]


@_closed
class PermissionClosure(TypedDict):
    requestId: NonEmpty
    reason: Literal["host_restarted", "timed_out"]


@_closed
class WorkspaceCheckpointMode(TypedDict):
    """The checkpoint mode a run declares in its first event (docs/design/workspace.md
    section 2)."""

    mode: Literal["git_v1", "unavailable"]
    reasonCode: NotRequired[NonEmpty]


@_closed
class RuntimeProtocol(TypedDict):
    toolBoundary: Literal["t1_after_preflight_v1"]
    workspaceCheckpoints: NotRequired[WorkspaceCheckpointMode]


@_closed
class FileStateBefore(TypedDict):
    exists: bool
    sha256: NotRequired[Digest]
    size: NotRequired[NonNegativeSafeInt]


@_closed
class FileStateAfter(TypedDict):
    exists: Literal[True]
    sha256: Digest
    size: NonNegativeSafeInt


@_closed
class FileStateEvidence(TypedDict):
    """Evidence a reconcilable write carries in its T1 dispatch (docs/design/recovery.md
    section 5)."""

    kind: Literal["file_state_v1"]
    path: NonEmpty
    workspaceIdentity: NonEmpty
    before: FileStateBefore
    expectedAfter: FileStateAfter


@_closed
class ToolDispatch(TypedDict):
    protocol: Literal["t1_after_preflight_v1"]
    operationId: NonEmpty
    providerToolCallId: NonEmpty
    toolName: NonEmpty
    canonicalArgsHash: str
    recoveryMode: RecoveryMode
    evidence: NotRequired[FileStateEvidence]


@_closed
class ToolRecovery(TypedDict):
    """Recovery fact envelope; the payload is checked by the bundle validation, which reports
    ``reconcile_fact_invalid`` / ``decision_fact_invalid`` for a malformed one."""

    kind: Literal["maka.tool.reconcile_result", "maka.tool.recovery_decision"]
    version: Literal[1]
    payload: dict[str, Any]


@_closed
class ContinuationSource(TypedDict):
    sessionId: NonEmpty
    invocationId: NonEmpty
    runId: NonEmpty
    turnId: NonEmpty
    highWater: Annotated[int, _Constrained(ge=1, le=MAX_SAFE_INTEGER)]
    prefixDigest: Digest


@_closed
class ContinuationStart(TypedDict):
    protocol: Literal["continuation_start_v2"]
    provenance: Literal["runtime_admission", "claim_repair"]
    claimId: NonEmpty
    boundaryDigest: Digest
    immediateSource: ContinuationSource
    replayManifestDigest: Digest
    providerProjectionVersion: Literal[1]
    providerReplayDigest: Digest


GitObjectId = Annotated[str, _Constrained(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")]


@_closed
class WorkspaceCheckpoint(TypedDict):
    """A snapshot of the session folder bound to the committed run prefix it belongs to
    (docs/design/workspace.md section 2); written only by the workspace-fact writer."""

    protocol: Literal["workspace_checkpoint_v1"]
    workspaceIdentity: NonEmpty
    workspaceEpoch: Annotated[int, _Constrained(ge=1, le=MAX_SAFE_INTEGER)]
    runtimeHighWater: Annotated[int, _Constrained(ge=1, le=MAX_SAFE_INTEGER)]
    runtimeDigest: Digest
    checkpointRef: NonEmpty
    commitId: GitObjectId
    treeId: GitObjectId
    policyHash: Annotated[str, _Constrained(pattern=r"^[0-9a-f]{64}$")]
    skippedPaths: NotRequired[list[str]]


@_closed
class WorkspaceCheckpointFailed(TypedDict):
    """A capture that failed: the tool and the turn went on; resume at this boundary parks."""

    protocol: Literal["workspace_checkpoint_v1"]
    workspaceIdentity: NonEmpty
    runtimeHighWater: Annotated[int, _Constrained(ge=1, le=MAX_SAFE_INTEGER)]
    reasonCode: NonEmpty
    message: NotRequired[str]
    # The capture of the user's decision to continue with the current files (a rebaseline,
    # docs/design/workspace.md section 4) that failed for what the folder holds (a nested
    # repository): committed in the continuation's admission, right after its start event, it
    # records the decision in place of the ``workspaceBaseline`` a snapshot would have carried.
    decidedBy: NotRequired[Literal["local_user"]]
    decidedAt: NotRequired[Annotated[int, _Constrained(ge=0, le=MAX_SAFE_INTEGER)]]


@_closed
class ChangedPath(TypedDict):
    path: str
    change: Literal["added", "modified", "deleted"]


@_closed
class WorkspaceBaseline(TypedDict):
    """The user chose to continue with the folder's current files (docs/design/workspace.md section
    4): committed in the continuation's start event, in its admission transaction."""

    protocol: Literal["workspace_baseline_v1"]
    workspaceIdentity: NonEmpty
    workspaceEpoch: Annotated[int, _Constrained(ge=1, le=MAX_SAFE_INTEGER)]
    previousCheckpointRef: NotRequired[str]
    checkpointRef: NonEmpty
    commitId: GitObjectId
    treeId: GitObjectId
    policyHash: Annotated[str, _Constrained(pattern=r"^[0-9a-f]{64}$")]
    # The files the capture left out (over the size limit), as a checkpoint's.
    skippedPaths: NotRequired[list[str]]
    changedPaths: list[ChangedPath]
    moreChangedPaths: Annotated[int, _Constrained(ge=0, le=MAX_SAFE_INTEGER)]
    compared: bool
    decidedBy: Literal["local_user"]
    decidedAt: Annotated[int, _Constrained(ge=0, le=MAX_SAFE_INTEGER)]


@_closed
class RestoreLaterCall(TypedDict):
    """A call that may have written, named in a restore point."""

    toolName: NonEmpty
    toolCallId: NonEmpty


@_closed
class RestoreAfterCall(TypedDict):
    """The call an earlier snapshot was taken after (a separate type: the derived schema
    inlines each TypedDict once)."""

    toolName: NonEmpty
    toolCallId: NonEmpty


@_closed
class WorkspaceTransition(TypedDict):
    """The user chose to continue in a restored copy (docs/design/workspace.md section 4): the
    session lives in ``toPath`` from then on. Committed in the continuation's start event, in its
    admission transaction; the only fact that lets a continuation run in another workspace than its
    source."""

    protocol: Literal["workspace_transition_v1"]
    kind: Literal["isolated_restore"]
    fromIdentity: NonEmpty
    toIdentity: NonEmpty
    fromPath: NonEmpty
    toPath: NonEmpty
    checkpointRef: NonEmpty
    commitId: GitObjectId
    treeId: GitObjectId
    workspaceEpoch: Annotated[int, _Constrained(ge=1, le=MAX_SAFE_INTEGER)]
    decidedBy: Literal["local_user"]
    decidedAt: Annotated[int, _Constrained(ge=0, le=MAX_SAFE_INTEGER)]
    # What the copy reflects when it is not the folder at the stop (absent: it is):
    # ``before_later_calls`` (the snapshot predates calls that may have written) or
    # ``earlier_snapshot`` (the snapshot at the stop is gone: an earlier one of the lineage).
    restorePoint: NotRequired[Literal["before_later_calls", "earlier_snapshot"]]
    laterCalls: NotRequired[list[RestoreLaterCall]]
    moreLaterCalls: NotRequired[Annotated[int, _Constrained(ge=0, le=MAX_SAFE_INTEGER)]]
    snapshotAfterCall: NotRequired[RestoreAfterCall]
    lostCheckpointRef: NotRequired[str]
    # ``earlier_snapshot``: how much older than the lost snapshot at the stop the copy's is (ms).
    snapshotAgeMs: NotRequired[Annotated[int, _Constrained(ge=0, le=MAX_SAFE_INTEGER)]]


@_closed
class Actions(TypedDict, total=False):
    stateDelta: dict[str, Any]
    endInvocation: bool
    tokenUsage: TokenUsage
    permissionRequest: PermissionRequest
    permissionDecision: PermissionDecision
    permissionClosure: PermissionClosure
    runtimeProtocol: RuntimeProtocol
    toolDispatch: ToolDispatch
    toolRecovery: ToolRecovery
    continuationStart: ContinuationStart
    workspaceCheckpoint: WorkspaceCheckpoint
    workspaceCheckpointFailed: WorkspaceCheckpointFailed
    workspaceBaseline: WorkspaceBaseline
    workspaceTransition: WorkspaceTransition


@_closed
class Refs(TypedDict, total=False):
    toolCallId: str
    operationId: str
    stepId: str
    sourceInvocationId: str
    sourceRunId: str
    sourceTurnId: str
    sourceRuntimeEventHighWater: NonNegativeSafeInt


# ---- the envelope -----------------------------------------------------------------------------


@_closed
class RuntimeEvent(TypedDict):
    id: NonEmpty
    sessionId: NonEmpty
    invocationId: NonEmpty
    runId: NonEmpty
    turnId: NonEmpty
    ts: NonNegativeSafeInt
    partial: bool
    role: Role
    author: Author
    modelVisibility: NotRequired[ModelVisibility]
    status: NotRequired[Status]
    content: NotRequired[Content]
    actions: NotRequired[Actions]
    refs: NotRequired[Refs]


# Built from the schema derived from the TypedDicts above (``event_schema_derivation``), with
# ``pydantic_core`` alone: deriving it again at every start would cost the ledger tools more than
# everything else they import. Built, and ``pydantic_core`` imported (~20 ms), at the first
# decode: a command that decodes nothing (``maka ledger plan`` on an empty file, ``maka
# sessions``) does not pay for it.


class _NotLoaded(Exception):
    """Stands for pydantic-core's ``ValidationError`` until the validator exists (nothing can
    raise it before then)."""


_ValidationError: type[Exception] = _NotLoaded
_validator: SchemaValidator | None = None


def event_validator() -> SchemaValidator:
    """The RuntimeEvent validator (built on first use)."""
    load_validator()
    assert _validator is not None
    return _validator


def load_validator() -> None:
    """Build the validator now (idempotent): before a fork, so that both processes share it."""
    if _VALIDATE_JSON is _first_validate_json:
        _load_validator()


def _load_validator() -> None:
    # Module globals, not an object: the decoders on the hot path read them directly.
    global _validator, _validate_python, _VALIDATE_JSON, _ValidationError  # noqa: PLW0603
    from pydantic_core import SchemaValidator, ValidationError

    from runtime.ledger.event_core_schema import RUNTIME_EVENT_CORE_SCHEMA

    validator = _validator = SchemaValidator(RUNTIME_EVENT_CORE_SCHEMA)
    _ValidationError = ValidationError
    _validate_python = validator.validate_python
    _VALIDATE_JSON = validator.validate_json


def _first_validate_python(value: object) -> Any:
    _load_validator()
    return _validate_python(value)


def _first_validate_json(data: bytes) -> Any:
    _load_validator()
    return _VALIDATE_JSON(data)


_validate_python: Callable[[object], Any] = _first_validate_python
_VALIDATE_JSON: Callable[[bytes], Any] = _first_validate_json


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        text = str(item)
        # Discriminated-union tags such as "function_call" are not part of the JSON path.
        if parts and parts[-1] == "content" and text in _CONTENT_TAGS:
            continue
        parts.append(text)
    return ".".join(parts)


_CONTENT_TAGS = frozenset({"text", "thinking", "function_call", "function_response", "error"})


def _raise_from_validation(error: ValidationError) -> EventDecodeError:
    first = error.errors(include_url=False)[0]
    path = _field_path(tuple(first.get("loc", ())))
    kind = first.get("type", "")
    message = first.get("msg", "invalid value")
    if kind == "extra_forbidden":
        message = "unknown key"
    elif kind == "missing":
        message = "required key is missing"
    elif first.get("input", 0) is None:
        message = "null is not allowed (omit an absent field instead)"
    if kind in ("json_invalid", "json_type"):
        return EventDecodeError(f"not valid JSON: {message}", "", DecodeCode.JSON_INVALID)
    where = path or "event"
    return EventDecodeError(f"{where}: {message}", path)


def check_json_value(value: Any, path: str) -> None:
    """Reject what canonical JSON cannot carry: non-finite floats, unsafe integers, lone
    surrogates, non-string keys and non-JSON types."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                raise EventDecodeError(f"{where}: integer outside +-(2^53-1)", where)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise EventDecodeError(f"{where}: number is not finite", where)
            # RFC 8785 writes an integral float below 1e21 as an integer literal, which would be
            # re-read as an integer outside the safe range: refuse it now, not on re-read.
            if item.is_integer() and MAX_SAFE_INTEGER < abs(item) < 1e21:
                raise EventDecodeError(f"{where}: integer outside +-(2^53-1)", where)
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise EventDecodeError(f"{where}: object keys must be strings", where)
                _check_text(key, where)
                stack.append((child, f"{where}.{key}" if where else key))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
        else:
            raise EventDecodeError(f"{where}: {type(item).__name__} is not a JSON value", where)


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise EventDecodeError(f"{where}: string contains a lone surrogate", where) from None


def _certainly_plain(value: Any) -> bool:
    """True when ``check_json_value`` would certainly accept ``value`` as parsed from JSON text.

    After ``validate_json`` every string is valid Unicode (the parser refuses lone surrogates and
    invalid UTF-8) and every object key is a string, so only numbers can still be refused: a
    value holding nothing but strings, booleans, nulls and safe integers is plain. Anything else
    (a float, a large integer) goes to the exact walk, which decides and names the field. This
    costs about as much as the value is large, far less than searching the raw line.
    """
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            return False
        if kind is dict:
            for child in item.values():
                child_kind = type(child)
                if child_kind is str or child_kind is bool or child is None:
                    continue
                push(child)
        elif kind is list:
            for child in item:
                child_kind = type(child)
                if child_kind is str or child_kind is bool or child is None:
                    continue
                push(child)
        else:
            return False
    return True


def _check_free_form(value: Any, path: str) -> None:
    if not _certainly_plain(value):
        check_json_value(value, path)


def _post_checks(event: RuntimeEvent, exact: bool, *, numbers_checked: bool = False) -> None:
    actions = event.get("actions")
    if actions is not None and "permissionClosure" in actions and len(actions) != 1:
        raise EventDecodeError(
            "actions.permissionClosure: must be the only action key", "actions.permissionClosure"
        )
    if numbers_checked:
        return
    # ``exact``: a Python value whose strings may hold anything gets the full walk of every
    # free-form field; a value parsed from JSON text only needs its numbers looked at.
    check = check_json_value if exact else _check_free_form
    content = event.get("content")
    if content is not None:
        if content["kind"] == "function_call":
            check(content["args"], "content.args")
        elif content["kind"] == "function_response":
            check(content["result"], "content.result")
    if actions is not None:
        if "stateDelta" in actions:
            check(actions["stateDelta"], "actions.stateDelta")
        if "toolRecovery" in actions:
            check(actions["toolRecovery"]["payload"], "actions.toolRecovery.payload")


def decode_event(value: object) -> RuntimeEvent:
    """Decode a Python JSON value (for example from ``json.loads``) into a RuntimeEvent."""
    if not isinstance(value, dict):
        raise EventDecodeError("a RuntimeEvent must be a JSON object", "")
    try:
        event: RuntimeEvent = _validate_python(value)
    except _ValidationError as error:
        raise _raise_from_validation(cast("ValidationError", error)) from None
    check_json_value(event, "")  # also covers strings of the envelope (lone surrogates)
    _post_checks(event, exact=True)
    return event


def decode_event_json(data: bytes | str, *, numbers_checked: bool = False) -> RuntimeEvent:
    """Decode one JSON text (a ledger line) into a RuntimeEvent.

    ``numbers_checked``: the caller made ``data`` itself by encoding a value in which it found
    only safe integers and no float (``canonical_codec.plain_canonical_json_bytes``); a value
    parsed back from that text holds nothing the free-form walk could refuse (after
    ``validate_json`` only numbers can be), so the walk is skipped."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    try:
        event: RuntimeEvent = _VALIDATE_JSON(raw)
    except _ValidationError as error:
        raise _raise_from_validation(cast("ValidationError", error)) from None
    _post_checks(event, exact=False, numbers_checked=numbers_checked)
    return event


def decode_event_lines(lines: Sequence[bytes]) -> tuple[list[RuntimeEvent], int]:
    """Decode ledger lines in order, each exactly as ``decode_event_json`` would, stopping at the
    first line that does not decode.

    Returns the events decoded and the index of the line that stopped the batch (``len(lines)``
    when every line decoded); the caller decodes that line again with ``decode_event_json`` to
    get its precise error. Errors stay out of the loop: a whole file is decoded without setting
    up an exception handler per line."""
    events: list[RuntimeEvent] = []
    append = events.append
    if lines:
        load_validator()
    validate = _VALIDATE_JSON
    try:
        for raw in lines:
            event = validate(raw)
            _post_checks(event, False)
            append(event)
    except (_ValidationError, EventDecodeError):
        pass
    return events, len(events)


# ---- helpers every consumer shares ------------------------------------------------------------


def is_terminal(event: RuntimeEvent) -> bool:
    """A terminal event: a terminal ``status`` or ``actions.endInvocation: true``."""
    if event.get("status") in TERMINAL_STATUSES:
        return True
    actions = event.get("actions")
    return actions is not None and actions.get("endInvocation") is True


def is_partial(event: RuntimeEvent) -> bool:
    return event["partial"]


def is_hidden(event: RuntimeEvent) -> bool:
    return event.get("modelVisibility") == "hidden"


def has_model_visible_content(event: RuntimeEvent) -> bool:
    if is_hidden(event):
        return False
    content = event.get("content")
    if content is None:
        return False
    kind = content["kind"]
    if kind == "text":
        return cast(TextContent, content)["text"] != ""
    return kind in ("thinking", "function_call", "function_response")


def has_t1_marker(event: RuntimeEvent) -> bool:
    actions = event.get("actions")
    return actions is not None and "runtimeProtocol" in actions
