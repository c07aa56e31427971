"""Tool cards and notices carry codes that let the renderer word each state honestly."""

from __future__ import annotations

import pytest

from app.bridge_contract import NoticeLevel, ToolCardItem, ToolCardStatus, TranscriptItem
from app.host.live_turn_view import LiveTurnView
from app.host.transcript_items import wire_item
from runtime.agent.transcript_projection import TranscriptEntry, transcript_of_run
from runtime.ledger.store_ports import RunStatus
from tests.helpers.ledger_builders import (
    RunIds,
    call_event,
    dispatch_event,
    response_event,
    terminal,
    user_text,
)

IDS = RunIds(session_id="s", invocation_id="i", run_id="r", turn_id="t")


class Sink:
    def __init__(self) -> None:
        self.items: list[TranscriptItem] = []

    def transcript_item(self, item: TranscriptItem) -> None:
        self.items.append(item)

    def run_status(self, run_id: str, status: object, failure_class: str | None = None) -> None:
        pass


def _card(status: str, result: str = "", code: str | None = None) -> ToolCardItem:
    entry = TranscriptEntry(
        "tool_card",
        "e",
        "r",
        tool_call_id="c",
        tool_name="bash",
        args_summary="sleep 30",
        status=status,
        result_summary=result,
        code=code,
    )
    item = wire_item(entry)
    assert isinstance(item, ToolCardItem)
    return item


@pytest.mark.parametrize(
    ("status", "result", "result_code", "wire_status", "code"),
    [
        ("pending", "", None, ToolCardStatus.RUNNING, "awaiting_permission"),
        ("running", "", None, ToolCardStatus.RUNNING, None),
        ("failed", "the command was cancelled", "cancelled", ToolCardStatus.FAILED, "cancelled"),
        (
            "failed",
            "the user denied permission to run bash",
            "permission_denied",
            ToolCardStatus.FAILED,
            "permission_denied",
        ),
        ("failed", "x.txt is outside", "path_outside_workspace", ToolCardStatus.FAILED, None),
        ("failed", "exit code 1: boom", None, ToolCardStatus.FAILED, None),
        ("succeeded", "exit code 0", None, ToolCardStatus.SUCCEEDED, None),
    ],
)
def test_a_card_is_qualified_by_what_happened_to_it(
    status: str,
    result: str,
    result_code: str | None,
    wire_status: ToolCardStatus,
    code: str | None,
) -> None:
    card = _card(status, result, result_code)
    assert card.status is wire_status
    assert card.park_reason == code


@pytest.mark.parametrize(
    ("result", "code"),
    [
        # refused before it ran: the runtime's refusal results carry their code
        ({"error": "the turn was cancelled while waiting for permission", "code": "cancelled"},
         "cancelled"),
        ({"error": "the user denied permission to run bash", "code": "permission_denied"},
         "permission_denied"),
        # a command stopped while it ran: bash flags its result
        ({"exitCode": -15, "output": "", "cancelled": True, "error": "the command was cancelled"},
         "cancelled"),
        ({"error": "path x is outside the workspace", "code": "path_outside_workspace"}, None),
        ({"exitCode": 1, "output": "boom", "error": "exit code 1"}, None),
    ],
)  # fmt: skip
def test_the_qualifier_comes_from_the_committed_result(
    result: dict[str, object], code: str | None
) -> None:
    call = call_event("c1", "bash", {"command": "sleep 30"}, ids=IDS, ts=2)
    events = [
        user_text("go", ids=IDS, marker=True),
        call,
        response_event(call, result, is_error=True),
    ]
    (card,) = [
        item
        for item in (wire_item(entry) for entry in transcript_of_run(events))
        if isinstance(item, ToolCardItem)
    ]
    assert card.status is ToolCardStatus.FAILED
    assert card.park_reason == code


def test_a_live_card_waits_for_permission_until_it_is_dispatched() -> None:
    sink = Sink()
    view = LiveTurnView(sink)  # type: ignore[arg-type]  # records items only
    call = call_event("c1", "bash", {"command": "ls"}, ids=IDS, ts=2)
    view.committed(user_text("go", ids=IDS, marker=True))
    view.committed(call)  # committed alone: the permission request follows
    view.committed(dispatch_event(call))
    cards = [i for i in sink.items if isinstance(i, ToolCardItem)]
    assert [(c.status, c.park_reason) for c in cards] == [
        (ToolCardStatus.RUNNING, "awaiting_permission"),
        (ToolCardStatus.RUNNING, None),
    ]


def test_a_cancelled_turn_ends_with_a_calm_notice_and_a_stopped_card() -> None:
    sink = Sink()
    view = LiveTurnView(sink)  # type: ignore[arg-type]  # records items only
    call = call_event("c1", "bash", {"command": "sleep 30"}, ids=IDS, ts=2)
    view.committed(user_text("go", ids=IDS, marker=True))
    view.committed(call)
    view.committed(
        response_event(
            call,
            {"error": "the turn was cancelled while waiting for permission", "code": "cancelled"},
            is_error=True,
        )
    )
    view.committed(
        terminal(
            IDS,
            status="cancelled",
            state_delta={"failureClass": "cancelled_by_user"},
            extra={"content": {"kind": "error", "message": "the turn was cancelled by the user"}},
        )
    )
    view.run_status("r", RunStatus.CANCELLED, "cancelled_by_user")
    card = [i for i in sink.items if isinstance(i, ToolCardItem)][-1]
    assert (card.status, card.park_reason) == (ToolCardStatus.FAILED, "cancelled")
    notices = [i for i in sink.items if i.type == "notice"]
    assert len(notices) == 1
    dumped = notices[0].model_dump(by_alias=False)
    assert dumped["code"] == "cancelled_by_user"
    assert dumped["level"] is NoticeLevel.INFO


def test_a_run_recovery_ended_says_maka_stopped_whoever_ran_it() -> None:
    """A turn a killed ``maka run`` left is ended by the next start's recovery as a killed
    desktop's is: the notice blames neither the app nor the terminal, both run Maka."""
    ending = terminal(
        IDS,
        status="failed",
        state_delta={"failureClass": "app_restarted", "recoveryReason": "x", "recovered": True},
    )
    [notice] = [
        e for e in transcript_of_run([user_text("go", ids=IDS), ending]) if e.type == "notice"
    ]
    assert notice.text == "Maka stopped while this turn was running"
    assert notice.code == "app_restarted" and notice.level == "error"


def test_a_reply_the_content_filter_cut_off_ends_with_a_notice_as_a_cut_by_length_does() -> None:
    """The transcript (the desktop's, the TUI's) says the reply was cut off; a turn that
    completed with stopReason content_filter read as an ordinary ending."""
    message = "the reply was cut off: the server's content filter stopped it before it finished"
    ending = terminal(
        IDS,
        state_delta={"stopReason": "content_filter"},
        extra={"content": {"kind": "error", "code": "content_filter", "message": message}},
    )
    [notice] = [
        e for e in transcript_of_run([user_text("go", ids=IDS), ending]) if e.type == "notice"
    ]
    assert notice.text == message and notice.level == "warn"
