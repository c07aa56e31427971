"""``maka sessions [--json]``: list sessions (read-only). While the desktop is open, its main
process (the host that owns the data folder) answers: the same rows from its own store, and
``--json`` adds ``servedBy`` naming it (docs/design/cli.md, "Beside the desktop"). Without a host
the command reads the database itself.

``maka sessions relocate SESSION FOLDER`` points a session whose folder was moved at its new
place (accepted only when the folder's workspace marker, ``.maka/workspace.json`` or the older
``.maka-workspace.json``, is the session's workspace; a
FOLDER refused, missing or of another workspace alike, exits 2 and changes nothing);
``maka sessions rename SESSION TITLE`` renames it; ``maka sessions remove SESSION --yes`` deletes
it and its history (export it first with ``maka export``). These three take the data directory
like ``maka run``; while a host serves it (the desktop, ``maka host``), the host makes the change
(the same checks, and every window hears it) and a running session is refused with
``session_busy``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, refuse_before_a_ledger
from app.data_paths import resolve_data_dir
from app.host.session_rows import host_flag, may_await_repair, nobody_owns, session_row
from runtime.ledger import codes  # each enum loaded where it is used (start-up time)
from runtime.ledger.command_words import maka_command
from runtime.ledger.file_names import shown_name

SAFE_RESUME_OFF = (
    "Safe resume is off: maka resume continues no session until it is turned on in the "
    "desktop's Settings (or MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    actions = parser.add_subparsers(
        dest="action",
        metavar="ACTION",
        description="without an action, list the sessions",
    )
    relocate = actions.add_parser(
        "relocate",
        help="point a session at its moved folder (its workspace marker must match)",
        description="Point SESSION at FOLDER, its folder's new place. Accepted only when "
        "FOLDER's workspace marker (.maka/workspace.json, or .maka-workspace.json from older "
        "versions) names the workspace the session ran in; recorded in "
        "logs/lifecycle.jsonl.",
    )
    relocate.add_argument("session", help="the session id (see 'maka sessions')")
    relocate.add_argument("folder", help="the folder's new place")
    rename = actions.add_parser("rename", help="give a session a new title")
    rename.add_argument("session", help="the session id")
    rename.add_argument("title", help="the new title (one line)")
    remove = actions.add_parser(
        "remove",
        help="delete a session and its history (export it first with 'maka export')",
        description="Delete SESSION and its whole ledger from the data directory. Its folder "
        "and files are not touched. Save it first with 'maka export SESSION -o FILE'.",
    )
    remove.add_argument("session", help="the session id")
    remove.add_argument(
        "--yes", action="store_true", help="confirm that the session's history is deleted"
    )
    for action in (relocate, rename, remove):
        # After the action too, as every other command takes it (unset: the one before it).
        action.add_argument(
            "--data-dir",
            default=argparse.SUPPRESS,
            help="data directory (default: MAKA_DATA_DIR or per-user)",
        )
        action.add_argument(
            "--json",
            action="store_true",
            default=argparse.SUPPRESS,
            help="print one JSON document",
        )


def run(args: argparse.Namespace) -> int:
    if getattr(args, "action", None):
        return _change(args)
    return _list(args)


def _change(args: argparse.Namespace) -> int:
    from app.commands.cli_session_host import owned_store
    from app.host.host_bootstrap import now_ms
    from app.host.session_relocation import (
        SessionChangeRefused,
        relocate_session,
        remove_session,
    )
    from runtime.continuation.lifecycle_log import LifecycleLog
    from runtime.ledger.ledger_errors import LedgerError

    data_dir = resolve_data_dir(args.data_dir)
    from app.host.host_client import attach
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    host = attach(data_dir, command="sessions")
    if host is not None:
        with host:
            if args.action == "remove" and not args.yes:
                _confirm_removal(args, _known_to_host(host, args.session))
            return _change_through_host(args, host)
    if args.action == "remove" and not args.yes:
        refuse_before_a_ledger(data_dir, args.session)
        _confirm_removal(args, _known_in(data_dir, args.session))
    # (after a host had its say, as every other command: with the ledger on a server, this
    # look is a connection of its own)
    refuse_before_a_ledger(data_dir, args.session)
    with owned_store(data_dir) as store:
        lifecycle = LifecycleLog.in_data_dir(data_dir, now_ms)
        try:
            if args.action == "relocate":
                given: list[bool] = []
                moved = relocate_session(
                    store,
                    args.session,
                    Path(args.folder).expanduser().absolute(),
                    lifecycle,
                    on_marker_given_back=lambda: given.append(True),
                    follow_folder=GitCheckpointStore.from_environment(data_dir).follow_folder,
                )
                _changed(args, cwd=moved.cwd, given_back=bool(given))
            elif args.action == "rename":
                store.rename_session(args.session, args.title)
                _changed(args, title=args.title.strip())
            else:
                removed = remove_session(store, args.session, lifecycle)
                _changed(args, title=removed.title, cwd=removed.cwd)
        except SessionChangeRefused as refusal:
            # A refused relocation exits 2 (docs/design/cli.md: usage or invalid input) when the
            # SESSION or FOLDER given cannot be used: no such session, no such folder, a folder of
            # another workspace or without a marker, a damaged marker; the same folder mistakes
            # ``maka run --cwd`` refuses with 2. Only a session that recorded no workspace
            # identity is refused whatever folder is given: exit 1.
            state = refusal.code == codes.HostCode.WORKSPACE_IDENTITY_MISSING
            exit_code = EXIT_ERROR if state else EXIT_USAGE
            raise CliError(refusal.code, refusal.message, exit_code) from None
        except LedgerError as error:
            usage = error.code in (
                "session_not_found",
                "session_title_invalid",
                "identity_conflict",
            )
            raise CliError(error.code, error.message, EXIT_USAGE if usage else EXIT_ERROR) from None
    return EXIT_OK


def _confirm_removal(args: argparse.Namespace, known: bool | None) -> None:
    """``maka sessions remove S`` without ``--yes``: ``session_not_found`` for a session that is
    not there (as with ``--yes``), else ``confirmation_required`` with the way on (also when
    whether it is there could not be read: the command with ``--yes`` says it then)."""
    if known is False:
        raise CliError(codes.StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE)
    raise CliError(
        codes.HostCode.CONFIRMATION_REQUIRED,
        "removing deletes the session's history; save it first "
        f"({maka_command(f'export {args.session} -o FILE')}), then run "
        f"{maka_command(f'sessions remove {args.session} --yes')}",
        EXIT_USAGE,
    )


def _known_in(data_dir: Path, session_id: str) -> bool | None:
    """Whether the data folder's ledger has ``session_id``, read without owning the folder
    (None when it cannot be read)."""
    from runtime.ledger.ledger_errors import LedgerError
    from storage.sessions.session_listing import SessionListing

    try:
        with SessionListing.open(data_dir) as listing:
            return any(s.session_id == session_id for s in listing.list_sessions())
    except LedgerError:
        return None


def _known_to_host(host: Any, session_id: str) -> bool | None:
    """Whether the host's sessions overview has ``session_id`` (None: no overview came)."""
    from app.bridge_contract import SessionsOverviewedPush, SessionsOverviewRequest
    from app.host.host_client import HostRefusal

    try:
        listing = host.ask(SessionsOverviewRequest())
    except HostRefusal:
        return None
    if not isinstance(listing, SessionsOverviewedPush):
        return None
    return any(row.session_id == session_id for row in listing.rows)


