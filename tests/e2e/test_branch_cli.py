"""Branching a session from an earlier point (issue #36), end to end with the real ``maka``, the
real ``git`` and the scripted provider recording its requests: the copy holds the files a later
``bash`` call deleted while the source folder does not, the model sees exactly the prefix and
the new message, a branched session branches again, and bad input is refused with a code and
changes nothing."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from storage.checkpoints.checkpoint_retention import run_retention
from storage.checkpoints.checkpoint_store import START_REF, GitCheckpointStore
from storage.ledger.ledger_store import open_store
from storage.sessions.workspace_identity import resolve_workspace_identity
from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

WRITE = {
    "text": "Writing notes.",
    "toolCalls": [
        {"id": "w1", "name": "write_file", "args": {"path": "notes.txt", "content": "kept\n"}}
    ],
}
DELETE = {
    "text": "Deleting.",
    "toolCalls": [{"id": "d1", "name": "bash", "args": {"command": "rm a.txt notes.txt"}}],
}
SOURCE = [[WRITE, {"text": "Notes written."}], [DELETE, {"text": "Deleted."}]]
# The branch's first turn is the second user message of its history (turn index 1).
BRANCH = [[{"text": "unused"}], [{"text": "Branch reply."}], [{"text": "Second branch reply."}]]


def _remove_object(data: Path, object_id: str) -> None:
    """Take ``object_id`` out of the data folder's checkpoint store, wherever it is kept: a
    loose object of the store, of its own folder of trees while it borrows from the folder's
    repository (storage/checkpoints/checkpoint_borrow.py, ``write_tree``), or the pack its
    absorption wrote (then every pack goes: the snapshot is gone either way)."""
    [store] = (data / "checkpoints").glob("*.git")
    name = f"objects/{object_id[:2]}/{object_id[2:]}"
    assert user_git(store, "cat-file", "-t", object_id, check=False)
    for path in [store / name, store / "trees.scratch" / name]:
        path.unlink(missing_ok=True)
    if user_git(store, "cat-file", "-t", object_id, check=False):
        for pack in (store / "objects" / "pack").glob("pack-*"):
            pack.unlink()
    assert not user_git(store, "cat-file", "-t", object_id, check=False)


class Source:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir()
        (self.work / "a.txt").write_text("alpha\n")
        user_git(self.work, "init", "-q")
        user_git(self.work, "-c", "user.name=t", "-c", "user.email=t@t", "add", "a.txt")
        user_git(self.work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
        self.record = tmp_path / "requests.jsonl"
        script = write_script(tmp_path / "source.json", SOURCE)
        self.env = scripted_env(script, self.record, checkpoints=True)
        branch = write_script(tmp_path / "branch.json", BRANCH)
        self.branch_env = {**self.env, "MAKA_SCRIPT_FILE": str(branch)}

    def run(self, text: str, *session: str) -> None:
        where = ["--session", session[0]] if session else ["--cwd", str(self.work)]
        args = ["run", *where, "--permission-mode", "auto", text]
        env = self.branch_env if session and session[0] != self.session else self.env
        result = maka(args, self.data, env=env)
        assert result.returncode == 0, result.stderr

    def run_without_snapshots(self, text: str) -> None:
        """The session's first turn with workspace snapshots turned off."""
        off = {**self.env, "MAKA_WORKSPACE_CHECKPOINTS": "off"}
        args = ["run", "--cwd", str(self.work), "--permission-mode", "auto", text]
        result = maka(args, self.data, env=off)
        assert result.returncode == 0, result.stderr

    @property
    def session(self) -> str:
        return committed_runs(self.data)[0][0].session_id

    def branch(self, session: str, *args: str, code: int = 0) -> dict[str, Any]:
        result = maka(["branch", session, "--json", *args], self.data, env=self.env)
        assert result.returncode == code, result.stderr
        return json.loads(result.stdout) if code == 0 else {"stderr": result.stderr}

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]


def _ending_of_first_run(boundaries: list[dict[str, Any]]) -> dict[str, Any]:
    return next(b for b in boundaries if b["kind"] == "run_ending")


