"""A real ``maka run`` killed with SIGKILL at each production crash point P0-P9.

For each point the committed prefix must be exactly what the crash contract names
(docs/design/recovery.md section 2, ``docs/crash-contract.md``), the resolver and the Phase 0 plan
must read it as documented, and a side-effect counter (the tool appends a line to a file) shows the
tool ran at most once, also after the next ``maka run`` in the same session (which runs
startup recovery).

P1 is reached through a permission wait (``--permission-mode ask`` answered "y" on standard
input): that is the only path where the function_call commits before T1; every other call commits
together with its dispatch.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from runtime.ledger.codes import (
    Disposition,
    OperationStatus,
    ParkReason,
    ResolverReason,
    ResolverStatus,
    SettlementOrigin,
)
from runtime.ledger.workspace_facts import is_workspace_fact
from runtime.recovery.failpoints import FAILPOINTS_BY_ID, CommittedPrefix
from runtime.recovery.recovery_resolver import resolve_recovery
from runtime.recovery.resume_plan import plan_resume
from tests.helpers.maka_run import committed_runs, maka, scripted_env, shape, write_script

pytestmark = pytest.mark.crash

BASH_ARGS = {"command": "echo x >> counter.txt"}

# committed shapes per point (bash in auto mode; P1 in ask mode)
TOOL_PREFIX = ["user", "text", "call", "dispatch"]
EXPECTED: dict[str, list[str]] = {
    "P0": ["user", "text"],
    "P1": ["user", "text", "call", "permission_request", "permission_allow"],
    "P2": TOOL_PREFIX,
    "P3": TOOL_PREFIX,
    "P4": TOOL_PREFIX,
    "P5": [*TOOL_PREFIX, "response"],
    "P6": [*TOOL_PREFIX, "response"],
    "P7": [*TOOL_PREFIX, "response"],
    "P8": [*TOOL_PREFIX, "response", "text"],
    "P9": [*TOOL_PREFIX, "response", "text", "terminal_completed"],
}
COUNTER_AFTER = {"P0": 0, "P1": 0, "P2": 0, "P3": 0}


def _counter(workspace: Path) -> int:
    path = workspace / "counter.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("point", list(EXPECTED))
def test_maka_run_killed_at_failpoint_leaves_the_contracted_prefix(
    tmp_path: Path, point: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data_dir = tmp_path / "data"
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {
                    "text": "running it",
                    "toolCalls": [{"id": "call-1", "name": "bash", "args": BASH_ARGS}],
                },
                {"text": "done"},
            ],
            [{"text": "second turn"}],
        ],
    )
    mode = "ask" if point == "P1" else "auto"
    result = maka(
        ["run", "--cwd", str(workspace), "--permission-mode", mode, "do it"],
        data_dir,
        env=scripted_env(script, checkpoints=True, MAKA_FAILPOINT=point),
        stdin="y\n",
    )
    assert result.returncode == -signal.SIGKILL, result.stderr

    [(header, all_events)] = committed_runs(data_dir)
    # Workspace checkpoint facts (their own lane, tested in test_checkpoint_capture) aside.
    events = [event for event in all_events if not is_workspace_fact(event)]
    assert len(all_events) > len(events)  # the run's start was captured
    assert [shape(event) for event in events] == EXPECTED[point]
    protocol = events[0]["actions"]["runtimeProtocol"]
    assert protocol["toolBoundary"] == "t1_after_preflight_v1"
    counted = _counter(workspace)
    assert counted == COUNTER_AFTER.get(point, 1)
    assert header.status == ("completed" if point == "P9" else "running")

    prefix = FAILPOINTS_BY_ID[point].committed_prefix
    resolution = resolve_recovery(events)
    assert resolve_recovery(all_events) == resolution  # the tool scanner passes over them
    plan = plan_resume(events)
    assert plan == plan_resume(events)  # deterministic
    replay_ids = [event["id"] for event in plan.replay_runtime_events]
    if prefix is CommittedPrefix.BEFORE_FUNCTION_CALL:
        assert resolution.decisions == ()
        assert plan.disposition is Disposition.SAFE_REPLAY
        assert plan.operations == ()
    elif prefix is CommittedPrefix.AFTER_FUNCTION_CALL:
        [decision] = resolution.decisions
        assert plan.disposition is Disposition.BLOCKED
        assert plan.rejection_reasons == (ParkReason.DANGLING_TOOL_STATE,)
        assert decision.call_runtime_event_id not in replay_ids
        if point == "P1":  # the T1 marker proves the call never crossed T1
            assert decision.status is ResolverStatus.DEFINITELY_NOT_DISPATCHED
            assert decision.reason is ResolverReason.NEW_PROTOCOL_BEFORE_DISPATCH
            assert plan.operations[0].status is OperationStatus.NOT_DISPATCHED
        else:
            assert decision.status is ResolverStatus.INDETERMINATE
            assert decision.reason is ResolverReason.DISPATCH_WITHOUT_RESPONSE
            assert plan.operations[0].status is OperationStatus.INDETERMINATE
            assert plan.requires_verification
    else:
        [decision] = resolution.decisions
        assert decision.status is ResolverStatus.COMPLETED
        assert decision.settlement_origin is SettlementOrigin.NORMAL_T2
        assert plan.disposition is Disposition.SAFE_REPLAY
        assert plan.operations[0].status is OperationStatus.SUCCEEDED
        assert decision.call_runtime_event_id in replay_ids
        assert decision.response_runtime_event_id in replay_ids
        has_terminal = any(shape(e).startswith("terminal") for e in plan.replay_runtime_events)
        assert has_terminal == (prefix is CommittedPrefix.AFTER_TERMINAL_EVENT)

    # The next command owns the directory, repairs the orphaned run, and never reruns the tool.
    follow_up = maka(
        ["run", "--session", header.session_id, "--permission-mode", "auto", "again"],
        data_dir,
        env=scripted_env(script),
    )
    assert follow_up.returncode == 0, follow_up.stderr
    assert _counter(workspace) == counted
    runs = committed_runs(data_dir)
    repaired_header, repaired_events = runs[0]
    if point == "P9":
        assert repaired_header.status == "completed"
    else:
        assert repaired_header.status == "failed"
        assert repaired_header.failure_class == "app_restarted"
        assert shape(repaired_events[-1]) == "terminal_failed"
    assert runs[1][0].status == "completed"


@pytest.mark.parametrize("point", ["P3", "P4"])
def test_write_file_killed_inside_the_tool_or_after_the_replace(tmp_path: Path, point: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("before\n")
    data_dir = tmp_path / "data"
    args = {"path": "notes.txt", "content": "after\n"}
    script = write_script(
        tmp_path / "script.json",
        [[{"toolCalls": [{"id": "w1", "name": "write_file", "args": args}]}, {"text": "ok"}]],
    )
    result = maka(
        ["run", "--cwd", str(workspace), "--permission-mode", "auto", "write"],
        data_dir,
        env=scripted_env(script, MAKA_FAILPOINT=point),
    )
    assert result.returncode == -signal.SIGKILL
    [(_, all_events)] = committed_runs(data_dir)
    events = [e for e in all_events if not is_workspace_fact(e)]
    assert [shape(e) for e in events] == ["user", "call", "dispatch"]
    evidence = events[2]["actions"]["toolDispatch"]["evidence"]
    assert evidence["path"] == "notes.txt"
    assert evidence["workspaceIdentity"].startswith("workspace:v1:")
    expected = "before\n" if point == "P3" else "after\n"
    assert (workspace / "notes.txt").read_text() == expected
