"""``maka import FILE.jsonl [--accept-torn-tail] [--json]``: import an exported session.

Every event is re-committed through the store's writers in one transaction: the import is all or
nothing, idempotent for an identical file, and refused when the file conflicts with what is
stored. A torn last line (no final newline) is refused unless ``--accept-torn-tail``; then the
lines before it are imported and the number of dropped bytes is reported.

The whole file is decoded and checked before the data directory is touched, so a file that is
not a valid export changes nothing (not even a fresh data directory is created). Importing writes
to the data directory, so it owns it like ``maka run``: while the desktop or another command owns
it, the import is refused with ``store_locked``.

Exit codes: 0 imported (or already present), 1 refused by the store (conflict, store problem,
another process owns the data directory), 2 the file is unreadable or not a valid export.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from app.commands.doctor_cmd import data_dir_from
from runtime.ledger.collector_pause import collector_paused


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE.jsonl", type=Path, help="an export file")
    parser.add_argument(
        "--accept-torn-tail",
        action="store_true",
        help="import the valid lines before a torn last line and drop it",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    from app.commands.cli_session_host import own_data_dir
    from runtime.ledger.codes import TransferCode
    from runtime.ledger.store_ports import StoreRefusal
    from storage.ledger_store import open_store
    from storage.session_export import TransferError, parse_export

    path: Path = args.file
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CliError(
            TransferCode.IMPORT_FILE_UNREADABLE, f"cannot read {path}: {error}", EXIT_USAGE
        ) from None
    try:
        with collector_paused():  # decoding makes many small containers and no cycles
            parsed = parse_export(data, accept_torn_tail=args.accept_torn_tail)
    except TransferError as error:
        raise CliError(error.code, error.message, EXIT_USAGE) from None
    del data
    data_dir = data_dir_from(args)
    lock = own_data_dir(data_dir)
    try:
        with open_store(data_dir) as store:
            report = store.import_parsed(parsed)
    except TransferError as error:
        raise CliError(error.code, error.message, EXIT_USAGE) from None
    except StoreRefusal as error:
        where = f" (event {error.event_id})" if error.event_id else ""
        raise CliError(error.code, f"{error.message}{where}", EXIT_ERROR) from None
    finally:
        lock.release()
    if args.json:
        document = {
            "sessionId": report.session_id,
            "runs": report.runs,
            "eventsRead": report.events_read,
            "eventsCreated": report.events_created,
            "eventsExisting": report.events_existing,
            "droppedBytes": report.dropped_bytes,
        }
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print(
            f"imported session {report.session_id}: {report.runs} runs, {report.events_read} "
            f"events ({report.events_created} new, {report.events_existing} already present)"
        )
        if report.dropped_bytes:
            print(f"dropped a torn last line of {report.dropped_bytes} bytes")
    return EXIT_OK
