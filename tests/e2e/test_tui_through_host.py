"""``maka tui`` beside a running ``maka host``: the chat's turns run in the host.

Real processes: ``maka host`` owns a data folder; ``maka tui`` on the same folder, with piped
standard input, sends each message as ``turns.run`` (``maka run``'s request), answers the
permission question from its input, lists sessions and settles through the host, resumes through
it, and reads its transcript and branch points through it. The host keeps serving afterwards.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.ledger.store_ports import RunStatus
from tests.e2e.test_run_through_host import Streaming
from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets"),
]

WRITE = {"id": "w1", "name": "write_file", "args": {"path": "a.txt", "content": "hi\n"}}


def test_tui_beside_maka_host_chats_through_it(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [[{"text": "Writing.", "toolCalls": [WRITE]}, {"text": "done"}], [{"text": "Second."}]],
    )
    env = scripted_env(script)
    host = start_main(data, env, "host").wait_ready()
    try:
        chat = maka(
            ["tui", "--cwd", str(work), "--permission-mode", "ask"],
            data,
            env=env,
            stdin="one\ny\n/sessions\n/transcript\n/branch\n/settle w1 ran\n/resume\ntwo\n/quit\n",
        )
        assert host.process.poll() is None, host.stderr()
        assert chat.returncode == 0, chat.stderr
        assert "Traceback" not in chat.stdout + chat.stderr
        assert f"served by the running Maka: headless (pid {host.pid})" in chat.stdout
        assert "[permission] write_file wants to:" in chat.stdout
        assert "  [permission] allow" in chat.stdout
        assert "Writing." in chat.stdout and "Second." in chat.stdout
        # /transcript and /branch are served by the host (test_tui_views_through_host.py
        # compares them with the TUI's lines alone).
        assert "[store_locked]" not in chat.stdout
        assert "you> one" in chat.stdout and "[tool] write_file" in chat.stdout
        assert "branch one: /branch EVENT [DIR]" in chat.stdout
        assert "not recorded [" in chat.stdout  # w1 completed: nothing to settle
        # The host's own work for that answer is not another client's turn in this chat.
        assert "[viewing]" not in chat.stdout, chat.stdout
        assert (work / "a.txt").read_text() == "hi\n"
        runs = committed_runs(data)
        assert [header.status for header, _ in runs] == [RunStatus.COMPLETED] * 2
        assert len({header.session_id for header, _ in runs}) == 1
        session = runs[0][0].session_id
        assert f"  {session}  completed  {work}" in chat.stdout  # /sessions
        # The session goes on in a second TUI; an unknown one is refused as when alone.
        again = maka(["tui", "--session", session], data, env=env, stdin="/quit\n")
        assert again.returncode == 0, again.stderr
        assert f"maka tui: session {session}, served by the running Maka" in again.stdout
        unknown = maka(["tui", "--session", "session_nope"], data, env=env, stdin="")
        assert unknown.returncode == 2 and "[session_not_found]" in unknown.stderr
        assert host.process.poll() is None, host.stderr()
    finally:
        host.stop()


@pytest.fixture
def chats() -> Iterator[list[Streaming]]:
    started: list[Streaming] = []
    yield started
    for chat in started:
        chat.kill()


def test_ctrl_c_in_the_tui_cancels_its_turn_in_the_host_and_the_chat_goes_on(
    tmp_path: Path, chats: list[Streaming]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    sleeping = {"id": "b1", "name": "bash", "args": {"command": "sleep 60"}}
    script = write_script(
        tmp_path / "script.json",
        [[{"toolCalls": [sleeping]}, {"text": "slept"}], [{"text": "After the stop."}]],
    )
    env = scripted_env(script)
    host = start_main(data, env, "host").wait_ready()
    try:
        chat = Streaming(["tui", "--cwd", str(work), "--permission-mode", "auto"], data, env)
        chats.append(chat)
        assert chat.process.stdin is not None
        chat.process.stdin.write("sleep\n")
        chat.process.stdin.flush()
        chat.wait_for(lambda: any("[tool] bash" in line for line in chat.out))
        session = chat.session()
        busy = maka(["run", "--session", session, "x"], data, env=env)
        assert busy.returncode == 1 and "[session_busy]" in busy.stderr
        assert f"pid {chat.process.pid}" in busy.stderr
        chat.process.send_signal(signal.SIGINT)
        chat.wait_for(lambda: any("cancelling the turn" in line for line in chat.err))
        chat.process.stdin.write("again\n/quit\n")
        chat.process.stdin.flush()
        assert chat.finish() == 0, chat.text()
        assert "After the stop." in "".join(chat.out), chat.text()
        assert "Traceback" not in chat.text()
        assert host.process.poll() is None, host.stderr()
    finally:
        host.stop()
    runs = committed_runs(data)
    assert [header.status for header, _ in runs] == [RunStatus.CANCELLED, RunStatus.COMPLETED]
