"""Decoding a ledger line checks the numbers of free-form values (``content.args``,
``content.result``, ``actions.stateDelta``, recovery payloads) without searching the raw line:
the result must be exactly that of the exhaustive walk, for any JSON value."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.event_model import _post_checks, decode_event_json, event_validator
from runtime.ledger.ledger_errors import EventDecodeError

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.sampled_from([2**53 - 1, 2**53, -(2**53), 2.0**53 + 2, 1e16, 1e21, 1e400, -1e400])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


def _line(args: Any, result: Any, delta: Any) -> bytes:
    events = [
        {"kind": "function_call", "id": "c", "name": "T", "args": args},
        {"kind": "function_response", "id": "c", "name": "T", "result": result},
    ]
    event: dict[str, Any] = {
        "id": "e",
        "sessionId": "s",
        "invocationId": "i",
        "runId": "r",
        "turnId": "t",
        "ts": 1,
        "partial": False,
        "role": "model",
        "author": "agent",
        "content": events[0] if delta is None else events[1],
    }
    if isinstance(delta, dict):
        event["actions"] = {"stateDelta": delta}
    return json.dumps(event).encode()  # NaN/Infinity written as JSON text tokens


def _exhaustive(line: bytes) -> str:
    try:
        event = event_validator().validate_json(line)
        _post_checks(event, exact=True)
    except EventDecodeError as error:
        return f"refused {error}"
    except ValueError:
        return "refused by the parser"
    return "accepted"


def _fast(line: bytes) -> str:
    try:
        decode_event_json(line)
    except EventDecodeError as error:
        if str(error).startswith("json_invalid"):
            return "refused by the parser"
        return f"refused {error}"
    return "accepted"


@settings(max_examples=200, deadline=None)
@given(
    VALUES, VALUES, st.one_of(st.none(), st.dictionaries(st.text(max_size=4), VALUES, max_size=3))
)
def test_line_decoding_refuses_exactly_what_the_exhaustive_walk_refuses(
    args: Any, result: Any, delta: Any
) -> None:
    line = _line(args, result, delta)
    assert _fast(line) == _exhaustive(line)
