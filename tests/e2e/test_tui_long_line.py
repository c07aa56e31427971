"""A message longer than a terminal line: the real ``maka tui`` on a pseudo-terminal in its
usual (canonical) mode, where the kernel keeps at most 4,095 bytes of a line (fewer characters
when some take two bytes, and possibly half of one) and drops the rest before any program reads
it. The TUI cannot know what was dropped, so it does not send a
message of that length (a cut message would reach the model as if whole): it says why and how to
send a long one, and the chat goes on."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import committed_runs

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="Linux's terminal line limit"),
]


def _read_until(
    leader: int, wanted: bytes, seen: bytearray, after: int = 0, timeout_s: float = 30
) -> None:
    """Read the terminal into ``seen`` until ``wanted`` shows after position ``after``."""
    deadline = time.monotonic() + timeout_s
    while wanted not in seen[after:]:
        assert time.monotonic() < deadline, seen.decode(errors="replace")[-2000:]
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                seen.extend(os.read(leader, 65536))
            except OSError:
                break


LONG_LINES = {
    "ascii": "write long.txt saying " + "x" * 6000 + " END",
    # 4,094 characters reach Maka (4,095 bytes: the limit counts bytes, "é" is two).
    "accented": "write long.txt saying \u00e9" + "a" * 5000 + " END",
    # Cut inside a character: the last byte is half an "é" (not the user's fault: not UTF-8).
    "cut_in_a_character": "\u00e9" * 2100,
}


@pytest.mark.parametrize("kind", sorted(LONG_LINES))
def test_a_message_the_terminal_may_have_cut_is_not_sent(tmp_path: Path, kind: str) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    leader, follower = pty.openpty()
    env = {**os.environ, "MAKA_DATA_DIR": str(data), "MAKA_WORKSPACE_CHECKPOINTS": "on"}
    child = subprocess.Popen(
        [*maka_executable(), "tui", "--cwd", str(work)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = bytearray()
    try:
        _read_until(leader, b"you> ", seen)
        long = LONG_LINES[kind]
        for start in range(0, len(long), 512):  # as a paste arrives
            os.write(leader, long[start : start + 512].encode())
        os.write(leader, b"\n")
        _read_until(leader, b"not sent:", seen)
        _read_until(leader, b"you> ", seen, after=seen.index(b"not sent:"))  # the chat goes on
        os.write(leader, b"/quit\n")
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        os.close(leader)
    said = seen.decode(errors="replace")
    assert "the most a terminal line holds" in " ".join(said.split()), said[-1500:]
    assert "4,095 bytes long" in said
    assert "text_not_utf8" not in said and "title" not in said
    assert not (work / "long.txt").exists()
    assert committed_runs(data) == []  # nothing reached the model
