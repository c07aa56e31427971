"""Workspace checkpoints captured by a real ``maka run`` (docs/design/workspace.md section 2): the
run declares its mode, captures at its start and after each writing call, and the two crash windows
of a capture (real SIGKILL at ``after_checkpoint_artifact`` / ``after_checkpoint_fact``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.event_model import RuntimeEvent
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [
    pytest.mark.crash,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
]

SCRIPT = [
    [
        {
            "text": "Looking, then writing.",
            "toolCalls": [
                {"id": "r1", "name": "read_file", "args": {"path": "a.txt"}},
                {"id": "w1", "name": "bash", "args": {"command": "echo x >> count.txt"}},
            ],
        },
        {"text": "Done."},
    ]
]


def _run(tmp_path: Path, failpoint: str | None = None) -> tuple[int, Path, Path]:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "a.txt").write_text("hello\n")
    env = scripted_env(
        write_script(tmp_path / "script.json", SCRIPT), tmp_path / "req.jsonl", checkpoints=True
    )
    if failpoint:
        env["MAKA_FAILPOINT"] = failpoint
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"]
    result = maka(args, data, env=env)
    return result.returncode, data, work


def _facts(events: list[RuntimeEvent], key: str) -> list[dict[str, Any]]:
    plain: list[dict[str, Any]] = json.loads(json.dumps(events))
    return [e["actions"][key] for e in plain if key in e.get("actions", {})]


def _refs(data: Path) -> dict[str, str]:
    repos = list((data / "checkpoints").glob("*.git"))
    assert len(repos) == 1
    out = subprocess.run(
        ["git", "--git-dir", str(repos[0]), "for-each-ref", "--format=%(refname) %(objectname)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_a_run_declares_its_mode_and_captures_after_each_writing_call(tmp_path: Path) -> None:
    code, data, _ = _run(tmp_path)
    assert code == 0
    [(header, events)] = committed_runs(data)
    assert events[0]["actions"]["runtimeProtocol"]["workspaceCheckpoints"] == {"mode": "git_v1"}
    facts = _facts(events, "workspaceCheckpoint")
    assert len(facts) == 2  # the run's start, then after bash (never after read_file)
    assert [f["checkpointRef"] for f in facts] == [
        f"refs/maka/{header.session_id}/{header.run_id}/{n}" for n in (1, 2)
    ]
    assert facts[0]["treeId"] != facts[1]["treeId"]
    # The first snapshot does not hold the model up: it may be recorded after the model's first
    # step and the read-only call, but always before the writing call's T1.
    plain_events: list[dict[str, Any]] = json.loads(json.dumps(events))
    first_fact = next(
        i for i, e in enumerate(plain_events) if "workspaceCheckpoint" in e.get("actions", {})
    )
    bash_t1 = next(
        i
        for i, e in enumerate(plain_events)
        if e.get("actions", {}).get("toolDispatch", {}).get("toolName") == "bash"
    )
    assert first_fact < bash_t1
    assert facts[0]["runtimeHighWater"] == first_fact  # pinned to the prefix before it (seq 1..)
    assert all(f["workspaceIdentity"] == header.workspace_identity for f in facts)
    refs = _refs(data)
    assert {refs[f["checkpointRef"]] for f in facts} == {f["commitId"] for f in facts}
    # The capture after bash's T2 committed before the next model step's events and T1s.
    plain: list[dict[str, Any]] = json.loads(json.dumps(events))
    response = next(
        i
        for i, e in enumerate(plain)
        if e.get("content", {}).get("kind") == "function_response"
        and e["content"].get("name") == "bash"
    )
    second = next(
        i
        for i, e in enumerate(plain)
        if e.get("actions", {})
        .get("workspaceCheckpoint", {})
        .get("checkpointRef", "")
        .endswith("/2")
    )
    assert second > response
    assert all("workspaceCheckpoint" not in e.get("actions", {}) for e in events[second + 1 : -1])
    # Replay never sends a checkpoint to the provider: the requests hold only model content.
    requests = [json.loads(line) for line in (tmp_path / "req.jsonl").read_text().splitlines()]
    for request in requests:
        assert "workspaceCheckpoint" not in json.dumps(request)
        assert "treeId" not in json.dumps(request)


def test_killed_after_the_artifact_leaves_an_orphan_ref_and_no_fact(tmp_path: Path) -> None:
    code, data, _ = _run(tmp_path, "after_checkpoint_artifact")
    assert code == -9
    [(header, events)] = committed_runs(data)
    assert _facts(events, "workspaceCheckpoint") == []
    assert f"refs/maka/{header.session_id}/{header.run_id}/1" in _refs(data)


def test_killed_after_the_fact_leaves_both(tmp_path: Path) -> None:
    code, data, _ = _run(tmp_path, "after_checkpoint_fact")
    assert code == -9
    [(_header, events)] = committed_runs(data)
    [fact] = _facts(events, "workspaceCheckpoint")
    assert _refs(data)[fact["checkpointRef"]] == fact["commitId"]
    assert events[-1]["actions"]["workspaceCheckpoint"] == fact  # the crash came right after it


def test_a_failed_capture_is_recorded_and_the_turn_goes_on(tmp_path: Path) -> None:
    script = [
        [
            {
                "text": "Making a nested repository.",
                "toolCalls": [
                    {"id": "g1", "name": "bash", "args": {"command": "git init -q inner"}}
                ],
            },
            {"text": "Done."},
        ]
    ]
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", script), checkpoints=True)
    result = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "go"], data, env=env)
    assert result.returncode == 0, result.stderr
    assert "[checkpoint] not taken [checkpoint_nested_repository]" in result.stdout
    [(header, events)] = committed_runs(data)
    assert header.status == "completed"
    [failed] = _facts(events, "workspaceCheckpointFailed")
    assert failed["reasonCode"] == "checkpoint_nested_repository"
    assert len(_facts(events, "workspaceCheckpoint")) == 1  # the run's start
