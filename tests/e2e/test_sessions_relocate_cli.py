"""``maka sessions relocate / rename / remove`` with the real command: a session whose folder was
moved is pointed at its new place only when the marker proves it is the same workspace, and then
Safe resume and new turns use the new place; a removal needs --yes and deletes only the ledger."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from storage.sessions.workspace_identity import (
    LEGACY_MARKER_NAME,
    MARKER_DIR,
    MARKER_NAME,
    marker_bytes,
    read_workspace_identity,
)
from tests.e2e.test_safe_resume_cli import FLAG, Drill
from tests.helpers.maka_run import committed_runs, maka

pytestmark = pytest.mark.e2e


def _sessions(drill: Drill) -> list[dict[str, object]]:
    listed = maka(["sessions", "--json"], drill.data)
    assert listed.returncode == 0, listed.stderr
    sessions: list[dict[str, object]] = json.loads(listed.stdout)["sessions"]
    return sessions


def test_a_moved_folder_parks_then_is_located_and_resumes_there(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9  # the bash call completed, its run was interrupted
    moved = tmp_path / "moved-work"
    shutil.move(str(drill.work), moved)

    parked = maka(["plan", drill.session, "--json"], drill.data, env={**drill.env, **FLAG})
    assert parked.returncode == 3
    body = json.loads(parked.stdout)
    assert body["rejectionReasons"] == ["workspace_folder_missing"]
    [missing] = body["diagnostics"]
    assert missing["message"] == f"the session folder {drill.work} no longer exists"
    listed = maka(["sessions"], drill.data).stdout
    assert f"FOLDER MISSING (maka sessions relocate {drill.session} NEW_FOLDER)" in listed
    assert _sessions(drill)[0]["folderMissing"] is True
    text = maka(["plan", drill.session], drill.data, env={**drill.env, **FLAG}).stdout
    assert "[warn] workspace_folder_missing" in text and "Error" not in text
    assert f"maka sessions relocate {drill.session} NEW_FOLDER" in text

    # A different workspace is refused (its marker in either form), and nothing changes.
    for n, name in enumerate((MARKER_NAME, LEGACY_MARKER_NAME)):
        other = tmp_path / f"other-{n}"
        (other / name).parent.mkdir(parents=True, exist_ok=True)
        (other / name).write_bytes(marker_bytes(str(uuid.uuid4()), 1))
        refused = maka(["sessions", "relocate", drill.session, str(other)], drill.data)
        assert refused.returncode == 2
        assert "maka: error [workspace_identity_differs]" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert _sessions(drill)[0]["cwd"] == str(drill.work)
    empty = tmp_path / "empty"
    empty.mkdir()
    no_marker = maka(["sessions", "relocate", drill.session, str(empty)], drill.data)
    assert "[workspace_identity_differs]" in no_marker.stderr
    assert list(empty.iterdir()) == [], "the marker is read, never created"

    located = maka(["sessions", "relocate", drill.session, str(moved)], drill.data)
    assert located.returncode == 0, located.stderr
    assert str(moved) in located.stdout
    assert _sessions(drill)[0]["cwd"] == str(moved)
    assert _sessions(drill)[0]["folderMissing"] is False
    log = (drill.data / "logs" / "lifecycle.jsonl").read_text()
    assert '"kind": "session.relocated"' in log

    code, resumed = drill.resume()
    assert code == 0, resumed
    assert resumed["started"] is True
    assert (moved / "count.txt").read_text().count("x") == 1  # the bash call never ran again
    runs = committed_runs(drill.data)
    assert runs[-1][0].cwd == str(moved)


def test_a_finished_session_whose_folder_moved_says_how_to_carry_on(tmp_path: Path) -> None:
    """Nothing was interrupted, so the planner never looks at the folder: ``maka plan`` must not
    say "carry on with a new message" (it cannot run), and the new message's refusal names the
    command that points the session at the folder's new place."""
    drill = Drill(tmp_path, checkpoints=True)
    assert drill.run(None).returncode == 0
    moved = tmp_path / "moved-work"
    shutil.move(str(drill.work), moved)
    relocate = f"maka sessions relocate {drill.session} NEW_FOLDER"

    for env in (drill.env, {**drill.env, **FLAG}):  # Safe resume off (the default) and on
        text = maka(["plan", drill.session], drill.data, env=env)
        assert text.returncode == 3, text.stderr
        assert "carry on with a new message" not in text.stdout, text.stdout
        assert "the session's folder is not there" in text.stdout and relocate in text.stdout

    sent = maka(["run", "--session", drill.session, "count once"], drill.data, env=drill.env)
    assert sent.returncode == 1 and "Traceback" not in sent.stderr
    assert "[invalid_cwd]" in sent.stderr and relocate in sent.stderr, sent.stderr
    chat = maka(["tui", "--session", drill.session], drill.data, env=drill.env, stdin="go\n")
    assert chat.returncode == 0, chat.stderr
    assert "note: the session's folder" in chat.stdout and relocate in chat.stdout, chat.stdout
    assert "/quit first" in chat.stderr, chat.stderr  # its message refused: the chat holds it

    assert maka(["sessions", "relocate", drill.session, str(moved)], drill.data).returncode == 0
    again = maka(["plan", drill.session], drill.data, env=drill.env).stdout
    assert "What next: carry on with a new message" in again and relocate not in again


