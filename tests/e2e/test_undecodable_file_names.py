"""A folder holding a file whose name is not UTF-8 is listed like any other: the real ``maka run``
ends its turn, the result names the file with the stray byte written as ``\\xNN``, and the
session is not left interrupted (it used to end with ``event_schema_invalid``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux"),
]


@pytest.mark.parametrize(
    ("tool", "args"),
    [("list_dir", {"path": "."}), ("glob", {"pattern": "*.txt"})],
)
def test_a_non_utf8_file_name_is_listed_escaped(
    tmp_path: Path, tool: str, args: dict[str, str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with open(os.path.join(os.fsencode(work), b"caf\xe9.txt"), "wb") as named:
        named.write(b"x")
    (work / "plain.txt").write_text("y", encoding="utf-8")
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {"text": "Listing.", "toolCalls": [{"id": "c1", "name": tool, "args": args}]},
                {"text": "Done."},
            ]
        ],
    )
    env = scripted_env(script)
    ran = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "go"], tmp_path / "data", env=env
    )
    assert ran.returncode == 0, ran.stderr
    assert "event_schema_invalid" not in ran.stderr and "Done." in ran.stdout
    ((_header, events),) = committed_runs(tmp_path / "data")
    assert events[-1].get("status") == "completed"
    responses = [
        content["result"]
        for event in events
        if (content := event.get("content")) is not None
        and content["kind"] == "function_response"
        and not content.get("isError")
    ]
    (result,) = responses
    names = [entry["name"] for entry in result.get("entries", [])] + result.get("matches", [])
    assert "caf\\xe9.txt" in names and "plain.txt" in names, result


def test_a_changed_file_whose_name_is_not_utf8_is_named_escaped_and_resumable(
    tmp_path: Path,
) -> None:
    """Snapshots on (the default), a run killed after its write, then a file whose name is not
    UTF-8 made private (``chmod 600``) and another one edited: ``maka plan`` names both with
    the stray byte written as ``\\xNN`` (one was U+FFFD, the name lost), and ``maka resume
    --rebaseline`` runs (it was refused with ``event_schema_invalid``: the permission change's
    name was a lone surrogate, which no event may hold)."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    private = os.path.join(os.fsencode(work), b"caf\xe9.txt")
    edited = os.path.join(os.fsencode(work), b"na\xefve.md")
    for path in (private, edited):
        with open(path, "wb") as named:
            named.write(b"x\n")
    env = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    killed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write notes.md saying hi"],
        data,
        env={**env, "MAKA_FAILPOINT": "P6"},
    )
    assert killed.returncode == -9, killed.stderr
    os.chmod(private, 0o600)
    with open(edited, "ab") as named:
        named.write(b"edited\n")
    [(header, _)] = committed_runs(data)
    plan = maka(["plan", header.session_id], data, env=env)
    assert plan.returncode == 3, plan.stderr
    assert "modified caf\\xe9.txt" in plan.stdout, plan.stdout
    assert "modified na\\xefve.md" in plan.stdout, plan.stdout
    resumed = maka(
        ["resume", header.session_id, "--rebaseline", "--permission-mode", "auto"], data, env=env
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "event_schema_invalid" not in resumed.stdout + resumed.stderr
