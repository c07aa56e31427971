"""One crash-point vocabulary (``CrashPoint``) and one hook: the contract document lists exactly
its members, every member is reached by the product, the environment is read at each call, and a
name that is no crash point is reported instead of silently never firing."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from runtime.ledger import crash_points
from runtime.ledger.crash_points import (
    FAILPOINT_ENV,
    CrashPoint,
    UnknownCrashPoint,
    armed_crash_point,
    crash_point_named,
    failpoint,
    failpoint_active,
    failpoint_armed,
)

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("app", "main_process", "renderer", "runtime", "storage")


def _documented_points() -> list[str]:
    """The first cell of every row of the table under ``## Crash points``."""
    text = (REPO / "docs" / "crash-contract.md").read_text(encoding="utf-8")
    section = text.split("\n## Crash points\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    names = []
    for row in rows:
        match = re.match(r"\| `([^`]+)` \|", row)
        assert match is not None, row
        names.append(match.group(1))
    return names


def test_the_crash_contract_lists_exactly_the_crash_points_in_their_order() -> None:
    documented = _documented_points()
    assert [name for name, count in Counter(documented).items() if count > 1] == []
    assert documented == [point.value for point in CrashPoint]


def _reached_members() -> set[str]:
    """Every ``CrashPoint.X`` the product's code names."""
    reached: set[str] = set()
    for package in PRODUCT:
        for path in (REPO / package).rglob("*.py"):
            if path.name == "crash_points.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "CrashPoint"
                ):
                    reached.add(node.attr)
    return reached


def test_every_crash_point_is_reached_by_the_product() -> None:
    assert sorted(set(CrashPoint.__members__) - _reached_members()) == []


def test_the_values_are_the_names_the_environment_has_always_used() -> None:
    """Drills, tests and other branches name points by these strings: they never change."""
    assert [point.value for point in CrashPoint][:12] == [f"P{index}" for index in range(12)]
    for name, point in CrashPoint.__members__.items():
        if not name.startswith("P"):
            assert point.value == name.lower()


def test_the_environment_is_read_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAILPOINT_ENV, raising=False)
    assert armed_crash_point() is None
    monkeypatch.setenv(FAILPOINT_ENV, "t1_after_commit")
    assert armed_crash_point() is CrashPoint.T1_AFTER_COMMIT
    failpoint(CrashPoint.T2_AFTER_COMMIT)  # another point: the process lives on
    failpoint_armed(armed_crash_point(), CrashPoint.P1, CrashPoint.T2_AFTER_COMMIT)
    monkeypatch.setenv(FAILPOINT_ENV, "t2_after_commit")
    assert armed_crash_point() is CrashPoint.T2_AFTER_COMMIT
    monkeypatch.setenv(FAILPOINT_ENV, "")
    assert armed_crash_point() is None


def test_a_switch_is_active_only_when_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAILPOINT_ENV, raising=False)
    assert not failpoint_active(CrashPoint.TOOL_SUPERVISOR_DISABLED)
    monkeypatch.setenv(FAILPOINT_ENV, "P3")
    assert not failpoint_active(CrashPoint.TOOL_SUPERVISOR_DISABLED)
    monkeypatch.setenv(FAILPOINT_ENV, "tool_supervisor_disabled")
    assert failpoint_active(CrashPoint.TOOL_SUPERVISOR_DISABLED)
    assert not failpoint_active(CrashPoint.TOOL_SUPERVISOR_NO_SUBREAPER)
    switches = {CrashPoint.TOOL_SUPERVISOR_DISABLED, CrashPoint.TOOL_SUPERVISOR_NO_SUBREAPER}
    failpoint(*[point for point in CrashPoint if point not in switches])


def test_an_unknown_name_is_refused_with_the_closest_point() -> None:
    assert crash_point_named("P10") is CrashPoint.P10
    with pytest.raises(UnknownCrashPoint) as raised:
        crash_point_named("t1_after_comit")
    assert raised.value.code == "failpoint_unknown"
    assert "MAKA_FAILPOINT='t1_after_comit' names no crash point" in raised.value.message
    assert "did you mean 't1_after_commit'?" in raised.value.message
    with pytest.raises(UnknownCrashPoint) as raised:
        crash_point_named("p3")  # names are case-sensitive
    assert "did you mean 'P3'?" in raised.value.message


def test_an_unknown_name_in_the_environment_is_reported_once_and_never_fires(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(crash_points, "_parsed", {None: None, "": None})
    monkeypatch.setenv(FAILPOINT_ENV, "any.store.point")
    failpoint(*CrashPoint)  # would kill the process if the name were taken as a point
    failpoint(CrashPoint.P3)
    assert armed_crash_point() is None
    err = capsys.readouterr().err
    assert err.count("maka: warning [failpoint_unknown]: MAKA_FAILPOINT='any.store.point'") == 1


def test_a_child_process_with_an_unknown_name_says_so_and_runs_on() -> None:
    child = textwrap.dedent(
        """
        from runtime.ledger.crash_points import CrashPoint, failpoint
        failpoint(CrashPoint.P1)
        failpoint(CrashPoint.P1)
        print("lived")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child],
        check=False,
        cwd=REPO,
        env={**os.environ, FAILPOINT_ENV: "P12"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert done.stdout == "lived\n"
    assert done.stderr.count("names no crash point") == 1
