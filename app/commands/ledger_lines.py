"""The lines of a ledger file named in the ledger tools' messages.

A line that is one of ``maka export``'s own records (the session line, a run header, a
continuation claim) is named as such instead of the decoder's complaint about a missing ``id``;
its code stays the decoder's. Used by ``maka ledger check`` (``ledger_cmd``) and by ``scan`` and
``plan`` (``ledger_report``, ``ledger_plan_parts``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli_errors import EXIT_USAGE, CliError

if TYPE_CHECKING:
    from runtime.ledger.ledger_file import LedgerFileError

EMPTY_LEDGER_MESSAGE = "the run has no events"
"""Why a ledger without events is refused (``runtime_ledger_empty``, an error): as Safe resume
parks a stored run without events, ``plan`` and ``timeline`` block it and ``check`` and ``scan``
report it."""

# The lines of a ``maka export`` file that are not RuntimeEvents, as
# ``storage.sessions.session_export``
# writes them (not imported from there: the ledger tools never load the storage package).
EXPORT_RECORDS = {
    "maka.session.v1": "a session export record",
    "maka.run_header.v1": "a run header export record",
    "maka.continuation_claim.v1": "a continuation claim export record",
    "maka.checkpoints.v1": "the export's record of its snapshots file",
    "maka.branch_start.v1": "a branch's start export record",
}


def export_record_kind(raw: bytes) -> str | None:
    """The ``kind`` of an export record line (``EXPORT_RECORDS``), else None. Called only for a
    line that did not decode as a RuntimeEvent."""
    if b'"kind"' not in raw:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past any record
        return None
    kind = value.get("kind") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) and kind in EXPORT_RECORDS else None


def export_record_message(line_number: int, kind: str) -> str:
    return (
        f"line {line_number} is {EXPORT_RECORDS[kind]} ({kind}), not a RuntimeEvent: ledger tools"
        " read one run's events; `maka import` reads export files"
    )


def file_line(path: Path, line_number: int) -> bytes | None:
    """Line ``line_number`` (1-based) of ``path`` without its newline; None when it cannot be
    read. For error messages only: it reads the file again."""
    from itertools import islice

    try:
        with path.open("rb") as file:
            for raw in islice(file, line_number - 1, line_number):
                return raw.rstrip(b"\n")
    except OSError:
        return None
    return None


def reading_error(path: Path, error: LedgerFileError) -> CliError:
    """The exit-2 refusal of a file that cannot be read or has a line that does not decode:
    ``maka: error [code]: FILE: line N: ...``. A line that is a ``maka export`` record is named
    as such, with the decoder's code (only here, when decoding already failed)."""
    message = error.message
    if error.line_number:
        raw = file_line(path, error.line_number)
        kind = export_record_kind(raw) if raw is not None else None
        if kind is not None:
            message = export_record_message(error.line_number, kind)
    return CliError(error.code, f"{path}: {message}", EXIT_USAGE)
