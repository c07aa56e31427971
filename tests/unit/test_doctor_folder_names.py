"""``maka doctor`` on sessions whose folders are named with a newline: the report printed the
name raw (``workspace /home/u/first<newline>second: marker folder_missing``), so the name's
second part stood on a line of its own, a line the report did not write. Folder names are
shown as the other commands show them (``shown_name``, as ``maka sessions`` does): as they are
when every character prints, else quoted, on one line. The JSON document keeps them as they
are (its strings escape the newline themselves)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app import cli
from runtime.ledger.store_ports import SessionRecord
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from storage.sessions.workspace_identity import MARKER_NAME


def _doctor(data_dir: Path, capsys: pytest.CaptureFixture[str], *more: str) -> str:
    cli.main(["doctor", "--data-dir", str(data_dir), *more])
    return capsys.readouterr().out


def test_folder_names_with_a_newline_stay_on_their_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "data"
    gone = tmp_path / "first\nsecond"  # never made: the folder is missing
    bad = tmp_path / "marker\nbroken"
    (bad / MARKER_NAME).parent.mkdir(parents=True)
    (bad / MARKER_NAME).write_text("{broken")
    with open_store(data_dir) as store:
        for index, folder in enumerate((gone, bad)):
            store.create_session(SessionRecord(f"s{index}", str(folder), "t", index))
    for path, _, files in os.walk(data_dir):  # (no privacy problem in the report)
        os.chmod(path, 0o700)
        for name in files:
            os.chmod(os.path.join(path, name), 0o600)

    text = _doctor(data_dir, capsys)
    lines = text.splitlines()
    assert f"workspace {str(gone)!r}: marker folder_missing (the folder no longer exists)" in lines
    assert f"workspace {str(bad)!r}: marker workspace_marker_invalid" in lines
    [problem] = [line for line in lines if line.startswith("PROBLEM")]
    assert problem.startswith(f"PROBLEM [workspace_marker_invalid] {str(bad)!r}: "), problem
    # Every line is one the report wrote: none starts with a name's second part.
    assert not [line for line in lines if line.startswith(("second", "broken"))], text

    document = json.loads(_doctor(data_dir, capsys, "--json"))
    assert {item["cwd"] for item in document["workspaces"]} == {str(gone), str(bad)}


def test_a_data_folder_named_with_a_newline_is_quoted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "da\nta"
    data_dir.mkdir(mode=0o700)
    lines = _doctor(data_dir, capsys).splitlines()
    assert lines == [f"no database at {str(data_dir / DATABASE_NAME)!r}: nothing to check"], lines