def _relocate(drill: Drill, folder: Path) -> tuple[int, str]:
    done = maka(["sessions", "relocate", drill.session, str(folder)], drill.data)
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stdout + done.stderr
    return done.returncode, done.stderr


def test_a_moved_folder_with_the_legacy_marker_is_located_and_resumes(tmp_path: Path) -> None:
    """A folder an older version marked (``.maka-workspace.json`` only) is still the session's
    workspace: relocation accepts it without touching the marker, and Safe resume continues
    there as the same workspace, the marker then moved into ``.maka``."""
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9  # interrupted after the bash call completed
    moved = tmp_path / "moved-work"
    shutil.move(str(drill.work), moved)
    data = (moved / MARKER_NAME).read_bytes()
    shutil.rmtree(moved / MARKER_DIR)
    (moved / LEGACY_MARKER_NAME).write_bytes(data)

    located = maka(["sessions", "relocate", drill.session, str(moved)], drill.data)
    assert located.returncode == 0, located.stderr
    assert _sessions(drill)[0]["cwd"] == str(moved)
    assert not (moved / MARKER_DIR).exists(), "relocation reads the marker, never moves it"
    assert (moved / LEGACY_MARKER_NAME).read_bytes() == data

    code, resumed = drill.resume()
    assert code == 0, resumed
    assert resumed["started"] is True
    assert (moved / "count.txt").read_text().count("x") == 1  # the bash call never ran again
    runs = committed_runs(drill.data)
    assert runs[-1][0].cwd == str(moved)
    assert {header.workspace_identity for header, _ in runs} == {runs[0][0].workspace_identity}
    assert (moved / MARKER_NAME).read_bytes() == data
    assert not (moved / LEGACY_MARKER_NAME).exists()
    found = read_workspace_identity(moved)
    assert found is not None and found.identity == runs[0][0].workspace_identity


