"""``maka resume S --restore-to`` / ``--rebaseline`` on a resume no workspace park stands in
the way of (the files match the snapshot, or the session has no snapshots) is refused with
``workspace_decision_not_offered``: before, the decision was dropped silently and the agent
continued in the user's own folder, the very thing ``--restore-to`` asked to avoid."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("checkpoints", [True, False])
@pytest.mark.parametrize("flag", ["--restore-to", "--rebaseline"])
def test_a_decision_no_park_asks_for_is_refused(
    tmp_path: Path, checkpoints: bool, flag: str
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    interrupted = write_script(
        tmp_path / "i.json", [[FIRST, {"error": {"message": "the service went away"}}]]
    )
    script = write_script(tmp_path / "s.json", [[FIRST, SECOND, {"text": "Finished."}]])
    env = {
        **scripted_env(script, checkpoints=checkpoints),
        "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1",
    }
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"]
    assert maka(args, data, env={**env, "MAKA_SCRIPT_FILE": str(interrupted)}).returncode == 1
    session = committed_runs(data)[0][0].session_id
    before = sorted(p.name for p in work.iterdir())

    resume = ["resume", session, "--permission-mode", "auto"]
    refused = maka([*resume, "--json", flag], data, env=env)
    body = json.loads(refused.stdout)
    assert refused.returncode == 3, body
    assert body["disposition"] == "refused" and body["code"] == "workspace_decision_not_offered"
    assert sorted(p.name for p in work.iterdir()) == before  # the agent did not write
    assert not (tmp_path / "work-restored-1").exists()
    assert len(committed_runs(data)) == 1
    text = maka([*resume, flag], data, env=env)
    assert text.returncode == 3 and "workspace_decision_not_offered" in text.stdout

    # Without the flag the resume goes on, in the folder.
    plain = maka(resume, data, env=env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert (work / "report.txt").read_text() == "done\n"
