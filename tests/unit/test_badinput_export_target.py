"""``maka export -o TARGET`` with a target that names no file (``""``, ``.``, ``/``): refused as
``-o ..`` is (``export_target_invalid``, exit 2), never a traceback, nothing written."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from app.cli_errors import EXIT_USAGE, CliError
from app.commands import export_cmd
from tests.helpers.ledger_builders import RunIds, clean_ledger
from tests.helpers.store_workloads import commit_ledger, store_with_runs

IDS = RunIds("sess-x", "inv-x", "run-x", "turn-x")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    with store_with_runs(folder, IDS) as store:
        commit_ledger(store, clean_ledger(3, ids=IDS))
    return folder


def _export(data_dir: Path, output: str, *, force: bool = False) -> CliError:
    args = argparse.Namespace(
        session=IDS.session_id,
        output=output,
        force=force,
        no_checkpoints=False,
        data_dir=str(data_dir),
    )
    with pytest.raises(CliError) as caught:
        export_cmd.run(args)
    return caught.value


def _tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.parametrize("output", ["..", "", ".", "/", "//"])
@pytest.mark.parametrize("force", [False, True])
def test_a_target_that_names_no_file_is_refused_as_a_folder(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, force: bool
) -> None:
    work = tmp_path / "work" / "here"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    before = _tree(tmp_path)
    error = _export(data_dir, output, force=force)
    assert error.code == "export_target_invalid"
    assert error.exit_code == EXIT_USAGE
    expected = "the output path is empty" if not output else f"{output} is a folder"
    assert expected in error.message
    assert "use -o - for standard output" in error.message
    assert _tree(tmp_path) == before


def test_the_current_folder_inside_the_data_folder_is_refused_as_inside(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(data_dir)
    before = sorted(os.listdir(data_dir))
    error = _export(data_dir, ".", force=True)
    assert error.code == "export_target_inside_data_dir"
    assert error.exit_code == EXIT_USAGE
    assert sorted(os.listdir(data_dir)) == before
