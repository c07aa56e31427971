"""Canonical bytes, hashes, ids and the strict decoder (docs/design/ledger.md sections 1 and 2)."""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.ledger.canonical_codec import (
    canonical_args_hash,
    canonical_bytes,
    canonical_json_bytes,
    operation_id,
    prefix_digest,
    sha256_digest,
)
from runtime.ledger.event_model import RuntimeEvent, decode_event, decode_event_json
from runtime.ledger.ledger_errors import (
    CanonicalEncodeError,
    DecodeCode,
    EventDecodeError,
)
from tests.helpers.ledger_builders import call_event, clean_ledger, user_text, with_changes
from tests.helpers.ledger_strategies import EVENTS, JSON_VALUES

# ---- the vectors of docs/design/ledger.md section 2 and the example ledger ----


def test_canonical_args_hash_reproduces_the_write_vector() -> None:
    assert (
        canonical_args_hash("Write", {"path": "notes.txt", "content": "after"})
        == "sha256:763712445cbfb7feebe3bd4ba14e29425f05e40b8cd14aef0896853dca24b4d9"
    )


def test_canonical_args_hash_does_not_depend_on_key_order() -> None:
    assert canonical_args_hash("Write", {"content": "after", "path": "notes.txt"}) == (
        canonical_args_hash("Write", {"path": "notes.txt", "content": "after"})
    )


def test_operation_id_reproduces_the_vector() -> None:
    assert operation_id("inv-01", "call_abc123") == "toolop_23b951fb971aba590954afbd796e429a"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {"content": '{"port":4000}', "path": "config.json"},
            "sha256:e48ec5aeae0d894ec8076d1cc799abe7e5e9690577ce00f7767a72a64a91976b",
        ),
        (
            {"path": "prepared.txt"},
            "sha256:b10a9dfa507aac2940a27bdd3670fd7582d52705de906eb13c1ab37b553031e1",
        ),
        (
            {"ordinaryArray": ["b", "a"]},
            "sha256:4b6be45e18e1a7c6566dd72a0fa0c01b0f059bb3128ecd7a3265d5221f7b8351",
        ),
    ],
)
def test_ascii_argument_hashes_coincide_with_the_design_vectors(args: Any, expected: str) -> None:
    tool = "Write" if "path" in args and "content" in args else "X"
    assert canonical_args_hash(tool, args) == expected


def test_required_arrays_keep_their_order_plain_rfc8785() -> None:
    """Deliberate difference 1: no sorting under ``required``/``enum``, ``__proto__`` kept."""
    body = b'{"args":{"required":["b","a"]},"toolName":"X"}'
    assert canonical_args_hash("X", {"required": ["b", "a"]}) == sha256_digest(body)
    assert canonical_args_hash("X", {"required": ["b", "a"]}) != canonical_args_hash(
        "X", {"required": ["a", "b"]}
    )
    assert canonical_args_hash("X", {"__proto__": {"admin": True}}) != canonical_args_hash("X", {})


def test_args_hash_refuses_an_empty_tool_name() -> None:
    with pytest.raises(CanonicalEncodeError):
        canonical_args_hash("", {})


EXAMPLE_LINES = [
    b'{"actions":{"runtimeProtocol":{"toolBoundary":"t1_after_preflight_v1"}},"author":"user",'
    b'"content":{"kind":"text","text":"Change the port in config.json to 4000"},"id":"evt-user-1",'
    b'"invocationId":"inv-01","partial":false,"role":"user","runId":"run-01","sessionId":"sess-01",'
    b'"ts":1767225600000,"turnId":"turn-01"}',
    b'{"actions":{"toolDispatch":{"canonicalArgsHash":"sha256:e48ec5aeae0d894ec8076d1cc799abe7e5e9'
    b'690577ce00f7767a72a64a91976b","operationId":"toolop_23b951fb971aba590954afbd796e429a",'
    b'"protocol":"t1_after_preflight_v1","providerToolCallId":"call_abc123","recoveryMode":'
    b'"reconcile","toolName":"Write"}},"author":"system","id":"toolop_23b951fb971aba590954afbd796e4'
    b'29a_dispatch","invocationId":"inv-01","modelVisibility":"visible","partial":false,"refs":'
    b'{"operationId":"toolop_23b951fb971aba590954afbd796e429a","toolCallId":"call_abc123"},"role":'
    b'"system","runId":"run-01","sessionId":"sess-01","ts":1767225601000,"turnId":"turn-01"}',
]