def _change_through_host(args: argparse.Namespace, host: Any) -> int:
    """A host serves the data folder: it relocates, renames or removes (its store, its checks;
    every window hears the change). Refusals exit as they do without a host."""
    from pydantic import ValidationError

    from app.bridge_contract import (
        Message,
        SessionRemovedPush,
        SessionsOverviewedPush,
        SessionsOverviewRequest,
        SessionsRelocateRequest,
        SessionsRemoveRequest,
        SessionsRenameRequest,
        SessionUpdatedPush,
    )
    from app.host.host_client import HostRefusal
    from runtime.ledger.codes import WorkspaceMarkerCode, WriterRejectionCode

    folder = Path(args.folder).expanduser().absolute() if args.action == "relocate" else None
    removed: Any = None
    try:
        if args.action == "remove":
            # The host's answer names only the session: the line says what was removed.
            listing = host.ask(SessionsOverviewRequest())
            if isinstance(listing, SessionsOverviewedPush):
                removed = next(
                    (row for row in listing.rows if row.session_id == args.session), None
                )
            request: Message = SessionsRemoveRequest(session_id=args.session)
        elif args.action == "relocate":
            request = SessionsRelocateRequest(session_id=args.session, cwd=str(folder))
        else:
            request = SessionsRenameRequest(session_id=args.session, title=args.title.strip())
    except ValidationError as error:
        if args.action == "rename" and any(e["loc"][-1] == "title" for e in error.errors()):
            from runtime.ledger.session_title import MAX_TITLE_CHARS

            text = f"a title is one line of 1 to {MAX_TITLE_CHARS} characters"
            raise CliError(codes.StoreCode.SESSION_TITLE_INVALID, text, EXIT_USAGE) from None
        text = f"no session {args.session}"
        raise CliError(codes.StoreCode.SESSION_NOT_FOUND, text, EXIT_USAGE) from None
    before = _marker_of(folder)
    try:
        answer = host.ask(request)
    except HostRefusal as refusal:
        # As without a host: the SESSION or FOLDER given cannot be used -> 2; a state -> 1.
        # (and only a session that recorded no workspace identity is a state, whatever FOLDER)
        usage = refusal.code in WorkspaceMarkerCode or refusal.code in (
            codes.StoreCode.SESSION_NOT_FOUND,
            codes.StoreCode.SESSION_TITLE_INVALID,
            WriterRejectionCode.IDENTITY_CONFLICT,
            codes.HostCode.INVALID_CWD,
            codes.HostCode.WORKSPACE_IDENTITY_DIFFERS,
        )
        raise CliError(refusal.code, refusal.message, EXIT_USAGE if usage else EXIT_ERROR) from None
    if args.action == "remove" and isinstance(answer, SessionRemovedPush):
        title = removed.title if removed is not None else None
        cwd = removed.cwd if removed is not None else None
        _changed(args, title=title, cwd=cwd)
        return EXIT_OK
    if not isinstance(answer, SessionUpdatedPush):
        raise CliError(codes.HostCode.HOST_UNREACHABLE, "the running Maka answered something else")
    if args.action == "relocate":
        # The host gave the folder its marker back when the marker there changed: read, as
        # the command alone would say it (the host's answer names only the session).
        given_back = folder is not None and _marker_of(folder) != before
        _changed(args, cwd=answer.session.cwd, given_back=given_back)
    else:
        _changed(args, title=answer.session.title)
    return EXIT_OK


