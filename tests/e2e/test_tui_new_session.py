"""A new ``maka tui`` chat makes its session with its first message: a chat ended before one
(end of input, ``/quit``) leaves no empty session in ``maka sessions`` or the desktop's list,
alone or beside a running ``maka host``. Commands about the session say there is none yet."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e]
USAGE = "usage: /settle CALL ran|not-run [NOTE]  (CALL as /transcript or maka plan shows)"


def _sessions(data: Path) -> list[dict[str, object]]:
    listed = maka(["sessions", "--json"], data)
    assert listed.returncode == 0, listed.stderr
    sessions: list[dict[str, object]] = json.loads(listed.stdout)["sessions"]
    return sessions


@pytest.mark.parametrize(
    "stdin", ["", "/quit\n", "/transcript\n/resume\n/settle c1 ran\n/sessions\n/quit\n"]
)
def test_a_chat_ended_before_its_first_message_leaves_no_session(
    tmp_path: Path, stdin: str
) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    chat = maka(["tui", "--cwd", str(work)], data, stdin=stdin)
    assert chat.returncode == 0, chat.stderr
    assert f"maka tui: a new session in {work.resolve()}" in chat.stdout
    if "/transcript" in stdin:
        assert chat.stdout.count("no session yet: send a message first") == 3
        assert "no sessions yet: a message you send here starts one" in chat.stdout
    assert _sessions(data) == []


def test_the_first_message_makes_the_session_and_names_it(tmp_path: Path) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    script = write_script(tmp_path / "script.json", [[{"text": "Hello."}], [{"text": "Again."}]])
    chat = maka(
        ["tui", "--cwd", str(work)],
        data,
        env=scripted_env(script),
        stdin="/settle\nhi\nthere\n/transcript\n/quit\n",
    )
    assert chat.returncode == 0, chat.stderr
    assert USAGE in chat.stdout  # the form, before any session
    sessions = _sessions(data)
    assert len(sessions) == 1  # one session, both messages in it
    session_id = sessions[0]["sessionId"]
    assert sessions[0]["title"] == "hi"  # its first message, as through a host or maka run
    assert f"(session {session_id})" in chat.stdout
    assert "Hello." in chat.stdout and "Again." in chat.stdout
    assert "no session yet" not in chat.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets")
def test_beside_a_host_too(tmp_path: Path) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    data.mkdir()
    host = start_main(data, {}, "host").wait_ready()
    try:
        chat = maka(["tui", "--cwd", str(work)], data, stdin="/transcript\n/settle\n/sessions\n")
        assert chat.returncode == 0, chat.stderr
        assert "no session yet: send a message first" in chat.stdout
        assert USAGE in chat.stdout  # as alone
        assert "no sessions yet: a message you send here starts one" in chat.stdout
        assert _sessions(data) == []
    finally:
        host.stop()


def test_a_first_message_with_bytes_that_are_not_utf8_is_worded_as_the_message(
    tmp_path: Path,
) -> None:
    import os
    import subprocess

    from tests.helpers.maka_process import maka_executable

    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    env = {**os.environ, "MAKA_DATA_DIR": str(data), "QT_QPA_PLATFORM": "offscreen"}
    env.pop("MAKA_PROVIDER", None)
    chat = subprocess.run(
        [*maka_executable(), "tui", "--cwd", str(work)],
        input=b"hello \xff there\n/quit\n",
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    err = chat.stderr.decode(errors="replace")
    assert chat.returncode == 0, err
    assert "[text_not_utf8]: the message holds bytes that are not UTF-8 text" in err
    assert "title" not in err
    assert _sessions(data) == []