@pytest.mark.parametrize("line", EXAMPLE_LINES)
def test_example_ledger_lines_are_their_own_canonical_bytes(line: bytes) -> None:
    assert canonical_bytes(decode_event_json(line)) == line


def test_digests_are_sha256_and_64_lowercase_hex() -> None:
    digest = sha256_digest(b"abc")
    assert digest == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert digest == digest.lower() and len(digest) == len("sha256:") + 64


def _lp(data: bytes) -> bytes:
    return struct.pack(">Q", len(data)) + data


def test_prefix_digest_follows_the_length_prefixed_layout() -> None:
    events = clean_ledger(2)
    identity = {key: events[0][key] for key in ("sessionId", "invocationId", "runId", "turnId")}
    rows = [(seq, canonical_bytes(event)) for seq, event in enumerate(events, start=1)]
    hasher = hashlib.sha256(_lp(b"maka.runtime-prefix.v1"))
    hasher.update(_lp(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()))
    for seq, payload in rows:
        hasher.update(struct.pack(">Q", seq) + _lp(payload))
    assert prefix_digest(identity, rows) == "sha256:" + hasher.hexdigest()
    with pytest.raises(CanonicalEncodeError, match="gap"):
        prefix_digest(identity, [rows[0], rows[2]])


# ---- properties -------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES)
def test_canonical_bytes_equal_the_rfc8785_package(value: Any) -> None:
    assert canonical_json_bytes(value) == rfc8785.dumps(value)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["\ue000", "\uffff", "\U0001f600", "a", "\u00e9"]), st.none())
)
def test_keys_sort_in_utf16_order_not_code_point_order(value: dict[str, None]) -> None:
    encoded = canonical_json_bytes(value)
    keys = list(json.loads(encoded))
    assert keys == sorted(value, key=lambda key: key.encode("utf-16-be"))


@settings(max_examples=300, deadline=None)
@given(EVENTS)
def test_decoding_the_canonical_bytes_gives_the_event_back(event: dict[str, Any]) -> None:
    decoded = decode_event(event)
    assert decoded == event
    encoded = canonical_bytes(decoded)
    again = decode_event_json(encoded)
    assert again == event
    assert canonical_bytes(again) == encoded


# ---- strict decoding --------------------------------------------------------------------------


def _event() -> dict[str, Any]:
    return dict(call_event())


def _error(value: Any) -> EventDecodeError:
    with pytest.raises(EventDecodeError) as caught:
        decode_event(value)
    return caught.value


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"colour": "red"}, "colour"),
        ({"content": {"providerOptions": {}}}, "content.providerOptions"),
        ({"refs": {"parentToolCallId": "x"}}, "refs.parentToolCallId"),
        ({"actions": {"transferToAgent": "x"}}, "actions.transferToAgent"),
        ({"branch": "b"}, "branch"),
        ({"origin": "provider"}, "origin"),
    ],
)
def test_unknown_keys_are_rejected_naming_the_field(changes: dict[str, Any], field: str) -> None:
    error = _error(with_changes(_event(), **changes))
    assert error.field == field
    assert "unknown key" in error.message


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"ts": "1"}, "ts"),
        ({"ts": 1.0}, "ts"),
        ({"ts": -1}, "ts"),
        ({"partial": 0}, "partial"),
        ({"role": "assistant"}, "role"),
        ({"id": ""}, "id"),
        ({"content": {"name": 3}}, "content.name"),
        ({"refs": {"sourceRuntimeEventHighWater": "4"}}, "refs.sourceRuntimeEventHighWater"),
    ],
)
def test_wrong_types_are_rejected_naming_the_field(changes: dict[str, Any], field: str) -> None:
    assert _error(with_changes(_event(), **changes)).field == field


