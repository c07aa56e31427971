"""``maka import FILE.jsonl [--accept-torn-tail] [--json]``: import an exported session.

Every event is re-committed through the store's writers in one transaction: the import is all or
nothing, idempotent for an identical file, and refused when the file conflicts with what is
stored. A torn last line (no final newline) is refused unless ``--accept-torn-tail``; then the
lines before it are imported and the number of dropped bytes is reported.

The whole file is decoded and checked before the data directory is touched, so a file that is
not a valid export changes nothing (not even a fresh data directory is created). Importing writes
to the data directory, so it owns it like ``maka run``: while the desktop or another command owns
it, the import is refused with ``store_locked``.

The session's snapshots of its folder come from the Git bundle the file's last line names
(``FILE.jsonl.bundle`` beside it, ``storage/checkpoints/checkpoint_transfer.py``). The bundle is
checked in
a scratch repository before anything is written (its sha256 and size as recorded, exactly the
recorded refs, each one of the session's snapshot facts with every file under it); a bundle
that is missing (``import_checkpoints_missing``) or not the one the export was written with
(``import_checkpoints_invalid``) refuses the import and changes nothing. After the ledger's
import its refs go into each workspace's private store. ``--no-checkpoints`` (or an export
without a bundle) imports the ledger alone; ``maka doctor`` then notes the snapshots were not
carried (``workspace_checkpoints_not_carried``) and resume offers to continue with the
current files.

A session already here keeps its title and folder where the file's differ (the user renamed
or moved it since the export, ``maka sessions rename`` / ``relocate``): the import is not
refused, and the report names each one kept (``sessionKept`` in ``--json``). A session line
whose folder (or a run's) is not an absolute path is refused (``import_line_invalid``), as is a
line longer than 64 MiB (reading stops there, so ``/dev/zero`` cannot fill the memory) and a
device, a folder or a socket in place of the file (``import_file_unreadable``).

Exit codes: 0 imported (or already present), 1 refused by the store (conflict, store problem,
another process owns the data directory), 2 the file is unreadable or not a valid export.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from app.commands.doctor_cmd import data_dir_from
from runtime.ledger.collector_pause import collector_paused
from runtime.ledger.command_words import maka_command

if TYPE_CHECKING:
    from storage.checkpoints.checkpoint_transfer import CarriedRef
    from storage.sessions.session_export import ParsedExport
    from storage.sessions.session_import import KeptValue


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE.jsonl", type=_named_file, help="an export file")
    parser.add_argument(
        "--accept-torn-tail",
        action="store_true",
        help="import the valid lines before a torn last line and drop it",
    )
    parser.add_argument(
        "--no-checkpoints",
        action="store_true",
        help="leave the snapshots file beside the export out",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _named_file(text: str) -> Path | None:
    """FILE.jsonl as given; None for an empty one (an unset variable), which ``Path`` would
    take as ``.``, the current folder."""
    return Path(text) if text else None


def run(args: argparse.Namespace) -> int:
    from app.commands.cli_session_host import own_data_dir
    from runtime.ledger.codes import TransferCode
    from runtime.ledger.store_ports import StoreRefusal
    from storage.ledger.ledger_store import open_store
    from storage.sessions.session_export import TransferError, parse_export, read_export_file

    if args.file is None:
        raise CliError(
            TransferCode.IMPORT_FILE_UNREADABLE,
            "no file was named: FILE.jsonl is empty (an unset variable?); nothing was imported",
            EXIT_USAGE,
        )
    path: Path = args.file
    try:
        data = read_export_file(path)
    except TransferError as error:
        raise CliError(error.code, f"{path}: {error.message}", EXIT_USAGE) from None
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
    from storage.ledger.database_choice import no_ledger_yet

    had_folder, had_ledger = data_dir.exists(), not no_ledger_yet(data_dir)
    with tempfile.TemporaryDirectory(prefix="maka-import-") as scratch:
        carry = _checked_snapshots(args, parsed, data_dir, Path(scratch))
        lock = own_data_dir(data_dir)
        refused: CliError | None = None
        try:
            with open_store(data_dir) as store:
                report = store.import_parsed(parsed)
            carried = _add_snapshots(data_dir, parsed, carry, Path(scratch))
        except TransferError as error:
            refused = CliError(error.code, error.message, EXIT_USAGE)
        except StoreRefusal as error:
            where = f" (event {error.event_id})" if error.event_id else ""
            refused = CliError(error.code, f"{error.message}{where}", EXIT_ERROR)
        finally:
            lock.release()
        if refused is not None:
            # Refused inside the store (the file's runs checked against each other): what this
            # command made for it goes again, so a refused import changes nothing.
            _undo_fresh(data_dir, had_folder, had_ledger)
            raise refused
    if args.json:
        document = {
            "sessionId": report.session_id,
            "runs": report.runs,
            "eventsRead": report.events_read,
            "eventsCreated": report.events_created,
            "eventsExisting": report.events_existing,
            "droppedBytes": report.dropped_bytes,
            "checkpointsCarried": carried,
            "sessionKept": [
                {"field": item.field, "here": item.here, "file": item.file} for item in report.kept
            ],
        }
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        print(
            f"imported session {report.session_id}: {report.runs} runs, {report.events_read} "
            f"events ({report.events_created} new, {report.events_existing} already present)"
        )
        if report.dropped_bytes:
            print(f"dropped a torn last line of {report.dropped_bytes} bytes")
        for item in report.kept:
            print(_kept_text(report.session_id, item))
        if carried is not None:
            from storage.checkpoints.checkpoint_transfer import snapshot_refs

            recorded = len(snapshot_refs(e for block in parsed.runs for e in block.events))
            missing = recorded - carried if carried else 0
            print(
                (
                    f"with {carried} snapshots of its folder"
                    + (
                        f"; the file did not hold the other {missing} it records "
                        f"({maka_command('doctor')} notes them)"
                        if missing > 0
                        else ""
                    )
                )
                if carried
                else f"without its snapshots of the folder ({maka_command('doctor')} notes it; "
                "resume offers to continue with the current files)"
            )
    return EXIT_OK


def _kept_text(session_id: str, item: KeptValue) -> str:
    """The session here was renamed or moved since the export: it keeps its own."""
    if item.field == "title":
        return (
            f"the session here keeps its title {item.here!r}; the file's is {item.file!r} "
            f"({maka_command(f'sessions rename {session_id} TITLE')} changes it)"
        )
    return (
        f"the session here keeps its folder {item.here}; the file's is {item.file} "
        f"({maka_command(f'sessions relocate {session_id} FOLDER')} changes it)"
    )


def _undo_fresh(data_dir: Path, had_folder: bool, had_ledger: bool) -> None:
    """Remove the data folder (or the database) this command created, when it held none."""
    import shutil

    from storage.ledger.sqlite_connection import DATABASE_NAME

    if had_ledger:
        return
    if not had_folder:
        shutil.rmtree(data_dir, ignore_errors=True)
        return
    for suffix in ("", "-wal", "-shm", "-journal", ".verified"):
        (data_dir / f"{DATABASE_NAME}{suffix}").unlink(missing_ok=True)


def _checked_snapshots(
    args: argparse.Namespace, parsed: ParsedExport, data_dir: Path, scratch: Path
) -> list[CarriedRef] | None:
    """The bundle's refs, validated in ``scratch`` (None: the snapshots are not carried)."""
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.checkpoints.checkpoint_transfer import (
        CheckpointTransferError,
        checked_bundle,
        snapshot_refs,
    )

    if parsed.checkpoints is None or args.no_checkpoints:
        return None
    carrier = GitCheckpointStore(data_dir)
    if not carrier.usable or carrier.git is None:
        print(
            "note: the snapshots beside the export are left out: no git 2.25 or newer on PATH "
            "(checkpoint_git_missing)",
            file=sys.stderr,
        )
        return None
    recorded = snapshot_refs(event for block in parsed.runs for event in block.events)
    try:
        return checked_bundle(
            carrier.git,
            args.file,
            parsed.checkpoints,
            session_id=parsed.session.session_id,
            recorded=recorded,
            scratch=scratch,
        )
    except CheckpointTransferError as error:
        message = error.message
        if "--no-checkpoints" not in message:
            # Nothing was imported: the way on without the snapshots no check accepts.
            message += (
                "; nothing was imported. To import the session without its snapshots, run the "
                "import again with --no-checkpoints (its resume then offers to continue with "
                "the current files)"
            )
        raise CliError(error.code, message, EXIT_USAGE) from None


def _add_snapshots(
    data_dir: Path, parsed: ParsedExport, carry: list[CarriedRef] | None, scratch: Path
) -> int | None:
    """Unpack the validated refs into the private stores, or note the import without them;
    the number carried (None when the session records no snapshot)."""
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.checkpoints.checkpoint_transfer import (
        CheckpointTransferError,
        note_import,
        snapshot_refs,
        unpack,
    )

    carrier = GitCheckpointStore(data_dir)
    session_id = parsed.session.session_id
    if carry is None:
        if not snapshot_refs(event for block in parsed.runs for event in block.events):
            return None
        note_import(carrier, session_id, carried=False)
        return 0
    try:
        unpack(carrier, scratch, carry)
    except CheckpointTransferError as error:
        note_import(carrier, session_id, carried=False)
        raise CliError(error.code, error.message, EXIT_ERROR) from None
    carried = {ref.ref for ref in carry}
    recorded = snapshot_refs(event for block in parsed.runs for event in block.events)
    note_import(
        carrier,
        session_id,
        carried=True,
        left_out=[ref.ref for ref in recorded if ref.ref not in carried],
    )
    return len(carry)