def test_a_branch_before_a_delete_has_the_files_and_sees_only_the_prefix(tmp_path: Path) -> None:
    src = Source(tmp_path)
    src.run("write the notes")
    src.run("delete them", src.session)
    assert not (src.work / "a.txt").exists() and not (src.work / "notes.txt").exists()
    session = src.session

    listing = src.branch(session)
    kinds = [b["kind"] for b in listing["boundaries"]]
    assert kinds == [
        "user_message",
        "tool_result",
        "run_ending",
        "user_message",
        "tool_result",
        "run_ending",
    ]
    assert all(b["snapshotBound"] and b["snapshotKept"] for b in listing["boundaries"])
    before_delete = _ending_of_first_run(listing["boundaries"])

    copy = tmp_path / "copy"
    made = src.branch(session, "--at", before_delete["eventId"], "--to", str(copy))
    new = made["sessionId"]
    assert made["branchedFrom"]["sourceSessionId"] == session
    assert made["branchedFrom"]["boundaryEventId"] == before_delete["eventId"]
    assert made["cwd"] == str(copy.resolve())
    # The copy holds what the later bash call deleted; the source folder still does not.
    assert (copy / "a.txt").read_text() == "alpha\n"
    assert (copy / "notes.txt").read_text() == "kept\n"
    assert not (src.work / "a.txt").exists()
    # A Git repository's copy keeps its history.
    assert "first" in user_git(copy, "log", "--oneline")
    # The ledger copied no event: the new session has no run yet.
    runs = committed_runs(src.data)
    assert [h.session_id for h, _ in runs].count(new) == 0
    # maka checkpoints says where its folder came from, and that no snapshot is its own yet.
    listed = maka(["checkpoints", new], src.data, env=src.env)
    assert listed.returncode == 0, listed.stderr
    ref = made["branchedFrom"]["checkpointRef"]
    assert f"its folder began as a copy of {ref} (branched from session {session}" in listed.stdout
    assert "none yet: the session has no run" in listed.stdout
    as_json = json.loads(maka(["checkpoints", new, "--json"], src.data, env=src.env).stdout)
    assert as_json["runs"] == [] and as_json["branchedFrom"]["checkpointRef"] == ref

    src.record.unlink()
    src.run("what now?", new)
    [request] = src.requests()
    texts = [json.dumps(item) for item in request["history"]]
    joined = "\n".join(texts)
    assert "write the notes" in joined and "Notes written." in joined
    assert "delete them" not in joined and "rm a.txt" not in joined
    assert "what now?" in texts[-1]
    assert request["unpairedToolCalls"] == []
    # The new session's turn ran in the copy.
    new_runs = [h for h, _ in committed_runs(src.data) if h.session_id == new]
    assert [h.cwd for h in new_runs] == [str(copy.resolve())]

    sessions = json.loads(maka(["sessions", "--json"], src.data).stdout)["sessions"]
    row = next(r for r in sessions if r["sessionId"] == new)
    assert row["branchedFrom"]["sourceSessionId"] == session
    source_row = next(r for r in sessions if r["sessionId"] == session)
    assert source_row["branches"] == [
        {"sessionId": new, "boundaryEventId": before_delete["eventId"]}
    ]


def test_a_branched_session_branches_again(tmp_path: Path) -> None:
    src = Source(tmp_path)
    src.run("write the notes")
    src.run("delete them", src.session)
    first = _ending_of_first_run(src.branch(src.session)["boundaries"])
    one = src.branch(src.session, "--at", first["eventId"], "--to", str(tmp_path / "one"))
    src.run("what now?", one["sessionId"])

    listing = src.branch(one["sessionId"])["boundaries"]
    ending = _ending_of_first_run(listing)  # the end of the branch's own first turn
    assert ending["snapshotKept"]
    two = src.branch(one["sessionId"], "--at", ending["eventId"], "--to", str(tmp_path / "two"))
    assert two["branchedFrom"]["sourceSessionId"] == one["sessionId"]
    assert (tmp_path / "two" / "a.txt").read_text() == "alpha\n"
    # Titled as the second branch, not "... (branch) (branch)".
    assert one["title"].endswith(" (branch)"), one
    assert two["title"] == one["title"].removesuffix(" (branch)") + " (branch 2)", two

    src.record.unlink()
    src.run("and then?", two["sessionId"])
    [request] = src.requests()
    joined = "\n".join(json.dumps(item) for item in request["history"])
    for said in ("write the notes", "Notes written.", "what now?", "Branch reply.", "and then?"):
        assert said in joined
    assert "delete them" not in joined

    # Its timeline holds only its own runs, and says whose history comes before them.
    shown = maka(["timeline", two["sessionId"]], src.data, env=src.env)
    assert shown.returncode == 0, shown.stderr
    first_line = shown.stdout.splitlines()[0]
    assert first_line.startswith(f"branched from session {one['sessionId']} at event ")
    assert first_line.endswith(f"(maka timeline {one['sessionId']})"), first_line
    as_json = maka(["timeline", two["sessionId"], "--json"], src.data, env=src.env)
    body = json.loads(as_json.stdout)
    assert body["branchedFrom"]["sourceSessionId"] == one["sessionId"]
    assert body["branchedFrom"]["boundaryEventId"] == ending["eventId"]
    plain = json.loads(maka(["timeline", src.session, "--json"], src.data, env=src.env).stdout)
    assert "branchedFrom" not in plain
    # The source's timeline says where each session was branched from it, under that event.
    assert plain["branches"] == [{"sessionId": one["sessionId"], "afterEvent": first["eventId"]}]
    assert "branches" not in body
    source = maka(["timeline", src.session], src.data, env=src.env).stdout.splitlines()
    mark = f"-- branched here into session {one['sessionId']} (maka timeline {one['sessionId']})"
    [at] = [n for n, line in enumerate(source) if line.strip() == mark]
    assert "run_end " in source[at - 1], source[at - 1 : at + 1]
    middle = maka(["timeline", one["sessionId"]], src.data, env=src.env).stdout
    assert f"-- branched here into session {two['sessionId']}" in middle