def test_every_folder_relocate_refuses_is_a_usage_refusal_that_changes_nothing(
    tmp_path: Path,
) -> None:
    """A folder that does not exist and a folder of another workspace are the same kind of
    mistake (the FOLDER given cannot be the session's): both exit 2 (docs/design/cli.md: usage or
    invalid input), each with its code and a sentence saying why, and nothing changes."""
    drill = Drill(tmp_path)
    assert drill.run(None).returncode == 0
    before = _sessions(drill)
    other = tmp_path / "other"
    (other / MARKER_DIR).mkdir(parents=True)
    marker = marker_bytes(str(uuid.uuid4()), 1)
    (other / MARKER_NAME).write_bytes(marker)
    no_marker = tmp_path / "no-marker"
    no_marker.mkdir()
    damaged = tmp_path / "damaged"
    (damaged / MARKER_DIR).mkdir(parents=True)
    (damaged / MARKER_NAME).write_text("{not json")
    damaged_legacy = tmp_path / "damaged-legacy"
    damaged_legacy.mkdir()
    (damaged_legacy / LEGACY_MARKER_NAME).write_text("{not json")
    # Both forms, naming different workspaces: neither is chosen.
    both = tmp_path / "both"
    (both / MARKER_DIR).mkdir(parents=True)
    (both / MARKER_NAME).write_bytes(marker)
    (both / LEGACY_MARKER_NAME).write_bytes(marker_bytes(str(uuid.uuid4()), 1))
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("not a folder")
    cases = {
        tmp_path / "missing": ("invalid_cwd", "does not exist"),
        a_file: ("invalid_cwd", "is a file, not a folder"),
        other: ("workspace_identity_differs", "belongs to another workspace"),
        no_marker: ("workspace_identity_differs", "has no workspace marker (.maka/workspace"),
        damaged: ("workspace_marker_invalid", ""),
        damaged_legacy: ("workspace_marker_invalid", LEGACY_MARKER_NAME),
        both: ("workspace_markers_disagree", "will not choose"),
    }
    for folder, (code, words) in cases.items():
        exit_code, stderr = _relocate(drill, folder)
        assert exit_code == 2, (folder, stderr)
        assert stderr.startswith(f"maka: error [{code}]: "), stderr
        assert words in stderr and "not moved" in stderr, stderr
        assert _sessions(drill) == before
    assert (other / MARKER_NAME).read_bytes() == marker
    assert list(no_marker.iterdir()) == []
    assert (damaged / MARKER_NAME).read_text() == "{not json"
    assert (damaged_legacy / LEGACY_MARKER_NAME).read_text() == "{not json"
    assert (both / MARKER_NAME).read_bytes() == marker and (both / LEGACY_MARKER_NAME).exists()
    log = drill.data / "logs" / "lifecycle.jsonl"
    assert not log.exists() or "session.relocated" not in log.read_text()


def test_rename_and_remove_need_what_they_say(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    assert drill.run(None).returncode == 0
    session = drill.session
    renamed = maka(["sessions", "rename", session, "Counting drill"], drill.data)
    assert renamed.returncode == 0, renamed.stderr
    assert _sessions(drill)[0]["title"] == "Counting drill"
    # --data-dir after the action, as every other command takes it
    elsewhere = drill.data.parent / "elsewhere"
    args = ["sessions", "rename", session, "Named last", "--data-dir", str(drill.data)]
    late = maka(args, elsewhere)
    assert late.returncode == 0, late.stderr
    assert _sessions(drill)[0]["title"] == "Named last" and not elsewhere.exists()
    bad = maka(["sessions", "rename", session, "two\nlines"], drill.data)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    # --json, before or after the action: one JSON document, as its refusals are.
    for args in (
        ["sessions", "--json", "rename", session, "J"],
        ["sessions", "rename", session, "J", "--json"],
    ):
        said = maka(args, drill.data)
        assert said.returncode == 0, said.stderr
        assert json.loads(said.stdout) == {"sessionId": session, "action": "renamed", "title": "J"}

    unconfirmed = maka(["sessions", "remove", session], drill.data)
    assert unconfirmed.returncode == 2
    assert "[confirmation_required]" in unconfirmed.stderr
    assert "maka export" in unconfirmed.stderr
    assert len(_sessions(drill)) == 1
    removed = maka(["sessions", "remove", session, "--yes", "--json"], drill.data)
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout) == {
        "sessionId": session,
        "action": "removed",
        "title": "J",
        "cwd": str(drill.work),
    }
    assert _sessions(drill) == []
    assert (drill.work / "count.txt").exists(), "the folder is not touched"
    again = maka(["sessions", "remove", session, "--yes"], drill.data)
    assert again.returncode == 2 and "[session_not_found]" in again.stderr


def test_sessions_help_documents_relocate_and_remove(tmp_path: Path) -> None:
    shown = maka(["sessions", "--help"], tmp_path / "data")
    assert shown.returncode == 0
    for word in ("relocate", "rename", "remove"):
        assert word in shown.stdout
    top = maka(["--help"], tmp_path / "data")
    assert "relocate" in top.stdout


