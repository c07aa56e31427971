"""Branching from the desktop (issue #36), end to end through the real main process, its real
store and the real ``git``: a session made by ``maka run`` (a file written, then deleted by a
later ``bash`` call), then the test plays the renderer over the socket. ``branch.options`` lists
the boundaries with the call each tool result answers and whether a snapshot is kept;
``branch.create`` at the write's result makes a new session (every window hears its row, the
asker ``branch.made``) whose folder has the file the source no longer has; the source's
transcript carries a marker after that card and the branch's open says where it came from; a
folder inside the source is refused with its code, and nothing is made.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    BranchCreateRequest,
    BranchMadePush,
    BranchMarkerItem,
    BranchOptionsListedPush,
    BranchOptionsRequest,
    BranchRefusedPush,
    Message,
    MessageKind,
    NoticeItem,
    SessionOpenedPush,
    SessionsOpenRequest,
    SessionUpdatedPush,
    ToolCardItem,
)
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script
from tests.helpers.user_git import user_git
from tests.helpers.wire_client import WireClient

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

WAIT_MS = 60_000
WRITE = {
    "text": "Writing notes.",
    "toolCalls": [
        {"id": "w1", "name": "write_file", "args": {"path": "notes.txt", "content": "kept\n"}}
    ],
}
DELETE = {
    "text": "Deleting.",
    "toolCalls": [{"id": "d1", "name": "bash", "args": {"command": "rm notes.txt"}}],
}
SCRIPT = [[WRITE, {"text": "Notes written."}], [DELETE, {"text": "Deleted."}]]


@pytest.fixture
def started() -> Iterator[list[MainProcess]]:
    processes: list[MainProcess] = []
    yield processes
    for process in processes:
        process.stop()


def _answer(client: WireClient, tag: str) -> Message | None:
    return next((m for m in client.received if m.correlation_id == tag), None)


def _ask(client: WireClient, qtbot: QtBot, message: Message) -> Message:
    tag = message.correlation_id
    assert tag is not None
    client.send(message)
    qtbot.waitUntil(lambda: _answer(client, tag) is not None, timeout=WAIT_MS)
    answer = _answer(client, tag)
    assert answer is not None
    return answer


def test_a_session_is_branched_from_the_window(
    tmp_path: Path, qtbot: QtBot, started: list[MainProcess]
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    user_git(work, "init", "-q")
    user_git(work, "-c", "user.name=t", "-c", "user.email=t@t", "add", "a.txt")
    user_git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    env = scripted_env(write_script(tmp_path / "script.json", SCRIPT), checkpoints=True)
    for text in ("write the notes", "delete them"):
        where = ["--session", committed_runs(data)[0][0].session_id] if data.exists() else []
        args = ["run", *(where or ["--cwd", str(work)]), "--permission-mode", "auto", text]
        result = maka(args, data, env=env)
        assert result.returncode == 0, result.stderr
    assert not (work / "notes.txt").exists()
    source = committed_runs(data)[0][0].session_id

    main = start_main(data, env).wait_ready()
    started.append(main)
    client = WireClient(main.socket_name)
    client.hello(main.token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=WAIT_MS)

    listed = _ask(client, qtbot, BranchOptionsRequest(session_id=source, correlation_id="opts"))
    assert isinstance(listed, BranchOptionsListedPush)
    assert listed.cwd == str(work)
    assert listed.default_folder == f"{work}-branch-1"
    kinds = [option.kind for option in listed.options]
    assert kinds == [
        "user_message",
        "tool_result",
        "run_ending",
        "user_message",
        "tool_result",
        "run_ending",
    ]
    written = listed.options[1]
    assert written.tool_call_id == "w1" and written.label == "result of write_file"
    assert written.snapshot_kept and written.branchable
    assert listed.folder_gone is False
    # The folder moved away: the dialog must not promise a clone of a repository that is gone.
    work.rename(tmp_path / "away")
    try:
        gone = _ask(client, qtbot, BranchOptionsRequest(session_id=source, correlation_id="g"))
        assert isinstance(gone, BranchOptionsListedPush) and gone.folder_gone is True
    finally:
        (tmp_path / "away").rename(work)

    inside = _ask(
        client,
        qtbot,
        BranchCreateRequest(
            session_id=source, event_id=written.event_id, to=str(work / "sub"), correlation_id="in"
        ),
    )
    assert isinstance(inside, BranchRefusedPush)
    assert inside.code == "workspace_restore_target_inside"
    assert inside.event_id == written.event_id
    assert len({header.session_id for header, _events in committed_runs(data)}) == 1

    made = _ask(
        client,
        qtbot,
        BranchCreateRequest(session_id=source, event_id=written.event_id, correlation_id="make"),
    )
    assert isinstance(made, BranchMadePush), made
    assert made.cwd == f"{work}-branch-1" and not made.current_files
    assert (Path(made.cwd) / "notes.txt").read_text() == "kept\n"
    assert not (work / "notes.txt").exists()  # the source folder is left as it is
    # Every window hears the new session's row before the asker is told.
    rows = [m for m in client.all(MessageKind.SESSION_UPDATED) if isinstance(m, SessionUpdatedPush)]
    assert any(row.session.session_id == made.new_session_id for row in rows)
    assert client.kinds().index("session.updated") < client.kinds().index("branch.made")

    opened = _ask(client, qtbot, SessionsOpenRequest(session_id=source, correlation_id="src"))
    assert isinstance(opened, SessionOpenedPush) and opened.branched_from is None
    items = list(opened.items)
    (marker,) = [item for item in items if isinstance(item, BranchMarkerItem)]
    assert marker.branch_session_id == made.new_session_id
    before = items[items.index(marker) - 1]
    assert isinstance(before, ToolCardItem) and before.tool_call_id == "w1"

    branch = _ask(
        client, qtbot, SessionsOpenRequest(session_id=made.new_session_id, correlation_id="new")
    )
    assert isinstance(branch, SessionOpenedPush)
    origin = branch.branched_from
    assert origin is not None
    assert (origin.source_session_id, origin.boundary_event_id) == (source, written.event_id)
    assert origin.boundary_label == "result of write_file" and origin.source_title
    assert origin.boundary_kind == "tool_result" and not origin.current_files
    # Its transcript is the source's up to the write's card, a note, then its own (none yet).
    *inherited, note = branch.items
    assert [item.item_id for item in inherited] == [
        item.item_id for item in items[: items.index(marker)]
    ]
    assert isinstance(note, NoticeItem) and note.text.startswith("Branched from “")
    assert all(not getattr(item, "settleable", False) for item in inherited)