def test_bad_points_and_folders_are_refused_and_change_nothing(tmp_path: Path) -> None:
    src = Source(tmp_path)
    src.run("write the notes")
    session = src.session
    before = committed_runs(src.data)
    boundaries = src.branch(session)["boundaries"]

    missing = src.branch(session, "--at", "evt-nope", code=2)
    assert "[branch_event_not_found]" in missing["stderr"]
    # The model's text is not a point to branch from.
    events: list[Any] = committed_runs(src.data)[0][1]
    text_event = next(
        str(e["id"])
        for e in events
        if (e.get("content") or {}).get("kind") == "text" and e["role"] == "model"
    )
    invalid = src.branch(session, "--at", text_event, code=2)
    assert "[branch_boundary_invalid]" in invalid["stderr"]
    for refused in (missing, invalid):
        said = f"; maka branch {session} lists the points to branch from"
        assert said in refused["stderr"], refused
    inside = src.branch(
        session, "--at", boundaries[0]["eventId"], "--to", str(src.work / "sub"), code=2
    )
    assert "[workspace_restore_target_inside]" in inside["stderr"]
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("x")
    full = src.branch(session, "--at", boundaries[0]["eventId"], "--to", str(taken), code=2)
    assert "[workspace_restore_target_not_empty]" in full["stderr"]
    unknown = src.branch("session_nope", code=2)
    assert "[session_not_found]" in unknown["stderr"]
    point = boundaries[0]["eventId"]
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    file_refused = src.branch(session, "--at", point, "--to", str(a_file), code=2)
    assert "is a file, not a folder" in file_refused["stderr"]
    empty = src.branch(session, "--at", point, "--to", "", code=2)  # an unset "$DIR"
    assert "[invalid_argument]" in empty["stderr"]
    # How without where: --to or --current-files without --at once listed the points, rc 0.
    for how in (["--to", str(tmp_path / "there")], ["--current-files"]):
        nowhere = src.branch(session, *how, code=2)
        assert "[usage_invalid]" in nowhere["stderr"] and "no --at EVENT" in nowhere["stderr"]
    assert not (tmp_path / "there").exists()
    # Not in Maka's data folder.
    refusals = [src.branch(session, "--at", point, "--to", str(src.data / "copies" / "x"), code=2)]
    assert "[workspace_restore_target_inside]" in refusals[0]["stderr"], refusals
    assert not (src.data / "copies").exists()
    assert "Traceback" not in "".join(
        r["stderr"]
        for r in (missing, invalid, inside, full, unknown, file_refused, empty, *refusals)
    )
    assert committed_runs(src.data) == before
    sessions = json.loads(maka(["sessions", "--json"], src.data).stdout)["sessions"]
    assert [s["sessionId"] for s in sessions] == [session]


