"""The TUI's commands that take no argument refuse one clearly (it said "unknown command
/help"), and ``//TEXT`` sends the message ``/TEXT``; alone and beside a running ``maka host``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e]

STDIN = "/help me\n/sessions all\n/transcript full\n/quit now\n//etc/hosts is what?\n/quit\n"


@pytest.mark.parametrize(
    "beside_a_host",
    [
        False,
        pytest.param(
            True,
            marks=pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets"),
        ),
    ],
)
def test_arguments_refused_and_a_double_slash_sends_a_slash(
    tmp_path: Path, beside_a_host: bool
) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    env = scripted_env(write_script(tmp_path / "s.json", [[{"text": "Answered."}]]))
    host = start_main(data, env, "host").wait_ready() if beside_a_host else None
    try:
        chat = maka(["tui", "--cwd", str(work)], data, env=env, stdin=STDIN)
    finally:
        if host is not None:
            host.stop()
    assert chat.returncode == 0, chat.stderr
    for command in ("/help", "/sessions", "/transcript", "/quit"):
        assert f"{command} takes no argument; /help lists the commands" in chat.stdout
    assert "unknown command" not in chat.stdout
    assert "Answered." in chat.stdout  # /quit now did not leave; the message was sent
    listed = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"]
    assert [row["title"] for row in listed] == ["/etc/hosts is what?"]
