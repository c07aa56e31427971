"""Decoding a large ledger file on two cores (POSIX), for the read-only ledger tools.

Strict decoding is the largest single cost of ``maka ledger plan`` on a long run, and it is the
same work for every line, so it splits: the process forks, the child decodes the tail of the file
while the parent decodes the head and hands it to its consumer (the scan starts on the head while
the tail is still being decoded), then the child's events come back piece by piece through a
shared memory region in ``marshal`` form, which is several times cheaper to load than to decode.
The events are equal (same values, same types, same key order) to a serial decode, and every
error is the serial decode's error: the first bad line of the file, with its number, a torn last
line included.

Falls back to decoding serially, with the same results, when forking is unavailable or unsafe
(no ``os.fork``, other threads running), the file is small, or the child fails in any way. The
child never runs the parent's clean-up code: it leaves with ``os._exit``.
"""

from __future__ import annotations

import _thread
import contextlib
import marshal
import mmap
import os
import signal
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.ledger.event_model import RuntimeEvent, decode_event_lines, load_validator
from runtime.ledger.ledger_file import decode_lines, raise_line_error, split_lines

MIN_PARALLEL_BYTES = 4 << 20
"""Below this size forking costs more than the second core saves."""

PARENT_SHARE = 0.3
"""The fraction of the file (by bytes) the parent decodes itself. The parent also consumes every
piece (scans it) and loads the child's pieces, so its own share is the smaller one."""

CHILD_PIECE_LINES = 8192
"""The child hands its events over in pieces of this many lines, so the parent can scan one
piece while the child decodes the next."""

PARENT_SHARE_WITH_TAIL_WORK = 0.55
"""The parent's share when the child also does the consumer's work on its tail (``TailHooks``)."""

CUT_LOOKAHEAD_BYTES = 64 << 10
"""How far past the share point the cut may move to reach a ``TailHooks.start_marker`` line."""

Consumer = Callable[[list[RuntimeEvent]], None]


class TailWork(Protocol):
    """Work the child does on the tail's events, piece by piece, beside decoding them."""

    def feed(self, events: list[RuntimeEvent]) -> None: ...

    def summary(self) -> Any:
        """The result, as plain data ``marshal`` can carry."""


@dataclass(frozen=True, slots=True)
class TailHooks:
    """Lets a consumer move its own per-event work on the tail into the child.

    ``start(first_position)`` runs in the child and returns the work (``first_position``: how
    many events precede the tail); the child feeds it every tail piece and sends back its
    ``summary``, which the parent passes to ``take_summary``. Pieces the child decoded go to
    ``consume_tail`` instead of ``consume``; whatever the parent decodes itself (the head, and
    the rest of the tail if the child fails) goes to ``consume``. No summary arrives when the
    child fails or its work raises: the consumer then does the work itself."""

    start: Callable[[int], TailWork]
    consume_tail: Consumer
    take_summary: Callable[[Any], bool | None]
    start_marker: bytes | None = None
    """When set, the tail preferably starts at a line containing these bytes whose previous
    line contains none of ``start_not_after``, found within ``CUT_LOOKAHEAD_BYTES`` after the
    share point (a hint for where the work on the two parts splits cleanly; the decoded events
    are the same wherever the cut falls)."""
    start_not_after: tuple[bytes, ...] = ()
    defer_pieces: bool = False
    """When set, the child's pieces are loaded only when needed: when no summary came, or
    ``take_summary`` did not return True. A True answer means the summary stands for the
    whole tail: ``consume_tail`` is then never called."""
    head_consumed: Callable[[], None] | None = None
    """Called once the head went to ``consume`` and before waiting for the tail, so the
    consumer can work on the head while the child still works on the tail."""
    parent_share: float = PARENT_SHARE_WITH_TAIL_WORK
    """The fraction of the file (by bytes) this process decodes itself."""


