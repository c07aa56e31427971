"""``maka export SESSION -o FILE.jsonl [--force]``: write a session's committed ledger.

The file holds a session line, then each run's header line and its events as canonical bytes,
run by run (format in ``storage/session_export.py``). The database is opened read-only, so export
works while the desktop app runs; the file is written to a temporary name and renamed into place,
so a crash never leaves a half-written export under the requested name. An existing file is only
replaced with ``--force``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

from app.cli_errors import EXIT_ERROR, EXIT_OK, CliError
from app.commands.doctor_cmd import data_dir_from


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="the session id")
    parser.add_argument(
        "-o", "--output", required=True, type=Path, metavar="FILE.jsonl", help="file to write"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing file")


def run(args: argparse.Namespace) -> int:
    from runtime.ledger.codes import TransferCode
    from runtime.ledger.ledger_errors import LedgerError
    from storage.ledger_store import open_store

    target: Path = args.output
    if target.exists() and not args.force:
        raise CliError(
            TransferCode.EXPORT_TARGET_EXISTS, f"{target} exists (use --force to replace it)"
        )
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open_store(data_dir_from(args), read_only=True) as store, temp.open("wb") as out:
            lines = store.export_session(args.session, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except LedgerError as error:
        raise CliError(str(error.code), error.message, EXIT_ERROR) from None
    except OSError as error:
        raise CliError("export_write_failed", f"cannot write {target}: {error}") from None
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()
    print(f"exported session {args.session}: {lines} lines to {target}")
    return EXIT_OK
