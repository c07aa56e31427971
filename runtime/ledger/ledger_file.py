"""JSONL ledger files: one RuntimeEvent per line, canonical bytes, each line ending in ``\\n``.

Reading is strict and precise: every problem names its line (1-based) and, for a decoding error,
the field. A last line without its newline that does not decode is a *torn* tail (a write that
was cut short), reported as ``torn_last_line`` so an importer can offer to drop it; a last line
without newline that does decode is accepted. ``check_ledger_bytes`` goes further and lists
everything that keeps a decodable file from being a clean ledger: lines that are not canonical
bytes, scanner issues (lane conflicts included) and invalid recovery tails, each at the line of
the event concerned.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NoReturn

from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.codes import LedgerFileCode, ScanIssueCode
from runtime.ledger.collector_pause import collector_paused
from runtime.ledger.event_model import RuntimeEvent, decode_event_json, decode_event_lines
from runtime.ledger.file_names import file_kind
from runtime.ledger.lane_rules import LaneConflict, classify_lane
from runtime.ledger.ledger_errors import DecodeCode, EventDecodeError, LedgerError
from runtime.ledger.tool_ledger_scanner import ToolLedgerScanner
from runtime.ledger.workspace_facts import workspace_fact_problem

LineCode = LedgerFileCode | DecodeCode


class LedgerFileError(LedgerError):
    """A ledger file that cannot be read as a sequence of events (names the line)."""

    def __init__(self, code: LineCode, message: str, line_number: int = 0, field: str = "") -> None:
        where = f"line {line_number}: " if line_number else ""
        super().__init__(code, where + message)
        self.detail = message
        self.line_number = line_number
        self.field = field


@dataclass(frozen=True, slots=True)
class LedgerLine:
    line_number: int
    raw: bytes
    """The line's bytes without its newline."""
    event: RuntimeEvent


@dataclass(frozen=True, slots=True)
class LedgerFileContent:
    lines: tuple[LedgerLine, ...]
    torn_tail_bytes: int = 0
    """Bytes of a torn last line that were dropped (only with ``accept_torn_tail``)."""


def _segments(data: bytes) -> list[tuple[int, bytes, bool]]:
    """``(line number, bytes, ended by a newline)`` for every line of ``data``."""
    parts = data.split(b"\n")
    segments = [(index + 1, part, True) for index, part in enumerate(parts[:-1])]
    if parts[-1]:
        segments.append((len(parts), parts[-1], False))
    return segments


def _decode_line(line_number: int, raw: bytes, terminated: bool) -> RuntimeEvent:
    if not raw.strip():
        raise LedgerFileError(LedgerFileCode.EMPTY_LINE, "empty line", line_number)
    try:
        return decode_event_json(raw)
    except EventDecodeError as error:
        if not terminated:
            raise LedgerFileError(
                LedgerFileCode.TORN_LAST_LINE,
                f"the last line has no newline and does not decode ({error.message})",
                line_number,
                error.field,
            ) from None
        code = error.code if isinstance(error.code, DecodeCode) else DecodeCode.JSON_INVALID
        raise LedgerFileError(code, error.message, line_number, error.field) from None


def read_ledger_bytes(data: bytes, *, accept_torn_tail: bool = False) -> LedgerFileContent:
    """Decode every line of ``data``; raises ``LedgerFileError`` at the first bad line.

    With ``accept_torn_tail`` a torn last line is dropped and counted instead of refused.
    """
    lines: list[LedgerLine] = []
    with collector_paused():
        for line_number, raw, terminated in _segments(data):
            try:
                event = _decode_line(line_number, raw, terminated)
            except LedgerFileError as error:
                if accept_torn_tail and error.code is LedgerFileCode.TORN_LAST_LINE:
                    return LedgerFileContent(tuple(lines), len(raw))
                raise
            lines.append(LedgerLine(line_number, raw, event))
    return LedgerFileContent(tuple(lines))


def read_ledger_events(data: bytes) -> list[RuntimeEvent]:
    """The events of every line of ``data``, decoded strictly; raises ``LedgerFileError`` at the
    first bad line exactly as ``read_ledger_bytes`` does (no torn tail is accepted). Cheaper when
    only the events are needed: no ``LedgerLine`` per line."""
    parts, last_terminated = split_lines(data)
    return decode_lines(parts, 1, last_terminated)


def split_lines(data: bytes) -> tuple[list[bytes], bool]:
    """The lines of ``data`` without their newlines, and whether the last one had its newline."""
    parts = data.split(b"\n")
    terminated = not parts[-1]
    if terminated:
        parts.pop()
    return parts, terminated


def decode_lines(
    parts: list[bytes], first_line_number: int, last_terminated: bool
) -> list[RuntimeEvent]:
    """Decode consecutive lines of a file, the first being line ``first_line_number``; raises
    ``LedgerFileError`` for the first bad one (``last_terminated``: whether the last of
    ``parts`` ended with a newline, which decides whether a bad last line is a torn tail)."""
    with collector_paused():
        events, stopped = decode_event_lines(parts)
    if stopped < len(parts):
        raise_line_error(
            first_line_number + stopped,
            parts[stopped],
            stopped != len(parts) - 1 or last_terminated,
        )
    return events


def raise_line_error(line_number: int, raw: bytes, terminated: bool) -> NoReturn:
    """Raise the ``LedgerFileError`` of a line the batch decoder refused."""
    _decode_line(line_number, raw, terminated)
    raise AssertionError(f"line {line_number} was refused in a batch but decodes alone")


