"""One session, one driver, many viewers: ``maka tui`` beside a running host sees the other way.

Real processes: the desktop's main process (offscreen) with a real window (``MainWindow`` on a
``RendererBridge``) or the headless ``maka host``, and the real ``maka tui`` / ``maka run`` on the
same data folder. A turn the window starts streams live into a TUI viewing that session (its
text, its tool cards, its ending, who drives it); the TUI cannot drive it (a message is refused
with ``session_busy`` naming the window) but answers its permission question, and the window's
prompt closes saying where it was answered (and the other way round). A turn of another
terminal shows the same way, and its own question closes naming the TUI. ``/transcript`` and
``/branch`` are served by the host with the lines the TUI prints alone.
"""

from __future__ import annotations

import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QTextEdit
from pytestqt.qtbot import QtBot

from renderer.bridge_client import RendererBridge
from renderer.main_window import MainWindow
from tests.e2e.test_run_through_host import Streaming
from tests.helpers.desktop_window import connected_window
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets"),
]

WAIT_MS = 60_000
ASKED = "(a question of the turn you are viewing: the first answer counts)"


def _bash(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "bash", "args": {"command": command}}


@pytest.fixture
def started() -> Iterator[tuple[list[Streaming], list[MainProcess]]]:
    clients: list[Streaming] = []
    hosts: list[MainProcess] = []
    yield clients, hosts
    for client in clients:
        client.kill()
    for host in hosts:
        host.stop()


def _window(qtbot: QtBot, main: MainProcess) -> tuple[MainWindow, RendererBridge]:
    return connected_window(qtbot, main, WAIT_MS)


def _shown(window: MainWindow) -> str:
    """Every text the window's transcript shows."""
    window.transcript.flush()
    texts = [label.text() for label in window.transcript.findChildren(QLabel)]
    texts += [view.toPlainText() for view in window.transcript.findChildren(QTextEdit)]
    texts += [view.toPlainText() for view in window.transcript.findChildren(QPlainTextEdit)]
    return "\n".join(texts)


def _say(chat: Streaming, line: str) -> None:
    assert chat.process.stdin is not None
    chat.process.stdin.write(line + "\n")
    chat.process.stdin.flush()


def _out(chat: Streaming) -> str:
    return "".join(chat.out)


def _decisions(data: Path) -> list[str]:
    return [
        event["actions"]["permissionDecision"]["decision"]
        for _, events in committed_runs(data)
        for event in events
        if "permissionDecision" in (event.get("actions") or {})
    ]


def test_a_window_turn_streams_into_a_viewing_tui_and_each_side_closes_the_others_prompt(
    tmp_path: Path, qtbot: QtBot, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    clients, hosts = started
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [
            [{"text": "Hello from the terminal."}],
            [
                {"text": "First from the window.", "toolCalls": [_bash("c1", "echo 1 >> n.txt")]},
                {"text": "Second.", "toolCalls": [_bash("c2", "echo 2 >> n.txt")]},
                {"text": "Both counted."},
            ],
        ],
    )
    env = scripted_env(script)
    main = start_main(data, env).wait_ready()
    hosts.append(main)
    window, bridge = _window(qtbot, main)
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "hi"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    # The terminal's turn is in the window's transcript (it was live there; reopened it agrees).
    qtbot.waitUntil(lambda: window.sessions.model.row_of(session) is not None, timeout=WAIT_MS)
    window.sessions.select(session)
    qtbot.waitUntil(lambda: "Hello from the terminal." in _shown(window), timeout=WAIT_MS)

    chat = Streaming(["tui", "--session", session], data, env)
    clients.append(chat)
    qtbot.waitUntil(lambda: "served by the running Maka: desktop" in _out(chat), timeout=WAIT_MS)
    assert bridge.send_turn(session, "count twice")

    # Live in the TUI: who drives it, the window's message, the model's text, the question.
    qtbot.waitUntil(lambda: ASKED in _out(chat), timeout=WAIT_MS)
    seen = _out(chat)
    assert "[viewing] a turn driven by the desktop window is running in this session" in seen
    assert "the desktop window> count twice" in seen
    assert "First from the window." in seen
    assert "[permission] bash wants to:" in seen and "echo 1 >> n.txt" in seen
    qtbot.waitUntil(window.permission.isVisible, timeout=WAIT_MS)
    assert not (work / "n.txt").exists()

    # The TUI may answer the window's question; the window's prompt closes saying where.
    _say(chat, "y")
    qtbot.waitUntil(window.permission.answered_label.isVisible, timeout=WAIT_MS)
    said = window.permission.answered_label.text()
    assert said == f"Allowed: answered in the terminal (maka tui, pid {chat.process.pid}).", said
    assert not window.permission.allow_button.isVisible()
    qtbot.waitUntil((work / "n.txt").exists, timeout=WAIT_MS)

    # The second question is answered in the window: the TUI's prompt closes saying so.
    qtbot.waitUntil(
        lambda: (
            window.permission.allow_button.isVisible()
            and "echo 2" in window.permission.summary_view.toPlainText()
        ),
        timeout=WAIT_MS,
    )
    qtbot.waitUntil(lambda: _out(chat).count(ASKED) >= 2, timeout=WAIT_MS)
    window.permission.allow_button.click()
    qtbot.waitUntil(
        lambda: "[permission] answered in the desktop window: allowed" in _out(chat),
        timeout=WAIT_MS,
    )
    qtbot.waitUntil(lambda: "ended completed" in _out(chat), timeout=WAIT_MS)
    seen = _out(chat)
    assert "[tool] bash echo 1 >> n.txt  (succeeded)" in seen
    assert "[tool] bash echo 2 >> n.txt  (succeeded)" in seen
    assert "Both counted." in seen
    assert "[viewing] the turn driven by the desktop window ended completed" in seen
    assert (work / "n.txt").read_text() == "1\n2\n"
    assert _decisions(data) == ["allow", "allow"]

    _say(chat, "/quit")
    assert chat.finish() == 0, chat.text()
    assert "Traceback" not in chat.text()
    bridge.stop()
    assert main.terminate() == 0


