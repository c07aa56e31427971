"""Branching a session is all or nothing at every step (issue #36): the real ``maka branch`` is
SIGKILLed after the copy was materialized and verified (nothing recorded), inside the admission
transaction (nothing committed) and right after the commit (the new session exists, its first
turn not started). The source session and its folder never change; a branch killed before its
commit records nothing and the same branch again makes exactly one session; a branch killed
after it continues with the prefix. Real Git folder, checkpoints on, the real ``maka``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_branch_cli import Source, _ending_of_first_run
from tests.helpers.maka_run import committed_runs, maka

pytestmark = [pytest.mark.crash, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _sessions(data: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads(maka(["sessions", "--json"], data).stdout)[
        "sessions"
    ]
    return rows


def _prepared(tmp_path: Path) -> tuple[Source, str]:
    src = Source(tmp_path)
    src.run("write the notes")
    src.run("delete them", src.session)
    point = _ending_of_first_run(src.branch(src.session)["boundaries"])
    return src, str(point["eventId"])


@pytest.mark.parametrize(
    "failpoint", ["after_branch_copy_materialized", "branch_admission_before_commit"]
)
def test_a_branch_killed_before_its_commit_records_nothing(tmp_path: Path, failpoint: str) -> None:
    src, event = _prepared(tmp_path)
    before = committed_runs(src.data)
    source_files = sorted(p.name for p in src.work.iterdir())
    copy = tmp_path / "copy"
    args = ["branch", src.session, "--at", event, "--to", str(copy)]
    killed = maka(args, src.data, env={**src.env, "MAKA_FAILPOINT": failpoint})
    assert killed.returncode == -9, killed.stderr

    assert committed_runs(src.data) == before
    assert [row["sessionId"] for row in _sessions(src.data)] == [src.session]
    assert sorted(p.name for p in src.work.iterdir()) == source_files
    # The copy is left where it was made and is never reused silently.
    assert (copy / "a.txt").read_text() == "alpha\n"
    # maka doctor names it: a copy of no session Maka will not use (it said nothing).
    doctor = maka(["doctor", "--json"], src.data, env=src.env)
    assert doctor.returncode == 0, doctor.stderr
    [note] = [n for n in json.loads(doctor.stdout)["notes"] if n.get("path") == str(copy)]
    assert note["code"] == "workspace_restore_abandoned", note
    assert "belongs to no session of this data folder" in note["message"], note
    assert "sessionId" not in note, "its session was never recorded"
    said = maka(["doctor"], src.data, env=src.env).stdout
    assert f"note [workspace_restore_abandoned]: a restored copy at {copy} belongs" in said
    again = maka(args, src.data, env=src.env)
    assert again.returncode == 2 and "[workspace_restore_target_not_empty]" in again.stderr
    # The same branch into a new folder makes exactly one session.
    made = src.branch(src.session, "--at", event, "--to", str(tmp_path / "fresh"))
    rows = _sessions(src.data)
    assert [row["sessionId"] for row in rows] == [src.session, made["sessionId"]]
    assert (tmp_path / "fresh" / "notes.txt").read_text() == "kept\n"


def test_a_branch_killed_after_its_commit_continues_with_the_prefix(tmp_path: Path) -> None:
    src, event = _prepared(tmp_path)
    before = committed_runs(src.data)
    copy = tmp_path / "copy"
    args = ["branch", src.session, "--at", event, "--to", str(copy)]
    env = {**src.env, "MAKA_FAILPOINT": "after_branch_admission_committed"}
    killed = maka(args, src.data, env=env)
    assert killed.returncode == -9, killed.stderr

    assert committed_runs(src.data) == before  # no event copied, no run started
    [_, row] = _sessions(src.data)
    assert row["branchedFrom"] == {
        **row["branchedFrom"],  # type: ignore[dict-item]
        "sourceSessionId": src.session,
        "boundaryEventId": event,
    }
    assert row["runCount"] == 0
    new = str(row["sessionId"])
    src.record.unlink()
    src.run("what now?", new)
    [request] = src.requests()
    joined = "\n".join(json.dumps(item) for item in request["history"])
    assert "Notes written." in joined and "delete them" not in joined
    assert (copy / "a.txt").read_text() == "alpha\n"


def test_a_branch_killed_while_it_copies_leaves_no_scratch_index(tmp_path: Path) -> None:
    """A restore writes the snapshot's files through a scratch index in the data folder,
    removed in a ``finally`` that a SIGKILL skips: a branch killed while it copied left that
    file for good. The next command that owns the data folder removes it (its process is
    gone); one whose process still runs is left alone."""
    import os
    import subprocess
    import time

    from tests.helpers.maka_process import maka_executable

    src = Source(tmp_path)
    for n in range(1500):
        folder = src.work / f"pkg{n % 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"file {n}\n" * 40)
    src.run("write the notes")
    event = str(_ending_of_first_run(src.branch(src.session)["boundaries"])["eventId"])
    store = src.data / "checkpoints"
    environment = {**os.environ, **src.env, "MAKA_DATA_DIR": str(src.data)}
    environment.pop("MAKA_FAILPOINT", None)
    left: list[Path] = []
    for attempt in range(5):
        args = ["branch", src.session, "--at", event, "--to", str(tmp_path / f"copy{attempt}")]
        child = subprocess.Popen([*maka_executable(), *args], env=environment)
        deadline = time.monotonic() + 60
        while child.poll() is None and time.monotonic() < deadline:
            left = list(store.glob("*.restore-*.index"))
            if left:
                child.kill()
                break
            time.sleep(0.001)
        child.wait(timeout=60)
        if left and child.returncode == -9:
            break
    assert left, "the branch was never caught while it copied"
    assert all(path.exists() for path in left)
    # Another process's scratch index while it runs (this test's own process id).
    running = store / f"{left[0].name.split('.restore-')[0]}.restore-{os.getpid()}-0000.index"
    running.write_bytes(b"in use")

    src.run("write the notes", src.session)
    assert not any(path.exists() for path in left)
    assert running.exists(), "a running process's scratch index is left alone"
