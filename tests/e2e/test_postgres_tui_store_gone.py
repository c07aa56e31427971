"""``maka tui`` when the PostgreSQL server stops, alone and through a running ``maka host``:

- a command whose outcome the stopped server refused ends the turn ``tool_boundary_failed``;
  the TUI said only the transcript's "[failed] T2 runtime commit failed" (no class, no word
  that the command may have run, no way on), where ``maka run`` says all three;
- ``/sessions`` (and, alone, ``/transcript``) while the server is down said the error and then
  ended the TUI; the chat now goes on.

The real ``maka``, a real PostgreSQL server stopped and started by the test."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_postgres_outcome_lost import stop_the_server_once_dispatched
from tests.e2e.test_run_through_host import Streaming
from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import scripted_env, write_script

pytestmark = pytest.mark.e2e


def _refused_since(chat: Streaming, before: int) -> bool:
    return "[store_io_failed]" in "".join(chat.err[before:])


def _say(chat: Streaming, line: str) -> None:
    assert chat.process.stdin is not None
    chat.process.stdin.write(line + "\n")
    chat.process.stdin.flush()


@pytest.mark.parametrize("through_host", [False, True], ids=["alone", "through-a-host"])
def test_a_tui_says_how_the_turn_ended_and_goes_on_while_the_server_is_down(
    tmp_path: Path, postgres_cluster: Any, postgres_url: str, through_host: bool
) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    call = {"id": "c1", "name": "bash", "args": {"command": "sleep 3; echo ran > ran.txt"}}
    script = write_script(tmp_path / "script.json", [[{"toolCalls": [call]}, {"text": "done"}]])
    env = {**scripted_env(script), "MAKA_DATABASE_URL": postgres_url}
    host = start_main(data, env, "host").wait_ready() if through_host else None
    chat = Streaming(["tui", "--cwd", str(work), "--permission-mode", "auto"], data, env)
    try:
        _say(chat, "go")
        back = stop_the_server_once_dispatched(postgres_cluster, postgres_url, chat.process)
        try:
            chat.wait_for(lambda: "(tool_boundary_failed)" in "".join(chat.err), 120)
        finally:
            back.join()
        said = " ".join("".join(chat.err).split())
        assert "maka: the turn ended failed (tool_boundary_failed)" in said, chat.text()
        assert "1 tool call (bash) had started with no outcome recorded" in said, chat.text()
        assert "maka plan session_" in said, chat.text()

        postgres_cluster.stop_server()
        try:
            for command in ("/sessions", "/transcript"):
                before = len(chat.err)
                _say(chat, command)
                chat.wait_for(functools.partial(_refused_since, chat, before))
                time.sleep(0.5)
                assert chat.process.poll() is None, chat.text()
        finally:
            postgres_cluster.start_server()
        _say(chat, "/quit")
        assert chat.finish() == 0, chat.text()
        assert "Traceback" not in chat.text()
    finally:
        chat.kill()
        if host is not None:
            host.stop()
