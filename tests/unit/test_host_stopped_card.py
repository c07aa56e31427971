"""A bash call whose run ended without its result reads "Interrupted": the command was stopped
when Maka stopped and may have run in part (docs/design/recovery.md section 9); other unknown
outcomes keep "Outcome unknown"."""

from __future__ import annotations

from app.bridge_contract import ToolCardItem, ToolCardStatus
from app.host.transcript_items import HOST_STOPPED, wire_item
from runtime.agent.transcript_projection import TranscriptEntry


def _card(tool: str) -> ToolCardItem:
    entry = TranscriptEntry(
        type="tool_card",
        item_id=f"{tool}-1",
        run_id="run_1",
        tool_call_id="c1",
        tool_name=tool,
        args_summary="sleep 30",
        status="indeterminate",
        settleable=True,
    )
    item = wire_item(entry)
    assert isinstance(item, ToolCardItem)
    return item


def test_an_interrupted_command_says_it_was_stopped_with_maka() -> None:
    card = _card("bash")
    assert card.status is ToolCardStatus.INDETERMINATE
    assert card.park_reason == HOST_STOPPED
    assert card.settleable, "the user may still say whether it ran"


def test_other_unknown_outcomes_are_not_called_stopped() -> None:
    assert _card("custom_tool").park_reason is None
