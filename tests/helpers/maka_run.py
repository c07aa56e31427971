"""Drive the real ``maka run`` with the scripted provider, and read what it committed."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader
from storage.ledger.ledger_store import open_store
from tests.helpers.maka_process import maka_executable


@dataclass(frozen=True)
class RunResult:
    returncode: int
    stdout: str
    stderr: str


def write_script(path: Path, turns: Sequence[Sequence[Any]]) -> Path:
    path.write_text(json.dumps({"turns": [list(turn) for turn in turns]}), encoding="utf-8")
    return path


def maka(
    args: Sequence[str],
    data_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    stdin: str = "",
    timeout: float = 60,
    cwd: Path | None = None,
) -> RunResult:
    environment = dict(os.environ)
    environment.pop("MAKA_FAILPOINT", None)
    environment.pop("MAKA_PROVIDER", None)
    environment.update({"MAKA_DATA_DIR": str(data_dir), "QT_QPA_PLATFORM": "offscreen"})
    environment.update(env or {})
    completed = subprocess.run(
        [*maka_executable(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )
    return RunResult(completed.returncode, completed.stdout, completed.stderr)


def scripted_env(
    script: Path, record: Path | None = None, *, checkpoints: bool = False, **extra: str
) -> dict[str, str]:
    """The environment of a scripted ``maka`` run. Workspace checkpoints are off unless
    ``checkpoints``: most drills test Safe resume as in Phase 1 (a session without checkpoints
    resumes as before), while a crash between a T2 and its capture parks with
    ``workspace_checkpoint_stale`` once they are on (tests/e2e/test_workspace_checkpoints_cli.py,
    tests/crash/test_checkpoint_capture.py)."""
    env = {"MAKA_PROVIDER": "scripted", "MAKA_SCRIPT_FILE": str(script)}
    env["MAKA_WORKSPACE_CHECKPOINTS"] = "on" if checkpoints else "off"
    if record is not None:
        env["MAKA_SCRIPT_RECORD"] = str(record)
    env.update(extra)
    return env


def committed_runs(data_dir: Path) -> list[tuple[RunHeader, list[RuntimeEvent]]]:
    """Every run of every session (oldest first) with its committed events, read-only."""
    store = open_store(data_dir, read_only=True)
    try:
        runs: list[tuple[RunHeader, list[RuntimeEvent]]] = []
        for session in sorted(store.list_sessions(), key=lambda s: s.created_at):
            headers = sorted(
                store.list_session_runs(session.session_id), key=lambda h: h.created_at
            )
            for header in headers:
                events = [row.event for row in store.read_run_events(header.run_id)]
                runs.append((header, events))
        return runs
    finally:
        store.close()


def shape(event: RuntimeEvent) -> str:
    """A short name for an event's kind: user, text, call, dispatch, response, ..."""
    content = event.get("content")
    actions = event.get("actions") or {}
    if "toolDispatch" in actions:
        return "dispatch"
    if "permissionRequest" in actions:
        return "permission_request"
    if "permissionDecision" in actions:
        return f"permission_{actions['permissionDecision']['decision']}"
    if event.get("status") or actions.get("endInvocation"):
        return f"terminal_{event.get('status')}"
    if content is None:
        return "other"
    if content["kind"] == "text":
        return "user" if event["role"] == "user" else "text"
    if content["kind"] == "function_call":
        return "call"
    if content["kind"] == "function_response":
        refs = event.get("refs") or {}
        return "response" if "operationId" in refs else "unbound_response"
    return str(content["kind"])


def run_auto(data_dir: Path, work: Path, text: str) -> RunResult:
    """``maka run --permission-mode auto TEXT`` in ``work`` (the offline demo), which must
    succeed."""
    result = maka(["run", "--cwd", str(work), "--permission-mode", "auto", text], data_dir)
    assert result.returncode == 0, result.stderr
    return result


def snapshot_facts(data_dir: Path) -> list[dict[str, Any]]:
    """Every ``workspaceCheckpoint`` fact of the data folder's committed runs, oldest first."""
    return [
        dict(event["actions"]["workspaceCheckpoint"])
        for _, events in committed_runs(data_dir)
        for event in events
        if "workspaceCheckpoint" in event.get("actions", {})
    ]
