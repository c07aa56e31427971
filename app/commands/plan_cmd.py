"""``maka plan SESSION [--json]``: explain whether Safe resume can continue the session's latest
interrupted run, without executing anything.

When no other process owns the data directory, ``plan`` takes ownership and runs startup recovery
first (so a crash is repaired before it is explained); while the desktop owns it, the desktop's
main process (the host) plans from its own store and sends the same words and document
(docs/design/cli.md, "Beside the desktop"); while another command owns it, ``plan`` reads the
database read-only. Exit 0 when the plan continues, 3 when it parks.

Besides the plan, it lists every tool call of the source run with the resolver's status and
reason, so a call settled or parked by startup recovery (a reconciled file write) is explained
per operation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from app.cli_errors import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PARKED,
    EXIT_USAGE,
    CliError,
    refuse_before_a_ledger,
)
from app.data_paths import resolve_data_dir
from runtime.ledger.codes import StoreCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="the session id (see 'maka sessions')")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    from app.host.host_bootstrap import recover_at_startup
    from app.host.host_client import attach
    from app.host.plan_report import explained_plan
    from app.resume_composition import build_resume_service
    from runtime.ledger.ledger_errors import LedgerError
    from runtime.tools.process_tree import BackgroundShellRegistry
    from runtime.tools.tool_catalog import default_catalog
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.instance_lock import InstanceLock, LockOutcome
    from storage.ledger.ledger_store import open_store

    data_dir = resolve_data_dir(args.data_dir)
    host = attach(data_dir, command="plan")
    if host is not None:
        with host:
            return plan_through_host(args, host)

    refuse_before_a_ledger(data_dir, args.session)
    if not data_dir.exists():
        # The ledger is on a server and this data folder is new: made private, as every
        # command that writes makes it (its lock, logs and snapshots go there).
        from storage.private_files import ensure_data_dir

        with contextlib.suppress(OSError):
            ensure_data_dir(data_dir)
    lock = InstanceLock(data_dir)
    taken = lock.acquire()
    owned = taken.outcome is LockOutcome.ACQUIRED
    try:
        try:
            store = open_store(data_dir, read_only=not owned)
        except LedgerError as error:
            raise CliError(error.code, error.message, EXIT_ERROR) from None
        try:
            if owned:
                recover_at_startup(store)
            if store.get_session(args.session) is None:
                raise CliError(
                    StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE
                )
            if taken.outcome is LockOutcome.UNAVAILABLE:
                _refuse_unrepaired(store, data_dir, args.session, taken)
            shells = BackgroundShellRegistry.in_data_dir(data_dir)
            # (looking only: the workspace's snapshot store is not written)
            checkpoints = GitCheckpointStore.from_environment(data_dir, look_only=True)
            service = build_resume_service(
                store, data_dir, default_catalog().names, shells, processes=store, look_only=True
            )
            plan = service.plan_latest(args.session)
            # (a shared ledger: the words name the other process holding the session's lease)
            words = explained_plan(
                store,
                checkpoints,
                plan,
                read_only=not owned,
            )
        finally:
            store.close()
    finally:
        if owned:
            lock.release()
    if args.json:
        print(json.dumps(words.document, ensure_ascii=False))
    else:
        print("\n".join(words.summary))
        if not owned and taken.outcome is LockOutcome.UNAVAILABLE:
            print(
                f"(read-only: the data directory's lock could not be taken: {taken.detail})",
                file=sys.stderr,
            )
        elif not owned:
            print(
                "(read-only: another Maka process owns the data directory, so maka run, maka "
                "resume and maka settle are refused (store_locked) until it closes; the "
                "desktop, if it is the one, offers the same choices on its banner and cards)",
                file=sys.stderr,
            )
    return EXIT_OK if plan.continues else EXIT_PARKED


def _refuse_unrepaired(store: Any, data_dir: Any, session_id: str, taken: Any) -> None:
    """In a data folder this command cannot write (a read-only mount, a full disk), a run of
    the session whose process is gone (nobody owns the folder) cannot be repaired, so no plan
    can be made for it: said so (``data_dir_read_only`` or ``disk_full``), never that the turn
    is still running."""
    import errno

    from app.host.session_rows import orphaned
    from runtime.ledger.command_words import maka_command

    marked = [
        (session_id, header.run_id)
        for header in store.list_session_runs(session_id)
        if str(header.status) in ("created", "running")
    ]
    gone = orphaned(data_dir, marked, store)
    if not gone:
        return
    run_id = gone[0][1]
    error = taken.error
    full = error is not None and error.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1))
    said = (
        f"run {run_id} of session {session_id} was interrupted: no Maka process has this data "
        "folder open, so the process that ran it is gone. Only its repair (which writes to the "
        "data folder) can say what Safe resume may do"
    )
    look = f"{maka_command(f'timeline {session_id}')} shows what it recorded."
    if full:
        raise CliError(
            StoreCode.DISK_FULL,
            f"{said}, and the disk is full ({taken.detail}). Free some space, then run "
            f"{maka_command(f'plan {session_id}')} again; {look}",
            EXIT_ERROR,
        )
    raise CliError(
        StoreCode.DATA_DIR_READ_ONLY,
        f"{said}, and this data folder cannot be written ({taken.detail}). Copy the data folder "
        "somewhere writable and give the copy as --data-dir: maka plan there repairs the run "
        f"and says what can continue. {look}",
        EXIT_ERROR,
    )


def plan_through_host(args: argparse.Namespace, host: Any) -> int:
    """The desktop owns the data folder: it plans from its own store, after its own startup
    recovery, and sends the words and the document this command prints when it owns the folder."""
    from pydantic import ValidationError

    from app.bridge_contract import SessionPlannedPush, SessionsPlanRequest
    from app.host.host_client import HostRefusal
    from runtime.ledger.codes import HostCode

    try:
        from app.host.resume_switch import command_safe_resume

        # The command's own variable decides for this plan, as for maka resume.
        request = SessionsPlanRequest(session_id=args.session, safe_resume=command_safe_resume())
    except ValidationError:
        raise CliError(
            StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE
        ) from None
    try:
        answer = host.ask(request)
    except HostRefusal as refusal:
        usage = str(refusal.code) == StoreCode.SESSION_NOT_FOUND
        raise CliError(refusal.code, refusal.message, EXIT_USAGE if usage else EXIT_ERROR) from None
    if not isinstance(answer, SessionPlannedPush):
        raise CliError(HostCode.HOST_UNREACHABLE, "the running Maka answered something else")
    print(answer.document if args.json else "\n".join(answer.summary))
    return EXIT_OK if answer.continues else EXIT_PARKED
