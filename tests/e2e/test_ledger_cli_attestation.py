"""The real ``maka ledger check/scan/plan`` on a run whose interrupted ``bash`` call the user
settled (docs/design/recovery.md section 8): a clean ledger, the call ``completed`` with settlement
origin ``user_attestation``, and a plan that replays the call with the attested result. A forged
attestation (its outcome says something else) is corruption, as any bad bundle is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.event_model import RuntimeEvent
from tests.helpers.ledger_builders import (
    attestation_bundle,
    bound_response,
    call_event,
    dispatch_event,
    terminal,
    to_jsonl,
    user_text,
    with_changes,
)

pytestmark = pytest.mark.e2e

MAKA = Path(sys.executable).with_name("maka")


def maka(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MAKA), *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def _settled_run(ran: bool) -> list[RuntimeEvent]:
    call = call_event("c1", "bash", {"command": "make migrate"})
    dispatch = dispatch_event(call, recovery_mode="never_auto_retry")
    ending = terminal(status="failed", state_delta={"failureClass": "app_restarted"}, ts=59)
    bundle = attestation_bundle(call, dispatch, ran, note="the log says so")
    return [user_text(marker=True), call, dispatch, ending, *bundle]


@pytest.mark.parametrize("ran", [True, False])
def test_check_scan_and_plan_understand_a_settled_call(tmp_path: Path, ran: bool) -> None:
    events = _settled_run(ran)
    path = tmp_path / "run.jsonl"
    path.write_bytes(to_jsonl(events))
    checked = maka("ledger", "check", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    scanned = maka("ledger", "scan", path, "--json")
    assert scanned.returncode == 0, scanned.stderr
    (operation,) = json.loads(scanned.stdout)["operations"]
    assert operation["status"] == "completed"
    assert operation["settlementOrigin"] == "user_attestation"
    assert operation["reason"] == ("user_attested_ran" if ran else "user_attested_not_run")
    assert operation["responseIsError"] is (not ran)
    planned = maka("ledger", "plan", path, "--json")
    assert planned.returncode == 0, planned.stderr
    plan: dict[str, Any] = json.loads(planned.stdout)
    assert plan["disposition"] == "safe_replay"
    assert plan["rejectionReasons"] == []
    assert [op["status"] for op in plan["operations"]] == ["succeeded" if ran else "failed"]
    assert events[4]["id"] in plan["replayRuntimeEventIds"]


def test_a_forged_attestation_is_corruption_everywhere(tmp_path: Path) -> None:
    events = _settled_run(True)
    events[5] = with_changes(events[5], content={"result": {"output": "made up"}})
    path = tmp_path / "run.jsonl"
    path.write_bytes(to_jsonl(events))
    checked = maka("ledger", "check", path)
    assert checked.returncode == 1
    assert "attestation_outcome_conflict" in checked.stdout + checked.stderr
    scanned = json.loads(maka("ledger", "scan", path, "--json").stdout)
    assert scanned["operations"][0]["status"] == "corruption"
    plan = json.loads(maka("ledger", "plan", path, "--json").stdout)
    assert plan["disposition"] == "blocked"
    assert plan["rejectionReasons"] == ["dangling_tool_state"]


@pytest.mark.parametrize("ran", [True, False])
def test_plan_says_what_the_user_confirmed_not_that_the_call_succeeded(
    tmp_path: Path, ran: bool
) -> None:
    """Nobody saw the call succeed or fail: the user said it ran (or did not). The text says
    that, with when and the note; the JSON keeps its status and adds what was confirmed."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(to_jsonl(_settled_run(ran)))
    text = maka("ledger", "plan", path)
    assert text.returncode == 0, text.stderr
    (line,) = [line for line in text.stdout.splitlines() if "c1" in line]
    said = "ran" if ran else "did not run"
    assert line == f"  bash c1: {said} (confirmed by you on 2025-12-01 16:03 UTC)", line
    assert "    your note: the log says so" in text.stdout.splitlines()
    assert "succeeded" not in text.stdout and "failed" not in text.stdout
    document = json.loads(maka("ledger", "plan", path, "--json").stdout)
    (operation,) = document["operations"]
    assert operation["status"] == ("succeeded" if ran else "failed")  # unchanged
    assert operation["attestation"] == ("ran" if ran else "not_run")
    assert operation["attestedAt"] == 1_764_605_000_000
    assert operation["attestationNote"] == "the log says so"


def test_plan_of_a_call_that_really_succeeded_adds_no_attestation(tmp_path: Path) -> None:
    call = call_event("c1", "bash", {"command": "make migrate"})
    path = tmp_path / "run.jsonl"
    path.write_bytes(
        to_jsonl([user_text(marker=True), call, dispatch_event(call), bound_response(call)])
    )
    text = maka("ledger", "plan", path)
    assert "  bash c1: succeeded" in text.stdout.splitlines(), text.stdout + text.stderr
    (operation,) = json.loads(maka("ledger", "plan", path, "--json").stdout)["operations"]
    assert operation["status"] == "succeeded"
    assert not {"attestation", "attestedAt", "attestationNote"} & set(operation)


def test_a_note_from_the_file_cannot_rewrite_the_terminal(tmp_path: Path) -> None:
    call = call_event("c1", "bash", {"command": "make migrate"})
    dispatch = dispatch_event(call, recovery_mode="never_auto_retry")
    ending = terminal(status="failed", state_delta={"failureClass": "app_restarted"}, ts=59)
    bundle = attestation_bundle(call, dispatch, True, note="fine\r\x1b[2Kall good")
    path = tmp_path / "run.jsonl"
    path.write_bytes(to_jsonl([user_text(marker=True), call, dispatch, ending, *bundle]))
    text = maka("ledger", "plan", path)
    assert text.returncode == 0, text.stderr
    assert "    your note: fine<CR><ESC>[2Kall good" in text.stdout.splitlines(), text.stdout
