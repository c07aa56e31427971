"""``maka sessions [--json]``: list sessions (read-only; works while the desktop is open)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from app.cli_errors import EXIT_OK, CliError
from app.data_paths import resolve_data_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    from runtime.agent.session_service import SessionOverview, list_session_overviews
    from runtime.ledger.codes import StoreCode
    from runtime.ledger.ledger_errors import LedgerError
    from storage.ledger_store import open_store

    data_dir = resolve_data_dir(args.data_dir)
    overviews: list[SessionOverview] = []
    try:
        store = open_store(data_dir, read_only=True)
    except LedgerError as error:
        if error.code != StoreCode.STORE_NOT_FOUND:
            raise CliError(str(error.code), error.message) from None
    else:
        try:
            overviews = list_session_overviews(store)
        finally:
            store.close()
    unowned = _nobody_owns(data_dir) if overviews else False
    rows = [_row(overview, unowned) for overview in overviews]
    if args.json:
        json.dump({"sessions": rows}, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return EXIT_OK
    if not rows:
        print("no sessions yet; start one with: maka run --cwd DIR 'write hello.txt saying hi'")
        return EXIT_OK
    for row in rows:
        status = row.get("lastRunStatus") or "no runs"
        flag = "  INTERRUPTED" if row["interrupted"] else ""
        if row.get("awaitingRepair"):
            flag = "  INTERRUPTED (repaired at the next start)"
        print(f"{row['sessionId']}  {status:<10} {row['title'][:40]:<40}  {row['cwd']}{flag}")
    return EXIT_OK


def _nobody_owns(data_dir: Any) -> bool:
    """True when no process owns the data directory right now: then a run still marked
    running or created belongs to a process that is gone (startup recovery will end it)."""
    from main_process.instance_lock import InstanceLock, LockOutcome

    lock = InstanceLock(data_dir)
    if lock.acquire().outcome is not LockOutcome.ACQUIRED:
        return False
    lock.release()
    return True


def _row(overview: Any, unowned: bool) -> dict[str, Any]:
    session = overview.session
    row: dict[str, Any] = {
        "sessionId": session.session_id,
        "cwd": session.cwd,
        "title": session.title,
        "createdAt": session.created_at,
        "interrupted": overview.interrupted,
        "runCount": overview.run_count,
    }
    if overview.last_run_status is not None:
        row["lastRunStatus"] = str(overview.last_run_status)
    if overview.failure_class is not None:
        row["failureClass"] = overview.failure_class
    if unowned and str(overview.last_run_status) in ("created", "running"):
        row["interrupted"] = True
        row["awaitingRepair"] = True
    return row
