"""``maka resume SESSION --restore-to DIR`` with DIR inside the session's folder (or the folder
itself, or a link into it) is refused with ``workspace_restore_target_inside``: a copy there
would change the folder the user keeps. Nothing is made, nothing is admitted."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

FIRST = {
    "text": "Counting.",
    "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}],
}
SECOND = {
    "text": "Writing.",
    "toolCalls": [
        {"id": "c2", "name": "write_file", "args": {"path": "report.txt", "content": "done\n"}}
    ],
}


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() else b"<dir>"
        for path in sorted(folder.rglob("*"))
    }


def test_a_restored_copy_inside_the_folder_is_refused(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    (work / "empty").mkdir()
    os.symlink(work, tmp_path / "alias")
    interrupted = write_script(
        tmp_path / "i.json", [[FIRST, {"error": {"message": "the service went away"}}]]
    )
    script = write_script(tmp_path / "s.json", [[FIRST, SECOND, {"text": "Finished."}]])
    env = {
        **scripted_env(script, checkpoints=True),
        "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1",
    }
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"]
    first = maka(args, data, env={**env, "MAKA_SCRIPT_FILE": str(interrupted)})
    assert first.returncode == 1, first.stderr
    session = committed_runs(data)[0][0].session_id
    (work / "a.txt").write_text("edited\n")
    before = _files(work)

    for target in (work / "copy", work / "empty", work, tmp_path / "alias" / "copy"):
        resume = ["resume", session, "--json", "--permission-mode", "auto"]
        result = maka([*resume, "--restore-to", str(target)], data, env=env)
        body = json.loads(result.stdout)
        assert result.returncode == 3, (target, body)
        assert body["code"] == "workspace_restore_target_inside", (target, body)
        assert "Traceback" not in result.stderr
        assert _files(work) == before, target
    assert len(committed_runs(data)) == 1

    # Outside the folder it goes ahead, and the folder is still as the user left it.
    result = maka([*resume, "--restore-to", str(tmp_path / "copy")], data, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "copy" / "report.txt").read_text() == "done\n"
    assert _files(work) == before
