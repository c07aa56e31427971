"""``maka export SESSION -o FILE.jsonl [--force]``: write a session's committed ledger.

The file holds a session line, then each run's header line and its events as canonical bytes,
run by run (format in ``storage/sessions/session_export.py``). The database is opened read-only, so
export
works while the desktop app runs; the file is written to a temporary name in the target's folder
and renamed into place, so a crash never leaves a half-written export under the requested name.
An existing file is only replaced with ``--force``, and only a regular file: a directory, a
device, a pipe or a symbolic link is refused (``export_target_invalid``), never replaced.
A target inside the data folder the export reads (its database, ``-wal``, snapshots, anything
under it, whatever links lead there) is refused with or without ``--force``
(``export_target_inside_data_dir``): replacing the database with the export destroyed it.
``-o -`` writes the export to standard output (the summary then goes to standard error).

The session's snapshots of its folder (workspace checkpoints) go beside the file, as the Git
bundle ``FILE.jsonl.bundle`` named by the file's last line
(``storage/checkpoints/checkpoint_transfer.py``),
so an import in another data directory verifies, restores and rebaselines as here.
``--no-checkpoints`` leaves them out, as does an export to standard output; ``maka doctor``
then notes the import without them.

Exit codes: 0 written, 1 the store or the disk failed, 2 invalid input (unknown session, a
target that exists, cannot be one or is inside the data folder).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, NoReturn, cast

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, refuse_before_a_ledger
from app.commands.doctor_cmd import data_dir_from
from runtime.ledger.command_words import maka_command
from runtime.ledger.file_names import file_kind

if TYPE_CHECKING:
    from runtime.ledger.event_model import RuntimeEvent

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
    parser.add_argument(
        "--no-checkpoints",
        action="store_true",
        help="leave the session's snapshots of its folder out",
    )


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
            f"{target} is {file_kind(mode)}; export writes a regular file (use -o - for "
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


def _refuse_unnamed(output: str, target: Path, data_dir: Path) -> NoReturn:
    """A target that names no file (``""``, ``.``, ``/``) is refused as a folder is, with the
    same codes; nothing is written."""
    from runtime.ledger.codes import TransferCode

    if not output:
        raise CliError(
            TransferCode.EXPORT_TARGET_INVALID,
            "the output path is empty; export writes a regular file (use -o - for standard output)",
            EXIT_USAGE,
        )
    _check_outside(data_dir, (target,))
    _check_target(target, force=True)
    raise CliError(
        TransferCode.EXPORT_TARGET_INVALID,
        f"{output} names no file; export writes a regular file (use -o - for standard output)",
        EXIT_USAGE,
    )


def _inside(path: Path, folder: Path) -> bool:
    """``path`` is ``folder`` or lies under it, after every link (and ``..``) is followed; a
    folder of the path that is the same directory as ``folder`` (another name for it: a bind
    mount, a case-insensitive file system) counts too."""
    real_path, real_folder = os.path.realpath(path), os.path.realpath(folder)
    try:
        if os.path.commonpath([real_path, real_folder]) == real_folder:
            return True
    except ValueError:  # on different drives (Windows)
        pass
    try:
        identity = os.stat(real_folder)
    except OSError:  # no data folder yet: nothing in it to destroy
        return False
    for parent in Path(real_path).parents:
        try:
            seen = os.stat(parent)
        except OSError:
            continue
        if (seen.st_dev, seen.st_ino) == (identity.st_dev, identity.st_ino):
            return True
    return False


def _check_outside(data_dir: Path, targets: tuple[Path, ...]) -> None:
    """An export never writes in the data folder it reads, even with ``--force``."""
    from runtime.ledger.codes import TransferCode

    for target in targets:
        if _inside(target, data_dir):
            raise CliError(
                TransferCode.EXPORT_TARGET_INSIDE_DATA_DIR,
                f"{target} is inside the data folder {data_dir}: an export there could replace "
                "the history it is made from (the database, a snapshot); write it outside the "
                "data folder",
                EXIT_USAGE,
            )


class _Snapshots:
    """Collects the snapshot facts of the exported lines (few lines name one), and the runs
    whose header says they have not ended."""

    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []
        self.unended: list[str] = []

    def __call__(self, line: bytes) -> None:
        if b'"maka.run_header.v1"' in line and (b'"running"' in line or b'"created"' in line):
            header = json.loads(line)
            if isinstance(header, dict) and header.get("status") in ("running", "created"):
                self.unended.append(str(header.get("runId")))
        if b'"workspaceCheckpoint"' in line or b'"workspaceBaseline"' in line:
            value = json.loads(line)
            if isinstance(value, dict) and "kind" not in value:
                self.events.append(cast("RuntimeEvent", value))


def _export(args: argparse.Namespace, out: BinaryIO, seen: _Snapshots) -> int:
    from runtime.ledger.codes import TransferCode
    from runtime.ledger.ledger_errors import LedgerError
    from storage.ledger.ledger_store import open_store

    data_dir = data_dir_from(args)
    # No database yet: the session is not here (as every command naming one says it).
    refuse_before_a_ledger(data_dir, args.session)
    try:
        with open_store(data_dir, read_only=True) as store:
            return store.export_session(args.session, out, seen)
    except LedgerError as error:
        usage = error.code in (TransferCode.SESSION_NOT_FOUND, "store_not_found")
        raise CliError(error.code, error.message, EXIT_USAGE if usage else EXIT_ERROR) from None


def _carry(
    args: argparse.Namespace, seen: _Snapshots, bundle: Path, name: str
) -> tuple[bytes | None, int]:
    """Write the snapshots bundle to ``bundle``; the export's last line naming it (None when
    nothing is carried) and the number of snapshots."""
    from runtime.ledger.checkpoint_ports import CheckpointError
    from runtime.ledger.codes import TransferCode
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.checkpoints.checkpoint_transfer import (
        imported_without_snapshots,
        manifest_line,
        snapshot_refs,
        write_bundle,
    )

    refs = snapshot_refs(seen.events)
    if not refs or args.no_checkpoints:
        return None, 0
    carrier = GitCheckpointStore.from_environment(data_dir_from(args))
    if not carrier.usable:
        print(
            "note: the session's snapshots of its folder were left out: no git 2.25 or newer "
            "on PATH (checkpoint_git_missing)",
            file=sys.stderr,
        )
        return None, 0
    try:
        carried = write_bundle(carrier, refs, bundle)
    except CheckpointError as error:
        raise CliError(
            TransferCode.EXPORT_WRITE_FAILED,
            f"cannot write the snapshots file: {error.message}",
            EXIT_ERROR,
        ) from None
    # On a shared ledger a snapshot another host took is in that host's data folder: not here,
    # and not damaged (as maka checkpoints and maka doctor say it); nor is one an import did not
    # bring (``maka import --no-checkpoints``), as maka doctor says it.
    elsewhere = carrier.missing_note
    if args.session in imported_without_snapshots(data_dir_from(args)):
        elsewhere = "its import did not bring them"
    if not carried:
        print(
            f"note: none of the session's snapshots of its folder is in this data folder "
            f"({elsewhere}); the export carries none"
            if elsewhere
            else "note: none of the session's snapshots of its folder is whole and undamaged "
            "in the checkpoint store; the export carries none "
            f"({maka_command('doctor --verify-snapshots')} says more)",
            file=sys.stderr,
        )
        return None, 0
    left = len({item.ref for item in refs}) - len({item.ref for item in carried})
    if left:
        print(
            f"note: {left} of the session's snapshots of its folder are not in this data folder "
            f"({elsewhere}) and were left out"
            if elsewhere
            else f"note: {left} of the session's snapshots of its folder are missing or damaged "
            "in the checkpoint store and were left out "
            f"({maka_command('doctor --verify-snapshots')} says which)",
            file=sys.stderr,
        )
    return manifest_line(name, bundle, carried), len(carried)


def run(args: argparse.Namespace) -> int:
    from runtime.ledger.codes import TransferCode
    from storage.checkpoints.checkpoint_transfer import bundle_name

    seen = _Snapshots()
    if args.output == STDOUT:
        try:
            lines = _export(args, sys.stdout.buffer, seen)
            sys.stdout.buffer.flush()
        except OSError as error:
            raise CliError(
                TransferCode.EXPORT_WRITE_FAILED,
                f"cannot write to standard output: {error.strerror or error}",
            ) from None
        print(f"exported session {args.session}: {lines} lines", file=sys.stderr)
        if seen.events and not args.no_checkpoints:
            print(
                "note: an export to standard output leaves the session's snapshots of its "
                "folder out (export to a file to carry them)",
                file=sys.stderr,
            )
        _say_unended(seen)
        return EXIT_OK
    from storage.private_files import private_opener

    target = Path(args.output)
    if not target.name:
        _refuse_unnamed(args.output, target, data_dir_from(args))
    bundle = target.with_name(bundle_name(target.name))
    _check_outside(data_dir_from(args), (target, bundle))
    _check_target(target, args.force)
    if not args.no_checkpoints:
        _check_target(bundle, args.force)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temp_bundle = target.with_name(f".{bundle.name}.{os.getpid()}.tmp")
    try:
        # Only the user may read an export: it holds whole transcripts, as the data directory.
        with open(temp, "xb", opener=private_opener) as out:
            lines = _export(args, out, seen)
            manifest, carried = _carry(args, seen, temp_bundle, bundle.name)
            if manifest is not None:
                out.write(manifest + b"\n")
                lines += 1
            out.flush()
            os.fsync(out.fileno())
        if manifest is not None:
            os.chmod(temp_bundle, 0o600)
            with open(temp_bundle, "rb") as written:
                os.fsync(written.fileno())
            os.replace(temp_bundle, bundle)
        os.replace(temp, target)
    except OSError as error:
        raise CliError(
            TransferCode.EXPORT_WRITE_FAILED,
            f"cannot write {target}: {error.strerror or error}",
            EXIT_ERROR,
        ) from None
    finally:
        for leftover in (temp, temp_bundle):
            with contextlib.suppress(OSError):
                leftover.unlink()
    print(f"exported session {args.session}: {lines} lines to {target}")
    if carried:
        print(f"with {carried} snapshots of its folder in {bundle}")
    _say_unended(seen)
    return EXIT_OK


def _say_unended(seen: _Snapshots) -> None:
    """A run not ended when exported: its turn was running (in another Maka process), or its
    process was stopped before it could end it. The export holds what it had committed."""
    for run_id in seen.unended:
        print(
            f"note: run {run_id} had not ended when it was exported (its turn was running, or "
            "its process was stopped before it could end it): the export holds what it had "
            "committed, and an import reads it as interrupted",
            file=sys.stderr,
        )
