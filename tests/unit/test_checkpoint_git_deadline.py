"""A Git command that does not finish is stopped at its deadline with everything it started
(storage/checkpoints/checkpoint_git.py): the caller gets ``checkpoint_git_timeout`` and no
process of the command is left running (``gc`` starts ``pack-objects``, which would otherwise
keep the pipes open and the caller waiting)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import CheckpointFailureCode
from storage.checkpoints import checkpoint_git
from storage.checkpoints.checkpoint_git import GitCommand, GitRunner
from tests.helpers.processes import pid_running

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell script as git")


def _hanging_git(tmp_path: Path) -> tuple[GitRunner, Path]:
    """A ``git`` that starts a long child holding its pipes, then waits for it."""
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "bin" / "git"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\nsleep 60 &\necho $! > "{pid_file}"\nwait\n')
    script.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    return GitRunner(GitCommand(str(script), (2, 39), "git version 2.39"), home), pid_file


def _child_pid(pid_file: Path) -> int:
    for _ in range(200):
        text = pid_file.read_text().strip() if pid_file.exists() else ""
        if text:
            return int(text)
        time.sleep(0.01)
    raise AssertionError("the script never started its child")


def _gone(pid: int) -> bool:
    for _ in range(300):  # the killed child is reaped by whoever adopts it
        if not pid_running(pid):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("streamed", [False, True])
def test_a_command_past_its_deadline_is_stopped_with_its_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    runner, pid_file = _hanging_git(tmp_path)
    monkeypatch.setattr(checkpoint_git, "GIT_TIMEOUT_S", 0.5)
    with pytest.raises(CheckpointError) as raised:
        if streamed:
            runner.stream(["gc"], git_dir=tmp_path, stdin=b"x\n", consume=lambda out: out.read())
        else:
            runner.run(["gc"], git_dir=tmp_path)
    assert raised.value.code is CheckpointFailureCode.CHECKPOINT_GIT_TIMEOUT
    assert "git gc did not finish" in raised.value.message
    assert _gone(_child_pid(pid_file))


def test_commands_run_side_by_side_share_one_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, pid_file = _hanging_git(tmp_path)
    monkeypatch.setattr(checkpoint_git, "GIT_TIMEOUT_S", 0.5)
    with pytest.raises(CheckpointError) as raised:
        runner.run_together([["ls-files"], ["diff-files"]], git_dir=tmp_path)
    assert raised.value.code is CheckpointFailureCode.CHECKPOINT_GIT_TIMEOUT
    assert "git ls-files did not finish" in raised.value.message
    assert _gone(_child_pid(pid_file))


def test_a_command_that_finishes_gives_its_output_and_exit_code(tmp_path: Path) -> None:
    script = tmp_path / "git"
    script.write_text('#!/bin/sh\ncat\necho "$1" >&2\nexit 3\n')
    script.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    runner = GitRunner(GitCommand(str(script), (2, 39), "git version 2.39"), home)
    assert runner.run(["x"], git_dir=tmp_path, stdin=b"in", ok_codes=(3,)) == b"in"
    with pytest.raises(CheckpointError) as raised:
        runner.run(["x"], git_dir=tmp_path)
    assert raised.value.code is CheckpointFailureCode.CHECKPOINT_GIT_FAILED
    assert raised.value.message.endswith(": -c")  # stderr's last line: the first argument
    assert os.path.isdir(home)


def test_a_nearer_deadline_is_kept_while_a_later_one_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One watchdog serves every command: a command watched for a long time must not make it
    miss a nearer deadline registered after it, and a command that ended is never stopped."""
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    watch = checkpoint_git._WATCHDOG.watch(sleeper, 60.0)
    try:
        runner, pid_file = _hanging_git(tmp_path)
        monkeypatch.setattr(checkpoint_git, "GIT_TIMEOUT_S", 0.5)
        started = time.monotonic()
        with pytest.raises(CheckpointError) as raised:
            runner.run(["gc"], git_dir=tmp_path)
        assert raised.value.code is CheckpointFailureCode.CHECKPOINT_GIT_TIMEOUT
        assert time.monotonic() - started < 20.0
        assert _gone(_child_pid(pid_file))
        assert sleeper.poll() is None  # the long watch has not fired
    finally:
        assert checkpoint_git._WATCHDOG.release(watch) is False
        sleeper.kill()
        sleeper.wait()
    # A watch released in time never stops its command.
    done = subprocess.Popen(["sleep", "0"], start_new_session=True)
    early = checkpoint_git._WATCHDOG.watch(done, 0.2)
    done.wait()
    assert checkpoint_git._WATCHDOG.release(early) is False


def _echoing_git(tmp_path: Path, body: str) -> GitRunner:
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "git"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    return GitRunner(GitCommand(str(script), (2, 39), "git version 2.39"), home)


def test_a_streamed_command_reads_its_input_while_its_output_is_read(tmp_path: Path) -> None:
    """An input and an output far larger than a pipe holds, each written while the other is
    read (written first, whole, it would wait for ever); what ``consume`` leaves unread is
    drained, and a failing command reports its last line of standard error."""
    runner = _echoing_git(tmp_path, 'cat\necho "done $1" >&2\nexit "${EXIT:-0}"')
    data = b"".join(b"%08d\n" % n for n in range(200_000))  # 1.8 MB
    first = runner.stream(["x"], git_dir=tmp_path, stdin=data, consume=lambda out: out.read(9))
    assert first == b"00000000\n"
    assert (
        runner.stream(["x"], git_dir=tmp_path, stdin=data, consume=lambda out: out.read()) == data
    )
    failing = _echoing_git(tmp_path / "f", 'cat >/dev/null\necho "no such object" >&2\nexit 128')
    with pytest.raises(CheckpointError) as raised:
        failing.stream(["cat-file"], git_dir=tmp_path, stdin=data, consume=lambda out: out.read())
    assert raised.value.code is CheckpointFailureCode.CHECKPOINT_GIT_FAILED
    assert raised.value.message == "git cat-file failed: no such object"


def test_what_consume_raises_is_raised_and_the_command_stopped(
    tmp_path: Path,
) -> None:
    runner, pid_file = _hanging_git(tmp_path)

    def refuse(out: object) -> None:
        _child_pid(pid_file)  # the command is running
        raise ValueError("not what was expected")

    started = time.monotonic()
    with pytest.raises(ValueError, match="not what was expected"):
        runner.stream(["cat-file"], git_dir=tmp_path, stdin=b"x\n", consume=refuse)
    assert time.monotonic() - started < 20.0
    assert _gone(_child_pid(pid_file))
