"""``maka export SESSION -o FILE.jsonl [--force]``: write a session's committed ledger.

The file holds a session line, then each run's header line and its events as canonical bytes,
run by run (format in ``storage/session_export.py``). The database is opened read-only, so export
works while the desktop app runs; the file is written to a temporary name in the target's folder
and renamed into place, so a crash never leaves a half-written export under the requested name.
An existing file is only replaced with ``--force``, and only a regular file: a directory, a
device, a pipe or a symbolic link is refused (``export_target_invalid``), never replaced.
``-o -`` writes the export to standard output (the summary then goes to standard error).

Exit codes: 0 written, 1 the store or the disk failed, 2 invalid input (unknown session, a
target that exists or cannot be one).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from app.commands.doctor_cmd import data_dir_from

STDOUT = "-"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="the session id")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE.jsonl",
        help="file to write ('-' for standard output)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing file")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_target(target: Path, force: bool) -> None:
    from runtime.ledger.codes import TransferCode

    try:
        mode = target.lstat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise CliError(
            TransferCode.EXPORT_TARGET_INVALID,
            f"cannot use {target}: {error.strerror or error}",
            EXIT_USAGE,
        ) from None
    if mode is not None and not stat.S_ISREG(mode):
        raise CliError(
            TransferCode.EXPORT_TARGET_INVALID,
            f"{target} is {_kind(mode)}; export writes a regular file (use -o - for "
            "standard output)",
            EXIT_USAGE,
        )
    if mode is not None and not force:
        raise CliError(
            TransferCode.EXPORT_TARGET_EXISTS,
            f"{target} exists (use --force to replace it)",
            EXIT_USAGE,
        )
    if not target.parent.is_dir():
        raise CliError(
            TransferCode.EXPORT_TARGET_INVALID,
            f"cannot write {target}: the folder {target.parent} does not exist",
            EXIT_USAGE,
        )


def _export(args: argparse.Namespace, out: BinaryIO) -> int:
    from runtime.ledger.codes import TransferCode
    from runtime.ledger.ledger_errors import LedgerError
    from storage.ledger_store import open_store

    try:
        with open_store(data_dir_from(args), read_only=True) as store:
            return store.export_session(args.session, out)
    except LedgerError as error:
        usage = error.code in (TransferCode.SESSION_NOT_FOUND, "store_not_found")
        raise CliError(error.code, error.message, EXIT_USAGE if usage else EXIT_ERROR) from None


def run(args: argparse.Namespace) -> int:
    from runtime.ledger.codes import TransferCode

    if args.output == STDOUT:
        try:
            lines = _export(args, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        except OSError as error:
            raise CliError(
                TransferCode.EXPORT_WRITE_FAILED,
                f"cannot write to standard output: {error.strerror or error}",
            ) from None
        print(f"exported session {args.session}: {lines} lines", file=sys.stderr)
        return EXIT_OK
    from storage.private_files import private_opener

    target = Path(args.output)
    _check_target(target, args.force)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        # Only the user may read an export: it holds whole transcripts, as the data directory.
        with open(temp, "xb", opener=private_opener) as out:
            lines = _export(args, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except OSError as error:
        raise CliError(
            TransferCode.EXPORT_WRITE_FAILED,
            f"cannot write {target}: {error.strerror or error}",
            EXIT_ERROR,
        ) from None
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()
    print(f"exported session {args.session}: {lines} lines to {target}")
    return EXIT_OK