def decode_ledger_pieces(
    data: bytes,
    consume: Consumer,
    *,
    parallel: bool | None = None,
    tail_hooks: TailHooks | None = None,
    linger: bool = False,
) -> int:
    """Decode every line of ``data`` strictly and pass the events to ``consume`` in file order,
    in consecutive pieces. Raises ``LedgerFileError`` at the first bad line exactly as
    ``ledger_file.read_ledger_events`` does; ``consume`` may have received earlier pieces by then.

    ``parallel``: None decides from the file size and the process state; False forces the serial
    decode; True forks whenever the platform and the process allow it (tests use it). Returns
    how many pieces were decoded (1 when decoded serially). ``tail_hooks``: see ``TailHooks``.

    ``linger``: for a caller that ends its process soon after: a child that finished normally
    is not waited for and the shared region is not unmapped here (unmapping tens of megabytes
    takes several milliseconds); both wait in ``_LINGERING`` for the next call, or for the end
    of the process, whose exit then waits for the child (``app.process_exit.exit_now``).
    """
    _release_lingering()
    share = PARENT_SHARE if tail_hooks is None else tail_hooks.parent_share
    cut = (
        _cut(data, parallel, share)
        if tail_hooks is None
        else _cut(data, parallel, share, tail_hooks.start_marker, tail_hooks.start_not_after)
    )
    if cut is None:
        return _decode_serially(data, consume)
    load_validator()  # once, before the fork: both processes decode with it
    region = mmap.mmap(-1, _capacity(len(data) - cut))
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        region.close()
        return _decode_serially(data, consume)
    if pid == 0:  # pragma: no cover - the child leaves through os._exit, coverage never sees it
        os.close(read_fd)
        _child(data, cut, region, write_fd, tail_hooks)
    os.close(write_fd)
    finished = False
    try:
        head = data[:cut].split(b"\n")
        head.pop()  # the head ends with a newline: its last part is empty
        consume(decode_lines(head, 1, True))
        if tail_hooks is not None and tail_hooks.head_consumed is not None:
            tail_hooks.head_consumed()
        outcome = _receive_tail(read_fd, region, consume, tail_hooks)
        finished = True
    finally:
        os.close(read_fd)
        if finished and outcome.complete and linger:
            _LINGERING.append((pid, region))
        else:
            _reap(pid, kill=not finished)
            region.close()
    if outcome.complete:
        return 1 + outcome.pieces
    tail, terminated = split_lines(data[cut:])
    tail_first_line = len(head) + 1
    if outcome.bad_line is not None:
        index = outcome.bad_line
        raise_line_error(tail_first_line + index, tail[index], index != len(tail) - 1 or terminated)
    # The child stopped early: decode what it did not send here, with the same result.
    done = outcome.lines_received
    consume(decode_lines(tail[done:], tail_first_line + done, terminated))
    return 2 + outcome.pieces


def _decode_serially(data: bytes, consume: Consumer) -> int:
    parts, terminated = split_lines(data)
    consume(decode_lines(parts, 1, terminated))
    return 1


def _cut(
    data: bytes,
    parallel: bool | None,
    share: float,
    marker: bytes | None = None,
    not_after: tuple[bytes, ...] = (),
) -> int | None:
    """The offset just after the newline that ends the parent's share, or None to decode
    serially. With ``marker``, the cut moves forward to the start of the first line within
    ``CUT_LOOKAHEAD_BYTES`` that holds ``marker`` and whose previous line holds none of
    ``not_after``, when there is one."""
    # ``_thread._count()``: other threads this interpreter started (a fork copies only the
    # calling thread, and a lock another thread held would stay held in the child). Read from
    # ``_thread``, which is built in, rather than ``threading``, to keep start-up lean.
    if parallel is False or not hasattr(os, "fork") or _thread._count() != 0:
        return None
    if parallel is None and len(data) < MIN_PARALLEL_BYTES:
        return None
    newline = data.find(b"\n", int(len(data) * share))
    if newline < 0 or newline + 1 >= len(data):
        return None
    if marker is not None:
        start, limit = newline + 1, newline + 1 + CUT_LOOKAHEAD_BYTES
        while (found := data.find(marker, start, limit)) >= 0:
            line_start = data.rfind(b"\n", newline, found) + 1
            previous = data[data.rfind(b"\n", 0, line_start - 1) + 1 : line_start]
            if not any(part in previous for part in not_after):
                return line_start
            start = data.find(b"\n", found) + 1
            if start == 0:
                break
    return newline + 1


def _capacity(tail_bytes: int) -> int:
    """Room for the child's marshalled events: JSON text marshals to about its own size (short
    numbers grow, quotes and punctuation go); a child that runs out says so and the parent
    decodes the rest. Untouched pages of the mapping cost nothing."""
    return 3 * tail_bytes + (1 << 20)


# Messages from the child: three little-endian int64 (kind, offset, length). The events of a
# piece are in the shared region at [offset, offset + length); the pipe only carries these
# small notices, so the child never waits for the parent.
_MESSAGE = struct.Struct("<qqq")
_PIECE, _BAD_LINE, _DONE, _STOPPED, _SUMMARY = 0, 1, 2, 3, 4


