"""``maka branch SESSION [--at EVENT] [--to DIR] [--current-files] [--json]``: continue from an
earlier point of a session in a new session (issue #36).

Without ``--at`` it lists the points the session can be branched from: each user message, tool
result and run ending, with whether a snapshot of the folder is kept for it. With ``--at`` it
makes a new session whose history is the session's prefix up to that event (by reference: no
event is copied) and whose folder is a restored copy of the snapshot bound to it (default: a
sibling named ``<folder>-branch-<n>``); the session and its folder are left as they are. The new
session's first turn is an ordinary one: ``maka run --session NEW ...`` or ``maka tui --session
NEW``. Exit 0 on success, 2 for a refused point or folder (nothing recorded), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from app.data_paths import resolve_data_dir
from runtime.ledger.codes import BranchCode, HostCode, RestoreCode, StoreCode

if TYPE_CHECKING:
    from runtime.continuation.branch_service import BranchOption

# Refusals about what the user named (the session, the event, the folder): exit 2.
_USAGE = frozenset(
    {
        StoreCode.SESSION_NOT_FOUND.value,
        BranchCode.BRANCH_EVENT_NOT_FOUND.value,
        BranchCode.BRANCH_BOUNDARY_INVALID.value,
        BranchCode.BRANCH_BOUNDARY_UNSETTLED.value,
        BranchCode.BRANCH_SNAPSHOT_UNAVAILABLE.value,
        BranchCode.BRANCH_SOURCE_RUNNING.value,
        RestoreCode.WORKSPACE_RESTORE_TARGET_NOT_EMPTY.value,
        RestoreCode.WORKSPACE_RESTORE_TARGET_INSIDE.value,
    }
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="the session id (see 'maka sessions')")
    parser.add_argument(
        "--at",
        metavar="EVENT",
        help="the event to branch after: a user message, a tool result or a run's ending "
        "(without --at: list them)",
    )
    parser.add_argument(
        "--to",
        metavar="DIR",
        help="the new session's folder, new or empty (default: a sibling named "
        "<folder>-branch-<n>, or, for a folder inside a Git repository, "
        "<repository>-<path inside>-branch-<n> beside the repository)",
    )
    parser.add_argument(
        "--current-files",
        action="store_true",
        help="when no snapshot is kept for that point: copy the folder as it is now (the "
        "model is told the files may differ from the history)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    from app.commands.cli_session_host import owned_session_host
    from app.host.branch_session import branch_json, branch_options, branch_session
    from app.host.host_bootstrap import now_ms
    from runtime.agent.session_service import require_utf8
    from runtime.continuation.branch_prefix import BranchRefused
    from runtime.continuation.lifecycle_log import LifecycleLog
    from runtime.ledger.ledger_errors import LedgerError

    if args.to is not None and not args.to.strip():
        raise CliError(
            HostCode.INVALID_ARGUMENT,
            "--to was given an empty folder name; leave it out for the default place",
            EXIT_USAGE,
        )
    data_dir = resolve_data_dir(args.data_dir)
    from storage.ledger.database_choice import no_ledger_yet

    if no_ledger_yet(data_dir):
        raise CliError(StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE)
    with owned_session_host(data_dir, None) as host:
        carrier = host.service.checkpoints
        try:
            if args.to is not None:
                require_utf8(args.to, "the folder name")
            if args.at is None:
                return _print_options(args, branch_options(host.store, carrier, args.session))
            source = host.store.get_session(args.session)
            source_cwd = source.cwd if source is not None else "the source folder"
            result = branch_session(
                host.store,
                carrier,
                args.session,
                args.at,
                now_ms=now_ms,
                to=args.to,
                current_files=args.current_files,
                lifecycle=LifecycleLog.in_data_dir(data_dir, now_ms),
            )
        except (BranchRefused, LedgerError) as refused:
            code = str(refused.code)
            raise CliError(
                refused.code, refused.message, EXIT_USAGE if code in _USAGE else EXIT_ERROR
            ) from None
    if args.json:
        print(json.dumps(branch_json(result), ensure_ascii=False))
    else:
        new = result.session
        print(f"branched {args.session} at {args.at} into session {new.session_id}")
        what = "a copy of the current files" if args.current_files else "the folder as it was there"
        import os

        left = (
            f"{source_cwd} was left as it is"
            if os.path.isdir(source_cwd)
            else f"{source_cwd}, the source's folder, is not there"
        )
        print(f"its folder: {new.cwd} ({what}); {left}")
        from app.host.copy_note import copy_repository_note

        note = copy_repository_note(source_cwd, new.cwd, current_files=args.current_files)
        if note is not None:
            print(note)
        print(f"continue it: maka run --session {new.session_id} 'your message'")
    return EXIT_OK


def _print_options(args: argparse.Namespace, options: list[BranchOption]) -> int:
    if args.json:
        body = {"sessionId": args.session, "boundaries": [o.to_json() for o in options]}
        print(json.dumps(body, ensure_ascii=False))
        return EXIT_OK
    if not options:
        print(f"session {args.session} has no point to branch from yet")
        return EXIT_OK
    from app.host.tui_reads import visible_label

    width = max(len(option.boundary.event_id) for option in options)
    for option in options:
        b = option.boundary
        snapshot = "snapshot kept" if option.snapshot_kept else "no snapshot (--current-files)"
        if b.unsettled:
            snapshot = "not branchable: a tool call has no settled outcome there"
        label = visible_label(b.label)
        sys.stdout.write(f"{b.event_id:<{width}}  {b.kind:<12} {label:<50}  {snapshot}\n")
    print(f"branch one: maka branch {args.session} --at EVENT [--to DIR]")
    return EXIT_OK