def _marker_of(folder: Path | None) -> str | None:
    """The identity ``folder``'s marker names (read only), or None."""
    if folder is None:
        return None
    from runtime.ledger.ledger_errors import LedgerError
    from storage.sessions.workspace_identity import read_workspace_identity

    try:
        found = read_workspace_identity(folder)
    except (LedgerError, OSError):
        return None
    return found.identity if found is not None else None


def _changed(
    args: argparse.Namespace,
    *,
    title: str | None = None,
    cwd: str | None = None,
    given_back: bool = False,
) -> None:
    """The line a change prints, or with ``--json`` its one document: ``{sessionId, action,
    cwd}`` (relocated), ``{sessionId, action, title}`` (renamed) or both (removed)."""
    if args.json:
        import json

        done = {"relocate": "relocated", "rename": "renamed", "remove": "removed"}[args.action]
        document: dict[str, Any] = {"sessionId": args.session, "action": done}
        if args.action != "rename":
            document["cwd"] = cwd
        if args.action != "relocate":
            document["title"] = title
        if given_back:
            document["markerGivenBack"] = True
        print(json.dumps(document, ensure_ascii=False))
    elif given_back:
        print(
            f"session {args.session} uses {shown_name(cwd or '')} again: its workspace marker "
            "was given back (it had been deleted, or made anew since)"
        )
    elif args.action == "relocate":
        print(f"session {args.session} now uses {shown_name(cwd or '')}")
    elif args.action == "rename":
        print(f"session {args.session} is now called {title!r}")
    else:
        print(f"removed session {args.session} ({title}); {cwd} untouched")