@pytest.mark.parametrize("key", ["status", "modelVisibility", "refs", "actions", "content"])
def test_null_for_an_absent_field_is_rejected(key: str) -> None:
    error = _error({**_event(), key: None})
    assert error.field == key
    assert "null" in error.message


def test_a_missing_required_key_is_named() -> None:
    event = _event()
    del event["turnId"]
    assert _error(event).field == "turnId"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (float("nan"), "content.args"),
        ([float("inf")], "content.args[0]"),
        ({"a": -float("inf")}, "content.args.a"),
        (2**53, "content.args"),
        (2.0**60, "content.args"),
        ([-(2**53)], "content.args[0]"),
        ({"k": "\ud800"}, "content.args.k"),
    ],
)
def test_unrepresentable_values_are_rejected_naming_the_field(args: Any, field: str) -> None:
    assert _error(with_changes(_event(), content={"args": args})).field == field


def test_a_lone_surrogate_in_an_envelope_string_is_rejected() -> None:
    assert _error(user_text() | {"turnId": "t\udc00"}).field == "turnId"


def test_a_huge_integral_float_is_kept_as_a_float_literal() -> None:
    event = decode_event(with_changes(_event(), content={"args": 1e21}))
    assert b'"args":1e+21' in canonical_bytes(event)


@pytest.mark.parametrize(
    ("args_text", "field"),
    [
        (b"NaN", "content.args"),
        (b"[Infinity]", "content.args[0]"),
        (b'{"a":-Infinity}', "content.args.a"),
        (b"9007199254740992", "content.args"),
        (b"1e400", "content.args"),
        (b"9007199254740993.0", "content.args"),
    ],
)
def test_json_text_with_unrepresentable_numbers_is_rejected(args_text: bytes, field: str) -> None:
    line = canonical_bytes(call_event(args=0)).replace(b'"args":0', b'"args":' + args_text)
    with pytest.raises(EventDecodeError) as caught:
        decode_event_json(line)
    assert caught.value.field == field


@pytest.mark.parametrize("escape", [b'"\\ud800"', b'"a\\udfffb"'])
def test_json_text_with_a_lone_surrogate_escape_is_rejected(escape: bytes) -> None:
    line = canonical_bytes(call_event(args=0)).replace(b'"args":0', b'"args":' + escape)
    with pytest.raises(EventDecodeError) as caught:
        decode_event_json(line)
    assert caught.value.code is DecodeCode.JSON_INVALID


def test_a_surrogate_pair_escape_is_one_astral_character() -> None:
    line = canonical_bytes(call_event(args=0)).replace(b'"args":0', b'"args":"\\ud83d\\ude00"')
    event = decode_event_json(line)
    assert event["content"]["args"] == "\U0001f600"  # type: ignore[typeddict-item]


def test_permission_closure_must_be_the_only_action() -> None:
    event = with_changes(
        user_text(),
        actions={
            "permissionClosure": {"requestId": "r", "reason": "timed_out"},
            "endInvocation": True,
        },
    )
    assert _error(event).field == "actions.permissionClosure"


def test_an_unknown_marker_value_does_not_decode() -> None:
    event = with_changes(user_text(), actions={"runtimeProtocol": {"toolBoundary": "v0"}})
    assert _error(event).field == "actions.runtimeProtocol.toolBoundary"


def test_canonical_bytes_refuse_what_json_cannot_carry() -> None:
    for bad in (float("nan"), 2**60, {"k": "\udc00"}, {1: "x"}, {1, 2}, b"x"):
        with pytest.raises(CanonicalEncodeError):
            canonical_json_bytes(bad)


def test_recovery_fact_version_other_than_one_does_not_decode() -> None:
    event: RuntimeEvent = with_changes(
        user_text(),
        actions={
            "toolRecovery": {"kind": "maka.tool.reconcile_result", "version": 999, "payload": {}}
        },
    )
    assert _error(event).field == "actions.toolRecovery.version"
