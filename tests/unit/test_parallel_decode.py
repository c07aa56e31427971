"""The two-core ledger decoder gives exactly what the serial decoder gives: the same events in the
same order, or the same first error (code, line number, field), a torn tail included, and it
leaves no child process behind, whatever the child does."""

from __future__ import annotations

import json
import marshal
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.fastplan import parallel_decode, tail_scan
from runtime.fastplan.parallel_decode import decode_ledger_pieces
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.ledger_file import LedgerFileError, read_ledger_events
from runtime.ledger.tool_ledger_scanner import scan_tool_ledger
from tests.helpers.ledger_builders import ENDINGS, clean_ledger, to_jsonl

# A few hundred lines of every kind of tool fact; small pieces make the child send several.
LEDGER = to_jsonl(clean_ledger(len(ENDINGS) * 12))
LINES = LEDGER.split(b"\n")[:-1]


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(parallel_decode, "CHILD_PIECE_LINES", 17)
    yield
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # every child was reaped


def decode(data: bytes, *, parallel: bool = True) -> tuple[list[RuntimeEvent], int]:
    received: list[RuntimeEvent] = []
    pieces = decode_ledger_pieces(data, received.extend, parallel=parallel)
    return received, pieces


def error_of(data: bytes, *, parallel: bool) -> tuple[str, int, str, str]:
    with pytest.raises(LedgerFileError) as caught:
        decode(data, parallel=parallel)
    error = caught.value
    return str(error.code), error.line_number, error.field, error.message


def _child_dies_after(monkeypatch: pytest.MonkeyPatch, sends: int) -> None:
    """Make the child end abruptly (exit 9) once it has sent ``sends`` messages."""
    real_send = parallel_decode._send
    sent = {"count": 0}

    def send_then_die(write_fd: int, kind: int, offset: int, length: int) -> None:
        if sent["count"] == sends:
            os._exit(9)
        sent["count"] += 1
        real_send(write_fd, kind, offset, length)

    monkeypatch.setattr(parallel_decode, "_send", send_then_die)


def test_the_events_equal_the_serial_decode_with_the_same_types_and_key_order() -> None:
    events, pieces = decode(LEDGER)
    assert pieces > 2  # the parent's head and several pieces from the child
    serial = read_ledger_events(LEDGER)
    assert events == serial
    assert [json.dumps(event) for event in events] == [json.dumps(event) for event in serial]


def test_a_small_file_is_decoded_serially_unless_forced() -> None:
    assert len(LEDGER) < parallel_decode.MIN_PARALLEL_BYTES
    received: list[RuntimeEvent] = []
    assert decode_ledger_pieces(LEDGER, received.extend) == 1
    assert received == read_ledger_events(LEDGER)
    assert decode(LEDGER, parallel=False)[1] == 1


def test_a_lingering_child_is_waited_for_by_the_next_decode() -> None:
    received: list[RuntimeEvent] = []
    assert decode_ledger_pieces(LEDGER, received.extend, parallel=True, linger=True) > 2
    assert received == read_ledger_events(LEDGER)
    ((pid, region),) = parallel_decode._LINGERING
    assert not region.closed
    decode(LEDGER, parallel=False)
    assert parallel_decode._LINGERING == [] and region.closed
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped


def test_a_process_running_other_threads_never_forks() -> None:
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert decode(LEDGER)[1] == 1
    finally:
        release.set()
        other.join()
    assert decode(LEDGER)[1] > 2


