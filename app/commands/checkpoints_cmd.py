"""``maka checkpoints SESSION [--json]``: a session's workspace checkpoints
(docs/design/workspace.md).

For each run, oldest first: the folder it worked in, whose snapshots these are (``cwd``; a
continuation in a restored copy works in the copy, and ``workspaceIdentity`` names the workspace
they are kept under), the checkpoint mode its first event declared (``git_v1``, or
``unavailable`` with the reason), then every checkpoint (its ref, commit and tree, the committed
run prefix it belongs to, whether its Git objects are still in the checkpoint store, the
files skipped as too large and the paths it left out because an ignore rule came in since the
capture before) and every failed capture with its code. A session imported without its snapshots
(``maka export --no-checkpoints``) says so, and its absent snapshots read "not carried", not
"MISSING" (``importedWithoutSnapshots`` in ``--json``); one whose damaged objects a check
moved aside reads "DAMAGED", with where they went (``damagedAside``). Read-only: it works while
the desktop app or another command runs. Exit 0, or 2 when there is no such session.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from typing import Any

from app.cli_errors import EXIT_OK, EXIT_USAGE, CliError, refuse_before_a_ledger
from app.data_paths import resolve_data_dir
from runtime.ledger.codes import StoreCode
from runtime.ledger.file_names import shown_name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="the session id (see 'maka sessions')")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _when(ts: int) -> str:
    moment = datetime.datetime.fromtimestamp(ts / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def run(args: argparse.Namespace) -> int:
    from runtime.ledger.ledger_errors import LedgerError
    from storage.checkpoints.checkpoint_audit import (
        damaged_aside,
        objects_json,
        removed_by_retention,
        session_checkpoints,
    )
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.checkpoints.checkpoint_transfer import imported_without_snapshots
    from storage.ledger.ledger_store import open_store

    data_dir = resolve_data_dir(args.data_dir)

    refuse_before_a_ledger(data_dir, args.session)
    try:
        store = open_store(data_dir, read_only=True)
    except LedgerError as error:
        raise CliError(error.code, error.message) from None
    with store:
        if store.get_session(args.session) is None:
            raise CliError(StoreCode.SESSION_NOT_FOUND, f"no session {args.session}", EXIT_USAGE)
        carrier = GitCheckpointStore.from_environment(data_dir)
        found = session_checkpoints(store, carrier, args.session)
        trimmed = removed_by_retention(store, carrier, found.rows)
        # Not whole because a check moved their damaged objects aside: damaged, not lost.
        aside = {
            row.event_id: objects
            for row, objects in damaged_aside(
                carrier,
                [
                    row
                    for row in found.rows
                    if row.kind == "checkpoint" and row.present is False
                    and row.event_id not in trimmed
                ],
            )
        }  # fmt: skip
        ignored = _now_ignored(carrier, found.rows)
        origin = store.read_branch(args.session)
    uncarried = args.session in imported_without_snapshots(data_dir)
    # On a shared ledger the carrier says where a missing snapshot may be (another host's).
    shared = carrier.missing_note is not None
    runs: list[dict[str, Any]] = []
    for run_id, mode in found.modes.items():
        rows = [row for row in found.rows if row.run_id == run_id]
        header = found.headers[run_id]
        entry: dict[str, Any] = {"runId": run_id, "cwd": header.cwd}
        if header.workspace_identity is not None:
            entry["workspaceIdentity"] = header.workspace_identity
        entry["mode"] = dict(mode) if mode is not None else None
        entry["checkpoints"] = [
            {
                **row.to_json(),
                **_ignored_of(ignored, row.body),
                **({"trimmed": True} if row.event_id in trimmed else {}),
                **(
                    {"damagedAside": objects_json(aside[row.event_id])}
                    if row.event_id in aside
                    else {}
                ),
            }
            for row in rows
        ]
        runs.append(entry)
    if args.json:
        document: dict[str, Any] = {"sessionId": args.session, "runs": runs}
        if origin is not None:
            document["branchedFrom"] = origin.to_json()
        if uncarried:
            document["importedWithoutSnapshots"] = True
        print(json.dumps(document, ensure_ascii=False))
        return EXIT_OK
    _print_text(args.session, runs, origin, uncarried, shared)
    return EXIT_OK


def _print_text(
    session: str, runs: list[dict[str, Any]], origin: Any, uncarried: bool, shared: bool
) -> None:
    print(f"Workspace checkpoints of session {session}:")
    if origin is not None:
        _print_origin(origin)
    if uncarried:
        print(
            "  imported without its snapshots (exported with --no-checkpoints): they are not "
            "here, and a resume offers to continue with the current files"
        )
    # An absent snapshot the import chose not to bring is expected, not lost; on a shared
    # ledger (PostgreSQL) one another host took is kept in that host's data folder.
    absent = (
        "not here (not carried by the import)"
        if uncarried
        else "not in this data folder (another host's may keep it)"
        if shared
        else "MISSING from the checkpoint store"
    )
    if not runs:
        print("  none yet: the session has no run (its first run takes the first snapshot)")
    for entry in runs:
        mode = entry["mode"]
        if mode is None:
            said = "no checkpoint mode (a run from before checkpoints, or without a carrier)"
        elif mode["mode"] == "git_v1":
            said = "mode git_v1"
        else:
            said = f"mode unavailable ({mode.get('reasonCode', '?')})"
        print(f"  run {entry['runId']} in {shown_name(str(entry['cwd']))}: {said}")
        for row in entry["checkpoints"]:
            when = _when(row["ts"])
            if row["kind"] == "checkpoint":
                state = {True: "present", None: "not checked (no usable git on PATH)"}.get(
                    row["present"], absent
                )
                if row.get("trimmed"):
                    state = "removed by retention (no longer needed)"
                elif row.get("damagedAside"):
                    state = _damaged_state(row["damagedAside"])
                high_water = row["runtimeHighWater"]
                # A snapshot without a high-water mark is the one of a decision to continue
                # with the current files (workspaceBaseline), taken before the run's events.
                at = (
                    f"after event {high_water}"
                    if high_water is not None
                    else "the folder as you answered about an interrupted call"
                    if row.get("decision") == "settle"
                    else "your current files, as you chose to continue with them"
                )
                # The commit is the id the timeline names the snapshot by; the tree, the one
                # a resume compares the folder's files with.
                ids = f"commit {str(row['commitId'])[:12]}  tree {str(row['treeId'])[:12]}"
                print(f"    {when}  {row['checkpointRef']}  {ids}  {at}  {state}")
                for path in row.get("skippedPaths", []):
                    print(f"      skipped (over 50 MiB): {shown_name(path)}")
                for path in row.get("nowIgnoredPaths", []):
                    print(f"      left out, now ignored: {shown_name(path)}")
            elif row.get("decision") == "rebaseline":
                print(
                    f"    {when}  your current files, as you chose to continue with them: not "
                    f"snapshotted [{row['reasonCode']}] {row['message']}"
                )
            else:
                print(f"    {when}  capture FAILED [{row['reasonCode']}] {row['message']}")
        if not entry["checkpoints"]:
            print("    (no checkpoints)")


def _print_origin(origin: Any) -> None:
    """Where a branched session's folder came from: a restored copy of one of its source's
    snapshots (kept with the source's), or of the source folder's files as they were."""
    start = origin.to_json().get("checkpointRef")
    copied = (
        "a copy of the source folder's files as they were when it was branched"
        if origin.current_files or not isinstance(start, str)
        else f"a copy of {start}"
    )
    print(
        f"  its folder began as {copied} (branched from session {origin.source_session_id} at "
        f"event {origin.boundary_event_id})"
    )


def _now_ignored(carrier: Any, rows: list[Any]) -> dict[tuple[str, str], list[str]]:
    """The paths each present snapshot left out because an ignore rule came in."""
    by_workspace: dict[str, list[str]] = {}
    for row in rows:
        if row.kind == "checkpoint" and row.present:
            workspace = str(row.body["workspaceIdentity"])
            by_workspace.setdefault(workspace, []).append(str(row.body["commitId"]))
    found: dict[tuple[str, str], list[str]] = {}
    for workspace, commits in by_workspace.items():
        for commit, paths in carrier.now_ignored(workspace, commits).items():
            found[(workspace, commit)] = paths
    return found


def _ignored_of(ignored: dict[tuple[str, str], list[str]], body: Any) -> dict[str, list[str]]:
    key = (str(body.get("workspaceIdentity")), str(body.get("commitId")))
    paths = ignored.get(key)
    return {"nowIgnoredPaths": paths} if paths else {}


def _damaged_state(objects: list[dict[str, Any]]) -> str:
    """A snapshot that is not whole because objects under it are damaged: moved aside by a
    check (a capture writes them again), or stored bytes Git cannot read."""
    moved = [item for item in objects if item.get("movedTo")]
    if moved:
        return (
            f"DAMAGED: {len(moved)} object(s) moved aside to "
            f"{shown_name(os.path.dirname(str(moved[0]['movedTo'])))} (a capture of "
            "a folder still holding those bytes writes them again)"
        )
    return (
        f"DAMAGED: {len(objects)} folder object(s) whose stored bytes cannot be read "
        "(see maka doctor)"
    )
