"""RendererBridge against a real QLocalServer standing in for the main process."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.bridge_client import RendererBridge
from renderer.bridge_port import ConnectionState

pytestmark = pytest.mark.gui

TOKEN = "k" * 40


class FakeMain:
    """Accepts connections, records decoded requests and raw bodies, sends what tests ask."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.server = QLocalServer()
        self.sockets: list[QLocalSocket] = []
        self.requests: list[bc.Message] = []
        self.bodies: list[dict[str, object]] = []
        self._readers: dict[int, bytearray] = {}
        self.server.newConnection.connect(self._on_new)

    def listen(self) -> None:
        QLocalServer.removeServer(self.name)
        assert self.server.listen(self.name), self.server.errorString()

    def close(self) -> None:
        for socket in self.sockets:
            socket.abort()
        self.server.close()

    @property
    def latest(self) -> QLocalSocket:
        return self.sockets[-1]

    def send(self, message: bc.Message, socket: QLocalSocket | None = None) -> None:
        (socket or self.latest).write(bc.encode_frame(message))

    def send_raw(self, data: bytes) -> None:
        self.latest.write(data)

    def _on_new(self) -> None:
        while self.server.hasPendingConnections():
            socket = self.server.nextPendingConnection()
            self.sockets.append(socket)
            buffer = bytearray()
            socket.readyRead.connect(lambda s=socket, b=buffer: self._on_read(s, b))

    def _on_read(self, socket: QLocalSocket, buffer: bytearray) -> None:
        buffer += socket.readAll().data()
        while len(buffer) >= 4:
            length = int.from_bytes(buffer[:4], "big")
            if len(buffer) < 4 + length:
                return
            body = bytes(buffer[4 : 4 + length])
            del buffer[: 4 + length]
            self.bodies.append(json.loads(body))
            self.requests.append(bc.parse_frame_payload(body, accept=bc.REQUEST_KINDS))


@pytest.fixture
def main() -> Iterator[FakeMain]:
    fake = FakeMain(f"mk-test-{uuid.uuid4().hex[:8]}")
    fake.listen()
    yield fake
    fake.close()


def _connected(qtbot: QtBot, main: FakeMain, *, enabled: bool = True) -> RendererBridge:
    bridge = RendererBridge(main.name, TOKEN)
    bridge.start()
    qtbot.waitUntil(lambda: len(main.requests) == 1)
    hello = main.requests[0]
    assert isinstance(hello, bc.HelloRequest)
    assert hello.token == TOKEN and hello.protocol_version == bc.PROTOCOL_VERSION
    with qtbot.waitSignal(bridge.connection_state_changed):
        main.send(bc.HelloOkPush(host_state=bc.HostState.READY, safe_resume_enabled=enabled))
    assert bridge.connection_state is ConnectionState.CONNECTED
    return bridge


def test_handshake_first_then_requests(qtbot: QtBot, main: FakeMain) -> None:
    bridge = RendererBridge(main.name, TOKEN)
    assert bridge.list_sessions() is False, "nothing leaves before the handshake"
    bridge.stop()
    bridge = _connected(qtbot, main)
    assert bridge.safe_resume_enabled
    assert bridge.list_sessions()
    qtbot.waitUntil(lambda: len(main.requests) == 2)
    assert isinstance(main.requests[1], bc.SessionsListRequest)
    bridge.stop()


def test_resume_latest_sends_a_session_id_and_nothing_else(qtbot: QtBot, main: FakeMain) -> None:
    bridge = _connected(qtbot, main)
    assert bridge.resume_latest("s1")
    qtbot.waitUntil(lambda: len(main.bodies) == 2)
    body = main.bodies[1]
    # The session and, only when the user chose one, a way forward for changed files with the
    # files the banner listed (which the main process only compares with the files it finds):
    # never a fact about the run or the folder that it would take on the window's word.
    assert set(body) == {
        "kind",
        "sessionId",
        "correlationId",
        "workspaceDecision",
        "restoreTo",
        "filesShown",
    }
    assert body["kind"] == "sessions.resumeLatest" and body["sessionId"] == "s1"
    assert body["workspaceDecision"] is None and body["restoreTo"] is None
    assert body["filesShown"] is None
    assert bridge.resume_latest("s1", "isolated_restore", "/home/ann/copy")
    qtbot.waitUntil(lambda: len(main.bodies) == 3)
    chosen = main.bodies[2]
    assert (chosen["workspaceDecision"], chosen["restoreTo"]) == (
        "isolated_restore",
        "/home/ann/copy",
    )
    bridge.stop()


