"""``maka checkpoints`` says which paths a snapshot left out because an ignore rule came in (the
real ``maka run`` writing a ``.gitignore``, the real store and ``git``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

SCRIPT = [
    [
        {
            "text": "Ignoring the secrets.",
            "toolCalls": [
                {
                    "id": "c1",
                    "name": "write_file",
                    "args": {"path": ".gitignore", "content": "secret.env\n"},
                }
            ],
        },
        {"text": "Done."},
    ]
]


def test_the_listing_names_the_paths_a_new_ignore_rule_took_out(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "secret.env").write_text("TOKEN=1\n")
    (work / "app.py").write_text("print(1)\n")
    data = tmp_path / "data"
    env = scripted_env(write_script(tmp_path / "script.json", SCRIPT), checkpoints=True)
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "ignore the secrets"]
    assert maka(args, data, env=env).returncode == 0
    session = committed_runs(data)[0][0].session_id

    listed = json.loads(maka(["checkpoints", session, "--json"], data).stdout)
    rows = listed["runs"][0]["checkpoints"]
    assert [row.get("nowIgnoredPaths") for row in rows] == [None, ["secret.env"]]
    text = maka(["checkpoints", session], data).stdout
    assert "left out, now ignored: secret.env" in text