def row_identity(drill: Drill) -> str:
    """The workspace the drill's session ran in (its last run's header)."""
    identity = committed_runs(drill.data)[-1][0].workspace_identity
    assert identity is not None
    return str(identity)


def test_beside_a_running_host_the_host_relocates_renames_and_removes(tmp_path: Path) -> None:
    """While ``maka host`` serves the data folder, the three changes go through it (the folder
    is its own, so the command cannot open it): the same lines, the same refusals with the same
    exit codes, nothing changed by a refusal, and the host still serves afterwards."""
    from tests.helpers.maka_process import start_main

    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9  # the bash call completed, its run was interrupted
    moved = tmp_path / "moved-work"
    shutil.move(str(drill.work), moved)
    other = tmp_path / "other"
    (other / MARKER_DIR).mkdir(parents=True)
    (other / MARKER_NAME).write_bytes(marker_bytes(str(uuid.uuid4()), 1))
    host = start_main(drill.data, drill.env, "host").wait_ready()
    try:
        refused = maka(["sessions", "relocate", drill.session, str(other)], drill.data)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "maka: error [workspace_identity_differs]" in refused.stderr
        assert "Traceback" not in refused.stderr and refused.stdout == ""
        gone = maka(["sessions", "relocate", "session_0123", str(moved)], drill.data)
        assert gone.returncode == 2 and "[session_not_found]" in gone.stderr, gone.stderr
        assert _sessions(drill)[0]["cwd"] == str(drill.work)

        located = maka(["sessions", "relocate", drill.session, str(moved)], drill.data)
        assert located.returncode == 0, located.stderr
        assert located.stdout == f"session {drill.session} now uses {moved}\n"
        listed = maka(["sessions", "--json"], drill.data)
        (row,) = json.loads(listed.stdout)["sessions"]
        assert json.loads(listed.stdout)["servedBy"]["host"] == "headless"
        assert row["cwd"] == str(moved) and row["folderMissing"] is False
        again = maka(["sessions", "--json", "relocate", drill.session, str(moved)], drill.data)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout) == {
            "sessionId": drill.session,
            "action": "relocated",
            "cwd": str(moved),
        }
        log = (drill.data / "logs" / "lifecycle.jsonl").read_text()
        assert '"kind": "session.relocated"' in log
        # Its marker deleted (``git clean -fdx``): the host gives it back, and it is said.
        shutil.rmtree(moved / MARKER_DIR)
        given = maka(["sessions", "relocate", drill.session, str(moved)], drill.data)
        assert given.returncode == 0, given.stderr
        assert "again: its workspace marker was given back" in given.stdout, given.stdout
        back = read_workspace_identity(moved)
        assert back is not None and back.identity == row_identity(drill)

        long_title = maka(["sessions", "rename", drill.session, "x" * 201], drill.data)
        assert long_title.returncode == 2 and "[session_title_invalid]" in long_title.stderr
        tab = maka(["sessions", "rename", drill.session, "a\tb"], drill.data)
        assert tab.returncode == 2 and "[session_title_invalid]" in tab.stderr, tab.stderr
        renamed = maka(["sessions", "rename", drill.session, "  Counting  "], drill.data)
        assert renamed.returncode == 0, renamed.stderr
        assert renamed.stdout == f"session {drill.session} is now called 'Counting'\n"
        assert _sessions(drill)[0]["title"] == "Counting"

        session = drill.session
        unconfirmed = maka(["sessions", "remove", session], drill.data)
        assert unconfirmed.returncode == 2 and "[confirmation_required]" in unconfirmed.stderr
        removed = maka(["sessions", "remove", session, "--yes"], drill.data)
        assert removed.returncode == 0, removed.stderr
        assert removed.stdout == f"removed session {session} (Counting); {moved} untouched\n"
        assert _sessions(drill) == []
        assert (moved / "count.txt").exists(), "the folder and its files are untouched"
        assert host.process.poll() is None, host.stderr()[-2000:]
    finally:
        host.stop()


