"""The ledger tools check workspace checkpoint facts as the store's writer and ``maka import`` do
(one check, ``workspace_fact_malformed``), and a checkpoint fact is never among the events
replayed to a model: the real ``maka ledger check`` / ``scan`` / ``plan`` on files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.ledger.event_model import RuntimeEvent
from runtime.recovery.replay_walk import walk_replay
from tests.helpers.ledger_builders import to_jsonl, user_text
from tests.unit.test_workspace_facts import _fact

pytestmark = pytest.mark.e2e

MAKA = Path(sys.executable).with_name("maka")


def maka(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MAKA), *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def _ledger() -> list[RuntimeEvent]:
    visible = _fact("ck1", modelVisibility="visible")
    with_content = _fact("ck2", ts=3, content={"kind": "text", "text": "a note"})
    return [user_text(), visible, with_content]


def test_the_ledger_tools_refuse_what_import_refuses(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(to_jsonl(_ledger()))

    check = maka("ledger", "check", path)
    assert check.returncode == 1, check.stdout + check.stderr
    lines = check.stdout.splitlines()
    assert lines[0].startswith(f"{path}:2: workspace_fact_malformed: event ck1: ")
    assert lines[0].endswith("(a workspace fact is hidden from the model and never partial)")
    assert lines[1].startswith(f"{path}:3: workspace_fact_malformed: event ck2: ")
    assert lines[1].endswith("(a workspace fact has no content, status or refs)")
    scan = maka("ledger", "scan", path)
    assert "workspace_fact_malformed at ck1" in scan.stdout
    assert "workspace_fact_malformed at ck2" in scan.stdout

    plan = maka("ledger", "plan", path)
    assert "replay: 1 events" in plan.stdout, plan.stdout
    assert "Traceback" not in check.stderr + scan.stderr + plan.stderr


def test_a_checkpoint_fact_is_never_replayed_whatever_its_envelope_says() -> None:
    events = _ledger()
    assert [event["id"] for event in walk_replay(events).replay] == [events[0]["id"]]


def test_a_well_formed_fact_stays_clean(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(to_jsonl([user_text(), _fact("ck1")]))
    check = maka("ledger", "check", path, "--json")
    assert check.returncode == 0, check.stdout
    assert json.loads(check.stdout)["problems"] == []
