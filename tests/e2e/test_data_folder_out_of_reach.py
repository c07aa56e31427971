"""Maka's data folder is out of every file tool's reach when a session folder holds it (a session
in the home folder, with the default data folder under it), and no session is made in it. One
``write_file`` of the agent replaced the database that recorded it (``store_corrupt`` from then
on), and ``read_file`` could read its settings."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e]


def _call(call_id: str, name: str, args: dict[str, object]) -> dict[str, object]:
    return {"text": "", "toolCalls": [{"id": call_id, "name": name, "args": args}]}


def test_no_tool_reads_lists_or_changes_the_data_folder_inside_the_session(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    data = home / ".local" / "share" / "maka"
    (home / "notes.txt").parent.mkdir(parents=True)
    (home / "notes.txt").write_text("mine\n")
    script = write_script(
        tmp_path / "script.json",
        [
            [
                _call(
                    "w",
                    "write_file",
                    {"path": f"{data.relative_to(home)}/{DATABASE_NAME}", "content": "gone"},
                ),
                _call("r", "read_file", {"path": str(data / DATABASE_NAME)}),
                _call("l", "list_dir", {"path": ".local/share/maka"}),
                _call("g", "glob", {"pattern": "**/*.sqlite*"}),
                _call("ok", "write_file", {"path": "out.txt", "content": "fine"}),
                {"text": "done"},
            ]
        ],
    )
    env = scripted_env(script)
    turn = maka(["run", "--cwd", str(home), "--permission-mode", "auto", "go"], data, env=env)
    assert turn.returncode == 0, turn.stderr
    # The database is whole: the session and its run read back.
    [(_header, events)] = committed_runs(data)
    with sqlite3.connect(data / DATABASE_NAME) as db:
        assert db.execute("pragma integrity_check").fetchone() == ("ok",)
    contents: list[dict[str, Any]] = [dict(e["content"]) for e in events if "content" in e]
    results = {c["id"]: c for c in contents if c["kind"] == "function_response"}
    for call in ("w", "r", "l"):
        assert results[call]["result"]["code"] == "path_protected", results[call]
        assert "Maka's data folder" in results[call]["result"]["error"]
    assert results["g"]["result"] == {"matches": [], "truncated": False}, results["g"]
    assert (home / "out.txt").read_text() == "fine"
    assert maka(["sessions"], data).returncode == 0


def test_a_session_is_not_made_in_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    script = write_script(tmp_path / "script.json", [[{"text": "hi"}]])
    data.mkdir()
    for cwd in (data, data / "inner"):
        cwd.mkdir(exist_ok=True)
        refused = maka(["run", "--cwd", str(cwd), "hello"], data, env=scripted_env(script))
        assert refused.returncode == 2, (refused.returncode, refused.stderr)
        assert "[invalid_cwd]" in refused.stderr and "Maka's data folder" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert committed_runs(data) == []
    assert json.loads(maka(["sessions", "--json"], data).stdout)["sessions"] == []


def test_a_session_is_not_made_in_a_git_directory(tmp_path: Path) -> None:
    """``maka run --cwd REPO/.git`` (or a bare repository, or a folder inside either) wrote
    Maka's marker into the user's Git directory and snapshotted Git's own files."""
    import subprocess

    repo, bare = tmp_path / "repo", tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    before = {p: p.stat().st_mtime_ns for p in (repo / ".git").rglob("*")}
    data = tmp_path / "data"
    script = write_script(tmp_path / "script.json", [[{"text": "hi"}]])
    for cwd in (repo / ".git", repo / ".git" / "objects", bare, bare / "refs"):
        refused = maka(["run", "--cwd", str(cwd), "hello"], data, env=scripted_env(script))
        assert refused.returncode == 2, (cwd, refused.returncode, refused.stderr)
        assert "[invalid_cwd]" in refused.stderr and "Git directory" in refused.stderr
    assert not (repo / ".git" / ".maka").exists() and not (bare / ".maka").exists()
    assert {p: p.stat().st_mtime_ns for p in (repo / ".git").rglob("*")} == before
    # The repository's own folder is a session's as ever.
    work = maka(["run", "--cwd", str(repo), "hello"], data, env=scripted_env(script))
    assert work.returncode == 0, work.stderr