def test_a_tui_turn_is_live_in_the_window_and_answered_in_the_tui_it_closes_there(
    tmp_path: Path, qtbot: QtBot, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    """The other way round: a turn typed in ``maka tui`` shows in the open window while it
    runs (its message, its text, the card waiting for permission, the prompt), and the answer
    typed in the TUI closes the window's prompt naming the TUI."""
    clients, hosts = started
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [
            [{"text": "Ready."}],
            [
                {"text": "Adding a line.", "toolCalls": [_bash("t1", "echo t >> n.txt")]},
                {"text": "Added."},
            ],
        ],
    )
    env = scripted_env(script)
    main = start_main(data, env).wait_ready()
    hosts.append(main)
    window, bridge = _window(qtbot, main)
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "hi"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    qtbot.waitUntil(lambda: window.sessions.model.row_of(session) is not None, timeout=WAIT_MS)
    window.sessions.select(session)
    qtbot.waitUntil(lambda: "Ready." in _shown(window), timeout=WAIT_MS)
    chat = Streaming(["tui", "--session", session, "--permission-mode", "ask"], data, env)
    clients.append(chat)
    qtbot.waitUntil(lambda: "served by the running Maka" in _out(chat), timeout=WAIT_MS)
    _say(chat, "add a line")
    qtbot.waitUntil(window.permission.isVisible, timeout=WAIT_MS)
    shown = _shown(window)
    assert "add a line" in shown and "Adding a line." in shown
    card = window.transcript.tool_card("t1")
    assert card is not None and "echo t >> n.txt" in window.permission.summary_view.toPlainText()
    assert not (work / "n.txt").exists()  # still waiting: the window saw it live
    assert [header.status.value for header, _ in committed_runs(data)][-1] in (
        "running",
        "waiting_for_user",
    )
    _say(chat, "y")
    qtbot.waitUntil(window.permission.answered_label.isVisible, timeout=WAIT_MS)
    said = window.permission.answered_label.text()
    assert said == f"Allowed: answered in the terminal (maka tui, pid {chat.process.pid}).", said
    qtbot.waitUntil(lambda: "Added." in _shown(window), timeout=WAIT_MS)
    assert (work / "n.txt").read_text() == "t\n"
    _say(chat, "/quit")
    assert chat.finish() == 0, chat.text()
    bridge.stop()
    assert main.terminate() == 0