def test_pushes_become_signals(qtbot: QtBot, main: FakeMain) -> None:
    bridge = _connected(qtbot, main)
    parked = bc.ResumeParkedPush(session_id="s1", rejection_reasons=("dangling_tool_state",))
    with qtbot.waitSignal(bridge.resume_parked) as blocker:
        main.send(parked)
    assert blocker.args == [parked]
    with qtbot.waitSignal(bridge.window_show_requested):
        main.send(bc.WindowShowPush())
    item = bc.TranscriptItemPush(session_id="s1", item=bc.UserMessageItem(item_id="i", text="hi"))
    with qtbot.waitSignal(bridge.transcript_item) as blocker:
        main.send_raw(bc.encode_frame(item)[:5])
        qtbot.wait(20)
        main.send_raw(bc.encode_frame(item)[5:])
    assert blocker.args == [item]
    bridge.stop()


def test_only_the_answer_to_its_own_change_says_the_change_went_through(
    qtbot: QtBot, main: FakeMain
) -> None:
    """``session.updated`` reaches every window, for any reason; ``session_change_done`` is
    emitted once, for the push that carries this window's correlation id for that session."""
    bridge = _connected(qtbot, main)
    done: list[tuple[str, str, object]] = []
    bridge.session_change_done.connect(lambda *args: done.append(args))
    assert bridge.relocate_session("s1", "/w/found")
    qtbot.waitUntil(lambda: len(main.requests) == 2)
    request = main.requests[1]
    assert isinstance(request, bc.SessionsRelocateRequest) and request.correlation_id
    ours = request.correlation_id
    moved = bc.SessionSummary(session_id="s1", cwd="/w/found", title="One")
    other = bc.SessionSummary(session_id="s2", cwd="/w/two", title="Two")
    not_answers: list[bc.SessionUpdatedPush | bc.SessionRemovedPush] = [
        bc.SessionUpdatedPush(session=moved),  # a refresh: no correlation id
        bc.SessionUpdatedPush(session=other, correlation_id=ours),  # another window's id
        bc.SessionRemovedPush(session_id="s1", correlation_id=ours),  # not a relocation
    ]
    for push in not_answers:
        # the push was read and handled: then it is known whether it counted as the answer
        removed = isinstance(push, bc.SessionRemovedPush)
        with qtbot.waitSignal(bridge.session_removed if removed else bridge.session_updated):
            main.send(push)
    assert done == []
    answer = bc.SessionUpdatedPush(session=moved, correlation_id=ours)
    with qtbot.waitSignal(bridge.session_change_done) as blocker:
        main.send(answer)
    assert blocker.args == ["s1", "relocate", answer]
    with qtbot.waitSignal(bridge.session_updated):
        main.send(answer)  # a second copy answers nothing more
    assert len(done) == 1
    bridge.stop()


def test_two_windows_asking_the_same_change_each_take_only_their_own_answer(
    qtbot: QtBot, main: FakeMain
) -> None:
    """Two windows rename the same session as their first change: the main process answers
    both to every window, and each window takes only the answer carrying its own id."""
    first = _connected(qtbot, main)
    second = _connected_again(qtbot, main)
    done: dict[str, list[tuple[str, str, object]]] = {"first": [], "second": []}
    updated: list[object] = []
    first.session_change_done.connect(lambda *args: done["first"].append(args))
    second.session_change_done.connect(lambda *args: done["second"].append(args))
    first.session_updated.connect(updated.append)
    second.session_updated.connect(updated.append)
    assert first.rename_session("s1", "From the first")
    assert second.rename_session("s1", "From the second")
    qtbot.waitUntil(
        lambda: sum(isinstance(r, bc.SessionsRenameRequest) for r in main.requests) == 2
    )
    renames = [r for r in main.requests if isinstance(r, bc.SessionsRenameRequest)]
    ids = {r.title: r.correlation_id for r in renames}
    assert ids["From the first"] != ids["From the second"], "two windows used one id"
    answer = bc.SessionUpdatedPush(
        session=bc.SessionSummary(session_id="s1", cwd="/w", title="From the second"),
        correlation_id=ids["From the second"],
    )
    assert len(main.sockets) == 2
    for socket in main.sockets:
        main.send(answer, socket)
    qtbot.waitUntil(lambda: len(updated) == 2)  # both windows have read and handled it
    assert len(done["second"]) == 1
    assert done["first"] == [], "the first window took the second window's answer"
    first.stop()
    second.stop()


def _connected_again(qtbot: QtBot, main: FakeMain) -> RendererBridge:
    """A second window on the same main process."""
    before = len(main.requests)
    bridge = RendererBridge(main.name, TOKEN)
    bridge.start()
    qtbot.waitUntil(lambda: len(main.requests) == before + 1)
    with qtbot.waitSignal(bridge.connection_state_changed):
        main.send(bc.HelloOkPush(host_state=bc.HostState.READY, safe_resume_enabled=True))
    return bridge


def test_garbage_from_the_main_process_closes_and_reconnects(qtbot: QtBot, main: FakeMain) -> None:
    bridge = _connected(qtbot, main)
    received: list[object] = []
    bridge.resume_parked.connect(received.append)
    with qtbot.waitSignal(bridge.connection_state_changed) as blocker:
        main.send_raw(b"\x00\x00\x00\x05nope!")
    assert blocker.args == [ConnectionState.DISCONNECTED.value]
    qtbot.waitUntil(lambda: len(main.sockets) == 2, timeout=3000)
    qtbot.waitUntil(lambda: isinstance(main.requests[-1], bc.HelloRequest))
    assert received == []
    bridge.stop()