def test_a_place_is_refused_before_anything_is_captured_or_copied(tmp_path: Path) -> None:
    """Where the copy goes is checked first: a refused ``--current-files`` branch once captured
    the folder and left a ref behind, a name too long for the file system printed a traceback,
    and a clone inside another session's repository stopped that session's snapshots."""
    src = Source(tmp_path)
    src.run("write the notes")
    session = src.session
    point = src.branch(session)["boundaries"][0]["eventId"]
    first = tmp_path / "first"
    made = src.branch(session, "--at", point, "--to", str(first))
    assert (first / ".git").is_dir()  # a clone of the source repository

    nested = src.branch(session, "--at", point, "--to", str(first / "nested"), code=2)
    assert "[workspace_restore_target_inside]" in nested["stderr"]
    assert f"the Git repository session {made['sessionId']} works in" in nested["stderr"]
    itself = src.branch(session, "--at", point, "--to", str(src.work), code=2)
    assert f"{src.work} is the source folder" in itself["stderr"]
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("x")
    full = src.branch(session, "--at", point, "--current-files", "--to", str(taken), code=2)
    assert "[workspace_restore_target_not_empty]" in full["stderr"]
    long_name = src.branch(session, "--at", point, "--to", str(tmp_path / ("d" * 300)), code=2)
    under_a_file = tmp_path / "a-file"
    under_a_file.write_text("x")
    beneath = src.branch(session, "--at", point, "--to", str(under_a_file / "sub"), code=2)
    assert f"{under_a_file} is a file, not a folder" in beneath["stderr"]
    assert "[workspace_restore_failed]" in long_name["stderr"]
    assert "File name too long" in long_name["stderr"]
    refs = [
        line
        for store in (src.data / "checkpoints").glob("*.git")
        for line in user_git(store, "for-each-ref", "--format=%(refname)").splitlines()
    ]
    assert not [ref for ref in refs if "/branch-" in ref], refs  # nothing captured for them
    # A folder that holds a nested repository already (its session runs without snapshots,
    # as a home folder's dotfiles repository does): one more stops nothing, so it is allowed.
    user_git(first, "init", "-q", "inner")
    src.run("write the notes", made["sessionId"])
    beside = src.branch(session, "--at", point, "--to", str(first / "nested"))
    assert (first / "nested" / ".git").is_dir(), beside
    src.work.rename(tmp_path / "moved")
    gone = src.branch(session, "--at", point, "--current-files", code=2)
    assert "[branch_snapshot_unavailable]" in gone["stderr"]
    assert "the source's folder, is not there" in gone["stderr"]
    assert "Traceback" not in "".join(r["stderr"] for r in (nested, itself, full, long_name, gone))
    sessions = json.loads(maka(["sessions", "--json"], src.data).stdout)["sessions"]
    assert len(sessions) == 3
    # From its snapshot, with the source's folder gone: what the copy leaves out is said, but
    # not "copy it from" a folder just said not to be there.
    after = tmp_path / "after-move"
    made_after = maka(["branch", session, "--at", point, "--to", str(after)], src.data, env=src.env)
    assert made_after.returncode == 0, made_after.stderr
    assert "the source's folder, is not there" in made_after.stdout, made_after.stdout
    assert "The copy leaves out paths Git ignores" in made_after.stdout, made_after.stdout
    assert "copy any it needs" not in made_after.stdout, made_after.stdout


def test_the_listed_points_line_up_and_show_what_a_message_hides(tmp_path: Path) -> None:
    """``maka branch S`` in a terminal: one column per field whatever the event ids' lengths,
    a long message cut with an ellipsis, and an escape sequence in it shown by name, not sent
    to the terminal (as the TUI's /branch shows it)."""
    src = Source(tmp_path)
    src.run("\x1b[2Jwrite the notes, " + "and a message longer than one column " * 3)
    src.run("delete them", src.session)
    listed = maka(["branch", src.session], src.data, env=src.env)
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "you: <ESC>[2Jwrite the notes, and a" in listed.stdout
    rows = listed.stdout.splitlines()[:-1]
    kinds = {"user_message", "tool_result", "run_ending"}
    assert len(rows) >= 5 and {row.split()[1] for row in rows} == kinds, rows
    starts = {row.index(row.split()[1]) for row in rows}
    assert len(starts) == 1, rows  # every kind starts in the same column
    ends = {row.index("snapshot kept") for row in rows}
    assert len(ends) == 1, rows
    assert any("…  snapshot kept" in row for row in rows), rows


def test_branch_in_the_tui_and_where_the_transcripts_show_it(tmp_path: Path) -> None:
    src = Source(tmp_path)
    src.run("write the notes")
    src.run("delete them", src.session)
    session = src.session
    point = _ending_of_first_run(src.branch(session)["boundaries"])["eventId"]

    listed = maka(["tui", "--session", session], src.data, env=src.env, stdin="/branch\n/quit\n")
    assert listed.returncode == 0, listed.stderr
    assert re.search(rf"{point} +run_ending ", listed.stdout), listed.stdout
    assert "snapshot kept" in listed.stdout

    copy = tmp_path / "tui copy"  # a name with a space, quoted as in a shell
    refusals = f'/branch {point} ""\n/branch {point} "open\n/branch evt-nope\n/branch a b c\n'
    made = maka(
        ["tui", "--session", session],
        src.data,
        env=src.env,
        stdin=f'{refusals}/branch {point} "{copy}"\n/quit\n',
    )
    assert made.returncode == 0, made.stderr
    assert "branch refused [invalid_argument]: the event id or the folder name is empty" in (
        made.stdout
    )
    assert not (src.work / '""').exists() and not Path('""').exists()
    assert made.stdout.count("usage: /branch [EVENT [DIR] [--current-files]]") == 2
    assert "a quote is not closed; usage: /branch" in made.stdout
    assert "branch refused [branch_event_not_found]" in made.stdout
    assert "usage: /branch [EVENT [DIR] [--current-files]]" in made.stdout
    [new] = [
        r["sessionId"]
        for r in json.loads(maka(["sessions", "--json"], src.data).stdout)["sessions"]
        if r["sessionId"] != session
    ]
    assert f"branched into session {new} in {copy.resolve()}" in made.stdout
    assert (copy / "a.txt").exists() and not (src.work / "a.txt").exists()
    # The chat goes on in the branch, its header naming the source.
    switched = made.stdout.index(f"maka tui: session {new} in {copy.resolve()}")
    assert made.stdout.index(f"branched into session {new}") < switched
    assert f"this session was branched from session {session}" in made.stdout[switched:]
    assert f"(the source goes on with: maka tui --session {session})" in made.stdout

    # The source's transcript marks the point, after the first turn's answer.
    shown = maka(["tui", "--session", session], src.data, env=src.env, stdin="/transcript\n/quit\n")
    text = shown.stdout
    mark = f"── branched here into session {new}"
    assert text.index("Notes written.") < text.index(mark) < text.index("you> delete them")
    # The new session's header names its source and boundary.
    opened = maka(["tui", "--session", new], src.data, env=src.env, stdin="/quit\n")
    assert f"this session was branched from session {session} at event {point}" in opened.stdout
    listing = maka(["sessions"], src.data).stdout
    assert f"(branch of {session} at {point})" in listing


