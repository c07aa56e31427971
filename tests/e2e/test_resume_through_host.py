"""``maka resume`` beside a running host: the host's continuation service (the banner's) plans
and continues, the terminal prints what ``maka resume`` prints alone.

Real processes: a data folder holding a session killed mid-turn (SIGKILL at a failpoint) and
recovered; Safe resume on and automatic resume off in its settings, so the session waits for a
resume. ``maka resume`` alone and beside a host print the same lines and exit the same way; a
terminal and a window asking at once make exactly one continuation (the other is told the session
is busy, or that the boundary was already continued).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import threading
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import MessageKind, ResumeLatestRequest
from runtime.ledger.store_ports import RunStatus
from tests.e2e.test_sessions_resume_hint_cli import interrupted_session
from tests.e2e.test_workspace_decisions_cli import Drill, _files
from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import RunResult, committed_runs, maka
from tests.helpers.user_git import user_git
from tests.helpers.wire_client import WireClient

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets"),
]

SETTINGS = {"safe_resume": "1", "auto_resume": "0"}


def _waiting(tmp_path: Path) -> tuple[Path, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    data, session = interrupted_session(tmp_path)
    (data / "settings.json").write_text(json.dumps(SETTINGS))
    return data, session


def _same(text: str) -> str:
    text = re.sub(r"(session|run|turn|inv|op)[_-][0-9a-f]+", r"\1_X", text)
    text = re.sub(r"sha256:[0-9a-f]+", "sha256:X", text)
    return re.sub(r"/(direct|served)/", "/", text)


def _drifted_repository(tmp_path: Path) -> tuple[Drill, dict[str, bytes]]:
    """The drill's interrupted run in a Git repository, then the user's changes."""
    drill = Drill(tmp_path)
    user_git(drill.work, "init", "-q")
    user_git(drill.work, "add", ".")
    user_git(drill.work, "commit", "-q", "-m", "first")
    drill.run()
    (drill.work / "count.txt").write_text("edited by the user\n")
    (drill.work / "b.txt").unlink()
    return drill, _files(drill.work)


def _continuations(data: Path) -> int:
    return sum(1 for header, _ in committed_runs(data) if header.status is RunStatus.COMPLETED)


@pytest.mark.parametrize("as_json", [False, True])
def test_resume_beside_a_host_prints_what_resume_prints_alone(
    tmp_path: Path, as_json: bool
) -> None:
    flags = ["--json"] if as_json else []
    alone_data, alone_session = _waiting(tmp_path / "direct")
    alone_decision = maka(["resume", alone_session, "--rebaseline", *flags], alone_data)
    alone = maka(["resume", alone_session, "--permission-mode", "auto", *flags], alone_data)
    alone_again = maka(["resume", alone_session, "--permission-mode", "auto"], alone_data)

    data, session = _waiting(tmp_path / "served")
    host = start_main(data, None, "host").wait_ready()
    try:
        decision = maka(["resume", session, "--rebaseline", *flags], data)
        served = maka(["resume", session, "--permission-mode", "auto", *flags], data)
        again = maka(["resume", session, "--permission-mode", "auto"], data)
        assert host.process.poll() is None, host.stderr()
    finally:
        host.stop()
    # A decision the plan would not carry out is refused, nothing done, as alone.
    assert decision.returncode == alone_decision.returncode == 3, decision.stdout + decision.stderr
    assert "workspace_decision_not_offered" in decision.stdout
    assert _same(decision.stdout) == _same(alone_decision.stdout)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert served.returncode == alone.returncode, served.stdout + served.stderr
    if as_json:
        document, expected = json.loads(served.stdout), json.loads(alone.stdout)
        assert json.loads(_same(json.dumps(document))) == json.loads(_same(json.dumps(expected)))
        assert document["started"] is True and document["status"] == "completed"
    else:
        assert _same(served.stdout) == _same(alone.stdout)
    assert _same(served.stderr) == _same(alone.stderr)
    # The boundary was continued once: a second resume parks, said as maka resume says it alone.
    assert again.returncode == alone_again.returncode == 3, again.stdout + again.stderr
    assert "continuation_already_exists" in again.stdout
    assert _same(again.stdout) == _same(alone_again.stdout)
    assert _continuations(data) == 1


def test_a_terminal_and_a_window_racing_make_one_continuation(qtbot: QtBot, tmp_path: Path) -> None:
    data, session = _waiting(tmp_path)
    host = start_main(data, None).wait_ready()
    results: list[RunResult] = []
    try:
        window = WireClient(host.socket_name)
        window.hello(host.token)
        qtbot.waitUntil(lambda: window.has(MessageKind.HELLO_OK), timeout=60_000)
        terminal = threading.Thread(
            target=lambda: results.append(
                maka(["resume", session, "--permission-mode", "auto"], data)
            )
        )
        terminal.start()
        window.send(ResumeLatestRequest(session_id=session, correlation_id="click"))
        terminal.join(120)
        qtbot.waitUntil(lambda: window.answered("click"), timeout=60_000)
        qtbot.waitUntil(
            lambda: (
                len(window.all(MessageKind.RESUME_STARTED)) >= 1
                and len(window.all(MessageKind.SESSION_UPDATED)) >= 1
            ),
            timeout=60_000,
        )
        # The continuation runs to its end before the host is stopped (its turn, not the
        # start, is what the count below sees).
        qtbot.waitUntil(lambda: _continuations(data) >= 1, timeout=60_000)
        assert host.process.poll() is None, host.stderr()
    finally:
        host.stop()
    [result] = results
    # Exactly one of them continued; the other was told the session is busy or done.
    assert result.returncode in (0, 3), result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    if result.returncode == 3:
        said = result.stdout + result.stderr
        assert "session_busy" in said or "continuation_already_exists" in said, said
    assert _continuations(data) == 1


@pytest.mark.skipif(shutil.which("git") is None, reason="git")
def test_the_ways_forward_after_changed_files_are_the_same_beside_a_host(tmp_path: Path) -> None:
    """A park on changed files, a folder refused for the restored copy, then the copy: the same
    words, documents and exit codes as alone, and the user's folder left as it was."""
    said: dict[str, list[RunResult]] = {}
    for folder in ("direct", "served"):
        drill, before = _drifted_repository(tmp_path / folder)
        busy = tmp_path / folder / "busy"
        busy.mkdir()
        (busy / "keep.txt").write_text("mine\n")
        host = (
            start_main(drill.data, drill.env, "host").wait_ready() if folder == "served" else None
        )
        try:
            said[folder] = [
                maka(["resume", drill.session, *extra], drill.data, env=drill.env)
                for extra in (
                    [],
                    ["--json", "--restore-to", str(busy)],
                    ["--restore-to", str(busy)],
                    ["--permission-mode", "auto", "--restore-to"],
                )
            ]
            if host is not None:
                assert host.process.poll() is None, host.stderr()
        finally:
            if host is not None:
                host.stop()
        assert _files(drill.work) == before
        assert _files(busy) == {"keep.txt": b"mine\n"}
    for alone, served in zip(said["direct"], said["served"], strict=True):
        assert served.returncode == alone.returncode, served.stdout + served.stderr
        assert _same(served.stdout) == _same(alone.stdout)
        assert _same(served.stderr) == _same(alone.stderr)
    parked, refused, refused_words, restored = said["served"]
    assert parked.returncode == 3 and "workspace_drift" in parked.stdout
    assert json.loads(refused.stdout)["code"] == "workspace_restore_target_not_empty"
    assert "Pick a new or empty folder" in refused_words.stdout
    # The notes about its tools are said once a continuation runs, never before a refusal
    # (alone and served alike: compared above).
    assert "no terminal to ask on" not in refused_words.stderr, refused_words.stderr
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "--permission-mode auto runs every tool" in restored.stderr, restored.stderr
    copy = tmp_path / "served" / "work-restored-1"
    assert f"Continued in a restored copy at {copy};" in restored.stdout
    assert "The copy is a clone of your Git repository" in restored.stdout
    assert user_git(copy, "log", "--format=%s") == "first\n"


