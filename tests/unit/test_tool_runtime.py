"""ToolRuntime and the run loop on a real SQLite store with the scripted provider.

Covers the preflight order and its unbound refusals, permission allow/deny, T1 and T2 failures,
tool exceptions, the result cap, the loop gate, cancellation of a running bash tree and the
history a new turn starts from.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

from runtime.agent.permission_policy import (
    Decision,
    PermissionMode,
    PermissionPolicy,
    PermissionQuestion,
)
from runtime.agent.run_loop import RunOutcome, RunSettings
from runtime.agent.session_service import SessionService
from runtime.agent.tool_runtime import cap_result
from runtime.base.cancel_token import CancelToken
from runtime.ledger.codes import ResolverStatus, SettlementOrigin, StoreCode
from runtime.ledger.event_model import RecoveryMode, RuntimeEvent
from runtime.ledger.store_ports import CommitResult, RunStatus, StoreRefusal
from runtime.providers.provider_port import ToolCall, ToolResult
from runtime.providers.scripted_provider import ScriptedProvider, parse_script
from runtime.recovery.recovery_resolver import resolve_recovery
from runtime.tools.tool_catalog import ToolCatalog, default_catalog
from runtime.tools.tool_contract import PreparedCall, ToolContext, ToolOutput
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.maka_run import shape

IDENTITY = "workspace:v1:11111111-2222-4333-8444-555555555555"


class Recorder:
    def __init__(self) -> None:
        self.events: list[RuntimeEvent] = []
        self.text = ""

    def text_delta(self, text: str) -> None:
        self.text += text

    def thinking_delta(self, text: str) -> None:
        del text

    def committed(self, event: RuntimeEvent) -> None:
        self.events.append(event)

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        del run_id, status, failure_class


class FailingStore:
    """A real store whose T1 or T2 writer fails on demand."""

    def __init__(self, inner: SqliteLedgerStore, fail: str) -> None:
        self._inner = inner
        self._fail = fail

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def commit_tool_prepared(
        self, call_event: RuntimeEvent | None, dispatch_event: RuntimeEvent
    ) -> CommitResult:
        if self._fail == "T1":
            raise StoreRefusal(StoreCode.STORE_CORRUPT, "disk on fire")
        return self._inner.commit_tool_prepared(call_event, dispatch_event)

    def commit_tool_outcome(self, response_event: RuntimeEvent) -> CommitResult:
        if self._fail == "T2":
            raise StoreRefusal(StoreCode.STORE_CORRUPT, "disk on fire")
        return self._inner.commit_tool_outcome(response_event)


class ExplodingTool:
    name = "explode"
    description = "always raises"
    parameters: Mapping[str, Any] = {"type": "object", "properties": {}}
    read_only = True
    recovery_mode: RecoveryMode = "replay_safe"

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall[None]:
        del ctx
        return PreparedCall(self.name, args, plan=None)

    def run(self, prepared: PreparedCall[None], ctx: ToolContext) -> ToolOutput:
        raise RuntimeError("kaboom")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    instance = open_store(tmp_path / "data")
    yield instance
    instance.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return Path(os.path.realpath(path))


def _service(
    store: Any, script: dict[str, Any], tmp_path: Path, catalog: ToolCatalog | None = None
) -> tuple[SessionService, Path]:
    record = tmp_path / "requests.jsonl"
    turns = parse_script(script)
    service = SessionService(
        store=store,
        provider_factory=lambda: ScriptedProvider(turns, record),
        owner_epoch=1,
        workspace_identity=lambda folder: IDENTITY,
        catalog=catalog,
        settings=RunSettings(max_steps=6, result_cap_bytes=4096),
    )
    return service, record


def _turn(
    service: SessionService,
    workspace: Path,
    mode: PermissionMode = PermissionMode.AUTO,
    answer: Decision | None = None,
    text: str = "go",
) -> tuple[RunOutcome, Recorder]:
    session = service.create_session(workspace)
    recorder = Recorder()

    def asker(question: PermissionQuestion, cancel: CancelToken) -> Decision | None:
        del question, cancel
        return answer

    outcome = service.send_turn(
        session.session_id, text, recorder, PermissionPolicy(mode), asker=asker
    )
    return outcome, recorder


def _call(call_id: str, name: str, args: Any) -> dict[str, Any]:
    return {"toolCalls": [{"id": call_id, "name": name, "args": args}]}


def _ledger(store: SqliteLedgerStore, run_id: str) -> list[RuntimeEvent]:
    return [row.event for row in store.read_run_events(run_id)]


@pytest.mark.parametrize(
    "case",
    [
        ("no_such_tool", {}, "unknown_tool"),
        ("write_file", {"path": "a.txt"}, "arguments_invalid"),
        ("write_file", {"path": "../escape.txt", "content": "x"}, "path_outside_workspace"),
        (
            "edit_file",
            {"path": "a.txt", "old_string": "x", "new_string": "y"},
            "edit_target_missing",
        ),
    ],
)
def test_preflight_refusals_commit_an_unbound_error_and_never_run_the_tool(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path, case: tuple[str, Any, str]
) -> None:
    name, args, code = case
    service, _ = _service(store, {"steps": [_call("c1", name, args), {"text": "ok"}]}, tmp_path)
    outcome, _ = _turn(service, workspace)
    assert outcome.status is RunStatus.COMPLETED
    events = _ledger(store, outcome.run_id)
    assert [shape(e) for e in events] == [
        "user",
        "call",
        "unbound_response",
        "text",
        "terminal_completed",
    ]
    assert events[2]["content"]["result"]["code"] == code  # type: ignore[typeddict-item]
    assert list(workspace.iterdir()) == []
    [decision] = resolve_recovery(events).decisions
    assert decision.status is ResolverStatus.COMPLETED
    assert decision.settlement_origin is SettlementOrigin.PRE_T1_SYNTHETIC


def test_successful_write_crosses_t1_with_evidence_then_t2(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    args = {"path": "a.txt", "content": "hi\n"}
    service, _ = _service(
        store, {"steps": [_call("c1", "write_file", args), {"text": "ok"}]}, tmp_path
    )
    outcome, recorder = _turn(service, workspace)
    events = _ledger(store, outcome.run_id)
    assert [shape(e) for e in events] == [
        "user",
        "call",
        "dispatch",
        "response",
        "text",
        "terminal_completed",
    ]
    assert recorder.events == events  # observers see exactly the committed events, in order
    dispatch = events[2]["actions"]["toolDispatch"]
    assert dispatch["recoveryMode"] == "reconcile"
    assert dispatch["evidence"]["workspaceIdentity"] == IDENTITY
    assert events[2]["id"].endswith("_dispatch") and events[3]["id"].endswith("_response")
    [decision] = resolve_recovery(events).decisions
    assert decision.settlement_origin is SettlementOrigin.NORMAL_T2
    assert (workspace / "a.txt").read_text() == "hi\n"


@pytest.mark.parametrize(("answer", "ran"), [("allow", True), ("deny", False)])
def test_ask_commits_request_and_decision_before_t1(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path, answer: Decision, ran: bool
) -> None:
    service, _ = _service(
        store, {"steps": [_call("c1", "bash", {"command": "touch m"}), {"text": "ok"}]}, tmp_path
    )
    outcome, _ = _turn(service, workspace, PermissionMode.ASK, answer)
    shapes = [shape(e) for e in _ledger(store, outcome.run_id)]
    tail = ["dispatch", "response"] if ran else ["unbound_response"]
    assert shapes == [
        "user",
        "call",
        "permission_request",
        f"permission_{answer}",
        *tail,
        "text",
        "terminal_completed",
    ]
    assert (workspace / "m").exists() is ran


def test_read_only_tools_are_not_asked_about_and_deny_mode_refuses_writers(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    steps = {
        "steps": [
            {
                "toolCalls": [
                    {"id": "r", "name": "list_dir", "args": {}},
                    {"id": "w", "name": "write_file", "args": {"path": "x", "content": "1"}},
                ]
            },
            {"text": "ok"},
        ]
    }
    service, _ = _service(store, steps, tmp_path)
    outcome, _ = _turn(service, workspace, PermissionMode.DENY)
    shapes = [shape(e) for e in _ledger(store, outcome.run_id)]
    assert shapes == [
        "user",
        "call",
        "dispatch",
        "response",
        "call",
        "unbound_response",
        "text",
        "terminal_completed",
    ]
    assert not (workspace / "x").exists()


def test_failing_t1_runs_the_tool_zero_times(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    service, _ = _service(
        FailingStore(store, "T1"),
        {"steps": [_call("c1", "bash", {"command": "echo x >> counter"}), {"text": "ok"}]},
        tmp_path,
    )
    outcome, _ = _turn(service, workspace)
    assert outcome.status is RunStatus.FAILED
    assert outcome.failure_class == "tool_boundary_failed"
    assert not (workspace / "counter").exists()
    shapes = [shape(e) for e in _ledger(store, outcome.run_id)]
    assert shapes == ["user", "terminal_failed"]
    assert store.read_run_header(outcome.run_id).status is RunStatus.FAILED  # type: ignore[union-attr]


def test_failing_t2_never_shows_the_result_to_the_model(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    service, record = _service(
        FailingStore(store, "T2"),
        {"steps": [_call("c1", "bash", {"command": "echo x >> counter"}), {"text": "ok"}]},
        tmp_path,
    )
    outcome, recorder = _turn(service, workspace)
    assert outcome.failure_class == "tool_boundary_failed"
    assert (workspace / "counter").read_text() == "x\n"  # ran exactly once
    assert len(record.read_text().splitlines()) == 1  # no provider call saw a result
    assert "response" not in [shape(e) for e in recorder.events]
    shapes = [shape(e) for e in _ledger(store, outcome.run_id)]
    assert shapes == ["user", "call", "dispatch", "terminal_failed"]


def test_tool_exceptions_become_is_error_responses(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    catalog = ToolCatalog([*default_catalog().tools().values(), ExplodingTool()])
    service, _ = _service(
        store, {"steps": [_call("c1", "explode", {}), {"text": "ok"}]}, tmp_path, catalog
    )
    outcome, _ = _turn(service, workspace)
    response = _ledger(store, outcome.run_id)[3]
    assert response["content"]["isError"] is True  # type: ignore[typeddict-item]
    result = response["content"]["result"]  # type: ignore[typeddict-item]
    assert result["code"] == "tool_internal_error"
    # what a card and the model read is a sentence; the exception's class stays in the detail
    assert result["error"] == "the tool failed because of an unexpected problem in Maka: kaboom"
    assert result["detail"] == "RuntimeError: kaboom"


class BrokenPrepareTool(ExplodingTool):
    name = "broken_prepare"

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall[None]:
        raise KeyError("a defect in preflight")


@pytest.mark.parametrize(
    "case",
    [
        ("write_file", {"path": "file.txt/x", "content": "x"}, "path_unusable"),
        (
            "edit_file",
            {"path": "file.txt/x", "old_string": "a", "new_string": "b"},
            "path_unusable",
        ),
        ("write_file", {"path": "loop/x", "content": "x"}, "path_unusable"),
        ("edit_file", {"path": "loop/x", "old_string": "a", "new_string": "b"}, "path_unusable"),
        ("write_file", {"path": "n" * 300, "content": "x"}, "path_unusable"),
        ("edit_file", {"path": "n" * 300, "old_string": "a", "new_string": "b"}, "path_unusable"),
        ("broken_prepare", {}, "preflight_failed"),
    ],
)
def test_os_errors_and_defects_in_preflight_are_coded_refusals_and_the_turn_goes_on(
    store: SqliteLedgerStore,
    workspace: Path,
    tmp_path: Path,
    case: tuple[str, dict[str, Any], str],
) -> None:
    tool, args, code = case
    (workspace / "file.txt").write_text("a")
    (workspace / "loop").symlink_to(workspace / "loop2")
    (workspace / "loop2").symlink_to(workspace / "loop")
    catalog = ToolCatalog([*default_catalog().tools().values(), BrokenPrepareTool()])
    service, _ = _service(
        store, {"steps": [_call("c1", tool, args), {"text": "ok"}]}, tmp_path, catalog
    )
    outcome, _ = _turn(service, workspace)
    assert outcome.status is RunStatus.COMPLETED
    events = _ledger(store, outcome.run_id)
    assert [shape(e) for e in events] == [
        "user",
        "call",
        "unbound_response",
        "text",
        "terminal_completed",
    ]
    result = events[2]["content"]["result"]  # type: ignore[typeddict-item]
    assert result["code"] == code
    assert "Traceback" not in result["error"]
    assert "Error" not in result["error"]  # no exception class name in what a user reads
    assert sorted(p.name for p in workspace.iterdir()) == ["file.txt", "loop", "loop2"]


def test_large_results_are_capped_with_a_marker(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "big.txt").write_text("z" * 20000)
    service, _ = _service(
        store, {"steps": [_call("c1", "read_file", {"path": "big.txt"}), {"text": "ok"}]}, tmp_path
    )
    outcome, _ = _turn(service, workspace)
    result = _ledger(store, outcome.run_id)[3]["content"]["result"]  # type: ignore[typeddict-item]
    assert result["truncated"] is True
    assert "[result truncated:" in result["content"]
    assert cap_result({"a": "b"}, False, 100) == {"a": "b"}
    assert cap_result(list(range(5000)), True, 500)["truncated"] is True


def test_loop_gate_blocks_the_third_identical_failure(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    failing = _call("c{}", "bash", {"command": "echo x >> counter; exit 1"})
    steps = [{"toolCalls": [dict(failing["toolCalls"][0], id=f"c{i}")]} for i in range(3)]
    service, _ = _service(store, {"steps": [*steps, {"text": "ok"}]}, tmp_path)
    outcome, _ = _turn(service, workspace)
    events = _ledger(store, outcome.run_id)
    assert [shape(e) for e in events].count("unbound_response") == 1
    blocked = next(e for e in events if shape(e) == "unbound_response")
    assert blocked["content"]["result"]["code"] == "loop_gate_blocked"  # type: ignore[typeddict-item]
    assert (workspace / "counter").read_text() == "x\nx\n"


def test_cancel_kills_a_running_bash_tree_and_ends_the_run_cancelled(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    command = "sleep 120 & echo $! > child.pid; sleep 120"
    service, _ = _service(store, {"steps": [_call("c1", "bash", {"command": command})]}, tmp_path)
    session = service.create_session(workspace)
    cancel = CancelToken()
    box: list[RunOutcome] = []
    worker = threading.Thread(
        target=lambda: box.append(
            service.send_turn(
                session.session_id,
                "go",
                Recorder(),
                PermissionPolicy(PermissionMode.AUTO),
                cancel=cancel,
            )
        )
    )
    worker.start()
    pid_file = workspace / "child.pid"
    deadline = time.monotonic() + 10
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert service.is_busy(session.session_id)
    assert service.cancel(session.session_id) is True  # the session's token is ``cancel``
    assert cancel.is_cancelled()
    worker.join(20)
    assert not worker.is_alive()
    [outcome] = box
    assert outcome.status is RunStatus.CANCELLED
    assert outcome.failure_class == "cancelled_by_user"
    assert outcome.message == "The turn was stopped before it finished"  # the transcript's notice
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    shapes = [shape(e) for e in _ledger(store, outcome.run_id)]
    assert shapes == ["user", "call", "dispatch", "response", "terminal_cancelled"]


def test_a_new_turn_starts_from_earlier_runs_paired_history(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    script = {
        "turns": [
            [_call("c1", "list_dir", {}), {"text": "listed"}],
            [{"text": "second"}],
        ]
    }
    service, record = _service(store, script, tmp_path)
    session = service.create_session(workspace)
    policy = PermissionPolicy(PermissionMode.AUTO)
    service.send_turn(session.session_id, "one", Recorder(), policy)
    service.send_turn(session.session_id, "two", Recorder(), policy)
    history = service.prior_history(session.session_id)
    assert [type(item).__name__ for item in history] == [
        "UserText",
        "ToolCall",
        "ToolResult",
        "AssistantText",
        "UserText",
        "AssistantText",
    ]
    assert isinstance(history[1], ToolCall) and isinstance(history[2], ToolResult)
    lines = record.read_text().splitlines()
    assert len(lines) == 3 and all('"unpairedToolCalls": []' in line for line in lines)


def test_provider_errors_end_the_run_with_provider_error(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    service, _ = _service(store, {"steps": [{"error": {"message": "boom"}}]}, tmp_path)
    outcome, recorder = _turn(service, workspace)
    assert outcome.status is RunStatus.FAILED and outcome.failure_class == "provider_error"
    terminal = recorder.events[-1]
    assert terminal["content"]["message"].endswith("boom")  # type: ignore[typeddict-item]
    header = store.read_run_header(outcome.run_id)
    assert header is not None and header.failure_class == "provider_error"


def test_step_limit_ends_the_turn(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    steps = [_call(f"c{i}", "list_dir", {}) for i in range(8)]
    service, _ = _service(store, {"steps": steps}, tmp_path)
    outcome, _ = _turn(service, workspace)
    assert outcome.status is RunStatus.COMPLETED and outcome.stop_reason == "step_limit"


def test_a_new_turn_after_an_unknown_outcome_gets_a_host_notice_not_the_call(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    script = {"turns": [[_call("c1", "bash", {"command": "echo x >> counter"})], [{"text": "ok"}]]}
    failing, _ = _service(FailingStore(store, "T2"), script, tmp_path)
    session = failing.create_session(workspace)
    policy = PermissionPolicy(PermissionMode.AUTO)
    failing.send_turn(session.session_id, "one", Recorder(), policy)
    service, record = _service(store, script, tmp_path)
    service.send_turn(session.session_id, "two", Recorder(), policy)
    history = record.read_text().splitlines()[-1]
    assert '"type": "tool_call"' not in history
    assert "outcome is unknown" in history and "echo x >> counter" in history
    assert (workspace / "counter").read_text() == "x\n"


@pytest.mark.parametrize(
    "case",
    [
        ({"path": "n.txt", "content": "x", "extra": float("nan")}, "$.extra", "NaN"),
        ({"command": "ls", "timeout": float("inf")}, "$.timeout", "Infinity"),
        ({"path": "b.txt", "content": "x", "n": [1, 2**60]}, "$.n[1]", str(2**60)),
        ({"path": "f.txt", "content": "x", "n": -1e20}, "$.n", "-1e+20"),
    ],
)
def test_a_number_no_record_can_hold_refuses_the_call_not_the_turn(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path, case: tuple[Any, str, str]
) -> None:
    """NaN, an infinity (``1e400`` reads as one) or an integer past 2^53 in a call's arguments:
    the call event could not be committed, and the turn ended ``tool_boundary_failed`` with
    "preflight runtime commit failed", the model never told. The call is now recorded with the
    value as text and refused; the model hears why and the turn goes on."""
    args, where, recorded = case
    name = "bash" if "command" in args else "write_file"
    steps = [_call("c1", name, args), {"text": "understood"}]
    service, record = _service(store, {"steps": steps}, tmp_path)
    outcome, _ = _turn(service, workspace)
    assert outcome.status is RunStatus.COMPLETED, outcome.message
    events = _ledger(store, outcome.run_id)
    assert [shape(e) for e in events] == [
        "user",
        "call",
        "unbound_response",
        "text",
        "terminal_completed",
    ]
    call, response = events[1]["content"], events[2]["content"]
    assert call["kind"] == "function_call" and response["kind"] == "function_response"
    key, _, index = where[2:].partition("[")
    value = call["args"][key]
    assert (value[int(index[:-1])] if index else value) == recorded, call["args"]
    result = response["result"]
    assert result["code"] == "arguments_invalid", result
    assert where in result["error"] and "did not run" in result["error"], result
    assert list(workspace.iterdir()) == []
    # The model's next request holds the call as recorded, answered once.
    assert record.read_text().count('"c1"') >= 2


def test_arguments_past_what_an_export_line_holds_are_left_out_and_the_call_refused(
    store: SqliteLedgerStore, workspace: Path, tmp_path: Path
) -> None:
    """A call carrying more than ``MAX_ARGS_BYTES`` (a 70 MiB ``write_file``): the session was
    recorded and exported, and the export refused by ``maka import`` (a line past 64 MiB). The
    call is now recorded without its arguments and refused, saying their size."""
    from runtime.agent import tool_runtime

    content = "y" * (tool_runtime.MAX_ARGS_BYTES + 1)
    args = {"path": "big.txt", "content": content}
    steps = [_call("c1", "write_file", args), {"text": "I will write it in parts"}]
    service, _ = _service(store, {"steps": steps}, tmp_path)
    outcome, _ = _turn(service, workspace)
    assert outcome.status is RunStatus.COMPLETED, outcome.message
    events = _ledger(store, outcome.run_id)
    call, response = events[1]["content"], events[2]["content"]
    assert call["kind"] == "function_call"
    assert set(call["args"]) == {"omitted"}, call["args"]
    assert response["kind"] == "function_response"
    result = response["result"]
    assert result["code"] == "arguments_invalid", result
    assert "more than the 32 MiB a call may carry" in result["error"], result
    assert not (workspace / "big.txt").exists()
    assert max(len(row.payload) for row in store.read_run_events(outcome.run_id)) < 1 << 20
