"""``maka tui --session S`` beside a running ``maka host``, S's last turn cut off by a crash:
the greeting names the session and its server first, then says what ``/resume`` will do there,
by the host's Safe resume setting (off, ``/resume`` could only park with
``resume_feature_disabled``: it is not offered)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets"),
]

SCRIPT = [
    [
        {"toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> n.txt"}}]},
        {"text": "Counted."},
    ]
]
FLAG = "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"


@pytest.mark.parametrize("host_resume", ["0", "1"])
def test_the_greeting_says_what_the_host_will_do_after_its_header(
    tmp_path: Path, host_resume: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(FLAG, raising=False)
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", SCRIPT))
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count"]
    assert maka(args, data, env={**env, "MAKA_FAILPOINT": "P4"}).returncode == -9
    session = committed_runs(data)[0][0].session_id
    host = start_main(data, {**env, FLAG: host_resume}, "host").wait_ready()
    try:
        chat = maka(["tui", "--session", session], data, env=env, stdin="/quit\n")
    finally:
        host.stop()
    assert chat.returncode == 0, chat.stderr
    header = chat.stdout.index(f"maka tui: session {session}, served by the running Maka")
    said = " ".join(chat.stdout.split())
    if host_resume == "1":
        note = chat.stdout.index("type /resume: the running Maka continues it safely")
    else:
        assert "the running Maka continues it safely" not in said
        assert "Safe resume is turned off in the running Maka" in said
        note = chat.stdout.index("Safe resume is turned off")
    assert header < note, chat.stdout
