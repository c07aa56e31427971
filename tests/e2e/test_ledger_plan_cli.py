"""The real ``maka ledger plan`` / ``maka ledger scan`` commands (docs/design/cli.md,
"Ledger tools").

Every example ledger of the shared design is planned by the installed console script and checked
against its ``expected.json``; further ledgers written here cover the JSON shapes exactly, the
facts a file may hold without being refused, and the inputs that are refused (exit 2 naming the
line).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.event_model import RuntimeEvent
from tests.helpers.ledger_builders import (
    DEFAULT_IDS,
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    model_text,
    orphan_dispatch_copy,
    reconcile_event,
    response_event,
    stray_recovery_copy,
    terminal,
    to_jsonl,
    tool_turn,
    user_text,
)
from tests.helpers.phase0_crash_ledger import crash_template_events

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO.parent / "shared" / "examples"
EXAMPLE_DIRS = sorted(p for p in EXAMPLES.glob("*/") if (p / "expected.json").is_file())


def _maka() -> list[str]:
    script = Path(sys.executable).with_name("maka")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def _run(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("MAKA_FAILPOINT", None)
    return subprocess.run(
        [*_maka(), *args], check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def _json(args: Sequence[str], cwd: Path) -> dict[str, Any]:
    done = _run(args, cwd)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _write(path: Path, events: Sequence[RuntimeEvent]) -> Path:
    path.write_bytes(to_jsonl(events))
    return path


def _matches(expected: Any, actual: Any) -> bool:
    """``expected`` objects list only the keys that must match; lists must match item by item."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and _matches(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual) and type(expected) is type(actual)


def _no_nulls(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, dict):
        return all(_no_nulls(item) for item in value.values())
    if isinstance(value, list):
        return all(_no_nulls(item) for item in value)
    return True


# ---- the shared examples ----------------------------------------------------------------------


@pytest.mark.skipif(not EXAMPLE_DIRS, reason=f"no example ledgers at {EXAMPLES}")
@pytest.mark.parametrize("folder", EXAMPLE_DIRS, ids=lambda path: path.name)
def test_the_example_ledger_gives_its_expected_plan(folder: Path) -> None:
    spec = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    words = shlex.split(spec["command"])
    assert words[0] == "maka"
    document = _json(words[1:], folder)
    expect = dict(spec["expect"])
    codes = expect.pop("diagnosticCodes", None)
    if codes is not None:
        assert [d["code"] for d in document["diagnostics"]] == codes
    for key, value in expect.items():
        assert key in document, key
        assert _matches(value, document[key]), (key, value, document[key])
    assert _no_nulls(document)


@pytest.mark.skipif(not EXAMPLE_DIRS, reason=f"no example ledgers at {EXAMPLES}")
def test_the_crash_template_is_the_example_crash_ledger(tmp_path: Path) -> None:
    """The harness ledger and the g-examples are the same bytes for the same failpoint."""
    for name, point, count in [
        ("g02-after-function-call", "P1", 2),
        ("g04-after-terminal-event", "P9", 4),
    ]:
        example = EXAMPLES / name / "ledger.jsonl"
        if example.is_file():
            assert to_jsonl(crash_template_events(point)[:count]) == example.read_bytes()


# ---- exact JSON shapes ------------------------------------------------------------------------


def _mixed_ledger() -> list[RuntimeEvent]:
    ids = RunIds()
    return [
        user_text(marker=True),
        *tool_turn("ok", ending="response", ts=10),
        *tool_turn("denied", ending="synthetic", ts=20),
        *tool_turn("lost", ending="dangling", ts=30),
        *tool_turn("parked", ending="parked", ts=40),
        *tool_turn("recovered", ending="completed", ts=50),
        call_event("never", ids=ids, ts=60),
        model_text(ts=70),
        terminal(ids, ts=80),
    ]