MAX_LINE_BYTES = 64 << 20
"""The longest line a ledger file may hold (64 MiB, as an export's): far more than any event
(a tool's result is capped at 128 KiB); a reader that goes a block at a time stops there instead
of holding an endless line in memory."""


def open_ledger_file(path: Path) -> BinaryIO:
    """``path`` open for reading: a regular file or a pipe (``<(...)``). A device (``/dev/zero``
    would be read for ever), a folder or a socket is refused before anything is read
    (``ledger_file_unreadable``), as is a file that cannot be opened."""
    try:
        _refuse_special(path, os.stat(path).st_mode)  # (a folder or a socket cannot be opened)
        file = path.open("rb")
        mode = os.fstat(file.fileno()).st_mode
    except OSError as error:
        raise LedgerFileError(
            LedgerFileCode.LEDGER_FILE_UNREADABLE, f"cannot read {path}: {error.strerror}"
        ) from None
    try:
        _refuse_special(path, mode)
    except LedgerFileError:
        file.close()
        raise
    return file


def _refuse_special(path: Path, mode: int) -> None:
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise LedgerFileError(
            LedgerFileCode.LEDGER_FILE_UNREADABLE,
            f"cannot read {path}: it is {file_kind(mode)}, not a ledger file",
        )


def read_file_bytes(path: Path) -> bytes:
    with open_ledger_file(path) as file:
        try:
            return file.read()
        except OSError as error:
            raise LedgerFileError(
                LedgerFileCode.LEDGER_FILE_UNREADABLE, f"cannot read {path}: {error.strerror}"
            ) from None


def read_ledger_file(path: Path, *, accept_torn_tail: bool = False) -> LedgerFileContent:
    return read_ledger_bytes(read_file_bytes(path), accept_torn_tail=accept_torn_tail)


# ---- checking ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LedgerProblem:
    line_number: int
    code: str
    message: str
    event_id: str | None = None
    field: str | None = None


@dataclass(frozen=True, slots=True)
class LedgerCheckReport:
    event_count: int
    problems: tuple[LedgerProblem, ...]
    unreadable: bool
    """True when some line does not decode; ``problems`` then lists only the decoding errors,
    since facts read around a hole would mislead."""

    @property
    def clean(self) -> bool:
        return not self.problems


def check_ledger_bytes(data: bytes) -> LedgerCheckReport:
    with collector_paused():
        return _check_bytes(data)


def _check_bytes(data: bytes) -> LedgerCheckReport:
    decode_problems: list[LedgerProblem] = []
    lines: list[LedgerLine] = []
    for line_number, raw, terminated in _segments(data):
        try:
            lines.append(LedgerLine(line_number, raw, _decode_line(line_number, raw, terminated)))
        except LedgerFileError as error:
            decode_problems.append(
                LedgerProblem(line_number, str(error.code), error.detail, None, error.field or None)
            )
    if decode_problems:
        return LedgerCheckReport(len(lines), tuple(decode_problems), unreadable=True)
    return LedgerCheckReport(len(lines), _check_lines(lines), unreadable=False)


def _check_lines(lines: list[LedgerLine]) -> tuple[LedgerProblem, ...]:
    problems: list[tuple[int, int, LedgerProblem]] = []
    first_line: dict[str, int] = {}
    scanner = ToolLedgerScanner()

    def add(line_number: int, problem: LedgerProblem) -> None:
        problems.append((line_number, len(problems), problem))

    for line in lines:
        event_id = line.event["id"]
        first_line.setdefault(event_id, line.line_number)
        try:
            canonical = canonical_bytes(line.event) == line.raw
        except LedgerError:
            canonical = False
        if not canonical:
            add(
                line.line_number,
                LedgerProblem(
                    line.line_number,
                    str(DecodeCode.NOT_CANONICAL),
                    "the line is not the event's canonical bytes",
                    event_id,
                ),
            )
        for issue in scanner.feed(line.event):
            at = line.line_number if issue.event_id == event_id else first_line[issue.event_id]
            message = ", ".join(
                f"{name} {value}"
                for name, value in (
                    ("tool call", issue.tool_call_id),
                    ("operation", issue.operation_id),
                )
                if value is not None
            )
            if issue.code is ScanIssueCode.WORKSPACE_FACT_MALFORMED:
                message = workspace_fact_problem(line.event) or message
            if issue.code is ScanIssueCode.SEMANTIC_LANE_CONFLICT:
                lane = classify_lane(line.event)
                if isinstance(lane, LaneConflict):
                    message = lane.reason
            add(at, LedgerProblem(at, str(issue.code), message, issue.event_id))
    # Imported here, not at the top: the other ledger tools read files through this module and
    # never need the bundle rules at start-up.
    from runtime.ledger.recovery_bundle import RecoveryCorruption, interpret_scanned_recovery

    for op in scanner.result().operations:
        meaning = interpret_scanned_recovery(op)
        if isinstance(meaning, RecoveryCorruption):
            facts = op.decision_events or op.reconcile_events
            fact_id = facts[0]["id"]
            at = first_line[fact_id]
            add(at, LedgerProblem(at, str(meaning.code), meaning.message, fact_id))
    problems.sort(key=lambda item: (item[0], item[1]))
    return tuple(problem for _, _, problem in problems)


def check_ledger_file(path: Path) -> LedgerCheckReport:
    """Check a ledger file; raises ``LedgerFileError`` only when the file cannot be read."""
    return check_ledger_bytes(read_file_bytes(path))
