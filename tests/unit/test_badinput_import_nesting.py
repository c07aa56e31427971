"""``maka import`` of a file whose lines nest arrays or objects deeply: the line is refused with
``import_line_invalid`` and its number, never a ``RecursionError``; a record line (session, run
header, claim, branch, snapshots) nested deeper than ``MAX_RECORD_DEPTH`` is refused before
anything walks it."""

from __future__ import annotations

import json

import pytest

from runtime.ledger.codes import TransferCode
from storage.sessions.session_export import MAX_RECORD_DEPTH, TransferError, parse_export

SESSION = {
    "createdAt": 1,
    "cwd": "/tmp/work",
    "kind": "maka.session.v1",
    "sessionId": "sess-d",
    "title": "t",
}


def _line(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def _arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def _objects(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _refused(data: bytes) -> TransferError:
    with pytest.raises(TransferError) as caught:
        parse_export(data)
    assert caught.value.code == TransferCode.IMPORT_LINE_INVALID
    return caught.value


@pytest.mark.parametrize("deep", [_arrays(3000), _objects(3000), _arrays(100_000)])
def test_a_line_too_deep_for_the_decoder_is_an_invalid_line(deep: str) -> None:
    error = _refused(deep.encode() + b"\n")
    assert error.line == 1
    assert "json_invalid" in error.message


@pytest.mark.parametrize("deep", [_arrays(3000), _objects(3000)])
def test_a_deep_value_in_a_later_record_line_names_that_line(deep: str) -> None:
    fact = '{"createdAt":1,"fact":{"deep":' + deep + '},"kind":"maka.branch_start.v1"}'
    error = _refused(_line(SESSION) + b"\n" + fact.encode() + b"\n")
    assert error.line == 2


@pytest.mark.parametrize("make", [_arrays, _objects])
@pytest.mark.parametrize("depth", [MAX_RECORD_DEPTH, 900])
def test_a_record_nested_deeper_than_the_limit_is_refused(make: object, depth: int) -> None:
    """Deep enough that the JSON decoder reads it, too deep for a record: refused by name."""
    assert callable(make)
    session = _line(SESSION)[:-1] + b',"x":' + str(make(depth)).encode() + b"}"
    error = _refused(session + b"\n")
    assert error.line == 1
    assert f"nested deeper than {MAX_RECORD_DEPTH} levels" in error.message


def test_each_record_kind_is_bounded() -> None:
    deep = _arrays(MAX_RECORD_DEPTH)
    branch = (
        '{"createdAt":1,"fact":{"protocol":"branch_start_v1","sessionId":"sess-d","source":'
        '{"sessionId":"sess-s","runId":"r","boundaryEventId":"e","prefixDigest":"d",'
        '"highWater":1},"x":' + deep + '},"kind":"maka.branch_start.v1"}'
    )
    error = _refused(_line(SESSION) + b"\n" + branch.encode() + b"\n")
    assert error.line == 2 and "maka.branch_start.v1 record nested deeper" in error.message
    snapshots = (
        '{"bundle":"b","bytes":1,"kind":"maka.checkpoints.v1","refs":' + deep + ',"sha256":"s"}'
    )
    error = _refused(_line(SESSION) + b"\n" + snapshots.encode() + b"\n")
    assert error.line == 2 and "maka.checkpoints.v1 record nested deeper" in error.message


def test_records_as_deep_as_maka_writes_them_still_parse() -> None:
    """The limit leaves every record Maka writes alone (a session line here)."""
    parsed = parse_export(_line(SESSION) + b"\n")
    assert parsed.session.session_id == "sess-d"
