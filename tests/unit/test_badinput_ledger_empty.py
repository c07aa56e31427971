"""The ledger tools on a file without events: no run to continue, so ``runtime_ledger_empty``
(an error) everywhere, as Safe resume parks a stored run without events: ``plan`` and
``timeline`` are blocked with that reason, ``check`` is not clean (exit 1), ``scan`` lists it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from app.commands import ledger_cmd
from app.commands.ledger_json import plan_json, plan_json_text
from runtime.recovery.resume_plan import plan_resume

EMPTY = "runtime_ledger_empty"


def _ledger(tmp_path: Path, command: str, *, as_json: bool, **extra: object) -> argparse.Namespace:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    defaults: dict[str, object] = {"expected_high_water": None, "only_problems": False}
    return argparse.Namespace(
        ledger_command=command, file=path, json=as_json, **{**defaults, **extra}
    )


def _run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, as_json: bool, **extra: object
) -> tuple[int, str]:
    code = ledger_cmd.run(_ledger(tmp_path, command, as_json=as_json, **extra))
    return code, capsys.readouterr().out


@pytest.mark.parametrize("expected", [None, 0, 3])
def test_plan_of_an_empty_file_is_blocked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, expected: int | None
) -> None:
    code, out = _run(capsys, tmp_path, "plan", True, expected_high_water=expected)
    document = json.loads(out)
    assert code == 0
    assert document["disposition"] == "blocked"
    assert document["rejectionReasons"][-1] == EMPTY
    assert {"code": EMPTY, "message": "the run has no events"} in document["diagnostics"]
    assert document["sourceRuntimeEventHighWater"] == 0
    code, out = _run(capsys, tmp_path, "plan", False, expected_high_water=expected)
    assert out.startswith("disposition: blocked (reasons: ")
    assert f"  ! {EMPTY}: the run has no events\n" in out


def test_the_general_plan_path_agrees() -> None:
    """The whole-file plan (taken when the streaming pass gives up) says the same."""
    plan = plan_resume([])
    assert json.loads(plan_json_text(plan)) == plan_json(plan)
    assert plan_json(plan)["rejectionReasons"] == [EMPTY]
    assert plan_json(plan)["disposition"] == "blocked"


def test_check_of_an_empty_file_is_not_clean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _run(capsys, tmp_path, "check", True)
    assert code == 1
    document = json.loads(out)
    assert document["clean"] is False and document["eventCount"] == 0
    assert document["problems"] == [{"code": EMPTY, "message": "the run has no events"}]
    code, out = _run(capsys, tmp_path, "check", False)
    assert code == 1
    assert out == f"{tmp_path / 'empty.jsonl'}: {EMPTY}: the run has no events\n"


def test_scan_of_an_empty_file_lists_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = _run(capsys, tmp_path, "scan", True)
    assert code == 0
    assert json.loads(out)["issues"] == [{"code": EMPTY}]
    code, out = _run(capsys, tmp_path, "scan", False)
    assert f"  ! {EMPTY}: the run has no events\n" in out


def test_timeline_of_an_empty_file_is_blocked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _run(capsys, tmp_path, "timeline", True)
    assert code == 0
    plan = json.loads(out)["plan"]
    assert plan["disposition"] == "blocked"
    assert plan["rejectionReasons"] == [EMPTY]
    code, out = _run(capsys, tmp_path, "timeline", False)
    assert out.startswith(f"Safe resume: blocked (reasons: {EMPTY})")