@pytest.mark.parametrize(
    ("where", "bad"),
    [
        (3, b'{"id":"x"}'),  # in the parent's head: a required key is missing
        (len(LINES) // 2, b"{not json"),  # in the child's tail
        (len(LINES) - 5, b""),  # an empty line in the tail
        (len(LINES) - 5, LINES[7].replace(b'"partial":false', b'"partial":"no"')),
    ],
)
def test_a_bad_line_is_the_serial_decoders_error_with_its_line_number(
    where: int, bad: bytes
) -> None:
    lines = list(LINES)
    lines[where] = bad
    data = b"".join(line + b"\n" for line in lines)
    expected = error_of(data, parallel=False)
    assert expected[1] == where + 1
    assert error_of(data, parallel=True) == expected


def test_only_the_first_of_two_bad_lines_is_reported() -> None:
    lines = list(LINES)
    lines[len(lines) // 2] = b"[]"
    lines[len(lines) - 2] = b"{"
    data = b"".join(line + b"\n" for line in lines)
    assert error_of(data, parallel=True) == error_of(data, parallel=False)
    assert error_of(data, parallel=True)[1] == len(lines) // 2 + 1


def test_a_torn_last_line_is_reported_as_torn() -> None:
    data = LEDGER + LINES[4][:20]
    expected = error_of(data, parallel=False)
    assert expected[0] == "torn_last_line"
    assert error_of(data, parallel=True) == expected


def test_a_last_line_without_newline_that_decodes_is_accepted() -> None:
    data = LEDGER[:-1]
    assert decode(data)[0] == read_ledger_events(data)


def test_a_child_that_cannot_send_leaves_the_parent_to_decode_the_tail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(value: Any) -> bytes:
        raise ValueError("no marshalling in this child")

    monkeypatch.setattr(marshal, "dumps", broken)  # the child marshals with this module
    events, pieces = decode(LEDGER)
    assert events == read_ledger_events(LEDGER)
    assert pieces == 2  # the head, then the whole tail decoded by the parent


def test_a_child_that_runs_out_of_room_hands_over_what_it_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Marshalled events take about half their JSON size here: room for a part of the tail only.
    assert len(marshal.dumps(read_ledger_events(LEDGER))) > len(LEDGER) // 4
    monkeypatch.setattr(parallel_decode, "_capacity", lambda tail_bytes: tail_bytes // 4)
    events, pieces = decode(LEDGER)
    assert events == read_ledger_events(LEDGER)
    assert 3 <= pieces < 2 + len(LINES) // 17  # some pieces came from the child, not all


def test_a_child_killed_midway_changes_nothing_but_the_speed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _child_dies_after(monkeypatch, 2)
    events, pieces = decode(LEDGER)
    assert events == read_ledger_events(LEDGER)
    assert pieces == 4  # the head, two pieces from the child, the rest decoded here


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(min_value=2, max_value=len(LINES)),
    broken=st.one_of(st.none(), st.tuples(st.integers(min_value=0), st.sampled_from([b"{", b"1"]))),
    share=st.floats(min_value=0.05, max_value=0.95),
    newline_at_end=st.booleans(),
)
def test_any_file_any_split_decodes_as_the_serial_decoder_does(
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    broken: tuple[int, bytes] | None,
    share: float,
    newline_at_end: bool,
) -> None:
    monkeypatch.setattr(parallel_decode, "PARENT_SHARE", share)
    lines = list(LINES[:count])
    if broken is not None:
        lines[broken[0] % count] = broken[1]
    data = b"\n".join(lines) + (b"\n" if newline_at_end else b"")
    try:
        expected: Any = read_ledger_events(data)
    except LedgerFileError as error:
        expected = (str(error.code), error.line_number, error.field, error.message)
        assert error_of(data, parallel=True) == expected
    else:
        assert decode(data)[0] == expected


class _CountingWork:
    """Tail work that records what the child fed it."""

    def __init__(self, first_position: int) -> None:
        self.first_position = first_position
        self.ids: list[str] = []

    def feed(self, events: list[RuntimeEvent]) -> None:
        self.ids.extend(event["id"] for event in events)

    def summary(self) -> Any:
        return (self.first_position, self.ids)


class _Hooked:
    def __init__(self) -> None:
        self.head: list[RuntimeEvent] = []
        self.tail: list[RuntimeEvent] = []
        self.summaries: list[Any] = []

    def hooks(self) -> parallel_decode.TailHooks:
        return parallel_decode.TailHooks(_CountingWork, self.tail.extend, self.summaries.append)


def test_tail_work_runs_in_the_child_on_exactly_the_pieces_it_sent() -> None:
    hooked = _Hooked()
    hooks = hooked.hooks()
    pieces = decode_ledger_pieces(LEDGER, hooked.head.extend, parallel=True, tail_hooks=hooks)
    assert pieces > 2
    assert hooked.head + hooked.tail == read_ledger_events(LEDGER)
    assert hooked.head and hooked.tail
    assert hooked.summaries == [(len(hooked.head), [event["id"] for event in hooked.tail])]


def test_no_summary_comes_from_a_child_that_dies_and_the_rest_is_decoded_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _child_dies_after(monkeypatch, 1)
    hooked = _Hooked()
    decode_ledger_pieces(LEDGER, hooked.head.extend, parallel=True, tail_hooks=hooked.hooks())
    assert hooked.summaries == []
    assert len(hooked.tail) == 17  # one piece came from the child; the rest went to ``consume``
    events = read_ledger_events(LEDGER)
    assert len(hooked.head) + len(hooked.tail) == len(events)
    assert sorted(map(json.dumps, hooked.head + hooked.tail)) == sorted(map(json.dumps, events))


def test_tail_work_that_raises_sends_no_summary_and_changes_no_event() -> None:
    class Broken(_CountingWork):
        def summary(self) -> Any:
            raise ValueError("no summary")

    hooked = _Hooked()
    hooks = parallel_decode.TailHooks(Broken, hooked.tail.extend, hooked.summaries.append)
    decode_ledger_pieces(LEDGER, hooked.head.extend, parallel=True, tail_hooks=hooks)
    assert hooked.summaries == []
    assert hooked.head + hooked.tail == read_ledger_events(LEDGER)


def test_the_tail_starts_at_the_next_line_holding_the_start_marker() -> None:
    share = parallel_decode.PARENT_SHARE_WITH_TAIL_WORK
    plain = parallel_decode._cut(LEDGER, True, share)
    assert plain is not None and LEDGER[plain - 1 : plain] == b"\n"
    marked = parallel_decode._cut(LEDGER, True, share, b'"function_call"')
    assert marked is not None and LEDGER[marked - 1 : marked] == b"\n"
    assert b'"function_call"' in LEDGER[marked : LEDGER.index(b"\n", marked)]
    assert b'"function_call"' not in LEDGER[plain:marked]
    # No marker line within reach: the plain cut.
    assert parallel_decode._cut(LEDGER, True, share, b"no such bytes") == plain
    hooked = _Hooked()
    hooks = parallel_decode.TailHooks(
        _CountingWork, hooked.tail.extend, hooked.summaries.append, b'"function_call"'
    )
    decode_ledger_pieces(LEDGER, hooked.head.extend, parallel=True, tail_hooks=hooks)
    assert hooked.head + hooked.tail == read_ledger_events(LEDGER)
    assert hooked.tail[0]["content"]["kind"] == "function_call"


def test_the_tail_does_not_start_at_a_call_that_follows_a_call_or_a_dispatch() -> None:
    """Batched steps (two calls, their dispatches, their responses): the cut never lands on a
    step's second call, which follows the first; it lands on a step's first call."""
    lines = [b'{"n":0,"k":"text"}']
    for step in range(1, 40):
        lines += [
            b'{"n":%d,"k":"function_call","c":1}' % step,
            b'{"n":%d,"k":"function_call","c":2}' % step,
            b'{"n":%d,"a":"toolDispatch","c":1}' % step,
            b'{"n":%d,"a":"toolDispatch","c":2}' % step,
            b'{"n":%d,"k":"function_response","c":1}' % step,
            b'{"n":%d,"k":"function_response","c":2}' % step,
        ]
    data = b"".join(line + b"\n" for line in lines)
    marker, not_after = tail_scan.TAIL_START_MARKER, tail_scan.TAIL_START_NOT_AFTER
    for share in (index / 400 for index in range(20, 380)):  # every line is passed
        cut = parallel_decode._cut(data, True, share, marker, not_after)
        assert cut is not None
        first_line = data[cut : data.index(b"\n", cut)]
        assert first_line.endswith(b'"function_call","c":1}'), (share, first_line)
        assert cut >= data.find(b"\n", int(len(data) * share)) + 1


@pytest.mark.parametrize("die_after", [None, 0, 2])
def test_the_ledger_report_scans_every_event_once_in_file_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, die_after: int | None
) -> None:
    """The report's reading adopts the child's tail scan, or scans what the child sent before
    what this process decoded after the child died: either way the scan of the whole file."""
    from app.commands import ledger_report

    monkeypatch.setattr(parallel_decode, "MIN_PARALLEL_BYTES", 0)
    if die_after is not None:
        _child_dies_after(monkeypatch, die_after)
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(LEDGER)
    document = ledger_report.read_and_build(path, lambda events, scan: {"e": events, "s": scan})
    events = read_ledger_events(LEDGER)
    assert document["e"] == events
    expected = scan_tool_ledger(events)
    assert document["s"] == expected
    assert [dict(op.event_positions) for op in document["s"].operations] == [
        dict(op.event_positions) for op in expected.operations
    ]