def test_a_renamed_or_moved_session_imports_again_keeping_its_name_and_place(
    tmp_path: Path,
) -> None:
    """A session's title and folder are the user's to change: an export made before a rename
    or a relocation imports into the same data folder again (nothing new, nothing refused),
    and the title and folder here stay as the user set them."""
    drill = Drill(tmp_path)
    assert drill.run(None).returncode == 0
    session = drill.session
    exported = tmp_path / "session.jsonl"
    args = ["export", session, "-o", str(exported), "--no-checkpoints"]
    assert maka(args, drill.data).returncode == 0
    assert maka(["sessions", "rename", session, "Renamed here"], drill.data).returncode == 0
    moved = tmp_path / "moved-work"
    shutil.move(str(drill.work), moved)
    assert maka(["sessions", "relocate", session, str(moved)], drill.data).returncode == 0

    again = maka(["import", str(exported), "--json"], drill.data)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["eventsCreated"] == 0
    [row] = _sessions(drill)
    assert row["title"] == "Renamed here" and row["cwd"] == str(moved)


def test_a_deleted_folder_is_offered_a_branch_from_its_snapshots_before_removal(
    tmp_path: Path,
) -> None:
    """The folder deleted (not moved): relocating is impossible and removing deletes the
    history. The plan names ``maka branch``, which makes a new folder from the snapshots that
    are still kept, and following it works."""
    drill = Drill(tmp_path, checkpoints=True)
    assert drill.run("P6").returncode == -9
    shutil.rmtree(drill.work)
    text = maka(["plan", drill.session], drill.data, env={**drill.env, **FLAG}).stdout
    assert f"Deleted? maka branch {drill.session} lists the points" in text, text
    assert text.index("maka branch") < text.index("maka sessions remove"), text

    listed = maka(["branch", drill.session, "--json"], drill.data, env=drill.env)
    assert listed.returncode == 0, listed.stderr
    kept = [p for p in json.loads(listed.stdout)["boundaries"] if p.get("snapshotKept")]
    assert kept, listed.stdout
    copy = tmp_path / "again"
    args = ["branch", drill.session, "--at", str(kept[-1]["eventId"]), "--to", str(copy)]
    made = maka(args, drill.data, env=drill.env)
    assert made.returncode == 0, made.stderr
    assert copy.is_dir() and any(copy.iterdir())


