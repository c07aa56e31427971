"""Replies a model server should not send, with the real ``maka`` and the scripted provider
recording the requests it is sent.

- Reused tool call ids (``call_0``, ``call_1``... afresh in each reply, or two calls of one reply
  with the same id): every call runs once, is recorded and is answered, under an id of its own.
  Maka dropped a call whose id repeated, so the model asked again and again.
- A value no event may hold: the turn fails and its run ends, never left marked running."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e


def _write(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "name": "write_file", "args": {"path": name, "content": name + "\n"}}


SCRIPT = [
    [
        {"text": "First.", "toolCalls": [_write("call_0", "a.txt")]},
        {"text": "Two more.", "toolCalls": [_write("call_0", "b.txt"), _write("call_0", "c.txt")]},
        {"text": "All written."},
    ],
    [{"text": "Again.", "toolCalls": [_write("call_0", "d.txt")]}, {"text": "Done."}],
]


def test_every_call_with_a_repeated_id_runs_once_and_is_answered(tmp_path: Path) -> None:
    work, data, record = tmp_path / "work", tmp_path / "data", tmp_path / "requests.jsonl"
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", SCRIPT), record)
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "write"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    args = ["run", "--session", session, "--permission-mode", "auto", "once more"]
    second = maka(args, data, env=env)
    assert second.returncode == 0, second.stderr
    assert sorted(p.name for p in work.iterdir() if p.suffix == ".txt") == [
        "a.txt",
        "b.txt",
        "c.txt",
        "d.txt",
    ]
    last = [json.loads(line) for line in record.read_text().splitlines()][-1]
    calls = [item["id"] for item in last["history"] if item["type"] == "tool_call"]
    results = [item["id"] for item in last["history"] if item["type"] == "tool_result"]
    assert calls == results, last["history"]  # every call answered, in order
    assert len(calls) == len(set(calls)) == 4, calls
    assert calls[0] == "call_0" and all(c.startswith("call_0") for c in calls), calls
    plan = maka(["plan", session, "--json"], data, env=env)
    assert "duplicate" not in plan.stdout, plan.stdout


def test_a_reply_no_record_can_hold_ends_the_run_failed(tmp_path: Path) -> None:
    """A reply holding a value no event may hold (a token count past 2^53): the turn fails as a
    malformed reply and its run ends failed. It ended with ``event_schema_invalid`` and the run
    stayed marked running (in the desktop: Running, and Stop did nothing, until a restart)."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    huge = [[{"text": "Counted.", "usage": {"input": 2**60, "output": 3}}]]
    env = scripted_env(write_script(tmp_path / "script.json", huge))
    done = maka(["run", "--cwd", str(work), "count"], data, env=env)
    assert done.returncode == 1, done.stderr
    assert "the turn ended failed (provider_error)" in done.stderr, done.stderr
    assert "no record can hold" in done.stderr and "Traceback" not in done.stderr
    [(header, _events)] = committed_runs(data)
    assert header.status == "failed", header
    assert header.failure_class == "provider_error", header