def test_a_viewing_tui_sees_another_terminals_turn_and_its_answer_closes_that_terminals_question(
    tmp_path: Path, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    clients, hosts = started
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [
            [{"text": "Ready."}],
            [
                {"text": "Writing it.", "toolCalls": [_bash("w1", "echo hi > a.txt")]},
                {"text": "Written."},
            ],
        ],
    )
    env = scripted_env(script)
    host = start_main(data, env, "host").wait_ready()
    hosts.append(host)
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "hi"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    chat = Streaming(["tui", "--session", session], data, env)
    clients.append(chat)
    chat.wait_for(lambda: "served by the running Maka: headless" in _out(chat))

    driver = Streaming(
        ["run", "--session", session, "--permission-mode", "ask", "write"], data, env
    )
    clients.append(driver)
    driver.wait_for(lambda: any("Allow? [y/N]" in line for line in driver.out))
    chat.wait_for(lambda: ASKED in _out(chat))
    seen = _out(chat)
    who = f"a terminal (maka run, pid {driver.process.pid})"
    assert f"[viewing] a turn driven by {who} is running" in seen, seen
    assert f"{who}> write" in seen and "Writing it." in seen

    _say(chat, "n")  # denied here, the first answer
    driver.wait_for(lambda: "answered in the terminal (maka tui" in "".join(driver.out))
    assert driver.finish() == 0, driver.text()
    assert (
        f"[permission] answered in the terminal (maka tui, pid {chat.process.pid}): denied"
        in "".join(driver.out)
    )
    chat.wait_for(lambda: f"the turn driven by {who} ended completed" in _out(chat))
    assert not (work / "a.txt").exists()
    assert _decisions(data) == ["deny"]
    # A resume with nothing to resume runs no turn: the viewer is not told one runs (it was,
    # and never told it ended).
    resumed = maka(["resume", session], data, env={**env, "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"})
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    _say(chat, "/transcript")  # (a reply after the resume's pushes, if any)
    chat.wait_for(lambda: _out(chat).count("you> ") >= 3)
    assert "(maka resume" not in _out(chat), _out(chat)
    _say(chat, "/quit")
    assert chat.finish() == 0, chat.text()
    assert "Traceback" not in chat.text() + driver.text()


def _shows(client: Streaming, text: str) -> Callable[[], bool]:
    return lambda: text in _out(client)