def test_export_and_import_carry_a_branch_with_its_lineage(tmp_path: Path) -> None:
    src = Source(tmp_path)
    src.run("write the notes")
    src.run("delete them", src.session)
    session = src.session
    point = _ending_of_first_run(src.branch(session)["boundaries"])["eventId"]
    new = src.branch(session, "--at", point, "--to", str(tmp_path / "copy"))["sessionId"]
    src.run("what now?", new)
    files = {}
    for name in (session, new):
        files[name] = tmp_path / f"{name}.jsonl"
        result = maka(["export", name, "-o", str(files[name])], src.data, env=src.env)
        assert result.returncode == 0, result.stderr
    assert '"kind":"maka.branch_start.v1"' in files[new].read_text().splitlines()[1]

    other = tmp_path / "other-data"
    # Without its source the branch would have no history: refused, nothing imported.
    early = maka(["import", str(files[new])], other, env=src.env)
    assert early.returncode != 0 and "[import_branch_source_missing]" in early.stderr
    assert "Traceback" not in early.stderr
    listed = maka(["sessions", "--json"], other)
    assert listed.stdout.strip() == "" or json.loads(listed.stdout)["sessions"] == []
    for name in (session, new):
        result = maka(["import", str(files[name])], other, env=src.env)
        assert result.returncode == 0, result.stderr
    rows = json.loads(maka(["sessions", "--json"], other).stdout)["sessions"]
    row = next(r for r in rows if r["sessionId"] == new)
    assert row["branchedFrom"]["boundaryEventId"] == point
    again = maka(["import", str(files[new])], other, env=src.env)  # an identical file: a no-op
    assert again.returncode == 0, again.stderr

    # The imported branch continues with the same prefix.
    src.record.unlink()
    args = ["run", "--session", new, "--permission-mode", "auto", "and then?"]
    assert maka(args, other, env=src.branch_env).returncode == 0
    [request] = src.requests()
    joined = "\n".join(json.dumps(item) for item in request["history"])
    assert "write the notes" in joined and "what now?" in joined and "delete them" not in joined


def test_a_point_without_a_snapshot_branches_with_the_current_files(tmp_path: Path) -> None:
    src = Source(tmp_path)
    src.run_without_snapshots("write the notes")
    session = src.session
    [point] = [b for b in src.branch(session)["boundaries"] if b["kind"] == "run_ending"]
    assert point["snapshotBound"] is False and point["snapshotKept"] is False
    refused = src.branch(session, "--at", point["eventId"], code=2)
    assert "[branch_snapshot_unavailable]" in refused["stderr"]
    assert f"maka branch {session} --at {point['eventId']} --current-files" in refused["stderr"]
    named = tmp_path / "my copy"
    refused = src.branch(session, "--at", point["eventId"], "--to", str(named), code=2)
    retry = f"--at {point['eventId']} --to '{named}' --current-files"
    assert retry in refused["stderr"], refused["stderr"]
    assert [
        r["sessionId"]
        for r in json.loads(maka(["sessions", "--json"], src.data).stdout)["sessions"]
    ] == [session]

    (src.work / "later.txt").write_text("after the point\n")
    copy = tmp_path / "copy"
    made = src.branch(session, "--at", point["eventId"], "--to", str(copy), "--current-files")
    assert made["branchedFrom"]["currentFiles"] is True
    assert (copy / "later.txt").read_text() == "after the point\n"
    assert (src.work / "later.txt").exists()
    src.record.unlink(missing_ok=True)
    src.run("what now?", made["sessionId"])
    [request] = src.requests()
    joined = "\n".join(json.dumps(item) for item in request["history"])
    assert "no snapshot of the folder was kept for that point" in joined
    assert joined.index("Notes written.") < joined.index("no snapshot") < joined.index("what now?")
    # The capture the copy was made from is named by the branch's fact: kept, not an orphan.
    doctor = maka(["doctor"], src.data, env=src.env)
    assert doctor.returncode == 0, doctor.stdout
    assert "0 orphan refs" in doctor.stdout and "orphan ref:" not in doctor.stdout, doctor.stdout