def _list(args: argparse.Namespace) -> int:
    # Only what listing needs: no run loop, tools, providers or store writers (start-up time).
    from app.host.host_client import attach
    from runtime.agent.session_overview import SessionOverview, list_session_overviews
    from runtime.ledger.ledger_errors import LedgerError
    from storage.sessions.session_listing import SessionListing

    data_dir = resolve_data_dir(args.data_dir)
    host = attach(data_dir, command="sessions")
    if host is not None:
        with host:
            return _list_from_host(args, data_dir, host)

    def read() -> list[SessionOverview]:
        try:
            listing = SessionListing.open(data_dir)
        except LedgerError as error:
            if error.code != codes.StoreCode.STORE_NOT_FOUND:
                raise CliError(error.code, error.message) from None
            return []
        with listing:
            return list_session_overviews(listing)

    overviews = read()
    # Whether anybody owns the folder matters only to a row whose last run is still marked
    # created or running (``session_row``): the lock is tested only then, and the sessions
    # are read again after it. A row awaits repair when its last run was marked before the
    # look and still is after it (``session_rows.orphaned``): a turn that ended meanwhile
    # (its process lets go of the folder only after ending it) does not.
    marked = {(o.session.session_id, o.run_count) for o in overviews if may_await_repair(o)}
    awaiting: set[tuple[str, int]] = set()
    from storage.ledger.database_choice import uses_postgres

    if marked and uses_postgres(data_dir):
        # A shared ledger: the process is gone when nobody holds the session's lease now.
        from app.host.session_rows import sessions_unheld
        from storage.ledger.ledger_store import open_store

        try:
            with open_store(data_dir, read_only=True) as store:
                unheld = sessions_unheld(store, {session_id for session_id, _ in marked})
        except LedgerError:
            unheld = set()
        if unheld:
            overviews = read()
            awaiting = {
                (o.session.session_id, o.run_count)
                for o in overviews
                if may_await_repair(o) and o.session.session_id in unheld
            } & marked
    elif marked and nobody_owns(data_dir):
        overviews = read()
        awaiting = {
            (o.session.session_id, o.run_count) for o in overviews if may_await_repair(o)
        } & marked
    unreadable: set[str] = set()
    if awaiting and not uses_postgres(data_dir):
        # A run the last start could not repair (its record does not decode) never will be.
        from app.host.session_rows import quarantined_sessions

        try:
            with SessionListing.open(data_dir) as listing:
                unreadable = quarantined_sessions(listing, {s for s, _ in awaiting})
        except LedgerError:
            unreadable = set()
        awaiting = {row for row in awaiting if row[0] not in unreadable}
    folders: dict[str, bool] = {}  # sessions often share a folder: look each up once
    rows = [
        session_row(
            overview,
            (overview.session.session_id, overview.run_count) in awaiting,
            folders,
            overview.session.session_id in unreadable,
        )
        for overview in overviews
    ]
    return _print(args, data_dir, rows, None)


