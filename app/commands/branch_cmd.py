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
from pathlib import Path
from typing import Any

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, refuse_before_a_ledger
from app.data_paths import resolve_data_dir
from runtime.ledger.codes import BranchCode, HostCode, RestoreCode, StoreCode
from runtime.ledger.command_words import maka_command

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
        # The folder named could not be made (a file above it, a name too long): nothing done.
        RestoreCode.WORKSPACE_RESTORE_FAILED.value,
    }
)


def _refused(session: str, code: Any, message: str) -> CliError:
    """A refused branch as the command says it; an event that is not a point to branch from
    names the listing of those points."""
    if str(code) in (BranchCode.BRANCH_EVENT_NOT_FOUND, BranchCode.BRANCH_BOUNDARY_INVALID):
        message += f"; {maka_command(f'branch {session}')} lists the points to branch from"
    return CliError(code, message, EXIT_USAGE if str(code) in _USAGE else EXIT_ERROR)


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
        help="the new session's folder, new or empty; missing folders above it are made "
        "(default: a sibling named "
        "<folder>-branch-<n>, or, for a folder inside a Git repository, "
        "<repository>-<path inside>-branch-<n> beside the repository)",
    )
    parser.add_argument(
        "--current-files",
        action="store_true",
        help="copy the folder as it is now instead of the snapshot kept for that point (the "
        "only way when none is kept; the model is told the files may differ from the history)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    from app.commands.cli_session_host import owned_session_host
    from app.host.branch_session import branch_json, branch_session
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
    if args.at is None and (args.to is not None or args.current_files):
        given = "--to" if args.to is not None else "--current-files"
        raise CliError(
            HostCode.USAGE_INVALID,
            f"{given} says how to make a branch, but no --at EVENT says where; without --at, "
            f"{maka_command(f'branch {args.session}')} lists the points to branch from. "
            "Nothing was made",
            EXIT_USAGE,
        )
    data_dir = resolve_data_dir(args.data_dir)
    from app.host.host_client import attach

    served = attach(data_dir, command="branch")
    if served is not None:  # the desktop or `maka host` owns the folder: it lists and branches
        with served:
            return _through_host(args, served)

    refuse_before_a_ledger(data_dir, args.session)
    if args.at is None:
        return _list_read_only(args, data_dir)
    with owned_session_host(data_dir, None) as host:
        carrier = host.service.checkpoints
        try:
            if args.to is not None:
                require_utf8(args.to, "the folder name")
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
            raise _refused(args.session, refused.code, refused.message) from None
    new = result.session
    return _print_made(
        args, branch_json(result), source_cwd, copy_folder=new.cwd, new_session=new.session_id
    )


def _list_read_only(args: argparse.Namespace, data_dir: Path) -> int:
    """The points to branch from, read without owning the data folder (as ``maka timeline``
    reads): listing repairs nothing, so a run a killed process left marked running stays so
    for the next host's start (its automatic resume takes up only what its own recovery
    found), and a ``maka run`` owning the folder does not stop the listing."""
    from app.host.branch_session import branch_options
    from runtime.continuation.branch_prefix import BranchRefused
    from runtime.ledger.ledger_errors import LedgerError
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.ledger.ledger_store import open_store

    try:
        store = open_store(data_dir, read_only=True)
    except LedgerError as error:
        raise CliError(error.code, error.message, EXIT_ERROR) from None
    from app.host.session_rows import orphaned

    try:
        carrier = GitCheckpointStore.from_environment(data_dir)
        options = branch_options(store, carrier, args.session)
        runs = [(h.run_id, str(h.status)) for h in store.list_session_runs(args.session)]
        unended = [run_id for run_id, status in runs if status in ("created", "running")]
        marked = [(args.session, run_id) for run_id in unended]
        gone = {run_id for _, run_id in orphaned(data_dir, marked, store)}
    except (BranchRefused, LedgerError) as refused:
        code = str(refused.code)
        raise CliError(
            refused.code, refused.message, EXIT_USAGE if code in _USAGE else EXIT_ERROR
        ) from None
    finally:
        store.close()
    # A turn not ended has no points yet (``list_boundaries``): say why it is not listed.
    unlisted = [
        {"runId": run_id, "reason": "awaiting_repair" if run_id in gone else "running"}
        for run_id in unended
    ]
    return _print_options(args, [option.to_json() for option in options], unlisted=unlisted)


def _print_made(
    args: argparse.Namespace,
    document: dict[str, Any],
    source_cwd: str,
    *,
    copy_folder: str,
    new_session: str,
) -> int:
    """What ``maka branch --at`` prints once the branch is made (whoever made it)."""
    if args.json:
        print(json.dumps(document, ensure_ascii=False))
        return EXIT_OK
    print(f"branched {args.session} at {args.at} into session {new_session}")
    what = "a copy of the current files" if args.current_files else "the folder as it was there"
    import os

    from runtime.ledger.file_names import shown_name

    source = shown_name(source_cwd)
    left = (
        f"{source} was left as it is"
        if os.path.isdir(source_cwd)
        else f"{source}, the source's folder, is not there"
    )
    print(f"its folder: {shown_name(copy_folder)} ({what}); {left}")
    # (as the desktop's branch dialog says before it makes one; from where only while the
    # source's folder is there)
    print(
        "The copy leaves out paths Git ignores (.gitignore files, .git/info/exclude, your "
        "excludes file) unless your Git tracks them, and files over 50 MiB, as snapshots do"
        + (
            f"; copy any it needs (a .env, say) from {source}."
            if os.path.isdir(source_cwd)
            else "."
        )
    )
    from app.host.copy_note import copy_repository_note

    note = copy_repository_note(source_cwd, copy_folder, current_files=args.current_files)
    if note is not None:
        print(note)
    print("continue it: " + maka_command(f"run --session {new_session} 'your message'"))
    return EXIT_OK


def _print_options(
    args: argparse.Namespace,
    options: list[dict[str, Any]],
    omitted: int = 0,
    *,
    unlisted: list[dict[str, str]] | None = None,
) -> int:
    """The points (``BranchOption.to_json``'s fields), as a list or one JSON document;
    ``unlisted``: the runs not ended, whose points are not listed yet, and why."""
    if args.json:
        body: dict[str, Any] = {"sessionId": args.session, "boundaries": options}
        if unlisted:
            body["runsNotListed"] = unlisted
        print(json.dumps(body, ensure_ascii=False))
        return EXIT_OK
    from app.host.session_rows import gone_words

    for item in unlisted or ():
        run_id = item["runId"]
        if item["reason"] == "awaiting_repair":
            gone = gone_words(resolve_data_dir(args.data_dir))
            print(
                f"run {run_id} is still marked running, but {gone}: "
                f"its points are listed once it is repaired ({maka_command(f'plan {args.session}')}"
                " repairs it and says whether Safe resume can continue it)"
            )
        else:
            print(f"run {run_id} is running: its points are listed once it ends")
    if not options:
        print(f"session {args.session} has no point to branch from yet")
        return EXIT_OK
    from app.host.tui_reads import DAMAGED_ASIDE_WORDS, TRIMMED_WORDS, visible_label

    if omitted:
        print(f"({omitted} earlier points are not listed)")
    width = max(len(str(option["eventId"])) for option in options)
    for option in options:
        snapshot = "snapshot kept" if option["snapshotKept"] else "no snapshot (--current-files)"
        if option.get("trimmed"):
            snapshot = TRIMMED_WORDS
        elif option.get("damagedAside"):
            snapshot = DAMAGED_ASIDE_WORDS + " (or --current-files)"
        if not option["branchable"]:
            snapshot = (
                f"not branchable: a call had no settled outcome yet (see {option['settledAt']})"
                if option.get("settledAt")
                else "not branchable: a tool call has no settled outcome there"
            )
        label = visible_label(str(option["label"]))
        event, kind = str(option["eventId"]), str(option["kind"])
        sys.stdout.write(f"{event:<{width}}  {kind:<12} {label:<50}  {snapshot}\n")
    print(f"branch one: {maka_command(f'branch {args.session} --at EVENT [--to DIR]')}")
    return EXIT_OK


def _through_host(args: argparse.Namespace, host: Any) -> int:
    """The desktop or ``maka host`` owns the data folder: it lists the points and makes the
    branch (the window's own requests, with the same checks); the output is the same."""
    import os

    from pydantic import ValidationError

    from app.bridge_contract import (
        BranchCreateRequest,
        BranchMadePush,
        BranchOptionsListedPush,
        BranchOptionsRequest,
        BranchRefusedPush,
    )
    from app.host.host_client import HostRefusal

    request: BranchOptionsRequest | BranchCreateRequest
    try:
        if args.at is None:
            request = BranchOptionsRequest(session_id=args.session)
        else:
            request = BranchCreateRequest(
                session_id=args.session,
                event_id=args.at,
                to=os.path.abspath(args.to) if args.to is not None else None,
                current_files=args.current_files,
            )
    except ValidationError:
        # What the host would not take, said as the command says it alone.
        if not 1 <= len(args.session) <= 200:
            raise CliError(
                StoreCode.SESSION_NOT_FOUND, f"no session {args.session[:200]}", EXIT_USAGE
            ) from None
        if args.at is not None and not 1 <= len(args.at) <= 200:
            raise CliError(
                BranchCode.BRANCH_EVENT_NOT_FOUND,
                f"session {args.session} has no event {args.at[:80]}…",
                EXIT_USAGE,
            ) from None
        raise CliError(
            RestoreCode.WORKSPACE_RESTORE_FAILED,
            f"the folder name is longer than the running Maka accepts: {str(args.to)[:80]}…",
            EXIT_USAGE,
        ) from None
    if args.at is not None:
        host.stream_without_timeout()  # the copy of a big folder takes as long as it takes
    answer = host.ask(request)
    if isinstance(answer, BranchRefusedPush):
        refusal = HostRefusal(answer.code, answer.message)
        raise _refused(args.session, refusal.code, refusal.message)
    if isinstance(answer, BranchOptionsListedPush):
        # The host owns the data folder: a run it has not ended is running there (one a
        # killed process left marked running was repaired when the host started).
        running = [{"runId": run_id, "reason": "running"} for run_id in answer.runs_running]
        return _print_options(
            args,
            [_option_json(o) for o in answer.options],
            answer.omitted_earlier,
            unlisted=running,
        )
    if not isinstance(answer, BranchMadePush):
        raise CliError(HostCode.HOST_UNREACHABLE, "the running Maka answered something else")
    document: dict[str, Any] = {
        "sessionId": answer.new_session_id,
        "cwd": answer.cwd,
        "title": answer.title,
        "branchedFrom": json.loads(answer.record) if answer.record else None,
    }
    return _print_made(
        args,
        document,
        answer.source_cwd or "the source folder",
        copy_folder=answer.cwd,
        new_session=answer.new_session_id,
    )


def _option_json(item: Any) -> dict[str, Any]:
    """A ``BranchOptionItem`` with ``BranchOption.to_json``'s fields (the wire's own names)."""
    body: dict[str, Any] = item.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("toolCallId", None)  # the window's, for its transcript cards
    body.pop("toolArgs", None)  # (and for its dialog)
    for flag in ("trimmed", "damagedAside"):
        if not body.get(flag):
            body.pop(flag, None)  # (said only when true, as alone)
    return body
