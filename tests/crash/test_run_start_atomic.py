"""A run's header and its first event commit in one transaction: the real ``maka run`` killed
with SIGKILL between inserting them (``run_start_after_header_insert``) leaves no run at all,
never a run without events (which Safe resume could only park), and the next ``maka run`` in the
same data directory works."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

SCRIPT = [[{"text": "Hello."}], [{"text": "Hello again."}]]


def test_a_kill_between_the_header_and_the_first_event_leaves_no_run(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", SCRIPT))
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "say hello"]
    killed = maka(args, data, env={**env, "MAKA_FAILPOINT": "run_start_after_header_insert"})
    assert killed.returncode == -9, killed.stderr
    assert committed_runs(data) == []  # neither the header nor the message committed

    again = maka(args, data, env=env)
    assert again.returncode == 0, again.stderr
    runs = committed_runs(data)
    assert all(events for _, events in runs)
    assert [header.status.value for header, _ in runs] == ["completed"]
    first: dict[str, Any] = dict(runs[0][1][0])
    assert first["role"] == "user" and first["content"]["text"] == "say hello"
