"""The real ``maka run`` / ``maka sessions`` / ``maka tui`` commands end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, shape, write_script

pytestmark = pytest.mark.e2e


def test_multi_step_scripted_task_writes_edits_reads_runs_and_leaves_a_clean_store(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    data_dir = tmp_path / "data"
    record = tmp_path / "requests.jsonl"
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {
                    "text": "Creating two files.",
                    "toolCalls": [
                        {
                            "id": "w1",
                            "name": "write_file",
                            "args": {"path": "src/app.py", "content": "print('hi')\n"},
                        },
                        {
                            "id": "w2",
                            "name": "write_file",
                            "args": {"path": "README.md", "content": "# Demo\n"},
                        },
                    ],
                },
                {
                    "toolCalls": [
                        {
                            "id": "e1",
                            "name": "edit_file",
                            "args": {
                                "path": "src/app.py",
                                "old_string": "'hi'",
                                "new_string": "'hello'",
                            },
                        }
                    ]
                },
                {"toolCalls": [{"id": "r1", "name": "read_file", "args": {"path": "src/app.py"}}]},
                {
                    "toolCalls": [
                        {
                            "id": "b1",
                            "name": "bash",
                            "args": {"command": "python3 src/app.py > out.txt; cat out.txt"},
                        }
                    ]
                },
                {"text": "All done.", "chunks": 3},
            ]
        ],
    )
    result = maka(
        ["run", "--cwd", str(workspace), "--permission-mode", "auto", "build the demo"],
        data_dir,
        env=scripted_env(script, record),
    )
    assert result.returncode == 0, result.stderr
    assert (workspace / "src" / "app.py").read_text() == "print('hello')\n"
    assert (workspace / "README.md").read_text() == "# Demo\n"
    assert (workspace / "out.txt").read_text() == "hello\n"
    assert "[tool] write_file src/app.py" in result.stdout
    assert "[tool] bash" in result.stdout
    assert "All done." in result.stdout

    [(header, events)] = committed_runs(data_dir)
    assert header.status == "completed"
    assert header.workspace_identity and header.workspace_identity.startswith("workspace:v1:")
    shapes = [shape(event) for event in events]
    assert shapes.count("dispatch") == 5 and shapes.count("response") == 5
    assert shapes[-1] == "terminal_completed"

    requests = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(requests) == 5
    assert all(request["unpairedToolCalls"] == [] for request in requests)
    # the two calls of the first step reach the model together, then their results
    second = [item["type"] for item in requests[1]["history"]]
    assert second == ["user", "assistant", "tool_call", "tool_call", "tool_result", "tool_result"]

    doctor = maka(["doctor", "--json"], data_dir)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr

    listed = maka(["sessions", "--json"], data_dir)
    sessions = json.loads(listed.stdout)["sessions"]
    assert [(s["lastRunStatus"], s["interrupted"]) for s in sessions] == [("completed", False)]


def test_offline_demo_is_the_default_and_carries_history_across_turns(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data_dir = tmp_path / "data"
    first = maka(
        ["run", "--cwd", str(workspace), "--permission-mode", "auto", "write hello.txt saying hi"],
        data_dir,
    )
    assert first.returncode == 0, first.stderr
    assert "not an AI model" in first.stderr
    session_id = json.loads(maka(["sessions", "--json"], data_dir).stdout)["sessions"][0][
        "sessionId"
    ]
    for prompt in (
        "edit hello.txt replace hi with hello",
        "read hello.txt",
        "run ls",
        "list files",
    ):
        step = maka(["run", "--session", session_id, "--permission-mode", "auto", prompt], data_dir)
        assert step.returncode == 0, step.stderr
    assert (workspace / "hello.txt").read_text() == "hello\n"
    assert "hello.txt" in step.stdout
    runs = committed_runs(data_dir)
    assert len(runs) == 5 and all(header.status == "completed" for header, _ in runs)


def test_without_a_terminal_the_default_permission_mode_denies_with_a_clear_message(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = maka(["run", "--cwd", str(workspace), "run touch marker"], tmp_path / "data")
    assert result.returncode == 0
    assert "permission mode deny" in result.stderr
    assert "denied" in result.stdout
    assert not (workspace / "marker").exists()
    [(_, events)] = committed_runs(tmp_path / "data")
    assert "dispatch" not in [shape(event) for event in events]
    assert "unbound_response" in [shape(event) for event in events]


@pytest.mark.parametrize(("answer", "ran"), [("y\n", True), ("n\n", False), ("", False)])
def test_ask_mode_reads_answers_from_standard_input(tmp_path: Path, answer: str, ran: bool) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = maka(
        ["run", "--cwd", str(workspace), "--permission-mode", "ask", "run touch marker"],
        tmp_path / "data",
        stdin=answer,
    )
    assert result.returncode == 0, result.stderr
    assert "Allow? [y/N]" in result.stdout
    assert (workspace / "marker").exists() is ran
    [(_, events)] = committed_runs(tmp_path / "data")
    shapes = [shape(event) for event in events]
    assert "permission_request" in shapes
    assert ("permission_allow" in shapes) is ran
    assert ("dispatch" in shapes) is ran


def test_provider_failure_ends_the_run_with_provider_error_and_a_readable_message(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = maka(
        ["run", "--cwd", str(workspace), "--provider", "openai", "hello"],
        tmp_path / "data",
        env={"MAKA_OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "MAKA_MODEL": "m"},
    )
    assert result.returncode == 1
    assert "provider_error" in result.stderr
    assert "connection" in result.stderr
    assert "Traceback" not in result.stderr
    [(header, events)] = committed_runs(tmp_path / "data")
    assert header.status == "failed" and header.failure_class == "provider_error"
    assert shape(events[-1]) == "terminal_failed"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["run", "hello"], "cwd_required"),
        (["run", "--cwd", "/nonexistent/dir", "hello"], "invalid_cwd"),
        (["run", "--cwd", ".", "--provider", "bogus", "hello"], "provider_config_invalid"),
        (["run", "--session", "session_missing", "hello"], "session_not_found"),
    ],
)
def test_user_mistakes_get_a_code_and_no_traceback(
    tmp_path: Path, args: list[str], code: str
) -> None:
    result = maka(args, tmp_path / "data")
    assert result.returncode == 2
    assert f"[{code}]" in result.stderr
    assert "Traceback" not in result.stderr


def test_sessions_on_a_fresh_machine_and_tui_chat(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert json.loads(maka(["sessions", "--json"], data_dir).stdout) == {"sessions": []}
    workspace = tmp_path / "ws"
    workspace.mkdir()
    chat = maka(
        ["tui", "--cwd", str(workspace), "--permission-mode", "auto"],
        data_dir,
        stdin="write a.txt saying one\n/transcript\n/bogus\n/quit\n",
    )
    assert chat.returncode == 0, chat.stderr
    assert (workspace / "a.txt").read_text() == "one\n"
    assert "[tool] write_file a.txt  (succeeded)" in chat.stdout
    assert "unknown command /bogus" in chat.stdout


def test_path_mistakes_are_refused_to_the_model_and_the_run_ends_properly(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "file.txt").write_text("a\n")
    (workspace / "loop").symlink_to(workspace / "loop2")
    (workspace / "loop2").symlink_to(workspace / "loop")
    data_dir = tmp_path / "data"
    paths = ["file.txt/x", "loop/x", "n" * 300]
    calls = [
        {"id": f"w{index}", "name": "write_file", "args": {"path": path, "content": "x"}}
        for index, path in enumerate(paths)
    ] + [
        {
            "id": f"e{index}",
            "name": "edit_file",
            "args": {"path": path, "old_string": "a", "new_string": "b"},
        }
        for index, path in enumerate(paths)
    ]
    script = write_script(
        tmp_path / "script.json", [[{"toolCalls": calls}, {"text": "Corrected."}]]
    )
    result = maka(
        ["run", "--cwd", str(workspace), "--permission-mode", "auto", "write"],
        data_dir,
        env=scripted_env(script),
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "Corrected." in result.stdout
    [(header, events)] = committed_runs(data_dir)
    assert header.status.value == "completed"
    results: list[Any] = [
        dict(event.get("content") or {})["result"]
        for event in events
        if shape(event) == "unbound_response"
    ]
    codes = [result["code"] for result in results]
    assert codes == ["path_unusable"] * 6
