"""Benchmark: branching a session (``maka branch``) against a plain restore of the same snapshot.

Builds a session whose one run holds ``--events`` committed events (a user message, the run's
first workspace capture of a ``--files``-file folder, model texts, the run's ending) in a real
SQLite store with the real Git checkpoint store, then measures side by side, in ``--rounds``
interleaved rounds:

- **restore**: what ``maka resume --restore-to`` does with the snapshot: ``materialize`` the tree
  into a new folder, then ``observe`` it (the check a branch also makes), each timed, and the
  bytes that check writes into the copy's new private repository (objects only that
  repository holds: a linked one is shared with the source's); with ``--git`` the folder is a
  user's repository (committed, packed, 10 files changed, one added) and the user's first
  ``git status`` in each copy is timed too;
- **branch**: ``BranchService.plan`` + ``execute`` at the run's ending: the plan (boundaries, the
  prefix and its digest, the replay gates), the same materialize + verify, and the admission;
- **admission alone**: the ledger write of the branch (one session row, one fact row), median
  of 7, at ``--events`` and at a tenth of them, to show it does not grow with the prefix.

Prints medians in milliseconds (wall clock). Usage::

    .venv/bin/python -m bench.bench_branch [--events 10000] [--files 10000] [--rounds 3]
        [--kb 0] [--git]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.bench_checkpoints import _user_git
from runtime.agent.event_builders import EventBuilder, RunIdentity
from runtime.agent.workspace_checkpointer import WorkspaceCheckpointer
from runtime.continuation.branch_service import BranchService
from runtime.ledger.branch_facts import branch_record
from runtime.ledger.checkpoint_ports import CheckpointMode, ModeDecision
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.sqlite_connection import Synchronous
from storage.sessions.workspace_identity import resolve_workspace_identity


def _now() -> int:
    return time.time_ns() // 1_000_000


def _folder(root: Path, files: int, kb: int, git: bool) -> Path:
    """``files`` files of about ``kb`` KB (80 bytes with 0); with ``git``, a user's repository:
    committed, packed by ``gc``, then 10 files changed and one added."""
    work = root / "work"
    for index in range(files):
        sub = work / f"d{index % 100:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        line = f"file {index}\n"
        body = (line * (kb * 1024 // len(line) + 1))[: kb * 1024] if kb else line * 8
        (sub / f"f{index:05d}.txt").write_text(body)
    if git:
        _user_git(work, "init", "-q")
        _user_git(work, "add", "-A")
        _user_git(work, "-c", "gc.auto=0", "commit", "-q", "-m", "first")
        _user_git(work, "gc", "-q")
        for index in range(10):
            (work / f"d{index:02d}" / f"f{index:05d}.txt").write_text(f"changed {index}\n")
        (work / "untracked.txt").write_text("new\n")
    return work


def _session(store: SqliteLedgerStore, carrier: GitCheckpointStore, work: Path, n: int) -> str:
    """One completed run of ``n`` events with a snapshot of ``work``; returns its ending's id."""
    identity = resolve_workspace_identity(work).identity
    session_id = f"session_bench{n}"
    store.create_session(SessionRecord(session_id, str(work), "bench", _now()))
    ids = RunIdentity(session_id, f"inv-{n}", f"run-{n}", f"turn-{n}")
    header = RunHeader(
        run_id=ids.run_id,
        session_id=session_id,
        invocation_id=ids.invocation_id,
        turn_id=ids.turn_id,
        status=RunStatus.CREATED,
        cwd=str(work),
        owner_epoch=store.read_owner_epoch(),
        created_at=_now(),
        updated_at=_now(),
        workspace_identity=identity,
    )
    builder = EventBuilder(ids)
    mode = ModeDecision(CheckpointMode.GIT_V1)
    store.start_run(
        header, builder.user_message("go", _now(), t1_marker=True, checkpoint_mode=mode.to_json())
    )
    store.mark_run_running(ids.run_id)
    checkpointer = WorkspaceCheckpointer(
        carrier=carrier,
        store=store,
        identity=ids,
        folder=work.resolve(),
        workspace_identity=identity,
        mode=mode,
        clock=_now,
    )
    checkpointer.capture_now()
    for index in range(max(0, n - 3)):
        store.append_event(builder.assistant_text(f"step {index}", _now(), None))
    ending = builder.terminal("completed", _now(), stop_reason="end_turn")
    store.commit_run_ending(ending, RunStatus.COMPLETED, None)
    return str(ending["id"])


