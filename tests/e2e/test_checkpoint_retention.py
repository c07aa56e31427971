"""Retention of workspace checkpoints (docs/design/workspace.md section 5) over checkpoints real
``maka run`` turns captured: every checkpoint of the two latest runs, the boundary checkpoint of
each earlier run; orphans (a capture killed before its fact) and the rest deleted,
objects pruned."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from storage.checkpoints.checkpoint_retention import RetentionResult, run_retention
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.ledger.ledger_store import open_store
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _turn(n: int) -> list[dict[str, object]]:
    command = f"echo {n} >> log.txt"
    return [
        {"text": "", "toolCalls": [{"id": f"c{n}", "name": "bash", "args": {"command": command}}]},
        {"text": f"turn {n} done"},
    ]


def test_retention_keeps_the_latest_runs_and_each_boundary(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(
        write_script(tmp_path / "script.json", [_turn(n) for n in range(5)]), checkpoints=True
    )
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "a"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    again = ["run", "--session", session, "--permission-mode", "auto"]
    assert maka([*again, "b"], data, env=env).returncode == 0
    killed = maka([*again, "c"], data, env={**env, "MAKA_FAILPOINT": "after_checkpoint_artifact"})
    assert killed.returncode == -9
    assert maka([*again, "d"], data, env=env).returncode == 0
    runs = [header.run_id for header, _ in committed_runs(data)]
    assert len(runs) == 4
    carrier = GitCheckpointStore(data)
    [repository] = list(carrier.root.glob("*.git"))
    before = set(carrier.refs_in(repository))
    ref = f"refs/maka/{session}/{{}}/{{}}".format
    assert before == {
        ref(runs[0], 1), ref(runs[0], 2),
        ref(runs[1], 1), ref(runs[1], 2),
        ref(runs[2], 1),  # the orphan: its fact was never committed
        ref(runs[3], 1), ref(runs[3], 2),
    }  # fmt: skip
    loose = subprocess.run(
        ["git", "--git-dir", str(repository), "count-objects"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    store = open_store(data, read_only=True)
    try:
        # (a moment later: a ref written just before retention's reading is left alone)
        result = run_retention(store, carrier, now=time.time() + 10)
    finally:
        store.close()
    assert result.errors == []
    after = set(carrier.refs_in(repository))
    # runs[2] and runs[3] are the two latest; runs[2]'s only ref is an orphan.
    assert after == {ref(runs[0], 2), ref(runs[1], 2), ref(runs[3], 1), ref(runs[3], 2)}
    assert sorted(result.deleted) == sorted(
        f"{repository.name} {r}" for r in (ref(runs[0], 1), ref(runs[1], 1), ref(runs[2], 1))
    )
    packed = subprocess.run(
        ["git", "--git-dir", str(repository), "count-objects"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert packed != loose  # gc packed the loose objects
    fsck = subprocess.run(
        ["git", "--git-dir", str(repository), "fsck", "--no-dangling"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert fsck.returncode == 0, fsck.stderr
    # Every kept checkpoint still resolves; a new capture still works after the prune.
    listed = maka(["checkpoints", session, "--json"], data, env=env)
    assert listed.returncode == 0
    # A point whose snapshot retention removed (its objects pruned, as a day later) is said so
    # when a branch asks for it, not called damaged.
    prune = ["git", "--git-dir", str(repository), "prune", "--expire=now"]
    subprocess.run(prune, check=True, capture_output=True)
    points = json.loads(maka(["branch", session, "--json"], data, env=env).stdout)
    [trimmed] = [p for p in points["boundaries"] if p.get("checkpointRef") == ref(runs[0], 1)]
    refused = maka(
        ["branch", session, "--at", trimmed["eventId"], "--to", str(tmp_path / "b")], data, env=env
    )
    assert refused.returncode != 0 and "[branch_snapshot_unavailable]" in refused.stderr
    assert "removed by retention" in refused.stderr and "damaged" not in refused.stderr
    assert not (tmp_path / "b").exists()
    # On a ledger several hosts share, only what retention here recorded removing is said to
    # be removed: another host's snapshot is never in this data folder either.
    from storage.checkpoints.checkpoint_audit import removed_by_retention, session_checkpoints
    from storage.checkpoints.checkpoint_retention import REMOVED_LOG

    shared = GitCheckpointStore(data)
    shared.missing_note = "another host's data folder"
    store = open_store(data, read_only=True)
    try:
        rows = session_checkpoints(store, shared, session).rows
        assert len(removed_by_retention(store, shared, rows)) == 2  # runs[0] and runs[1]'s /1
        log = shared.root / REMOVED_LOG
        recorded = log.read_text()
        log.unlink()
        assert removed_by_retention(store, shared, rows) == set()
        # Without the record (a store from before it), this folder's own rule of what
        # retention keeps tells; with it, a ref gone since it began and not in it was not
        # removed by retention (lost or deleted by hand: missing, a problem).
        assert len(removed_by_retention(store, carrier, rows)) == 2
        log.write_text('{"since": 0}\n')
        assert removed_by_retention(store, carrier, rows) == set()
        log.write_text(recorded)
        assert len(removed_by_retention(store, carrier, rows)) == 2
    finally:
        store.close()
    # So does a branch there: a snapshot gone since the record began, and not in it, was lost.
    log.write_text('{"since": 0}\n')
    lost = maka(
        ["branch", session, "--at", trimmed["eventId"], "--to", str(tmp_path / "b")], data, env=env
    )
    assert lost.returncode != 0 and "[branch_snapshot_unavailable]" in lost.stderr
    said = lost.stderr.replace(str(tmp_path), "TMP")  # (the folder's name says retention)
    assert "no longer whole" in said and "retention" not in said, lost.stderr
    log.write_text(recorded)
    assert maka([*again, "e"], data, env=env).returncode == 0


def test_the_desktop_trims_checkpoints_in_the_background_once_ready(tmp_path: Path) -> None:
    import time

    from tests.helpers.maka_process import main_log, start_main

    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(
        write_script(tmp_path / "script.json", [_turn(n) for n in range(3)]), checkpoints=True
    )
    assert (
        maka(
            ["run", "--cwd", str(work), "--permission-mode", "auto", "a"], data, env=env
        ).returncode
        == 0
    )
    session = committed_runs(data)[0][0].session_id
    for text in ("b", "c"):
        again = ["run", "--session", session, "--permission-mode", "auto", text]
        assert maka(again, data, env=env).returncode == 0
    carrier = GitCheckpointStore(data)
    [repository] = list(carrier.root.glob("*.git"))
    assert len(carrier.refs_in(repository)) == 6
    time.sleep(2.5)  # a ref written just before retention reads the ledger is left alone
    main = start_main(data, env).wait_ready()
    try:
        deadline = time.monotonic() + 60
        while "workspace checkpoints:" not in main_log(data) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "workspace checkpoints: 1 ref(s) deleted, 5 kept" in main_log(data)
    finally:
        main.stop()
    runs = [header.run_id for header, _ in committed_runs(data)]
    assert f"refs/maka/{session}/{runs[0]}/1" not in carrier.refs_in(repository)
    assert len(carrier.refs_in(repository)) == 5


def test_a_capture_made_while_retention_runs_keeps_its_ref(tmp_path: Path) -> None:
    """Retention read the ledger once, then deleted every ref no fact it read named: a capture
    made meanwhile (a run started by another process or a turn of the host, a settle's
    snapshot of an ended run) lost its snapshot. The ledger is read again after the refs are
    listed; a ref neither reading names goes only when it is older than a moment."""
    import time
    from typing import Any

    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(
        write_script(tmp_path / "script.json", [_turn(n) for n in range(3)]), checkpoints=True
    )
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "a"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    again = ["run", "--session", session, "--permission-mode", "auto"]
    assert maka([*again, "b"], data, env=env).returncode == 0
    runs = [header.run_id for header, _ in committed_runs(data)]
    carrier = GitCheckpointStore(data)
    [repository] = list(carrier.root.glob("*.git"))
    store = open_store(data, read_only=True)

    class Reader:
        """The ledger as read by retention: the newest run's facts are committed after the
        first reading (``hidden`` readings), as a capture made meanwhile commits its own."""

        def __init__(self, hidden: int) -> None:
            self.hidden = hidden

        def list_sessions(self) -> Any:
            self.hidden -= 1
            return store.list_sessions()

        def list_session_runs(self, session_id: str) -> Any:
            headers = store.list_session_runs(session_id)
            return [h for h in headers if self.hidden < 0 or h.run_id != runs[-1]]

        def read_run_events(self, run_id: str) -> Any:
            return store.read_run_events(run_id)

    newest = f"/{runs[-1]}/"
    later = time.time() + 60  # every ref older than the moment a capture's fact may lag
    try:
        raced = run_retention(Reader(hidden=1), carrier, prune=False, now=later)
        assert {r for r in carrier.refs_in(repository) if newest in r}, raced.deleted
        assert not [d for d in raced.deleted if newest in d], raced.deleted
        # A ref written a moment before the second reading stays even if no reading names it.
        fresh = run_retention(Reader(hidden=99), carrier, prune=False)
        assert not [d for d in fresh.deleted if newest in d], fresh.deleted
        # Named by no fact in either reading and older than that: an orphan, it goes.
        orphaned = run_retention(Reader(hidden=99), carrier, prune=False, now=later)
        assert [d for d in orphaned.deleted if newest in d], orphaned.deleted
    finally:
        store.close()


def test_refs_of_sessions_the_ledger_does_not_hold_are_kept(tmp_path: Path) -> None:
    """A data folder pointed at another ledger (switched from PostgreSQL to SQLite in
    Settings, or an empty database): its snapshots of the sessions that ledger does not hold
    were all deleted as orphans. They are kept, and the doctor counts them as such. A
    session this data folder removed has its refs deleted, recorded as removed by retention."""
    from runtime.continuation.lifecycle_log import LIFECYCLE_LOG
    from storage.checkpoints.checkpoint_audit import audit_checkpoints
    from storage.checkpoints.checkpoint_retention import LIFECYCLE_LOG as READ_HERE
    from storage.checkpoints.checkpoint_retention import REMOVED_LOG

    assert READ_HERE == LIFECYCLE_LOG
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(
        write_script(tmp_path / "script.json", [_turn(n) for n in range(3)]), checkpoints=True
    )
    assert maka(["run", "--cwd", str(work), "--permission-mode", "auto", "a"], data, env=env)
    session = committed_runs(data)[0][0].session_id
    carrier = GitCheckpointStore(data)
    [repository] = list(carrier.root.glob("*.git"))
    before = set(carrier.refs_in(repository))
    assert before
    # Another ledger (an empty one in another folder) reads this data folder's snapshots.
    other = open_store(tmp_path / "other")
    try:
        result = run_retention(other, carrier, now=time.time() + 10)
        assert result.deleted == [] and set(carrier.refs_in(repository)) == before
        audit = audit_checkpoints(other, carrier)
        assert audit.orphans == [] and len(audit.foreign) == len(before)
    finally:
        other.close()
    # That ledger's data folder holding them: its doctor says whose they may be, no problem.
    (tmp_path / "other" / "checkpoints").mkdir(exist_ok=True)
    shutil.copytree(repository, tmp_path / "other" / "checkpoints" / repository.name)
    doctor = maka(["doctor"], tmp_path / "other")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"{len(before)} refs of sessions this ledger does not hold" in doctor.stdout
    assert " 0 orphan refs" in doctor.stdout, doctor.stdout
    # The session removed here: its refs go, recorded as removed by retention.
    removed = maka(["sessions", "remove", session, "--yes"], data, env=env)
    assert removed.returncode == 0, removed.stderr
    store = open_store(data, read_only=True)
    try:
        result = run_retention(store, carrier, prune=False, now=time.time() + 10)
    finally:
        store.close()
    assert sorted(result.deleted) == sorted(f"{repository.name} {ref}" for ref in before)
    assert carrier.refs_in(repository) == {}
    since, *logged = (carrier.root / REMOVED_LOG).read_text().splitlines()
    assert json.loads(since).keys() == {"since"}  # from when every removal is in it
    assert len(logged) == len(before)
    assert (carrier.root / REMOVED_LOG).stat().st_mode & 0o777 == 0o600


def test_a_snapshot_retention_removed_is_said_so_at_once_and_a_branch_from_it_keeps_it(
    tmp_path: Path,
) -> None:
    """Retention deletes a ref at once and its objects a day later: meanwhile the snapshot
    was listed as present and kept, the doctor counted it nowhere, and a branch made from it
    named a ref that no longer existed, so the next prune removed what the branch came from.
    Now it is said to be removed from the moment its ref is, and a branch from it names it
    again, so retention keeps it."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(
        write_script(tmp_path / "script.json", [_turn(n) for n in range(3)]), checkpoints=True
    )
    assert maka(["run", "--cwd", str(work), "--permission-mode", "auto", "a"], data, env=env)
    session = committed_runs(data)[0][0].session_id
    again = ["run", "--session", session, "--permission-mode", "auto"]
    for message in ("b", "c"):
        assert maka([*again, message], data, env=env).returncode == 0
    first = committed_runs(data)[0][0].run_id
    gone = f"refs/maka/{session}/{first}/1"
    carrier = GitCheckpointStore(data)
    [repository] = list(carrier.root.glob("*.git"))
    store = open_store(data, read_only=True)
    try:
        result = run_retention(store, carrier, prune=False, now=time.time() + 10)
    finally:
        store.close()
    assert result.deleted == [f"{repository.name} {gone}"]
    listed = json.loads(maka(["checkpoints", session, "--json"], data, env=env).stdout)
    rows = {row["checkpointRef"]: row for run in listed["runs"] for row in run["checkpoints"]}
    assert rows[gone].get("trimmed") is True, rows[gone]
    assert [ref for ref, row in rows.items() if row.get("trimmed")] == [gone]
    doctor = maka(["doctor"], data, env=env)
    assert ", 1 removed by retention (no longer needed)" in doctor.stdout, doctor.stdout
    assert " 0 missing" in doctor.stdout, doctor.stdout
    # Its objects are still whole: a branch from it is made, and names it again.
    points = json.loads(maka(["branch", session, "--json"], data, env=env).stdout)
    [point] = [p for p in points["boundaries"] if p.get("checkpointRef") == gone]
    assert point["snapshotKept"] is True
    # Said as maka checkpoints says it: kept only until the prune, unless a branch keeps it.
    assert point.get("trimmed") is True
    assert [p for p in points["boundaries"] if p.get("trimmed")] == [point]
    text = maka(["branch", session], data, env=env).stdout
    [line] = [line for line in text.splitlines() if line.startswith(point["eventId"])]
    assert line.endswith(
        "snapshot kept until the next prune (removed by retention; a branch keeps it)"
    )
    made = maka(
        ["branch", session, "--at", point["eventId"], "--to", str(tmp_path / "b")], data, env=env
    )
    assert made.returncode == 0, made.stderr
    assert gone in carrier.refs_in(repository)
    points = json.loads(maka(["branch", session, "--json"], data, env=env).stdout)
    assert not any(p.get("trimmed") for p in points["boundaries"])  # named again: kept
    store = open_store(data, read_only=True)
    try:
        result = run_retention(store, carrier, now=time.time() + 10)
    finally:
        store.close()
    assert result.errors == [] and gone in carrier.refs_in(repository)
    prune = ["git", "--git-dir", str(repository), "prune", "--expire=now"]
    subprocess.run(prune, check=True, capture_output=True)
    listed = json.loads(maka(["checkpoints", session, "--json"], data, env=env).stdout)
    rows = {row["checkpointRef"]: row for run in listed["runs"] for row in run["checkpoints"]}
    assert rows[gone]["present"] is True and not rows[gone].get("trimmed"), rows[gone]


