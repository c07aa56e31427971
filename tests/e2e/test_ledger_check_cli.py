"""The real ``maka ledger check`` command on files: exit 0 clean, 1 problems (an undecodable line
is one), 2 when the file cannot be read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.ledger_builders import (
    call_event,
    clean_ledger,
    dispatch_event,
    response_event,
    to_jsonl,
    user_text,
)

pytestmark = pytest.mark.e2e

MAKA = Path(sys.executable).with_name("maka")


def maka(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert MAKA.exists(), f"the console script is not installed next to {sys.executable}"
    return subprocess.run(
        [str(MAKA), *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def write(tmp_path: Path, data: bytes, name: str = "ledger.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def assert_no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout


def test_a_clean_ledger_exits_zero(tmp_path: Path) -> None:
    events = clean_ledger(5)
    path = write(tmp_path, to_jsonl(events))
    result = maka("ledger", "check", path)
    assert result.returncode == 0, result.stderr
    assert f"clean ledger, {len(events)} events" in result.stdout


def test_problems_are_listed_with_line_and_code_and_exit_one(tmp_path: Path) -> None:
    call = call_event()
    unbound = response_event(call)
    lines = to_jsonl([user_text(), call, unbound, dispatch_event(call), call]).split(b"\n")
    lines[0] = lines[0].replace(b"{", b"{ ", 1)  # not canonical
    path = write(tmp_path, b"\n".join(lines))
    result = maka("ledger", "check", path)
    assert result.returncode == 1, result.stderr
    assert_no_traceback(result)
    listed = [line.split(": ")[0:2] for line in result.stdout.splitlines()]
    assert listed == [
        [f"{path}:1", "not_canonical"],
        [f"{path}:3", "identity_conflict"],
        [f"{path}:4", "event_order_conflict"],
        [f"{path}:5", "duplicate_event_id"],
    ]


def test_json_output_is_one_document(tmp_path: Path) -> None:
    events = clean_ledger(2)
    path = write(tmp_path, to_jsonl([*events, events[1]]))
    result = maka("ledger", "check", path, "--json")
    assert result.returncode == 1
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["clean"] is False and document["readable"] is True
    assert document["eventCount"] == len(events) + 1
    assert [(p["line"], p["code"], p["eventId"]) for p in document["problems"]] == [
        (len(events) + 1, "duplicate_event_id", events[1]["id"])
    ]


def test_a_torn_last_line_is_a_problem_of_an_unreadable_ledger(tmp_path: Path) -> None:
    data = to_jsonl(clean_ledger(2))
    path = write(tmp_path, data[:-25])
    result = maka("ledger", "check", path)
    assert result.returncode == 1
    assert result.stderr == ""
    assert_no_traceback(result)
    line_count = data.count(b"\n")
    assert f"{path}:{line_count}: torn_last_line" in result.stdout
    document = json.loads(maka("ledger", "check", path, "--json").stdout)
    assert document["readable"] is False
    assert document["problems"][0]["code"] == "torn_last_line"


def test_an_undecodable_line_names_line_and_field(tmp_path: Path) -> None:
    lines = to_jsonl(clean_ledger(1)).split(b"\n")
    lines[1] = lines[1].replace(b'"partial":false', b'"partial":"no"')
    path = write(tmp_path, b"\n".join(lines))
    result = maka("ledger", "check", path, "--json")
    assert result.returncode == 1
    (problem,) = json.loads(result.stdout)["problems"]
    assert (problem["line"], problem["code"], problem["field"]) == (
        2,
        "event_schema_invalid",
        "partial",
    )


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = maka("ledger", "check", tmp_path / "absent.jsonl")
    assert result.returncode == 2
    assert_no_traceback(result)
    assert "maka: error [ledger_file_unreadable]" in result.stderr


def test_a_missing_subcommand_is_a_usage_error() -> None:
    result = maka("ledger")
    assert result.returncode == 2
    assert_no_traceback(result)


def test_plan_takes_the_expected_high_water() -> None:
    result = maka("ledger", "plan", "--help")
    assert result.returncode == 0
    assert "--expected-high-water" in result.stdout


def test_a_damaged_record_is_said_in_words_by_check_scan_and_plan(tmp_path: Path) -> None:
    """The ledger tools say what a ledger check's code means, as maka doctor and maka plan do,
    instead of naming only the code and the call."""
    from app.code_text import describe

    call = call_event()
    lines = to_jsonl([user_text(), call, response_event(call), dispatch_event(call)])
    path = write(tmp_path, lines)
    checked = maka("ledger", "check", path)
    assert checked.returncode == 1, checked.stderr
    for code in ("identity_conflict", "event_order_conflict"):
        [line] = [text for text in checked.stdout.splitlines() if f": {code}:" in text]
        assert describe(code).sentence in line, line
    scanned = maka("ledger", "scan", path)
    assert f"event_order_conflict at {call['id']}" not in scanned.stdout.splitlines()
    assert describe("event_order_conflict").sentence in scanned.stdout, scanned.stdout
    planned = maka("ledger", "plan", path)
    corrupt = [text for text in planned.stdout.splitlines() if "ledger is corrupt:" in text]
    assert corrupt, planned.stdout
    assert all(
        any(
            describe(code).sentence in text
            for code in ("identity_conflict", "event_order_conflict")
        )
        for text in corrupt
    ), planned.stdout