def test_plan_prints_exactly_the_documented_shape(tmp_path: Path) -> None:
    events = _mixed_ledger()
    document = _json(
        ["ledger", "plan", str(_write(tmp_path / "run.jsonl", events)), "--json"], tmp_path
    )
    assert list(document) == [
        "disposition",
        "operations",
        "diagnostics",
        "rejectionReasons",
        "requiresVerification",
        "sourceRuntimeEventHighWater",
        "directive",
        "replayRuntimeEventIds",
    ]
    assert document["disposition"] == "blocked"
    assert document["rejectionReasons"] == ["dangling_tool_state"]
    assert document["requiresVerification"] is True
    assert "Do not retry" in document["directive"]
    assert document["sourceRuntimeEventHighWater"] == len(events)
    statuses = {op["toolCallId"]: op["status"] for op in document["operations"]}
    assert statuses == {
        "ok": "succeeded",
        "denied": "failed",
        "lost": "indeterminate",
        "parked": "parked",
        "recovered": "succeeded",
        "never": "not_dispatched",
    }
    by_id = {op["toolCallId"]: op for op in document["operations"]}
    assert list(by_id["ok"]) == [
        "toolCallId",
        "toolName",
        "status",
        "callRuntimeEventId",
        "responseRuntimeEventId",
        "responseIsError",
    ]
    assert list(by_id["never"]) == ["toolCallId", "toolName", "status", "callRuntimeEventId"]
    assert by_id["denied"]["responseIsError"] is True
    assert [d["code"] for d in document["diagnostics"]] == [
        "pending_tool_result",
        "tool_recovery_parked",
        "tool_not_dispatched",
    ]
    assert list(document["diagnostics"][0]) == [
        "code",
        "message",
        "eventId",
        "toolCallId",
        "toolName",
        "detail",
    ]
    # The resolver's reason as a field: tools and the banner never read it out of the message.
    assert document["diagnostics"][0]["detail"] == {"resolverReason": "dispatch_without_response"}
    assert _no_nulls(document)


def test_directive_is_absent_unless_verification_is_required(tmp_path: Path) -> None:
    events = [user_text(marker=True), *tool_turn("ok", ending="response"), terminal()]
    document = _json(
        ["ledger", "plan", str(_write(tmp_path / "ok.jsonl", events)), "--json"], tmp_path
    )
    assert document["disposition"] == "safe_replay"
    assert document["requiresVerification"] is False
    assert "directive" not in document


