"""The TUI's commands that take no argument refuse one clearly (it said "unknown command
/help"), and ``//TEXT`` sends the message ``/TEXT``; alone and beside a running ``maka host``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.crashed_session import FLAG, crashed_run
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
def test_plan_and_timeline_print_what_maka_plan_and_maka_timeline_print(
    tmp_path: Path, beside_a_host: bool
) -> None:
    """``/plan`` and ``/timeline`` in the chat say what ``maka plan S`` and ``maka timeline S``
    say, alone and beside a running host (they were unknown commands: the user had to leave
    the chat to ask why a session parks)."""
    crashed = crashed_run(tmp_path, "P5")  # a park
    env = {**crashed.env, **FLAG}
    session = crashed.session_id
    # The data folder as a user leaves it: startup recovery has ended the killed run.
    assert maka(["plan", session], crashed.data, env=env).returncode == 3
    plan = maka(["plan", session], crashed.data, env=env).stdout
    timeline = maka(["timeline", session], crashed.data, env=env).stdout
    assert "parked" in plan and "resume boundary" in timeline, (plan, timeline)
    host = start_main(crashed.data, env, "host").wait_ready() if beside_a_host else None
    try:
        chat = maka(
            ["tui", "--session", session],
            crashed.data,
            env=env,
            stdin="/plan\n/timeline\n/plan now\n/quit\n",
        )
    finally:
        if host is not None:
            host.stop()
    assert chat.returncode == 0, chat.stderr
    assert "Traceback" not in chat.stdout + chat.stderr
    assert "unknown command" not in chat.stdout, chat.stdout
    assert plan.strip() in chat.stdout, (plan, chat.stdout)
    assert timeline.strip() in chat.stdout, (timeline, chat.stdout)
    assert "/plan takes no argument; /help lists the commands" in chat.stdout
    # Alone, the chat holds the data folder: the maka commands the plan names wait for /quit.
    # (said once when the parked session opens, and again under /plan)
    held = "The maka commands above need the data folder, which this TUI holds: /quit first"
    said = " ".join(chat.stdout.split()).count(held)
    assert said == (0 if beside_a_host else 2), chat.stdout


def test_plan_and_timeline_before_a_session_say_there_is_none_yet(tmp_path: Path) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    env = scripted_env(write_script(tmp_path / "s.json", [[{"text": "Answered."}]]))
    chat = maka(["tui", "--cwd", str(work)], data, env=env, stdin="/plan\n/timeline\n/quit\n")
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.count("no session yet: send a message first") == 2, chat.stdout
