"""On a run whose record of tool calls is damaged, ``maka plan`` and ``maka settle`` (and the
desktop's "Did it run?") read the same facts: the call the damaged result no longer answers
(``c1``) is ``indeterminate`` in the plan, and settling it is refused because the record is
damaged (``tool_ledger_corruption``), not because "the outcome was recorded"; the desktop's
card does not ask, and a settle request is refused with the same code. Nothing is written.

The damaged run is built with the real ``maka`` (a real run killed with SIGKILL after its tool
result, exported, imported, repaired) and then edited in the SQLite file behind Maka's back
(``tests/e2e/test_damaged_ledger_park_words_cli.py``)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from app.bridge_contract import (
    AttestationChoice,
    MessageKind,
    SessionOpenedPush,
    SessionsOpenRequest,
    ToolCardItem,
    ToolSettledPush,
    ToolsSettleRequest,
)
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.e2e.test_damaged_ledger_park_words_cli import _damaged_session, _orphan, _wrong_side
from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import maka
from tests.helpers.wire_client import WireClient

pytestmark = pytest.mark.e2e

WAIT_MS = 30_000


def _rows(data: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(data / DATABASE_NAME)) as conn:
        events = conn.execute("SELECT event_id, payload FROM runtime_events ORDER BY rowid")
        operations = conn.execute("SELECT * FROM tool_operations ORDER BY operation_id")
        return [*events.fetchall(), *operations.fetchall()]


def _operation(plan: dict[str, Any], call: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [op for op in plan["operations"] if op["toolCallId"] == call]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("damage", [_orphan, _wrong_side], ids=["orphan_response", "lane"])
def test_settle_refuses_a_damaged_record_and_agrees_with_the_plan(
    tmp_path: Path, damage: Any
) -> None:
    data, session, event, env = _damaged_session(tmp_path, damage)
    planned = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    assert planned["rejectionReasons"] == ["dangling_tool_state"]
    before = _rows(data)

    for choice in ("--ran", "--not-run"):
        settled = maka(["settle", session, "c1", choice], data, env=env)
        assert settled.returncode == 1, settled.stdout + settled.stderr
        assert settled.stdout == ""
        [line] = settled.stderr.splitlines()
        assert line.startswith("maka: error [tool_ledger_corruption]: "), line
        assert "is damaged" in line and f"at event {event}" in line, line
        assert "was recorded" not in line and "nothing to settle" not in line
        assert "maka doctor" in line
        assert _rows(data) == before  # nothing written

    # The plan still says what it said about c1, and the JSON answer of settle is the same code.
    again = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    assert _operation(again, "c1") == _operation(planned, "c1")
    shown = maka(["settle", session, "c1", "--ran", "--json"], data, env=env)
    assert shown.returncode == 1 and "[tool_ledger_corruption]" in shown.stderr


def test_the_plan_names_c1_indeterminate_and_settle_does_not_claim_its_outcome(
    tmp_path: Path,
) -> None:
    """The orphan response: the plan lists c1 as unknown; settling says why it cannot help."""
    data, session, _event, env = _damaged_session(tmp_path, _orphan)
    plan = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    assert _operation(plan, "c1")["status"] == "indeterminate"
    assert _operation(plan, "c1")["reason"] == "dispatch_without_response"
    text = maka(["plan", session], data, env=env).stdout
    assert "maka settle" not in text
    settled = maka(["settle", session, "c1", "--ran"], data, env=env)
    assert "saying whether read_file c1 ran cannot" in settled.stderr, settled.stderr


def _settled(client: WireClient, tag: str) -> ToolSettledPush | None:
    for message in client.all(MessageKind.TOOL_SETTLED):
        if message.correlation_id == tag:
            assert isinstance(message, ToolSettledPush)
            return message
    return None


def test_the_desktop_card_does_not_ask_and_its_settle_is_refused_alike(
    tmp_path: Path, qtbot: QtBot
) -> None:
    data, session, _event, env = _damaged_session(tmp_path, _orphan)
    before = _rows(data)
    main = start_main(data, env).wait_ready()
    try:
        client = WireClient(main.socket_name)
        client.hello(main.token)
        qtbot.waitUntil(lambda: client.has(MessageKind.HELLO_OK), timeout=WAIT_MS)
        client.send(SessionsOpenRequest(session_id=session, correlation_id="open"))
        qtbot.waitUntil(lambda: client.has(MessageKind.SESSION_OPENED), timeout=WAIT_MS)
        opened = client.first(MessageKind.SESSION_OPENED)
        assert isinstance(opened, SessionOpenedPush)
        cards = {i.tool_call_id: i for i in opened.items if isinstance(i, ToolCardItem)}
        assert cards["c1"].status == "indeterminate"  # as maka plan says
        assert not cards["c1"].settleable  # no "Did it run?": an answer cannot help

        client.send(
            ToolsSettleRequest(
                session_id=session,
                tool_call_id="c1",
                outcome=AttestationChoice.RAN,
                correlation_id="ran",
            )
        )
        qtbot.waitUntil(lambda: _settled(client, "ran") is not None, timeout=WAIT_MS)
        refused = _settled(client, "ran")
        assert refused is not None and not refused.recorded
        assert refused.code == "tool_ledger_corruption", refused
        assert refused.message is not None and "is damaged" in refused.message
        assert main.terminate() == 0
    finally:
        main.stop()
    assert _rows(data) == before
