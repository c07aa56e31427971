"""Resume after a context overflow (the real ``maka`` command, the scripted provider failing as a
server does when the history does not fit its context window): the plan parks with
``provider_history_too_long`` and says to send a new message, instead of sending the same
history again (a new message leaves the oversized turn out: tests/unit/
test_provider_history_ledger.py). Also when the run was killed (SIGKILL at P8) after the
overflow's notice, before its ending."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
OVERFLOW = {
    "error": {
        "code": "provider_context_overflow",
        "message": "the prompt is longer than the model's context window",
    }
}
SCRIPT = [[OVERFLOW]]


def _session(data: Path) -> str:
    return committed_runs(data)[0][0].session_id


def _overflowed(tmp_path: Path, failpoint: str | None) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "work"
    work.mkdir()
    record = tmp_path / "requests.jsonl"
    env = {**scripted_env(write_script(tmp_path / "s.json", SCRIPT), record), **FLAG}
    env_run = {**env, "MAKA_FAILPOINT": failpoint} if failpoint else env
    data = tmp_path / "data"
    ran = maka(["run", "--cwd", str(work), "paste " * 50], data, env=env_run)
    assert ran.returncode == (-9 if failpoint else 1), ran.stderr
    return data, env


def _requests(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("failpoint", [None, "P8"])
def test_resume_after_an_overflow_parks_and_a_new_message_carries_on(
    tmp_path: Path, failpoint: str | None
) -> None:
    data, env = _overflowed(tmp_path, failpoint)
    session = _session(data)

    planned = maka(["plan", session, "--json"], data, env=env)
    body = json.loads(planned.stdout)
    assert body["disposition"] == "park", body
    assert body["rejectionReasons"] == ["provider_history_too_long"]
    human = maka(["plan", session], data, env=env)
    assert "no longer fits the model's context window" in human.stdout, human.stdout
    assert "Send a new, shorter message" in human.stdout
    assert "check what the interrupted calls" not in human.stdout

    resumed = maka(["resume", session, "--json", "--permission-mode", "auto"], data, env=env)
    assert resumed.returncode == 3, resumed.stderr
    assert json.loads(resumed.stdout)["rejectionReasons"] == ["provider_history_too_long"]
    assert len(_requests(tmp_path)) == 1  # the overflowing history was not sent again
    assert len(committed_runs(data)) == 1


def test_a_request_refused_without_an_answer_parks_without_claiming_an_overflow(
    tmp_path: Path,
) -> None:
    """A server that answered the request with an empty stream (no event at all): the turn is
    left out as after an overflow, and the plan parks the same way, but it stated the cause as
    fact ("the conversation did not fit the model's context window") for a three-message
    conversation. It now says the server refused it, an overflow being the likeliest cause."""
    work = tmp_path / "work"
    work.mkdir()
    empty = {"error": {"code": "provider_empty_stream", "message": "the server sent nothing"}}
    listing = {"toolCalls": [{"id": "c1", "name": "list_dir", "args": {"path": "."}}]}
    env = {**scripted_env(write_script(tmp_path / "s.json", [[listing, empty]])), **FLAG}
    data = tmp_path / "data"
    ran = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "list"], data, env=env)
    assert ran.returncode == 1, ran.stderr
    session = _session(data)
    body = json.loads(maka(["plan", session, "--json"], data, env=env).stdout)
    assert body["rejectionReasons"] == ["provider_history_too_long"], body
    [finding] = [d for d in body["diagnostics"] if d["code"] == "provider_history_too_long"]
    assert finding["message"].startswith(
        "the model server refused the run's last request without an answer (most often"
    ), finding
    human = maka(["plan", session], data, env=env).stdout
    assert "did not fit the model's context window" not in human, human
    assert "or the model server refused it without saying why" in human, human