def _with_hosts(rows: list[dict[str, Any]], data_dir: Path) -> None:
    """On PostgreSQL, each row's ``host``: the holder of the session's live lease (the host
    serving it now), or None when no host holds it (docs/postgres.md)."""
    from storage.ledger.store_open import database_url

    url = database_url(data_dir)
    if url is None or not rows:
        return
    from runtime.ledger.ledger_errors import LedgerError
    from storage.ledger.postgres_doctor import lease_holders

    try:
        holders = lease_holders(url)
    except LedgerError as error:
        raise CliError(error.code, error.message) from None
    from app.host.session_rows import host_fields

    for row in rows:
        row.update(host_fields(holders.get(row["sessionId"])))


def _print(
    args: argparse.Namespace,
    data_dir: Path,
    rows: list[dict[str, Any]],
    served: Any,
    host_resume: bool | None = None,
) -> int:
    """``host_resume``: the serving host's Safe resume setting, which ``maka resume`` through it
    uses unless the command sets MAKA_RUNTIME_SAFE_BOUNDARY_RESUME itself."""
    _with_hosts(rows, data_dir)
    if args.json:
        import json  # only here: the text list does without it (start-up time)

        document: dict[str, Any] = {"sessions": rows}
        if served is not None:
            document["servedBy"] = served
        json.dump(document, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return EXIT_OK
    if not rows:
        start = maka_command("run --cwd DIR 'write hello.txt saying hi'")
        print(f"no sessions yet; start one with: {start}")
        return EXIT_OK
    from app.host.resume_switch import command_safe_resume, resume_enabled

    # Off, 'maka resume' can only refuse: the hint would send the user to a refusal.
    enabled = False
    if any(row["resumable"] for row in rows):
        by_host = host_resume is not None and command_safe_resume() is None
        enabled = bool(host_resume) if by_host else resume_enabled(data_dir)
    lines: list[str] = []  # written at once: one pass of the terminal guard, not one per row
    for row in rows:
        status = row.get("lastRunStatus") or "no runs"
        flag = "  INTERRUPTED" if row["interrupted"] else ""
        if row.get("awaitingRepair"):
            flag = "  INTERRUPTED (repaired at the next start)"
        if row.get("recordUnreadable"):
            why = maka_command(f"plan {row['sessionId']}")
            flag = f"  INTERRUPTED (its record cannot be read: {why} says why)"
        if row["resumable"] and enabled:
            # The listing does not plan: the resume may still park (an unknown outcome, changed
            # files), and then it says why instead of continuing.
            resume = maka_command(f"resume {row['sessionId']}")
            flag += f"  ({resume} continues it or says what holds it)"
        branched = row.get("branchedFrom")
        if branched:
            flag += f"  (branch of {branched['sourceSessionId']} at {branched['boundaryEventId']})"
        if row.get("branches"):
            flag += f"  ({len(row['branches'])} branch(es) made from it)"
        if row["folderMissing"]:
            relocate = maka_command(f"sessions relocate {row['sessionId']} NEW_FOLDER")
            flag += f"  FOLDER MISSING ({relocate})"
        flag += host_flag(row)
        lines.append(
            f"{row['sessionId']}  {status:<10} {row['title'][:40]:<40}  "
            f"{shown_name(str(row['cwd']))}{flag}\n"
        )
    if any(row["resumable"] for row in rows) and not enabled:
        lines.append(f"{SAFE_RESUME_OFF}\n")
    sys.stdout.write("".join(lines))
    return EXIT_OK


def _list_from_host(args: argparse.Namespace, data_dir: Path, host: Any) -> int:
    """The running desktop owns the folder: it lists from its own store (the same rows)."""
    from app.bridge_contract import SessionsOverviewedPush, SessionsOverviewRequest
    from app.host.session_rows import rows_from_wire

    answer = host.ask(SessionsOverviewRequest())
    if not isinstance(answer, SessionsOverviewedPush):
        raise CliError(codes.HostCode.HOST_UNREACHABLE, "the running Maka answered something else")
    served = {"host": str(host.host_kind), "pid": host.host_pid}
    return _print(args, data_dir, rows_from_wire(answer.rows), served, answer.safe_resume)