def test_scan_prints_exactly_the_documented_shape(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.jsonl", _mixed_ledger())
    document = _json(["ledger", "scan", str(path), "--json"], tmp_path)
    assert list(document) == ["operations", "issues", "hasCorruption", "requiresReconciliation"]
    assert document["issues"] == []
    assert document["hasCorruption"] is False
    assert document["requiresReconciliation"] is True
    by_id = {op["toolCallId"]: op for op in document["operations"]}
    assert list(by_id["ok"]) == [
        "toolCallId",
        "toolName",
        "operationId",
        "status",
        "reason",
        "settlementOrigin",
        "callRuntimeEventId",
        "dispatchRuntimeEventId",
        "responseRuntimeEventId",
        "responseIsError",
    ]
    assert (by_id["denied"]["reason"], by_id["denied"]["settlementOrigin"]) == (
        "matching_response",
        "pre_t1_synthetic",
    )
    assert "operationId" not in by_id["denied"]
    assert "dispatchRuntimeEventId" not in by_id["denied"]
    assert (by_id["parked"]["status"], by_id["parked"]["reason"]) == (
        "parked",
        "reconcile_diverged",
    )
    assert by_id["recovered"]["settlementOrigin"] == "recovery_bundle"
    assert (by_id["never"]["status"], by_id["never"]["reason"]) == (
        "definitely_not_dispatched",
        "new_protocol_before_dispatch",
    )
    assert list(by_id["never"]) == [
        "toolCallId",
        "toolName",
        "status",
        "reason",
        "callRuntimeEventId",
    ]
    assert _no_nulls(document)


# ---- facts, not refusals ----------------------------------------------------------------------


def test_duplicates_partials_and_other_runs_are_reported_not_refused(tmp_path: Path) -> None:
    call = call_event("c1")
    other = RunIds("sess-2", "inv-2", "run-2", "turn-2")
    events = [
        user_text(marker=True),
        model_text(event_id="chunk", partial=True),
        call,
        dispatch_event(call),
        bound_response(call),
        bound_response(call),  # the same line twice
        model_text(event_id="elsewhere", ids=other),
    ]
    path = _write(tmp_path / "messy.jsonl", events)
    scan = _json(["ledger", "scan", str(path), "--json"], tmp_path)
    assert scan["issues"] == [{"code": "duplicate_event_id", "eventId": events[4]["id"]}]
    assert scan["hasCorruption"] is True
    plan = _json(["ledger", "plan", str(path), "--json"], tmp_path)
    assert plan["sourceRuntimeEventHighWater"] == 7
    assert [d["code"] for d in plan["diagnostics"]] == ["duplicate_event_id"]
    assert plan["replayRuntimeEventIds"] == [
        "evt-user",
        call["id"],
        events[3]["id"],
        events[4]["id"],
        events[4]["id"],
        "elsewhere",
    ]


def test_an_expected_high_water_that_differs_blocks_the_plan(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.jsonl", [user_text(marker=True), model_text()])
    args = ["ledger", "plan", str(path), "--expected-high-water", "3", "--json"]
    document = _json(args, tmp_path)
    assert document["disposition"] == "blocked"
    assert document["rejectionReasons"] == ["runtime_offset_mismatch"]
    assert document["diagnostics"][0]["detail"] == {
        "expectedRuntimeEventHighWater": 3,
        "actualRuntimeEventHighWater": 2,
    }


def test_an_orphan_response_is_an_unmatched_tool_result(tmp_path: Path) -> None:
    ghost = response_event(call_event("ghost"), event_id="ghost")
    path = _write(tmp_path / "run.jsonl", [user_text(marker=True), ghost])
    document = _json(["ledger", "plan", str(path), "--json"], tmp_path)
    assert [d["code"] for d in document["diagnostics"]] == [
        "tool_ledger_corruption",
        "unmatched_tool_result",
    ]
    assert document["diagnostics"][0]["detail"] == {"issueCode": "orphan_response"}


def _corrupt_recovery_ledger(ids: RunIds = DEFAULT_IDS) -> tuple[list[RuntimeEvent], str]:
    """A call-less dispatch reusing a bound operation id, and a reconcile fact for an operation
    no dispatch made (reference section 4.2, steps 6 and 8); the reused operation id."""
    call = call_event("owner", ids=ids, ts=10)
    owner = dispatch_event(call)
    claimed = owner["actions"]["toolDispatch"]["operationId"]
    return [
        call,
        owner,
        bound_response(call),
        orphan_dispatch_copy(owner, "thief", claimed),
        stray_recovery_copy(reconcile_event(call), "toolop_nobody", "stray"),
    ], claimed


def test_scan_reports_an_orphan_dispatch_and_a_stray_recovery_fact_with_their_ids(
    tmp_path: Path,
) -> None:
    tail, claimed = _corrupt_recovery_ledger()
    events = [user_text(marker=True), *tail]
    orphan, stray = events[-2:]
    path = _write(tmp_path / "run.jsonl", events)
    scan = _json(["ledger", "scan", str(path), "--json"], tmp_path)
    assert scan["operations"][1] == {
        "toolCallId": "thief",
        "toolName": "Write",
        "operationId": claimed,
        "status": "corruption",
        "reason": "orphan_dispatch",
        "dispatchRuntimeEventId": orphan["id"],
    }
    assert scan["issues"] == [
        {
            "code": "event_order_conflict",
            "eventId": orphan["id"],
            "operationId": claimed,
            "toolCallId": "thief",
        },
        {
            "code": "duplicate_operation",
            "eventId": orphan["id"],
            "operationId": claimed,
            "toolCallId": "thief",
        },
        {
            "code": "event_order_conflict",
            "eventId": stray["id"],
            "operationId": "toolop_nobody",
            "toolCallId": "owner",
        },
    ]
    text = _run(["ledger", "scan", str(path)], tmp_path).stdout
    assert "Write thief: corruption (orphan_dispatch)" in text
    plan = _json(["ledger", "plan", str(path), "--json"], tmp_path)
    assert plan["diagnostics"][-1] == {
        "code": "tool_recovery_corruption",
        "message": "tool recovery fact is corrupt: orphan_dispatch",
        "eventId": orphan["id"],
        "toolCallId": "thief",
        "toolName": "Write",
        "detail": {"resolverReason": "orphan_dispatch"},
    }
    assert plan["disposition"] == "blocked"


@pytest.mark.parametrize("command", ["plan", "scan"])
def test_a_large_ledger_with_both_facts_in_its_tail_gives_the_serial_answer(
    tmp_path: Path, command: str
) -> None:
    """The two-core path (the tail scanned and planned in a child) reports them as the plain
    path does."""
    from app.commands.ledger_json import plan_json, scan_json
    from runtime.ledger.ledger_file import read_ledger_events
    from runtime.recovery.recovery_resolver import resolve_recovery
    from runtime.recovery.resume_plan import plan_resume

    events = _large_run(4_500)
    tail, claimed = _corrupt_recovery_ledger(RunIds("sess-large", "inv-large", "run-large"))
    events[-2:-2] = tail
    path = _write(tmp_path / "large.jsonl", events)
    decoded = read_ledger_events(path.read_bytes())
    expected = (
        plan_json(plan_resume(decoded))
        if command == "plan"
        else scan_json(resolve_recovery(decoded))
    )
    document = _json(["ledger", command, str(path), "--json"], tmp_path)
    assert document == expected
    if command == "scan":
        thief = next(op for op in document["operations"] if op["toolCallId"] == "thief")
        assert (thief["reason"], thief["operationId"]) == ("orphan_dispatch", claimed)
        assert "toolop_nobody" in [issue.get("operationId") for issue in document["issues"]]
    else:
        assert "tool recovery fact is corrupt: orphan_dispatch" in [
            d["message"] for d in document["diagnostics"]
        ]


def test_without_json_the_plan_is_a_short_text(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.jsonl", [user_text(), *tool_turn("c1", ending="dangling")])
    done = _run(["ledger", "plan", str(path)], tmp_path)
    assert done.returncode == 0
    assert "disposition: blocked (reasons: dangling_tool_state)" in done.stdout
    assert "pending_tool_result" in done.stdout


# ---- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["plan", "scan"])
def test_a_torn_last_line_is_refused_naming_the_line(tmp_path: Path, command: str) -> None:
    data = to_jsonl([user_text(marker=True), model_text()])
    path = tmp_path / "torn.jsonl"
    path.write_bytes(data + to_jsonl([model_text(event_id="cut")])[:40])
    done = _run(["ledger", command, str(path), "--json"], tmp_path)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "torn_last_line"
    assert "torn_last_line" in done.stderr
    assert "line 3" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"not json at all", "json_invalid"),
        (b'{"id":"x"}', "event_schema_invalid"),
    ],
)
def test_an_undecodable_line_is_refused_naming_the_line(
    tmp_path: Path, line: bytes, code: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(to_jsonl([user_text()]) + line + b"\n" + to_jsonl([model_text()]))
    done = _run(["ledger", "plan", str(path), "--json"], tmp_path)
    assert done.returncode == 2
    assert "line 2" in done.stderr
    assert code in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_key_is_refused(tmp_path: Path) -> None:
    event = json.loads(to_jsonl([user_text()]))
    event["surprise"] = 1
    path = tmp_path / "extra.jsonl"
    path.write_text(json.dumps(event) + "\n", encoding="utf-8")
    done = _run(["ledger", "scan", str(path), "--json"], tmp_path)
    assert done.returncode == 2
    assert "line 1" in done.stderr
    assert "unknown key" in done.stderr


def test_a_missing_file_is_refused_without_a_traceback(tmp_path: Path) -> None:
    done = _run(["ledger", "plan", str(tmp_path / "absent.jsonl"), "--json"], tmp_path)
    assert done.returncode == 2
    assert "ledger_file_unreadable" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_ledger_tools_start_without_qt_sqlite_storage_or_pydantic(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.jsonl", [user_text(marker=True), *tool_turn("c1")])
    probe = (
        "import sys\n"
        "from app.cli import main\n"
        f"code = main(['ledger', 'plan', {str(path)!r}, '--json'])\n"
        "loaded = [m for m in ('PySide6', 'sqlite3', '_sqlite3', 'storage', 'pydantic')\n"
        "          if m in sys.modules]\n"
        "print(code, loaded, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "0 []"


def _large_run(turns: int) -> list[RuntimeEvent]:
    """A long run of several megabytes (the size at which the command once decoded on two
    cores), ending with a dispatched call that has no response, so the plan is blocked and has
    a directive."""
    ids = RunIds("sess-large", "inv-large", "run-large", "turn-large")
    events: list[RuntimeEvent] = [user_text(ids=ids, marker=True)]
    for index in range(turns):
        events.extend(tool_turn(f"call-{index}", ids=ids, ts=10 + index))
        events.append(model_text(ids=ids, event_id=f"text-{index}", ts=10 + index))
    call = call_event("call-last", ids=ids, ts=10 + turns)
    events.extend([call, dispatch_event(call, ts=11 + turns)])
    return events


@pytest.mark.parametrize("command", ["plan", "scan"])
def test_a_large_ledger_gives_the_plan_of_the_serial_decode(tmp_path: Path, command: str) -> None:
    from app.commands.ledger_json import plan_json, scan_json
    from runtime.ledger.ledger_file import read_ledger_events
    from runtime.recovery.recovery_resolver import resolve_recovery
    from runtime.recovery.resume_plan import plan_resume

    path = _write(tmp_path / "large.jsonl", _large_run(4_500))
    assert path.stat().st_size > 4 << 20
    events = read_ledger_events(path.read_bytes())
    expected = (
        plan_json(plan_resume(events)) if command == "plan" else scan_json(resolve_recovery(events))
    )
    assert _json(["ledger", command, str(path), "--json"], tmp_path) == expected
    if command == "plan":
        assert expected["disposition"] == "blocked"
        assert len(expected["operations"]) == 4_501


def test_a_bad_line_late_in_a_large_ledger_is_refused_naming_the_line(tmp_path: Path) -> None:
    lines = to_jsonl(_large_run(4_500)).split(b"\n")[:-1]
    lines[-10] = lines[-10].replace(b'"partial":false', b'"partial":0')
    path = tmp_path / "large-bad.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    done = _run(["ledger", "plan", str(path), "--json"], tmp_path)
    assert done.returncode == 2
    assert f"line {len(lines) - 9}:" in json.loads(done.stdout)["error"]["message"]
    assert f"line {len(lines) - 9}:" in done.stderr
    assert "partial" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="needs /dev/stdin")
@pytest.mark.parametrize("ending", ["response", "parked"])
def test_a_ledger_read_from_a_pipe_gives_the_plan_of_the_file(tmp_path: Path, ending: str) -> None:
    """A pipe cannot be read twice: the plan of a piped ledger is the file's, whether the
    streaming pass would fold it (``response``) or hand it to the general path (``parked``:
    a recovery fact)."""
    events = [user_text(marker=True), *tool_turn("c-1", ending=ending), model_text()]
    path = _write(tmp_path / "run.jsonl", events)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("MAKA_FAILPOINT", None)
    for form in (["--json"], []):
        piped = subprocess.run(
            [*_maka(), "ledger", "plan", "/dev/stdin", *form],
            input=path.read_bytes(),
            check=True,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert piped.stdout.decode() == _run(["ledger", "plan", str(path), *form], tmp_path).stdout
