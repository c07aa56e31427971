"""``maka timeline SESSION [--run R] [--only-problems] [--json]``: a session's record as a
timeline: its runs in lineage order, each run's events on the ``event_seq`` axis, tool calls
grouped, and, for an interrupted session, the reasons of the same plan Safe resume makes pinned
to the rows they concern.

It reads the database and never writes it: the store is opened read-only whoever owns the
data directory, so it works beside a running desktop (startup recovery is not run, so a crash
nobody has recovered yet shows as it was left; ``maka plan`` repairs first).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli_errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, refuse_before_a_ledger
from app.data_paths import resolve_data_dir
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.command_words import maka_command

if TYPE_CHECKING:
    from app.host.branch_session import BranchMark
    from runtime.ledger.store_ports import LedgerReader
    from runtime.ledger.timeline_model import TimelineRun


def _safe_resume_here(data_dir: Path) -> bool:
    """Whether Safe resume is on for the plan the timeline shows: the command's own variable
    when set; else, beside a running host, the host's (it is the one ``maka resume`` and
    ``maka plan`` go through, and its variable may differ from this shell's); else the
    desktop's setting. Timeline said Safe resume was off beside a host that had it on."""
    from app.host.resume_switch import command_safe_resume, resume_enabled

    own = command_safe_resume()
    if own is not None:
        return own
    from app.host.host_client import HostConnectionError, attach

    try:
        host = attach(data_dir)  # (a reader: it answers no question there)
    except HostConnectionError:
        host = None
    if host is not None:
        with host:  # its hello says (a reader: it is asked nothing more)
            if host.safe_resume is not None:
                return host.safe_resume
    return resume_enabled(data_dir)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="the session id (see 'maka sessions')")
    parser.add_argument("--run", metavar="R", help="only this run of the session")
    parser.add_argument(
        "--only-problems", action="store_true", help="only rows that failed, parked or are unknown"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def run(args: argparse.Namespace) -> int:
    from app.commands.timeline_text import write_timeline, write_timeline_json
    from app.host.host_bootstrap import now_ms
    from app.host.resume_seam import resume_service
    from app.host.session_timeline import read_session_timeline
    from runtime.ledger.ledger_errors import LedgerError
    from runtime.ledger.timeline_pins import only_problems
    from runtime.tools.process_tree import BackgroundShellRegistry
    from runtime.tools.tool_catalog import default_catalog
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.ledger.ledger_store import open_store

    if args.run is not None and not args.run.strip():
        # (an unset shell variable, ``--run "$R"``: no run is named, as ``--at ""`` names none)
        raise CliError(
            HostCode.INVALID_ARGUMENT,
            "the run id (--run) is empty; nothing was changed",
            EXIT_USAGE,
        )
    data_dir = resolve_data_dir(args.data_dir)

    refuse_before_a_ledger(data_dir, args.session)
    try:
        store = open_store(data_dir, read_only=True)
    except LedgerError as error:
        raise CliError(error.code, error.message, EXIT_ERROR) from None
    try:
        if store.get_session(args.session) is None:
            raise CliError(StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE)
        # The planner Safe resume runs, without the lifecycle log: looking is not planning.
        service = resume_service(
            store,
            default_catalog().names,
            BackgroundShellRegistry.in_data_dir(data_dir),
            enabled=_safe_resume_here(data_dir),
            clock=now_ms,
            lifecycle=None,
            processes=store,
            checkpoints=GitCheckpointStore.from_environment(data_dir, look_only=True),
        )
        timeline = read_session_timeline(store, args.session, service.plan_latest, run_id=args.run)
        origin = store.read_branch(args.session)
        from app.host.branch_session import branches_from

        branches = branches_from(store, args.session)
        abandoned = _awaiting_repair(store, args.session, timeline.runs, data_dir)
        from app.host.plan_report import lease_holder

        marked = [r.run_id for r in timeline.runs if r.status in ("created", "running")]
        # A shared ledger: a killed maka run or host of this computer still holds the lease.
        lease = lease_holder(store, args.session) if marked else None
        gone_holder = lease.holder if lease is not None and lease.gone else None
    finally:
        store.close()
    if args.run is not None and not timeline.runs:
        raise CliError(
            StoreCode.RUN_NOT_FOUND, f"session {args.session} has no run {args.run}", EXIT_USAGE
        )
    runs = timeline.runs
    header = timeline.header
    if args.only_problems:
        runs = only_problems(runs, header.pins if header is not None else (), abandoned)
    if args.json:
        extra: dict[str, object] = {"sessionId": args.session}
        if origin is not None:
            extra["branchedFrom"] = origin.to_json()
        extra.update(_branches_json(branches))
        if abandoned:
            extra["awaitingRepair"] = sorted(abandoned)
        if gone_holder is not None:
            extra.update({"leaseHeldBy": gone_holder, "leaseHolderGone": True})
        write_timeline_json(runs, header, extra)
    else:
        from app.host.session_rows import gone_words, held_by_gone_words

        if gone_holder is not None:
            for run_id in marked:
                print(held_by_gone_words(run_id, gone_holder))

        writable = os.access(data_dir, os.W_OK)
        for run_id in sorted(abandoned):
            repair = (
                "It is repaired at the next start; "
                f"{maka_command(f'plan {args.session}')} repairs it now and says what can "
                "continue."
                if writable
                else "This data folder cannot be written, so it cannot be repaired here: copy "
                "the data folder somewhere writable and give the copy as --data-dir, where "
                "maka plan repairs it and says what can continue."
            )
            print(
                f"run {run_id} is still marked running, but {gone_words(data_dir)}: the "
                f"process that ran it is gone. {repair}"
            )
        if origin is not None:
            # Its record starts with its source's, by reference: say where that part is.
            from app.host.branch_session import branch_header_words

            print(
                f"{branch_header_words(origin)}; the history before this session's first run is "
                "that session's up to there "
                f"({maka_command(f'timeline {origin.source_session_id}')})"
            )
        write_timeline(runs, header, only_problems=args.only_problems, branched=_by_event(branches))
    return EXIT_OK


def _branches_json(branches: Sequence[BranchMark]) -> dict[str, object]:
    """The sessions branched from this one, each with the event it was branched after."""
    if not branches:
        return {}
    return {
        "branches": [
            {"sessionId": mark.session_id, "afterEvent": mark.boundary_event_id}
            for mark in branches
        ]
    }


def _by_event(branches: Sequence[BranchMark]) -> dict[str, list[str]]:
    branched: dict[str, list[str]] = {}
    for mark in branches:
        branched.setdefault(mark.boundary_event_id, []).append(mark.session_id)
    return branched


def _awaiting_repair(
    store: LedgerReader, session_id: str, runs: Sequence[TimelineRun], data_dir: Path
) -> frozenset[str]:
    """The runs still marked created or running while nobody owns the data folder, and still
    so once that was looked at: their process is gone and startup recovery has not repaired
    them yet (``maka sessions`` says "INTERRUPTED (repaired at the next start)" of them). A
    turn that ended while the timeline was read is not one of them."""
    from app.host.session_rows import orphaned

    marked = [(session_id, run.run_id) for run in runs if run.status in ("created", "running")]
    found = orphaned(data_dir, marked, store)
    return frozenset(run_id for _, run_id in found)