def test_a_kept_snapshot_whose_ref_was_deleted_is_named_again_not_pruned(tmp_path: Path) -> None:
    """A ref of a kept snapshot deleted by hand (its objects still there): retention names it
    again before it prunes. It pruned it, with nothing said, and the snapshot read MISSING."""
    data, env, session, carrier, repository, refs, gone = _a_snapshot_unnamed(tmp_path)
    commit = refs[gone]
    # Long after: what no ref names is old enough to be pruned.
    result = _retention_later(data, carrier)
    assert result.errors == []
    assert carrier.refs_in(repository) == refs, "named again, the snapshot kept"
    assert result.named_again == [f"{repository.name} {gone}"]
    listed = maka(["checkpoints", session, "--json"], data, env=env)
    assert listed.returncode == 0, listed.stderr
    assert '"MISSING"' not in listed.stdout and "missing" not in listed.stdout.lower(), commit


def test_doctor_notes_a_kept_snapshot_whose_ref_was_deleted(tmp_path: Path) -> None:
    """Between a hand-deleted ref and retention's next pass, ``maka doctor`` notes the kept
    snapshot that lost its name (its files still there) instead of saying nothing; the note
    goes once retention names it again. It said ok with nothing noted."""
    data, env, session, carrier, repository, _, gone = _a_snapshot_unnamed(tmp_path)
    doctor = maka(["doctor", "--json"], data, env=env)
    assert doctor.returncode == 0, doctor.stdout  # a note, not a problem
    document = json.loads(doctor.stdout)
    [note] = [n for n in document["notes"] if n["code"] == "workspace_checkpoint_unnamed"]
    assert note["sessionId"] == session and gone in note["message"], note
    [row] = document["workspaceCheckpoints"]["unnamed"]
    assert row["checkpointRef"] == gone and row["present"] is True, row
    text = maka(["doctor"], data, env=env).stdout
    assert f"note [workspace_checkpoint_unnamed] session {session}: 1 snapshot(s)" in text, text
    result = _retention_later(data, carrier)
    assert result.named_again == [f"{repository.name} {gone}"]
    after = json.loads(maka(["doctor", "--json"], data, env=env).stdout)
    assert not [n for n in after["notes"] if n["code"] == "workspace_checkpoint_unnamed"], after
    assert after["workspaceCheckpoints"]["unnamed"] == []


def _a_snapshot_unnamed(
    tmp_path: Path,
) -> tuple[Path, dict[str, str], str, GitCheckpointStore, Path, dict[str, str], str]:
    """A session of two snapshots whose newest ref was then deleted by hand (its objects still
    there): the data folder, env, session, carrier, private repository, refs before, the ref."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(
        write_script(tmp_path / "script.json", [_turn(n) for n in range(2)]), checkpoints=True
    )
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "a"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    carrier = GitCheckpointStore(data)
    [repository] = list(carrier.root.glob("*.git"))
    refs = carrier.refs_in(repository)
    gone = sorted(refs)[-1]
    subprocess.run(["git", "--git-dir", str(repository), "update-ref", "-d", gone], check=True)
    assert gone not in carrier.refs_in(repository)
    return data, env, session, carrier, repository, refs, gone


def _retention_later(data: Path, carrier: GitCheckpointStore) -> RetentionResult:
    """Retention run ten seconds from now (what no ref names is then old enough to prune)."""
    store = open_store(data, read_only=True)
    try:
        return run_retention(store, carrier, now=time.time() + 10)
    finally:
        store.close()