def _store_bytes(git_dir: Path) -> int:
    """The disk a private repository's objects take that is its own (allocated blocks; a
    linked object, shared with another repository, is not counted)."""
    seen: set[int] = set()
    total = 0
    for path in (git_dir / "objects").rglob("*"):
        info = path.lstat()
        if path.is_file() and info.st_nlink == 1 and info.st_ino not in seen:
            seen.add(info.st_ino)
            total += info.st_blocks * 512
    return total


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kb", type=int, default=0, help="file size in KB (0: 80 bytes)")
    parser.add_argument("--git", action="store_true", help="the folder is a Git repository")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="maka-bench-branch-"))
    try:
        work = _folder(root, args.files, args.kb, args.git)
        data = root / "data"
        store = open_store(data)
        store.set_synchronous(Synchronous.NORMAL)
        carrier = GitCheckpointStore(data)
        started = time.perf_counter()
        big = _session(store, carrier, work, args.events)
        small = _session(store, carrier, work, max(10, args.events // 10))
        took = time.perf_counter() - started
        print(f"setup: {args.events} events, {args.files} files in {took:.1f} s")
        service = BranchService(store, carrier, now_ms=_now)
        source = f"session_bench{args.events}"
        snapshot = service.plan(source, big, to=str(root / "probe")).snapshot
        assert snapshot is not None
        tree, identity = str(snapshot["treeId"]), str(snapshot["workspaceIdentity"])
        restore: list[float] = []
        copied: list[float] = []
        checked: list[float] = []
        written: list[int] = []
        statuses: list[float] = []
        branch: list[float] = []
        for round_ in range(args.rounds):
            target = root / f"restored-{round_}"
            identities: list[str] = []

            def copy_files(target: Path = target, identities: list[str] = identities) -> None:
                identities.append(
                    carrier.materialize(identity, tree, target, "session_restore", source=work)
                )

            copied.append(_timed(copy_files))
            if args.git:  # the user's first look at the copy, before anything else reads it
                statuses.append(_timed(lambda: _user_git(target, "status", "--porcelain")))  # noqa: B023
            before = _store_bytes(carrier.git_dir(identities[0]))
            checked.append(
                _timed(lambda: carrier.observe(target.resolve(), identities[0]))  # noqa: B023
            )
            written.append(_store_bytes(carrier.git_dir(identities[0])) - before)
            restore.append(copied[-1] + checked[-1])
            copy = root / f"branch-{round_}"

            def make_branch(copy: Path = copy) -> None:
                service.execute(service.plan(source, big, to=str(copy)))

            branch.append(_timed(make_branch))
        admission: dict[str, float] = {}
        for label, session, event in (
            ("full", source, big),
            ("tenth", f"session_bench{max(10, args.events // 10)}", small),
        ):
            made = service.execute(service.plan(session, event, to=str(root / f"adm-{label}")))
            times: list[float] = []
            for n in range(7):
                # The same fact for another new session: the ledger write alone.
                fact = {**made.record.fact, "sessionId": f"{made.session.session_id}x{n}"}
                record = branch_record(fact, _now())
                row = made.session._replace(session_id=record.session_id)
                times.append(_timed(lambda: store.admit_branch(row, record)))  # noqa: B023
            admission[label] = statistics.median(times)
        r, b = statistics.median(restore), statistics.median(branch)
        print(f"restore (materialize + verify), median of {args.rounds}: {r:8.1f} ms")
        print(
            f"  of which the copy {statistics.median(copied):8.1f} ms, its check (observe) "
            f"{statistics.median(checked):8.1f} ms, writing "
            f"{statistics.median(written) / 1024:.0f} KB of disk into the copy's store"
        )
        if statuses:
            print(f"  first git status in the copy, median: {statistics.median(statuses):8.1f} ms")
        print(f"branch (plan + copy + verify + admit), median:     {b:8.1f} ms  ({b / r:.2f}x)")
        print(
            f"branch admission (ledger write, median of 7): {admission['full']:.2f} ms at "
            f"{args.events} "
            f"events, {admission['tenth']:.2f} ms at {max(10, args.events // 10)}"
        )
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