def test_a_question_the_driver_left_open_waits_for_a_viewing_tui_then_stops_when_it_leaves(
    tmp_path: Path, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    """The terminal driving a turn is killed at a permission question while a ``maka tui``
    views the session: the host denied it "for the user" at once, and the viewer's answer was
    dropped. The viewer answers it now; and when the last viewer leaves with the question still
    open, the turn is stopped there (not denied on the user's behalf)."""
    clients, hosts = started
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    turn = [
        {"text": "Writing it.", "toolCalls": [_bash("w1", "echo hi > a.txt")]},
        {"text": "Written."},
    ]
    script = write_script(tmp_path / "script.json", [[{"text": "Ready."}], turn, turn])
    env = scripted_env(script)
    host = start_main(data, env, "host").wait_ready()
    hosts.append(host)
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "hi"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id

    for answer in ("y", None):
        chat = Streaming(["tui", "--session", session], data, env)
        clients.append(chat)
        chat.wait_for(_shows(chat, "served by the running Maka: headless"))
        driver = Streaming(
            ["run", "--session", session, "--permission-mode", "ask", "write"], data, env
        )
        clients.append(driver)
        driver.wait_for(_shows(driver, "Allow? [y/N]"))
        chat.wait_for(_shows(chat, ASKED))
        driver.kill()  # SIGKILL: the question stays open in the host
        time.sleep(1.0)
        assert "answered in the host" not in _out(chat), _out(chat)
        if answer is not None:
            _say(chat, answer)
            chat.wait_for(_shows(chat, "ended completed"))
            assert (work / "a.txt").read_text() == "hi\n"
            assert _decisions(data) == ["allow"]
            (work / "a.txt").unlink()
            _say(chat, "/quit")
            assert chat.finish() == 0, chat.text()
        else:
            # The last viewer leaves with /quit: a command is no answer (it denied the call
            # on the user's behalf).
            _say(chat, "/quit")
            assert chat.finish() == 0, chat.text()
    deadline = time.monotonic() + 60
    while [h.status for h, _ in committed_runs(data)][-1] not in ("cancelled", "completed"):
        assert time.monotonic() < deadline, "the turn still waits for an answer"
        time.sleep(0.2)
    assert str(committed_runs(data)[-1][0].status) == "cancelled"
    authored = [
        (event["author"], event["actions"]["permissionDecision"]["decision"])
        for _, events in committed_runs(data)
        for event in events
        if "permissionDecision" in (event.get("actions") or {})
    ]
    # Nobody answered the second: the host closed it and stopped the turn, not "the user".
    assert authored == [("user", "allow"), ("host", "deny")], authored
    assert not (work / "a.txt").exists()


def _body(text: str) -> list[str]:
    """The TUI's lines after its greeting (which says how it is served), prompts dropped."""
    lines = text.replace("you> ", "\n").splitlines()
    return [
        line
        for line in lines
        if line.strip() and not line.startswith("maka tui: ") and "/help for help" not in line
    ]


def test_transcript_and_branch_through_the_host_print_what_the_tui_prints_alone(
    tmp_path: Path, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    _, hosts = started
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {"text": "Writing.", "toolCalls": [_bash("w1", "echo hi > a.txt")]},
                {"text": "Done writing."},
            ],
            [{"text": "Second turn."}],
        ],
    )
    env = scripted_env(script)
    host = start_main(data, env, "host").wait_ready()
    hosts.append(host)
    for prompt in ("write", "again"):
        args = ["run", "--permission-mode", "auto", prompt]
        if prompt == "write":
            args[1:1] = ["--cwd", str(work)]
        else:
            args[1:1] = ["--session", committed_runs(data)[0][0].session_id]
        ran = maka(args, data, env=env)
        assert ran.returncode == 0, ran.stderr
    session = committed_runs(data)[0][0].session_id
    reads = "/transcript\n/branch\n/branch nope\n/quit\n"
    served = maka(["tui", "--session", session], data, env=env, stdin=reads)
    assert served.returncode == 0, served.stderr
    assert "[store_locked]" not in served.stdout
    assert "you> write" in served.stdout and "[tool] bash echo hi > a.txt  (succeeded)" in (
        served.stdout
    )
    assert "branch one: /branch EVENT [DIR]" in served.stdout
    assert "branch refused [" in served.stdout

    # A branch made through the host: the chat goes on in it, every window lists it.
    event = re.search(r"(\S+)\s+user_message you: write", served.stdout)
    assert event is not None, served.stdout
    fork = tmp_path / "fork"
    made = maka(
        ["tui", "--session", session],
        data,
        env=env,
        stdin=f"/branch {event.group(1)} {fork} --current-files\n/transcript\n/quit\n",
    )
    assert made.returncode == 0, made.stderr
    assert "; the source is unchanged" in made.stdout
    assert f"(the source goes on with: maka tui --session {session})" in made.stdout
    branched = re.search(r"branched into session (\S+) in", made.stdout)
    assert branched is not None and branched.group(1) != session
    assert "this session was branched from" in made.stdout
    assert fork.is_dir()
    host.terminate()

    # The same reads with the TUI opening the store itself: the same lines.
    alone = maka(["tui", "--session", session], data, env=env, stdin=reads)
    assert alone.returncode == 0, alone.stderr
    assert "served by" not in alone.stdout
    marks = [line for line in _body(alone.stdout) if "branched here into session" in line]
    assert marks, alone.stdout  # the branch made through the host, seen alone
    assert _body(served.stdout) == [
        line for line in _body(alone.stdout) if line not in marks and "branched here" not in line
    ]


def test_a_viewing_tui_cannot_drive_the_turn_it_sees(
    tmp_path: Path, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    """A message typed in the viewer is refused with ``session_busy`` naming the driver, and
    its Ctrl+C leaves the TUI without touching the other terminal's turn."""
    clients, hosts = started
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [
            [{"text": "Ready."}],
            [{"text": "Sleeping.", "toolCalls": [_bash("s1", "sleep 4")]}, {"text": "Awake."}],
        ],
    )
    env = scripted_env(script)
    host = start_main(data, env, "host").wait_ready()
    hosts.append(host)
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "hi"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    chat = Streaming(["tui", "--session", session], data, env)
    clients.append(chat)
    chat.wait_for(lambda: "served by the running Maka" in _out(chat))
    driver = Streaming(["run", "--session", session, "--permission-mode", "auto", "nap"], data, env)
    clients.append(driver)
    chat.wait_for(lambda: "[tool] bash sleep 4  (running)" in _out(chat))
    _say(chat, "me too")
    chat.wait_for(lambda: "[session_busy]" in "".join(chat.err))
    assert f"driven by a terminal (maka run, pid {driver.process.pid})" in "".join(chat.err)
    chat.process.send_signal(signal.SIGINT)
    assert chat.finish() == 0, chat.text()
    assert driver.finish() == 0, driver.text()
    assert "Awake." in "".join(driver.out)
    assert "Traceback" not in chat.text() + driver.text()
    runs = committed_runs(data)
    assert [header.status.value for header, _ in runs] == ["completed", "completed"]


