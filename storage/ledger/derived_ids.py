"""Which ids are the reference's derivations (docs/design/ledger.md section 2), for schema
4's uniqueness.

An operation id is ``toolop_`` + 32 hex digits of SHA-256 over ``[invocationId,
providerToolCallId]``, and a tool fact's event id starts with its operation id and ``_``
(``<operationId>_call``, ``_dispatch``, ``_response``, and the recovery facts'). Such an id is
*derived*: it names its own invocation through a hash, so two derived ids of different
invocations differ unless SHA-256 collides, and their uniqueness across the ledger needs no
global index (``storage/ledger/schema_v4.py``). Any other id is *chosen* by its producer, and a
global
index (or, for the few chosen ids shaped like a derived one, a scan) keeps it unique.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from runtime.ledger.canonical_codec import operation_id as derive_operation_id
from runtime.ledger.ledger_errors import LedgerError
from storage.ledger.schema_v4 import TOOL_ID_PREFIX


def _derived(invocation_id: object, call_id: object) -> str | None:
    if not isinstance(invocation_id, str) or not isinstance(call_id, str):
        return None
    return _derived_of(invocation_id, call_id)


@lru_cache(maxsize=512)
def _derived_of(invocation_id: str, call_id: str) -> str | None:
    """A tool call's T1 and T2 ask for the same operation id four times: hashed once."""
    try:
        return derive_operation_id(invocation_id, call_id)
    except LedgerError:
        return None


def is_derived_operation_id(
    operation_id: object, invocation_id: object, provider_tool_call_id: object
) -> int:
    """1 when ``operation_id`` is the reference's id of ``(invocation_id,
    provider_tool_call_id)``, else 0 (also for anything that is not a pair of strings)."""
    return int(_derived(invocation_id, provider_tool_call_id) == operation_id)


def tool_call_ids(event: Mapping[str, Any]) -> list[str]:
    """The provider tool-call ids an event names: its function_call / function_response
    content id, ``refs.toolCallId``, the dispatch fact's ``providerToolCallId`` and a
    permission request's ``toolCallId`` (dicts, as decoded events are: a T1+T2 asks this of
    three events, so no abstract-class checks)."""
    found: list[object] = []
    content = event.get("content")
    if type(content) is dict and content.get("kind") in ("function_call", "function_response"):
        found.append(content.get("id"))
    refs = event.get("refs")
    if type(refs) is dict:
        found.append(refs.get("toolCallId"))
    actions = event.get("actions")
    if type(actions) is dict:
        fact = actions.get("toolDispatch")
        if type(fact) is dict:
            found.append(fact.get("providerToolCallId"))
        request = actions.get("permissionRequest")
        if type(request) is dict:
            found.append(request.get("toolCallId"))
    return [value for value in found if type(value) is str and value]


# ``toolop_`` + 32 hex digits: the operation id an id shaped like a derived one starts with.
_OPERATION_ID_LENGTH = len(TOOL_ID_PREFIX) + 32


def operation_prefix(event_id: str) -> str | None:
    """The operation id an id shaped like a derived event id starts with (``toolop_`` + 32
    characters, then ``_`` and a suffix), else None."""
    if (
        len(event_id) <= _OPERATION_ID_LENGTH
        or event_id[_OPERATION_ID_LENGTH] != "_"
        or not event_id.startswith(TOOL_ID_PREFIX)
    ):
        return None
    return event_id[:_OPERATION_ID_LENGTH]


def is_derived_event_id(event_id: str, invocation_id: str, call_ids: Iterable[str]) -> bool:
    """Whether ``event_id`` is the operation id of ``invocation_id`` and one of the event's own
    tool-call ids, then ``_`` and a suffix."""
    operation = operation_prefix(event_id)
    if operation is None:
        return False
    return any(_derived_of(invocation_id, call_id) == operation for call_id in call_ids)


def is_derived_event(
    event: Mapping[str, Any], call_of: Callable[[str], str | None] | None = None
) -> bool:
    """Whether the event's id is derived: from a tool-call id the event names, or else (a
    permission decision or closure names only its request) from the call ``call_of`` finds
    for the id's operation in the event's own run (its ``<operationId>_call``)."""
    event_id, invocation_id = event.get("id"), event.get("invocationId")
    if type(event_id) is not str or type(invocation_id) is not str:
        return False
    if is_derived_event_id(event_id, invocation_id, tool_call_ids(event)):
        return True
    if call_of is None or not event_id.startswith(TOOL_ID_PREFIX):
        return False
    call_id = call_of(event_id[:_OPERATION_ID_LENGTH])
    return call_id is not None and is_derived_event_id(event_id, invocation_id, [call_id])


def is_derived_event_row(event_id: object, invocation_id: object, payload: object) -> int:
    """``is_derived_event`` of a stored row (the migration's SQL function); 0 for a payload
    that does not decode (the row is then kept unique as a chosen id)."""
    if not isinstance(event_id, str) or not event_id.startswith(TOOL_ID_PREFIX):
        return 0
    if not isinstance(invocation_id, str) or not isinstance(payload, bytes | str):
        return 0
    try:
        event = json.loads(payload)
    except ValueError:
        return 0
    if not isinstance(event, dict):
        return 0
    return int(is_derived_event_id(event_id, invocation_id, tool_call_ids(event)))