def test_a_run_without_snapshots_is_not_given_the_next_runs(tmp_path: Path) -> None:
    """A run that took no snapshot (here turned off; a nested repository does the same) has
    no snapshot at its points, even once a later run took one: the user changed the folder
    between the two turns, and a branch there would have held those later changes."""
    src = Source(tmp_path)
    src.run_without_snapshots("write the notes")
    session = src.session
    (src.work / "later.txt").write_text("made by the user between the turns\n")
    src.run("and now?", session)
    points = src.branch(session)["boundaries"]
    first_run = points[0]["runId"]
    assert [p["snapshotBound"] for p in points if p["runId"] == first_run] == [False] * 3
    assert all(p["snapshotBound"] for p in points if p["runId"] != first_run)


def test_a_snapshot_gone_from_the_store_is_said_and_nothing_is_copied(tmp_path: Path) -> None:
    src = Source(tmp_path)
    src.run("write the notes")
    session = src.session
    point = _ending_of_first_run(src.branch(session)["boundaries"])
    assert point["snapshotKept"]
    events: list[Any] = committed_runs(src.data)[0][1]
    [tree] = [
        e["actions"]["workspaceCheckpoint"]["treeId"]
        for e in events
        if "workspaceCheckpoint" in e.get("actions", {})
    ][-1:]
    _remove_object(src.data, tree)

    listed = _ending_of_first_run(src.branch(session)["boundaries"])
    assert listed["snapshotBound"] and not listed["snapshotKept"]
    target = tmp_path / "copy"
    refused = src.branch(session, "--at", point["eventId"], "--to", str(target), code=2)
    assert "[branch_snapshot_unavailable]" in refused["stderr"]
    # The way on keeps the folder the user named (it went to the default folder).
    retry = f"maka branch {session} --at {point['eventId']} --to {target} --current-files"
    assert retry in refused["stderr"], refused["stderr"]
    assert not target.exists()
    rows = json.loads(maka(["sessions", "--json"], src.data).stdout)["sessions"]
    assert [r["sessionId"] for r in rows] == [session]


def test_a_branch_inside_a_turn_stops_before_the_call_that_deleted_files(tmp_path: Path) -> None:
    src = Source(tmp_path)
    one_turn = write_script(tmp_path / "one.json", [[WRITE, DELETE, {"text": "All gone."}]])
    args = ["run", "--cwd", str(src.work), "--permission-mode", "auto", "write then delete"]
    result = maka(args, src.data, env={**src.env, "MAKA_SCRIPT_FILE": str(one_turn)})
    assert result.returncode == 0, result.stderr
    assert not (src.work / "a.txt").exists()
    session = src.session
    boundaries = src.branch(session)["boundaries"]
    assert [b["kind"] for b in boundaries] == [
        "user_message",
        "tool_result",
        "tool_result",
        "run_ending",
    ]
    after_write = boundaries[1]  # the write's result; the bash call comes next
    copy = tmp_path / "copy"
    new = src.branch(session, "--at", after_write["eventId"], "--to", str(copy))["sessionId"]
    assert (copy / "a.txt").read_text() == "alpha\n"
    assert (copy / "notes.txt").read_text() == "kept\n"
    assert not (src.work / "notes.txt").exists()

    src.run("keep them", new)
    [request] = src.requests()[-1:]
    history = request["history"]
    kinds = [item["type"] for item in history]
    assert kinds[-1] == "user" and "keep them" in json.dumps(history[-1])
    joined = json.dumps(history)
    assert '"w1"' in joined and "rm a.txt" not in joined and "All gone." not in joined
    assert request["unpairedToolCalls"] == []


def test_the_folder_a_branch_lives_in_is_not_called_an_abandoned_copy(tmp_path: Path) -> None:
    """The branch's copy is written through the same restore log a resume's restored copy is;
    it is the new session's home, so neither ``maka plan`` nor ``maka doctor`` may call it a
    copy a resume made and did not start in (doctor would invite the user to remove it)."""
    src = Source(tmp_path)
    src.run("write the notes")
    session = src.session
    point = _ending_of_first_run(src.branch(session)["boundaries"])
    copy = tmp_path / "copy"
    new = src.branch(session, "--at", point["eventId"], "--to", str(copy))["sessionId"]
    for args in (["plan", new], ["doctor"]):
        result = maka(args, src.data, env=src.env)
        assert "workspace_restore_abandoned" not in result.stdout + result.stderr, args
    src.run("carry on", new)
    doctor = maka(["doctor"], src.data, env=src.env)
    assert doctor.returncode == 0, doctor.stdout
    assert "workspace_restore_abandoned" not in doctor.stdout