def test_a_folder_replaced_by_a_file_is_said_to_be_no_folder_not_gone(tmp_path: Path) -> None:
    """A file (or a broken link) where the session's folder was: the plan and a new turn say
    the name is no longer a folder, which a user who lists the parent can see is true."""
    drill = Drill(tmp_path)
    assert drill.run("P6").returncode == -9
    shutil.move(str(drill.work), tmp_path / "moved-work")
    drill.work.write_text("a file now\n")
    for replaced, words in (
        ("file", "is no longer a folder (a file has its name now)"),
        ("link", "is no longer a folder (a link that leads to no folder has its name now)"),
    ):
        if replaced == "link":
            drill.work.unlink()
            drill.work.symlink_to(tmp_path / "nowhere")
        parked = maka(["plan", drill.session, "--json"], drill.data, env={**drill.env, **FLAG})
        assert parked.returncode == 3, parked.stdout + parked.stderr
        body = json.loads(parked.stdout)
        assert body["rejectionReasons"] == ["workspace_folder_missing"]
        [missing] = body["diagnostics"]
        assert missing["message"] == f"the session folder {drill.work} {words}"
        turn = maka(["run", "--session", drill.session, "hello"], drill.data, env=drill.env)
        assert turn.returncode == 1, turn.stdout + turn.stderr
        assert f"the session folder {drill.work} {words}" in turn.stderr
        assert "Traceback" not in turn.stderr
        doctor = maka(["doctor"], drill.data, env=drill.env)
        assert f"workspace {drill.work}: marker folder_missing (the folder {words})" in (
            doctor.stdout
        ), doctor.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_marker_git_clean_deleted_is_given_back_and_the_session_resumes(tmp_path: Path) -> None:
    """A user's defaults: a Git repository with uncommitted work, snapshots on. ``maka run``
    killed with SIGKILL, then ``git clean -fdx`` (which deletes ``.maka``, ignored by its own
    ``.gitignore``): Safe resume's look made a new marker, and the session parked for good
    with ``workspace_identity_mismatch`` (relocation refused the folder it ran in). A look
    now writes nothing into the folder: the plan parks saying the marker is missing (it made
    one, then asked whether one was "made anew"). Pointing the session at its own folder
    gives the marker back, and Safe resume continues; a marker naming a workspace another
    session recorded is never replaced."""
    from tests.helpers.user_git import user_git

    drill = Drill(tmp_path, checkpoints=True)
    (drill.work / "a.txt").write_text("committed\n")
    user_git(drill.work, "init", "-q")
    user_git(drill.work, "add", "a.txt")
    user_git(drill.work, "commit", "-q", "-m", "first")
    (drill.work / "a.txt").write_text("committed, then edited\n")
    assert drill.run("P6").returncode == -9
    found = read_workspace_identity(drill.work)
    assert found is not None
    session, identity = drill.session, found.identity
    user_git(drill.work, "clean", "-fdxq")
    assert not (drill.work / MARKER_DIR).exists() and (drill.work / "count.txt").exists() is False

    parked = maka(["plan", session, "--json"], drill.data, env={**drill.env, **FLAG})
    assert parked.returncode == 3
    assert "workspace_identity_mismatch" in json.loads(parked.stdout)["rejectionReasons"]
    assert "the folder has no workspace marker" in parked.stdout, parked.stdout
    assert not (drill.work / MARKER_DIR).exists(), "a look writes nothing into the folder"
    text = maka(["plan", session], drill.data, env={**drill.env, **FLAG}).stdout
    assert f"maka sessions relocate {session} FOLDER, with this same folder" in text
    assert "Its workspace marker was deleted?" in text and "made anew" not in text, text
    assert "This folder has no workspace marker, so it cannot be shown to be the" in text, text
    assert "not the same workspace" not in text, text
    resumed = maka(["resume", session, "--json"], drill.data, env={**drill.env, **FLAG})
    assert resumed.returncode == 3, resumed.stdout
    assert not (drill.work / MARKER_DIR).exists(), "nor does a resume that parks"

    given = maka(["sessions", "relocate", session, str(drill.work)], drill.data)
    assert given.returncode == 0, given.stderr
    assert "again: its workspace marker was given back" in given.stdout, given.stdout
    back = read_workspace_identity(drill.work)
    assert back is not None and back.identity == identity
    log = (drill.data / "logs" / "lifecycle.jsonl").read_text()
    assert '"kind": "workspace.marker_given_back"' in log
    # The workspace gate is back to the files: ``git clean`` also took the command's
    # ``count.txt``, and the last capture was cut short, so they are the user's to decide.
    parked_on_files = json.loads(
        maka(["plan", session, "--json"], drill.data, env={**drill.env, **FLAG}).stdout
    )
    assert parked_on_files["rejectionReasons"] == ["workspace_checkpoint_stale"], parked_on_files
    code, body = drill.resume("--rebaseline")
    assert code == 0, body
    continued = [h for h, _ in committed_runs(drill.data) if h.session_id == session][-1]
    assert str(continued.status) == "completed" and continued.workspace_identity == identity

    # A marker naming a workspace a session recorded is that workspace's: never replaced.
    other = tmp_path / "other"
    other.mkdir()
    demo = {"MAKA_WORKSPACE_CHECKPOINTS": "on"}
    made = maka(
        ["run", "--cwd", str(other), "--permission-mode", "auto", "write n.md saying x"],
        drill.data,
        env=demo,
    )
    assert made.returncode == 0, made.stderr
    shutil.rmtree(drill.work / MARKER_DIR)
    shutil.copytree(other / MARKER_DIR, drill.work / MARKER_DIR)
    refused = maka(["sessions", "relocate", session, str(drill.work)], drill.data)
    assert refused.returncode == 2 and "[workspace_identity_differs]" in refused.stderr
    other_session = next(h for h, _ in committed_runs(drill.data) if h.cwd == str(other))
    assert f"which session {other_session.session_id} ran in" in refused.stderr
    still = read_workspace_identity(drill.work)
    theirs = read_workspace_identity(other)
    assert still is not None and theirs is not None and still.identity == theirs.identity


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_another_folder_at_the_sessions_place_is_never_its_starting_point(tmp_path: Path) -> None:
    """After a crash the session's folder is replaced by another one at the same place (a
    look made it a marker). Settling the call recorded that folder as the run's starting
    point, and once the marker was given back Safe resume called it verified and carried on in
    it. The answer is now recorded without the folder (its marker is not the session's), and
    after the give-back the files are compared with the snapshot: they differ, so it parks."""
    drill = Drill(tmp_path, checkpoints=True)
    assert drill.run("P4").returncode == -9  # killed inside the bash call: outcome unknown
    session = drill.session
    drill.work.rename(tmp_path / "the-real-one")
    drill.work.mkdir()
    (drill.work / "other.txt").write_text("another project\n")
    looked = maka(["plan", session, "--json"], drill.data, env={**drill.env, **FLAG})
    assert "workspace_identity_mismatch" in json.loads(looked.stdout)["rejectionReasons"]
    # An answer takes no folder not shown to be the session's: the plan does not say it would
    # (the window said "so the files need no other decision", and they did).
    assert "workspace_settle_takes_folder" not in looked.stdout, looked.stdout
    settled = maka(["settle", session, "c1", "--not-run"], drill.data, env={**drill.env, **FLAG})
    assert settled.returncode == 0, settled.stderr
    assert "so it was not taken as the new starting point" in settled.stdout, settled.stdout
    assert f"maka sessions relocate {session} FOLDER, with this same folder" in settled.stdout
    assert "--rebaseline" not in settled.stdout
    given = maka(["sessions", "relocate", session, str(drill.work)], drill.data)
    assert given.returncode == 0, given.stderr
    parked = maka(["plan", session, "--json"], drill.data, env={**drill.env, **FLAG})
    assert parked.returncode == 3, parked.stdout
    assert "workspace_drift" in json.loads(parked.stdout)["rejectionReasons"], parked.stdout
    code, body = drill.resume()
    assert code == 3 and body["disposition"] == "park", body