def _child(
    data: bytes, cut: int, region: mmap.mmap, write_fd: int, tail_hooks: TailHooks | None
) -> None:  # pragma: no cover - runs in the child
    """Decode ``data[cut:]`` piece by piece into ``region``, announcing each piece, then send the
    tail work's summary."""
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        parts, _ = split_lines(data[cut:])
        work = tail_hooks.start(data.count(b"\n", 0, cut)) if tail_hooks is not None else None
        offset = 0
        for start in range(0, len(parts), CHILD_PIECE_LINES):
            piece = parts[start : start + CHILD_PIECE_LINES]
            events, stopped = decode_event_lines(piece)
            if stopped < len(piece):
                _send(write_fd, _BAD_LINE, start + stopped, 0)
                work = None
                break
            offset = _put(region, offset, events, write_fd, _PIECE)
            if offset < 0:
                work = None
                break
            if work is not None:
                work.feed(events)
        else:
            if work is not None:
                with contextlib.suppress(Exception):
                    _put(region, offset, work.summary(), write_fd, _SUMMARY)
            _send(write_fd, _DONE, 0, 0)
        status = 0
    finally:
        os._exit(status)


def _put(
    region: mmap.mmap, offset: int, value: Any, write_fd: int, kind: int
) -> int:  # pragma: no cover - runs in the child
    """Write ``value`` marshalled at ``offset`` and announce it; the next free offset, or -1
    (after telling the parent) when the region is full."""
    payload = marshal.dumps(value)
    end = offset + len(payload)
    if end > len(region):
        _send(write_fd, _STOPPED, 0, 0)
        return -1
    region[offset:end] = payload
    _send(write_fd, kind, offset, len(payload))
    return end


def _send(write_fd: int, kind: int, offset: int, length: int) -> None:  # pragma: no cover
    os.write(write_fd, _MESSAGE.pack(kind, offset, length))  # atomic: far below PIPE_BUF


@dataclass(slots=True)
class _TailOutcome:
    complete: bool = False
    bad_line: int | None = None
    """Index, within the tail, of the first line that does not decode."""
    lines_received: int = 0
    pieces: int = 0


def _receive_tail(
    read_fd: int, region: mmap.mmap, consume: Consumer, tail_hooks: TailHooks | None
) -> _TailOutcome:
    """Consume the child's pieces as they are announced (or, deferring them, once it is clear
    they are needed), until the child is done, reports a bad line, or stops or dies (the outcome
    then says how many tail lines arrived)."""
    outcome = _TailOutcome()
    consume_tail = consume if tail_hooks is None else tail_hooks.consume_tail
    defer = tail_hooks is not None and tail_hooks.defer_pieces
    deferred: list[tuple[int, int]] = []
    covered = False
    view = memoryview(region)
    try:
        while True:
            message = _read_message(read_fd)
            if message is None:
                break
            kind, offset, length = message
            if kind == _DONE:
                outcome.complete = True
                break
            if kind == _BAD_LINE:
                outcome.bad_line = offset
                return outcome
            if kind not in (_PIECE, _SUMMARY):
                break
            if kind == _PIECE and defer:
                deferred.append((offset, length))
                continue
            try:
                value: Any = marshal.loads(view[offset : offset + length])
            except (EOFError, ValueError, TypeError):
                outcome.complete = False
                break
            if kind == _SUMMARY:
                if tail_hooks is not None:
                    covered = tail_hooks.take_summary(value) is True
                continue
            consume_tail(value)
            outcome.lines_received += len(value)
            outcome.pieces += 1
        if outcome.complete and covered and deferred:
            outcome.pieces += len(deferred)
            return outcome
        for offset, length in deferred:  # needed after all: load them, in order
            try:
                piece: Any = marshal.loads(view[offset : offset + length])
            except (EOFError, ValueError, TypeError):
                outcome.complete = False
                return outcome
            consume_tail(piece)
            outcome.lines_received += len(piece)
            outcome.pieces += 1
        return outcome
    finally:
        view.release()


def _read_message(read_fd: int) -> tuple[int, int, int] | None:
    received = b""
    while len(received) < _MESSAGE.size:
        chunk = os.read(read_fd, _MESSAGE.size - len(received))
        if not chunk:
            return None
        received += chunk
    kind, offset, length = _MESSAGE.unpack(received)
    return kind, offset, length


_LINGERING: list[tuple[int, mmap.mmap]] = []
"""Finished children not yet waited for, with their shared regions (``linger``)."""


def _release_lingering() -> None:
    while _LINGERING:
        pid, region = _LINGERING.pop()
        _reap(pid, kill=False)
        region.close()


def _reap(pid: int, *, kill: bool) -> None:
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except InterruptedError:
            continue
        except ChildProcessError:
            return