def test_a_branch_moved_before_its_first_turn_can_be_relocated(tmp_path: Path) -> None:
    """A branch has no run until its first turn, so no run recorded its workspace: its
    ``branchStart`` fact names the copy's, and moving the copy first is no dead end. Another
    workspace's folder is still refused."""
    src = Source(tmp_path)
    src.run("write the notes")
    session = src.session
    point = _ending_of_first_run(src.branch(session)["boundaries"])
    copy = tmp_path / "copy"
    new = src.branch(session, "--at", point["eventId"], "--to", str(copy))["sessionId"]
    moved = tmp_path / "moved"
    copy.rename(moved)
    wrong = maka(["sessions", "relocate", new, str(src.work)], src.data, env=src.env)
    assert wrong.returncode != 0 and "[workspace_identity_differs]" in wrong.stderr, wrong
    done = maka(["sessions", "relocate", new, str(moved)], src.data, env=src.env)
    assert done.returncode == 0, done.stderr
    assert f"now uses {moved}" in done.stdout
    src.run("carry on", new)
    [header] = [h for h, _ in committed_runs(src.data) if h.session_id == new]
    assert header.cwd == str(moved)


def test_a_linked_worktrees_branch_is_a_clone_and_says_so(tmp_path: Path) -> None:
    """A session in a ``git worktree`` folder (its ``.git`` a file naming the repository):
    the branch's copy is a clone at that worktree's commit with the snapshot's files on top,
    and ``maka branch`` says what the copy holds."""
    main = tmp_path / "main"
    main.mkdir()
    (main / "a.txt").write_text("alpha\n")
    user_git(main, "init", "-q")
    user_git(main, "add", "a.txt")
    user_git(main, "commit", "-qm", "first")
    work = tmp_path / "work"
    user_git(main, "worktree", "add", "-q", "-b", "feature", str(work))
    (work / "a.txt").write_text("alpha, changed on the feature\n")
    data = tmp_path / "data"
    script = write_script(tmp_path / "source.json", SOURCE)
    env = scripted_env(script, tmp_path / "requests.jsonl", checkpoints=True)
    first = maka(["run", "--cwd", str(work), "--permission-mode", "auto", "write"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    second = maka(["run", "--session", session, "--permission-mode", "auto", "rm"], data, env=env)
    assert second.returncode == 0, second.stderr
    assert not (work / "a.txt").exists()
    listing = json.loads(maka(["branch", session, "--json"], data, env=env).stdout)
    before_delete = _ending_of_first_run(listing["boundaries"])

    copy = tmp_path / "copy"
    at = before_delete["eventId"]
    made = maka(["branch", session, "--at", at, "--to", str(copy)], data, env=env)
    assert made.returncode == 0, made.stderr
    assert "The copy is a clone of your Git repository" in made.stdout
    # What the copy leaves out is said, as the desktop's dialog says it (a .env, say).
    assert "The copy leaves out paths Git ignores" in made.stdout, made.stdout
    assert f"copy any it needs (a .env, say) from {work}." in made.stdout, made.stdout
    assert (copy / "notes.txt").read_text() == "kept\n"
    assert user_git(copy, "log", "--format=%s") == "first\n"
    status = sorted(user_git(copy, "status", "--porcelain").splitlines())
    assert status == [" M a.txt", "?? notes.txt"]
    assert not (work / "notes.txt").exists()


def test_a_branchs_store_keeps_its_start_packed_until_it_has_a_snapshot(tmp_path: Path) -> None:
    """The branch's copy has a store of its own, given the snapshot's objects: retention (a
    gc) keeps them packed while nothing else of the copy's names them, and lets the start go
    once the branch has taken a snapshot of its own."""
    src = Source(tmp_path)
    src.run("write the notes")
    session = src.session
    [point] = [b for b in src.branch(session)["boundaries"] if b["kind"] == "run_ending"]
    copy = tmp_path / "copy"
    made = src.branch(session, "--at", point["eventId"], "--to", str(copy))
    carrier = GitCheckpointStore(src.data)
    target = carrier.git_dir(resolve_workspace_identity(copy).identity)

    def retention() -> None:
        store = open_store(src.data, read_only=True)
        try:
            assert run_retention(store, carrier).errors == []
        finally:
            store.close()

    def start() -> str:
        return user_git(target, "--git-dir", str(target), "for-each-ref", START_REF)

    retention()
    assert start()
    counted = user_git(target, "--git-dir", str(target), "count-objects", "-v")
    assert "count: 0\n" in counted, "kept packed, not one loose object per file"
    src.run("what now?", made["sessionId"])
    retention()
    assert not start()
    assert carrier.refs_in(target)


def test_a_copy_nobody_continues_in_lets_its_start_go_after_a_week(tmp_path: Path) -> None:
    src = Source(tmp_path)
    src.run("write the notes")
    session = src.session
    [point] = [b for b in src.branch(session)["boundaries"] if b["kind"] == "run_ending"]
    copy = tmp_path / "copy"
    src.branch(session, "--at", point["eventId"], "--to", str(copy))
    carrier = GitCheckpointStore(src.data)
    target = carrier.git_dir(resolve_workspace_identity(copy).identity)
    made = carrier.start_made_at(target)
    assert made is not None and abs(made - time.time()) < 60
    store = open_store(src.data, read_only=True)
    try:
        for days, kept in ((6, True), (8, False)):
            later = time.time() + days * 24 * 3600
            assert run_retention(store, carrier, now=later).errors == []
            assert (carrier.start_made_at(target) is not None) is kept
    finally:
        store.close()


def test_beside_a_running_host_the_host_lists_and_branches(tmp_path: Path) -> None:
    """``maka branch`` while ``maka host`` owns the data folder: the host lists the points and
    makes the branch (the window's requests, with its checks); what the command prints is what
    it prints alone, and a refusal keeps its code and exit status."""
    src = Source(tmp_path)
    src.run("write the notes")
    session = src.session
    alone = src.branch(session)
    alone_text = maka(["branch", session], src.data, env=src.env)
    point = _ending_of_first_run(alone["boundaries"])
    copy = tmp_path / "served-copy"
    host = start_main(src.data, src.env, "host").wait_ready()
    try:
        served = src.branch(session)
        served_text = maka(["branch", session], src.data, env=src.env)
        made = src.branch(session, "--at", point["eventId"], "--to", str(copy))
        refused = src.branch(session, "--at", "evt-nope", code=2)
        too_long = src.branch(session, "--at", "e" * 300, code=2)  # more than the host takes
        listed = json.loads(maka(["sessions", "--json"], src.data).stdout)
        assert host.process.poll() is None
    finally:
        host.stop()
    assert served == alone
    assert served_text.stdout == alone_text.stdout and served_text.returncode == 0
    assert made["cwd"] == str(copy) and (copy / "notes.txt").read_text() == "kept\n"
    assert made["branchedFrom"]["sourceSessionId"] == session
    assert made["branchedFrom"]["boundaryEventId"] == point["eventId"]
    assert "[branch_event_not_found]" in refused["stderr"]
    assert "[branch_event_not_found]" in too_long["stderr"], too_long
    assert listed["servedBy"]["host"] == "headless"
    assert {row["sessionId"] for row in listed["sessions"]} == {session, made["sessionId"]}


def test_a_point_before_an_answer_names_the_answer_to_branch_from(tmp_path: Path) -> None:
    """A command killed after it ran (P4), answered later (``maka settle --ran``): the run's
    ending, recorded before the answer, can never be branched from (the call had no outcome
    there). The listing and the refusal name the answer's result, the point to branch from;
    they advised settling the call, which was settled already."""
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    user_git(work, "init", "-q")
    call = {"id": "b1", "name": "bash", "args": {"command": "echo x >> n.txt"}}
    count = {"text": "Counting.", "toolCalls": [call]}
    env = scripted_env(
        write_script(tmp_path / "s.json", [[count, {"text": "Counted."}]]), checkpoints=True
    )
    args = ["run", "--cwd", str(work), "--permission-mode", "auto", "count"]
    assert maka(args, data, env={**env, "MAKA_FAILPOINT": "P4"}).returncode == -9
    session = committed_runs(data)[0][0].session_id
    assert maka(["plan", session], data, env=env).returncode == 3  # repairs the run
    settled = maka(["settle", session, "b1", "--ran"], data, env=env)
    assert settled.returncode == 0, settled.stderr
    listed = json.loads(maka(["branch", session, "--json"], data, env=env).stdout)["boundaries"]
    ending = _ending_of_first_run(listed)
    answer = next(b for b in listed if b["kind"] == "tool_result")
    assert answer["seq"] > ending["seq"] and answer["branchable"], listed
    assert (ending["branchable"], ending.get("settledAt")) == (False, answer["eventId"])
    text = maka(["branch", session], data, env=env).stdout
    assert f"not branchable: a call had no settled outcome yet (see {answer['eventId']})" in text
    refused = maka(["branch", session, "--at", ending["eventId"]], data, env=env)
    assert refused.returncode == 2, refused.stderr
    assert "[branch_boundary_unsettled]" in refused.stderr
    said = f"its outcome was recorded later in the run: branch from {answer['eventId']} instead"
    assert said in refused.stderr, refused.stderr
    made = maka(["branch", session, "--at", answer["eventId"], "--json"], data, env=env)
    assert made.returncode == 0, made.stderr
