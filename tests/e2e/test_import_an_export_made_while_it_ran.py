"""An export made while a run was open (its process killed with SIGKILL: the run is still
marked running), imported, then the later export of the same session, made once the run had
an ending: the import carries the stored run on with the file's later events and ending, and
the data folder then holds what the source holds. It was refused for good
(``identity_conflict``: "stored with another header than the file's"), the export command
itself offering such exports. The earlier file imported again after that changes nothing. A
run this data folder ended itself (repaired as interrupted) is never given another ending: the
refusal says why and the way on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_safe_resume_cli import FLAG, Drill
from tests.helpers.maka_run import committed_runs, maka

pytestmark = pytest.mark.e2e


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if "bundle" not in line]


def test_the_later_export_carries_an_imported_open_run_on(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P8").returncode == -9
    session = drill.session
    early, late = tmp_path / "early.jsonl", tmp_path / "late.jsonl"
    assert maka(["export", session, "-o", str(early)], drill.data).returncode == 0
    repaired = maka(["plan", session], drill.data, env={**drill.env, **FLAG})
    assert repaired.returncode in (0, 3), repaired.stderr  # the run now has its ending
    assert maka(["export", session, "-o", str(late)], drill.data).returncode == 0
    assert _lines(early) != _lines(late)

    here = tmp_path / "here"
    assert maka(["import", str(early)], here).returncode == 0
    [(header, _)] = committed_runs(here)
    assert str(header.status) == "running"
    carried = maka(["import", str(late)], here)
    assert carried.returncode == 0, carried.stderr
    again = tmp_path / "again.jsonl"
    assert maka(["export", session, "-o", str(again)], here).returncode == 0
    assert _lines(again) == _lines(late), "the data folder holds what the source holds"
    older = maka(["import", str(early)], here)
    assert older.returncode == 0, older.stderr
    assert "0 new" in older.stdout
    [(header, _)] = committed_runs(here)
    assert str(header.status) == str(committed_runs(drill.data)[0][0].status)

    # Ended here first (this data folder repaired it): its ending is never replaced.
    there = tmp_path / "there"
    assert maka(["import", str(early)], there).returncode == 0
    assert maka(["plan", session], there, env={**drill.env, **FLAG}).returncode in (0, 3)
    before = committed_runs(there)
    refused = maka(["import", str(late)], there)
    assert refused.returncode == 1 and "[identity_conflict]" in refused.stderr
    assert "this data folder ended it as interrupted" in refused.stderr
    assert "import it into another data folder" in refused.stderr
    assert committed_runs(there) == before, "a refused import changes nothing"