def test_the_commands_own_safe_resume_flag_decides_through_a_host(tmp_path: Path) -> None:
    """``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME`` for one command (as the park's advice says) decides
    a resume through a running host as it does alone, both ways; without it, the host's
    setting decides."""
    data, session = interrupted_session(tmp_path)
    (data / "settings.json").write_text(json.dumps({"safe_resume": "0", "auto_resume": "0"}))
    host = start_main(data, None, "host").wait_ready()
    try:
        off = maka(["resume", session, "--permission-mode", "auto"], data)
        told = maka(
            ["resume", session, "--permission-mode", "auto"],
            data,
            env={"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "0"},
        )
        # Safe resume turned on in the settings while the host runs: the command's "0" wins.
        (data / "settings.json").write_text(json.dumps(SETTINGS))
        refused = maka(
            ["resume", session, "--permission-mode", "auto"],
            data,
            env={"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "0"},
        )
        (data / "settings.json").write_text(json.dumps({"safe_resume": "0", "auto_resume": "0"}))
        on = maka(
            ["resume", session, "--permission-mode", "auto"],
            data,
            env={"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"},
        )
        assert host.process.poll() is None, host.stderr()
    finally:
        host.stop()
    for parked in (off, told, refused):
        assert parked.returncode == 3, parked.stdout + parked.stderr
        assert "resume_feature_disabled" in parked.stdout
    assert on.returncode == 0, on.stdout + on.stderr
    assert "resume_feature_disabled" not in on.stdout
    assert _continuations(data) == 1
