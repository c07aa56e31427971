"""The main process's handling of ``tools.settle`` (fake services, real host, real socket): the
answer runs on the session's turn thread and reaches every renderer as the re-sent card and
``tool.settled``; a park that stood for the session is dropped when Safe resume would now
continue (a renderer connecting later is not told the stale park), and a refusal carries its
code."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    AttestationChoice,
    ChangedFilesShown,
    MessageKind,
    ResumeLatestRequest,
    SessionSummary,
    SettleFolderNote,
    ToolCardItem,
    ToolCardStatus,
    ToolSettledPush,
    ToolsSettleRequest,
    TranscriptItemPush,
)
from app.host.host_services import HostServiceError, ResumeParked, SettleResult, ShownCardStale
from app.host.since_shown import ShownChangedCode
from main_process.host_app import HostApp
from runtime.ledger.codes import WriterRejectionCode
from tests.helpers.fake_host_services import FakeHostServices
from tests.helpers.served_host import serve
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.gui

CARD = ToolCardItem(
    item_id="evt-call",
    tool_call_id="c1",
    tool_name="bash",
    status=ToolCardStatus.COMPLETED_AFTER_RECOVERY,
    attestation=AttestationChoice.RAN,
    attested_at=1,
)


@pytest.fixture
def host(
    qtbot: QtBot, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[HostApp, FakeHostServices, str, str]]:
    services = FakeHostServices(
        sessions={
            "s1": SessionSummary(session_id="s1", cwd=str(data_dir), title="one", interrupted=True)
        },
        resume_outcomes={"s1": ResumeParked(("dangling_tool_state",))},
    )

    app, socket, token = serve(qtbot, data_dir, services, capsys)
    yield app, services, socket, token
    app.close()


def _client(qtbot: QtBot, socket: str, token: str) -> WireClient:
    client = WireClient(socket)
    client.hello(token)
    qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=5000)
    return client


def _settle(client: WireClient, tag: str, outcome: AttestationChoice) -> None:
    client.send(
        ToolsSettleRequest(
            session_id="s1", tool_call_id="c1", outcome=outcome, note="seen", correlation_id=tag
        )
    )


def _answer(client: WireClient, tag: str) -> ToolSettledPush | None:
    for message in client.all(MessageKind.TOOL_SETTLED):
        if message.correlation_id == tag:
            assert isinstance(message, ToolSettledPush)
            return message
    return None


def test_a_recorded_answer_resends_the_card_and_drops_the_standing_park(
    qtbot: QtBot, host: tuple[HostApp, FakeHostServices, str, str]
) -> None:
    _app, services, socket, token = host
    client = _client(qtbot, socket, token)
    client.send(ResumeLatestRequest(session_id="s1", correlation_id="park"))
    qtbot.waitUntil(lambda: client.has(MessageKind.RESUME_PARKED), timeout=5000)
    earlier = _client(qtbot, socket, token)
    qtbot.waitUntil(lambda: earlier.has(MessageKind.RESUME_PARKED), timeout=5000)  # it stands

    services.settle_outcomes["s1"] = SettleResult(CARD, None)
    _settle(client, "ran", AttestationChoice.RAN)
    qtbot.waitUntil(lambda: _answer(client, "ran") is not None, timeout=5000)
    answer = _answer(client, "ran")
    assert answer is not None and answer.recorded and answer.resume_available
    cards = [m for m in client.received if isinstance(m, TranscriptItemPush)]
    assert cards[-1].item == CARD
    assert "settle_call:s1:c1:True:seen" in services.calls
    assert services.threads["settle_call"] != threading.main_thread().name
    later = _client(qtbot, socket, token)
    later.ask_marker("after-hello")  # answered after whatever stands was sent
    qtbot.waitUntil(lambda: later.answered("after-hello"), timeout=5000)
    assert not later.has(MessageKind.RESUME_PARKED)  # no stale park for a later window


def test_a_refusal_reaches_the_renderer_with_its_code(
    qtbot: QtBot, host: tuple[HostApp, FakeHostServices, str, str]
) -> None:
    _app, services, socket, token = host
    client = _client(qtbot, socket, token)
    services.settle_outcomes["s1"] = HostServiceError(
        WriterRejectionCode.OPERATION_SETTLED, "already settled"
    )
    _settle(client, "no", AttestationChoice.NOT_RUN)
    qtbot.waitUntil(lambda: _answer(client, "no") is not None, timeout=5000)
    answer = _answer(client, "no")
    assert answer is not None and not answer.recorded
    assert (answer.code, answer.message) == ("operation_settled", "already settled")


def test_a_park_that_still_holds_is_sent_and_stands(
    qtbot: QtBot, host: tuple[HostApp, FakeHostServices, str, str]
) -> None:
    _app, services, socket, token = host
    client = _client(qtbot, socket, token)
    services.settle_outcomes["s1"] = SettleResult(
        CARD, ResumeParked(("background_operation_pending",))
    )
    _settle(client, "still", AttestationChoice.RAN)
    qtbot.waitUntil(lambda: _answer(client, "still") is not None, timeout=5000)
    answer = _answer(client, "still")
    assert answer is not None and answer.recorded and not answer.resume_available
    parked = client.all(MessageKind.RESUME_PARKED)
    assert parked and parked[-1].model_dump()["rejectionReasons"] == (
        "background_operation_pending",
    )


ASKING = ToolCardItem(
    item_id="evt-call",
    tool_call_id="c1",
    tool_name="bash",
    status=ToolCardStatus.INDETERMINATE,
    settleable=True,
    settle_folder=SettleFolderNote(changed_paths=["main.py"]),
)


def test_an_answer_on_a_note_that_no_longer_holds_resends_the_card_then_refuses(
    qtbot: QtBot, host: tuple[HostApp, FakeHostServices, str, str]
) -> None:
    _app, services, socket, token = host
    client = _client(qtbot, socket, token)
    shown = SettleFolderNote(changed_paths=[])
    services.settle_outcomes["s1"] = ShownCardStale(
        ShownChangedCode.SETTLE_FOLDER_CHANGED, "It said no file changed; now 1.", ASKING
    )
    client.send(
        ToolsSettleRequest(
            session_id="s1",
            tool_call_id="c1",
            outcome=AttestationChoice.RAN,
            folder_shown=shown,
            correlation_id="stale",
        )
    )
    qtbot.waitUntil(lambda: _answer(client, "stale") is not None, timeout=5000)
    assert services.folders_shown == [("c1", shown)]
    answer = _answer(client, "stale")
    assert answer is not None and not answer.recorded
    assert answer.code == "settle_folder_changed"
    assert answer.message == "It said no file changed; now 1."
    kinds = [m.kind for m in client.received]
    card_at = kinds.index(MessageKind.TRANSCRIPT_ITEM)
    assert card_at < kinds.index(MessageKind.TOOL_SETTLED)  # the new words first
    pushed = client.received[card_at]
    assert isinstance(pushed, TranscriptItemPush) and pushed.item == ASKING


def test_a_park_checked_again_resends_the_cards_whose_note_changed(
    qtbot: QtBot, host: tuple[HostApp, FakeHostServices, str, str]
) -> None:
    """Try again (or a decision) parks again: the cards asking about a call are sent again
    with their note as it is now; a decision carries the files the banner listed."""
    _app, services, socket, token = host
    client = _client(qtbot, socket, token)
    services.fresh_notes["s1"] = (ASKING,)
    listed = (ChangedFilesShown(code="workspace_drift"),)
    client.send(
        ResumeLatestRequest(
            session_id="s1",
            workspace_decision="rebaseline",
            files_shown=listed,
            correlation_id="again",
        )
    )
    qtbot.waitUntil(
        lambda: any(isinstance(m, TranscriptItemPush) for m in client.received), timeout=5000
    )
    assert services.files_shown == [("s1", listed)]
    [pushed] = [m for m in client.received if isinstance(m, TranscriptItemPush)]
    assert pushed.item == ASKING
