"""The real ``maka export`` and ``maka import`` refuse what would destroy or mislead, changing
nothing: an export into the data folder it reads (with or without ``--force``), an endless line
(read a bounded piece at a time, never whole), a device in place of the file, a session or run
folder that is not an absolute path. A re-import whose session line differs from the session
stored here (renamed or moved since) says which title or folder it kept."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from storage.ledger.sqlite_connection import DATABASE_NAME
from storage.sessions.session_export import MAX_LINE_BYTES
from tests.helpers.ledger_builders import RunIds, clean_ledger
from tests.helpers.maka_run import RunResult, maka
from tests.helpers.store_workloads import commit_ledger, db_state, store_with_runs

pytestmark = pytest.mark.e2e

IDS = RunIds()


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    data_dir = tmp_path / "origin"
    with store_with_runs(data_dir, IDS) as store:
        commit_ledger(store, clean_ledger(3, ids=IDS))
    return data_dir


@pytest.fixture
def exported(origin: Path, tmp_path: Path) -> Path:
    out = tmp_path / "session.jsonl"
    result = maka(["export", IDS.session_id, "-o", str(out)], origin)
    assert result.returncode == 0, result.stderr
    return out


def _refused(result: RunResult, code: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"maka: error [{code}]: " in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


def test_an_export_into_the_data_folder_is_refused_even_with_force(
    origin: Path, tmp_path: Path
) -> None:
    """``-o DATA/runtime.sqlite --force`` replaced the database with the export: every later
    command said store_corrupt. Any place under the data folder, by any name, is refused."""
    link = tmp_path / "link"
    link.symlink_to(origin, target_is_directory=True)
    database = origin / DATABASE_NAME
    before = db_state(database)
    targets = [
        (str(database), ["--force"]),
        (str(database), []),
        (str(origin / "checkpoints" / "s.jsonl"), ["--force"]),
        (str(origin / "new.jsonl"), []),
        (str(tmp_path / "other" / ".." / "origin" / "new.jsonl"), []),
        (str(link / "new.jsonl"), ["--force"]),
        (str(link / DATABASE_NAME), ["--force", "--no-checkpoints"]),
    ]
    (tmp_path / "other").mkdir()
    for target, flags in targets:
        result = maka(["export", IDS.session_id, "-o", target, *flags], origin)
        _refused(result, "export_target_inside_data_dir")
        assert "is inside the data folder" in result.stderr
    # A relative --data-dir and an absolute target name the same folder.
    relative = maka(
        ["--data-dir", "origin", "export", IDS.session_id, "-o", str(database), "--force"],
        origin,
        cwd=tmp_path,
    )
    _refused(relative, "export_target_inside_data_dir")
    assert db_state(database) == before
    assert not [name for name in _files(origin) if name.endswith((".jsonl", ".tmp", ".bundle"))]
    listed = maka(["sessions", "--json"], origin)
    assert listed.returncode == 0, listed.stderr
    assert IDS.session_id in listed.stdout
    # Beside the data folder, with its name as a prefix: not inside it.
    beside = maka(["export", IDS.session_id, "-o", f"{origin}-copy.jsonl"], origin)
    assert beside.returncode == 0, beside.stderr


def test_a_line_longer_than_the_limit_is_refused_without_reading_on(tmp_path: Path) -> None:
    """A file of the limit plus one byte without a newline (sparse: no disk, no gigabytes) is
    refused as a line too long, not read whole and called torn; nothing is created."""
    data_dir = tmp_path / "data"
    endless = tmp_path / "zeros.jsonl"
    with endless.open("wb") as file:
        file.truncate(MAX_LINE_BYTES + 1)
    result = maka(["import", str(endless)], data_dir)
    _refused(result, "import_line_invalid")
    assert "line 1 is longer than 64 MiB" in result.stderr
    assert not data_dir.exists()

    at_limit = tmp_path / "second.jsonl"
    with at_limit.open("wb") as file:
        file.write(b"{}\n")
        file.truncate(3 + MAX_LINE_BYTES + 1)
    second = maka(["import", str(at_limit)], data_dir)
    _refused(second, "import_line_invalid")
    assert "line 2 is longer than 64 MiB" in second.stderr
    assert not data_dir.exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_pipe_without_newlines_is_read_only_up_to_the_limit(tmp_path: Path) -> None:
    """A pipe (``maka import <(...)``) of zeros without end: the import stops reading once the
    line passes the limit, so the writer is cut off long before it is done."""
    data_dir = tmp_path / "data"
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    piece = b"\0" * (1 << 20)
    budget = 4 * MAX_LINE_BYTES  # the writer stops here if nobody stops it before
    written = [0]

    def write() -> None:
        try:
            with pipe.open("wb") as file:
                while written[0] < budget:
                    file.write(piece)
                    written[0] += len(piece)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        result = maka(["import", str(pipe)], data_dir)
    finally:
        if writer.is_alive():  # never opened by the reader: open it to let the writer go
            with pipe.open("rb") as drain:
                while drain.read(1 << 20):
                    pass
        writer.join(timeout=30)
    _refused(result, "import_line_invalid")
    assert written[0] < budget, "the import read the whole pipe"
    assert not data_dir.exists()


def test_a_device_in_place_of_the_file_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    result = maka(["import", os.devnull], data_dir)
    _refused(result, "import_file_unreadable")
    assert "is a device, not an export file" in result.stderr
    assert not data_dir.exists()


@pytest.mark.parametrize(
    ("line", "folder", "words"),
    [
        (0, "relative/dir", "the session's folder (cwd) must be an absolute path"),
        (0, "", "the session's folder (cwd) must be an absolute path"),
        (1, "relative/dir", "the run's folder (cwd) must be an absolute path"),
    ],
)
def test_a_folder_that_is_not_absolute_is_refused(
    exported: Path, tmp_path: Path, line: int, folder: str, words: str
) -> None:
    """A session recorded with ``cwd: "relative/dir"`` was imported, and its next turns ran in
    that name under whatever folder the shell was in."""
    lines = exported.read_bytes().split(b"\n")
    assert b'"cwd":"/work"' in lines[line]
    lines[line] = lines[line].replace(b'"cwd":"/work"', json.dumps({"cwd": folder})[1:-1].encode())
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(b"\n".join(lines))
    data_dir = tmp_path / "data"
    result = maka(["import", str(edited), "--no-checkpoints"], data_dir)
    _refused(result, "import_line_invalid")
    assert f"line {line + 1}: {words}" in result.stderr
    assert not data_dir.exists()


def test_a_reimport_says_which_title_and_folder_it_kept(
    origin: Path, exported: Path, tmp_path: Path
) -> None:
    """The session line differs from the session here (renamed, moved): the history is the
    same, so nothing is refused, but the import no longer passes over the difference silently."""
    lines = exported.read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b'"cwd":"/work"', b'"cwd":"/elsewhere"')
    lines[0] = lines[0].replace(b'"title":"a session"', b'"title":"Another title"')
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(b"\n".join(lines))
    before = db_state(origin / DATABASE_NAME)

    text = maka(["import", str(edited)], origin)
    assert text.returncode == 0, text.stderr
    assert "(0 new, " in text.stdout
    assert (
        f"the session here keeps its title 'a session'; the file's is 'Another title' "
        f"(maka sessions rename {IDS.session_id} TITLE changes it)\n"
    ) in text.stdout
    assert (
        "the session here keeps its folder /work; the file's is /elsewhere "
        f"(maka sessions relocate {IDS.session_id} FOLDER changes it)\n"
    ) in text.stdout
    document = maka(["import", str(edited), "--json"], origin)
    assert document.returncode == 0, document.stderr
    assert json.loads(document.stdout)["sessionKept"] == [
        {"field": "title", "here": "a session", "file": "Another title"},
        {"field": "cwd", "here": "/work", "file": "/elsewhere"},
    ]
    after = db_state(origin / DATABASE_NAME)
    assert (after.events, after.runs) == (before.events, before.runs)
    [row] = json.loads(maka(["sessions", "--json"], origin).stdout)["sessions"]
    assert (row["title"], row["cwd"]) == ("a session", "/work")

    same = maka(["import", str(exported), "--json"], origin)
    assert same.returncode == 0 and json.loads(same.stdout)["sessionKept"] == []


def test_an_export_of_a_run_that_has_not_ended_says_so(tmp_path: Path, origin: Path) -> None:
    """A session exported while its turn ran (or after its process was killed, before any
    repair): the export holds what was committed, and the imported copy reads as interrupted.
    It said nothing of that; it now notes the run, to a file or to standard output. A session
    whose runs all ended gets no note."""
    from tests.e2e.test_workspace_checkpoints_cli import Drill
    from tests.helpers.maka_run import committed_runs

    drill = Drill(tmp_path / "killed")
    drill.run("P8")
    [(header, _)] = committed_runs(drill.data)
    note = f"note: run {header.run_id} had not ended when it was exported"
    for target in (str(tmp_path / "killed.jsonl"), "-"):
        result = maka(["export", drill.session, "-o", target], drill.data, env=drill.env)
        assert result.returncode == 0, result.stderr
        assert note in result.stderr and "an import reads it as interrupted" in result.stderr
    ended = maka(["export", IDS.session_id, "-o", str(tmp_path / "ended.jsonl")], origin)
    assert ended.returncode == 0 and "had not ended" not in ended.stderr, ended.stderr