def test_a_marker_git_clean_deleted_after_a_proven_write_parks_on_the_mismatch_alone(
    tmp_path: Path,
) -> None:
    """Killed after a write its T1 evidence proves, then ``git clean -fdx``: the plan said
    "safety_observation_unavailable: the folder could not be captured" beside the identity
    mismatch, an error that was only the new marker's workspace having no store."""
    from tests.helpers.maka_run import committed_runs, scripted_env, write_script
    from tests.helpers.user_git import user_git

    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("committed\n")
    user_git(work, "init", "-q")
    user_git(work, "add", "a.txt")
    user_git(work, "commit", "-q", "-m", "first")
    write = {"id": "w1", "name": "write_file", "args": {"path": "n.md", "content": "hi\n"}}
    script = write_script(tmp_path / "s.json", [[{"text": "", "toolCalls": [write]}]])
    env = {**scripted_env(script, checkpoints=True), **FLAG}
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "write"]
    assert maka(args, data, env={**env, "MAKA_FAILPOINT": "P5"}).returncode == -9
    session = committed_runs(data)[0][0].session_id
    user_git(work, "clean", "-fdxq")
    parked = maka(["plan", session, "--json"], data, env=env)
    reasons = json.loads(parked.stdout)["rejectionReasons"]
    assert reasons == ["workspace_identity_mismatch"], reasons
    # Its one call has its outcome: no "interrupted calls" to check, the folder is.
    text = maka(["plan", session], data, env=env).stdout
    assert "What next: check the session's folder, then carry on" in text, text
    assert "interrupted calls" not in text, text