def test_main_process_gone_shows_disconnected_and_reconnects(qtbot: QtBot, main: FakeMain) -> None:
    bridge = _connected(qtbot, main)
    failed: list[bc.ResumeFailedPush] = []
    bridge.resume_failed.connect(failed.append)
    with qtbot.waitSignal(bridge.connection_state_changed) as blocker:
        main.close()
    assert blocker.args == [ConnectionState.DISCONNECTED.value]
    assert bridge.resume_latest("s1") is False
    qtbot.waitUntil(lambda: len(failed) == 1)
    assert failed[0].code == "bridge_disconnected" and failed[0].session_id == "s1"
    qtbot.wait(150)
    main.listen()
    qtbot.waitUntil(lambda: len(main.sockets) == 2, timeout=5000)
    qtbot.waitUntil(lambda: isinstance(main.requests[-1], bc.HelloRequest))
    with qtbot.waitSignal(bridge.connection_state_changed):
        main.send(bc.HelloOkPush(host_state=bc.HostState.READY, safe_resume_enabled=False))
    assert bridge.connection_state is ConnectionState.CONNECTED
    assert not bridge.safe_resume_enabled
    bridge.stop()


def test_rejected_handshake_is_final(qtbot: QtBot, main: FakeMain) -> None:
    bridge = RendererBridge(main.name, TOKEN)
    bridge.start()
    qtbot.waitUntil(lambda: len(main.requests) == 1)
    with qtbot.waitSignal(bridge.connection_state_changed) as blocker:
        main.send(bc.HelloRejectedPush(code="token_invalid"))
    assert blocker.args == [ConnectionState.REJECTED.value]
    with qtbot.assertNotEmitted(main.server.newConnection, wait=300):
        pass  # no reconnect after a rejection (the first retry would come within 300 ms)
    assert len(main.sockets) == 1, "no reconnect after a rejection"
    assert bridge.connection_state is ConnectionState.REJECTED


def test_a_push_before_hello_ok_is_refused(qtbot: QtBot, main: FakeMain) -> None:
    bridge = RendererBridge(main.name, TOKEN)
    bridge.start()
    qtbot.waitUntil(lambda: len(main.requests) == 1)
    parked: list[object] = []
    bridge.resume_parked.connect(parked.append)
    main.send(bc.ResumeParkedPush(session_id="s", rejection_reasons=("session_busy",)))
    qtbot.waitUntil(lambda: len(main.sockets) == 2, timeout=3000)
    assert parked == []
    bridge.stop()


def test_a_settings_answer_turns_safe_resume_on_or_off_in_the_window(
    qtbot: QtBot, main: FakeMain
) -> None:
    bridge = _connected(qtbot, main, enabled=False)
    assert not bridge.safe_resume_enabled
    on = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OFFLINE_DEMO, safe_resume=True, safe_resume_enabled=True
    )
    with qtbot.waitSignal(bridge.safe_resume_enabled_changed) as blocker:
        main.send(on)
    assert blocker.args == [True] and bridge.safe_resume_enabled
    bridge.stop()


def test_branch_requests_and_their_answers(qtbot: QtBot, main: FakeMain) -> None:
    bridge = _connected(qtbot, main)
    assert bridge.branch_options("s1")
    assert bridge.create_branch("s1", "e7", "/home/ann/fork", True)
    qtbot.waitUntil(lambda: len(main.requests) == 3)
    asked, made = main.requests[1], main.requests[2]
    assert isinstance(asked, bc.BranchOptionsRequest) and asked.session_id == "s1"
    assert isinstance(made, bc.BranchCreateRequest)
    assert (made.event_id, made.to, made.current_files) == ("e7", "/home/ann/fork", True)
    listed = bc.BranchOptionsListedPush(
        session_id="s1", cwd="/w", default_folder="/w-branch-1", options=()
    )
    with qtbot.waitSignal(bridge.branch_options_listed) as blocker:
        main.send(listed)
    assert blocker.args == [listed]
    # Refused before it was tried (the main process is closing): a branch refusal, not a
    # stray error in the status bar.
    with qtbot.waitSignal(bridge.branch_refused) as blocker:
        main.send(bc.ErrorPush(code="host_draining", correlation_id=made.correlation_id))
    (refused,) = blocker.args
    assert (refused.session_id, refused.event_id, refused.code) == ("s1", "e7", "host_draining")
    bridge.stop()
    # Not connected: refused at once, said as a branch refusal.
    with qtbot.waitSignal(bridge.branch_refused) as blocker:
        assert not bridge.create_branch("s1", "e7", None, False)
    assert blocker.args[0].code == "bridge_disconnected"
