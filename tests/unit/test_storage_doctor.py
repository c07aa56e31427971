"""``store.diagnose()``: a clean data directory reports no problem; each kind of damage made
behind the store's back is reported with its code."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.store_ports import SessionRecord
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from storage.sessions.workspace_identity import (
    LEGACY_MARKER_NAME,
    MARKER_NAME,
    marker_bytes,
    resolve_workspace_identity,
)
from tests.helpers.ledger_builders import RunIds, call_event, clean_ledger
from tests.helpers.store_workloads import commit_ledger, store_with_runs

IDS = RunIds()


def _seed(data_dir: Path) -> None:
    with store_with_runs(data_dir, IDS, durable=False) as store:
        commit_ledger(store, clean_ledger(5, ids=IDS))


def _tamper(data_dir: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    conn = sqlite3.connect(data_dir / DATABASE_NAME)
    for sql, params in statements:
        conn.execute(sql, params)
    conn.commit()
    conn.close()


def _codes(data_dir: Path) -> list[str]:
    with open_store(data_dir, read_only=True) as store:
        return [problem.code for problem in store.diagnose().problems]


def test_a_clean_store_has_no_problem(data_dir: Path) -> None:
    _seed(data_dir)
    with open_store(data_dir, read_only=True) as store:
        report = store.diagnose()
    assert report.ok and report.problems == []
    assert (report.runs, report.events, report.operations) == (1, 19, 4)
    assert report.integrity == ["ok"]
    document = report.to_json()
    assert document["ok"] is True and document["schemaVersion"] == report.program_schema_version


def _payload(event_id: str, **changes: object) -> bytes:
    event = next(e for e in clean_ledger(5, ids=IDS) if e["id"] == event_id)
    return canonical_bytes({**event, **changes})  # type: ignore[typeddict-item]


DAMAGE: dict[str, tuple[Callable[[], tuple[str, tuple[object, ...]]], str]] = {
    "payload_mismatch": (
        lambda: (
            "UPDATE runtime_events SET payload = ? WHERE event_id = 'evt-model'",
            (_payload("evt-model", runId="run-other"),),
        ),
        "event_unreadable",
    ),
    "undecodable": (
        lambda: ("UPDATE runtime_events SET payload = ? WHERE event_id = 'evt-model'", (b"{",)),
        "event_unreadable",
    ),
    "seq_gap": (
        lambda: (
            "UPDATE runtime_events SET event_seq = 100 WHERE event_id = 'evt-terminal'",
            (),
        ),
        "event_seq_gap",
    ),
    "header_claims_no_ending": (
        lambda: ("UPDATE runs SET status = 'running' WHERE run_id = ?", (IDS.run_id,)),
        "header_terminal_mismatch",
    ),
    "projection_state": (
        lambda: ("UPDATE tool_operations SET current_state = 'prepared', version = 1", ()),
        "projection_mismatch",
    ),
    "projection_missing": (
        lambda: ("DELETE FROM tool_journal_events WHERE state = 'recovery_parked'", ()),
        "projection_mismatch",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damage_is_reported_with_its_code(data_dir: Path, damage: str) -> None:
    _seed(data_dir)
    statement, code = DAMAGE[damage]
    _tamper(data_dir, statement())
    assert code in _codes(data_dir)


def test_a_scanner_issue_is_reported(data_dir: Path) -> None:
    _seed(data_dir)
    duplicate = call_event("call-0", ids=IDS, event_id="injected")
    _tamper(
        data_dir,
        ("UPDATE runtime_events SET event_seq = event_seq + 1 WHERE event_seq = 19", ()),
        (
            "INSERT INTO runtime_events VALUES (?, ?, ?, ?, ?, 19, 'function_call', 0, ?, 1)",
            ("injected", IDS.session_id, IDS.invocation_id, IDS.run_id, IDS.turn_id,
             canonical_bytes(duplicate)),
        ),
    )  # fmt: skip
    codes = _codes(data_dir)
    assert "duplicate_call" in codes
    assert "projection_mismatch" not in codes  # an unprojectable run is not compared


def test_an_event_after_the_terminal_is_reported(data_dir: Path) -> None:
    _seed(data_dir)
    late = next(e for e in clean_ledger(5, ids=IDS) if e["id"] == "evt-model")
    late = {**late, "id": "late"}
    _tamper(
        data_dir,
        (
            "INSERT INTO runtime_events VALUES (?, ?, ?, ?, ?, 20, 'ordinary', 0, ?, 1)",
            ("late", IDS.session_id, IDS.invocation_id, IDS.run_id, IDS.turn_id,
             canonical_bytes(late)),
        ),
    )  # fmt: skip
    assert "event_after_terminal" in _codes(data_dir)


def test_workspace_markers_are_checked(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    good, bad, gone = tmp_path / "good", tmp_path / "bad", tmp_path / "gone"
    legacy = tmp_path / "legacy"
    good.mkdir()
    bad.mkdir()
    legacy.mkdir()
    resolve_workspace_identity(good)
    (legacy / LEGACY_MARKER_NAME).write_bytes(
        marker_bytes("0f8fad5b-d9cb-469f-a165-70867728950e", 1)
    )
    (bad / MARKER_NAME).parent.mkdir()
    (bad / MARKER_NAME).write_text("{broken")
    with open_store(data_dir) as store:
        for index, folder in enumerate((good, bad, gone, legacy)):
            store.create_session(SessionRecord(f"s{index}", str(folder), "t", index))
    with open_store(data_dir, read_only=True) as store:
        report = store.diagnose()
    assert [problem.code for problem in report.problems] == ["workspace_marker_invalid"]
    markers = {item["cwd"]: item["marker"] for item in report.workspaces}
    assert markers == {
        str(good): "valid",
        str(bad): "workspace_marker_invalid",
        str(gone): "folder_missing",
        str(legacy): "valid",  # a marker of older versions still names the workspace
    }
    assert [p.name for p in legacy.iterdir()] == [LEGACY_MARKER_NAME]  # the doctor only reads