def test_a_viewing_tui_waiting_for_its_user_says_at_once_that_the_host_stopped(
    tmp_path: Path, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    """SIGKILL of the host while the TUI only waits for its user: the TUI does not wait for a
    next line to find out; it says ``host_stopped`` and exits 1."""
    clients, hosts = started
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", [[{"text": "Ready."}]]))
    host = start_main(data, env, "host").wait_ready()
    hosts.append(host)
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "hi"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    chat = Streaming(["tui", "--session", session], data, env)
    clients.append(chat)
    chat.wait_for(lambda: "served by the running Maka" in _out(chat))
    time.sleep(0.5)  # at its prompt
    host.process.send_signal(signal.SIGKILL)
    assert chat.finish(30) == 1, chat.text()
    assert "maka: error [host_stopped]" in "".join(chat.err)
    # Nothing of the chat's was waiting: not "run the command again".
    assert "nothing of this chat's own was waiting" in "".join(chat.err), chat.text()
    assert "stopped with it" not in "".join(chat.err)  # no turn of another was viewed
    assert "run the command again" not in "".join(chat.err)
    assert "Traceback" not in chat.text()


def test_a_viewer_is_told_the_terminal_driving_the_turn_has_gone_away(
    tmp_path: Path, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    """The ``maka run`` driving a turn was killed (the turn goes on in the host): a TUI opened
    on the session then named that terminal as if it still drove the turn."""
    clients, hosts = started
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    script = [[{"toolCalls": [_bash("b1", "sleep 8")]}, {"text": "Slept."}]]
    env = scripted_env(write_script(tmp_path / "script.json", script))
    host = start_main(data, env, "host").wait_ready()
    hosts.append(host)
    driver = Streaming(["run", "--cwd", str(work), "--permission-mode", "auto", "go"], data, env)
    clients.append(driver)
    session = driver.session()
    driver.wait_for(lambda: any("[tool] bash" in line for line in driver.out))
    driver.process.kill()
    driver.process.wait(10)
    time.sleep(0.5)  # the host sees the terminal go
    chat = Streaming(["tui", "--session", session], data, env)
    clients.append(chat)
    chat.wait_for(lambda: "[viewing] a turn driven by" in _out(chat))
    seen = _out(chat)
    assert "which has gone away (the turn goes on here)" in seen, seen


def test_a_settle_through_the_host_is_not_shown_to_a_viewer_as_a_turn(
    tmp_path: Path, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    """``maka settle`` served by the host (here refused: the call has its outcome) told every
    viewing TUI that "a turn driven by an answer about a tool call being recorded is running",
    and no line ever said it ended: the viewer believed a turn ran."""
    data, env, session, chat = _viewed(
        tmp_path, started, [[{"toolCalls": [_bash("b1", "true")]}, {"text": "Done."}]]
    )
    settled = maka(["settle", session, "b1", "--not-run"], data, env=env)
    assert settled.returncode != 0 and "[attestation_not_applicable]" in settled.stderr, (
        settled.stderr
    )
    time.sleep(1.5)  # a push to the viewer would have arrived by now
    assert "[viewing]" not in _out(chat), _out(chat)
    assert "being recorded" not in chat.text(), chat.text()
    chat.process.send_signal(signal.SIGINT)
    assert chat.finish() == 0, chat.text()


def test_a_viewer_is_told_at_once_that_its_session_was_removed(
    tmp_path: Path, started: tuple[list[Streaming], list[MainProcess]]
) -> None:
    """``maka sessions remove`` of the session a ``maka tui`` views: the chat heard of it only
    when its next message failed with ``session_not_found``."""
    data, env, session, chat = _viewed(tmp_path, started, [[{"text": "Ready."}]])
    removed = maka(["sessions", "remove", session, "--yes"], data, env=env)
    assert removed.returncode == 0, removed.stderr
    chat.wait_for(lambda: "[removed] this session was removed" in _out(chat))
    chat.process.send_signal(signal.SIGINT)
    assert chat.finish() == 0, chat.text()


def _viewed(
    tmp_path: Path,
    started: tuple[list[Streaming], list[MainProcess]],
    turns: list[list[dict[str, Any]]],
) -> tuple[Path, dict[str, str], str, Streaming]:
    """A headless host, one ``maka run`` turn (``turns``, every call allowed) in a new session,
    and a ``maka tui`` viewing it: the data folder, env, session and the chat."""
    clients, hosts = started
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", turns))
    host = start_main(data, env, "host").wait_ready()
    hosts.append(host)
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "go"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    chat = Streaming(["tui", "--session", session], data, env)
    clients.append(chat)
    chat.wait_for(lambda: "served by the running Maka" in _out(chat))
    return data, env, session, chat
