"""Export and import carry the snapshots (docs/design/workspace.md section 4): a real ``maka run``
with checkpoints on, killed by SIGKILL at P8, exported with the real ``maka export`` and imported
into another data directory with ``maka import``; the real ``git`` carries the bundle. There
``maka doctor`` is clean and ``maka resume`` verifies the folder against the carried snapshot.
An export without them imports with a note and resume offers the rebaseline; a snapshots file
that is not the export's own is refused and changes nothing."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_workspace_checkpoints_cli import FLAG, Drill
from tests.helpers.maka_run import committed_runs, maka
from tests.helpers.user_git import user_git

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _export(drill: Drill, out: Path, *extra: str) -> str:
    result = maka(["export", drill.session, "-o", str(out), *extra], drill.data, env=drill.env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _json(args: list[str], data: Path, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    result = maka(args, data, env={**env, **FLAG})
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout.strip(), result.stderr
    body: dict[str, Any] = json.loads(result.stdout)
    return result.returncode, body


def _codes(body: dict[str, Any]) -> list[str]:
    return [d["code"] for d in body["diagnostics"]]


def test_export_import_carries_the_snapshots_and_resume_verifies(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")
    out = tmp_path / "session.jsonl"
    said = _export(drill, out)
    bundle = tmp_path / "session.jsonl.bundle"
    assert bundle.is_file() and f"in {bundle}" in said
    last = json.loads(out.read_bytes().splitlines()[-1])
    assert last["kind"] == "maka.checkpoints.v1" and last["bundle"] == bundle.name
    facts = [
        e["actions"]["workspaceCheckpoint"]
        for _, events in committed_runs(drill.data)
        for e in events
        if "workspaceCheckpoint" in e.get("actions", {})
    ]
    assert [r["ref"] for r in last["refs"]] == [f["checkpointRef"] for f in facts]

    other = tmp_path / "other"
    code, imported = _json(["import", str(out), "--json"], other, drill.env)
    assert code == 0 and imported["checkpointsCarried"] == len(facts), imported
    code, doctor = _json(["doctor", "--json"], other, drill.env)
    assert code == 0 and doctor["ok"] is True, doctor
    assert doctor["workspaceCheckpoints"]["missing"] == []
    assert doctor["workspaceCheckpoints"]["orphans"] == []
    # The exported run was killed (still marked running): so is its copy here, until a plan
    # or the next start repairs it.
    assert [(n["code"], n["sessionId"]) for n in doctor["notes"]] == [
        ("run_awaiting_repair", drill.session)
    ]
    # A second import of the same files is a no-op, snapshots included.
    code, again = _json(["import", str(out), "--json"], other, drill.env)
    assert code == 0 and again["eventsCreated"] == 0, again

    code, planned = _json(["plan", drill.session, "--json"], other, drill.env)
    assert planned["disposition"] == "continue", planned
    assert "workspace_verified" in _codes(planned)
    args = ["resume", drill.session, "--json", "--permission-mode", "auto"]
    code, resumed = _json(args, other, drill.env)
    assert code == 0 and resumed["status"] == "completed", resumed
    assert "workspace_verified" in _codes(resumed)


def test_relative_file_names_carry_the_snapshots_both_ways(tmp_path: Path) -> None:
    """``maka export S -o session.jsonl`` and ``maka import session.jsonl``, as typed in a
    terminal: the snapshots file is written and read beside the export in the current folder
    (Git runs elsewhere, so a relative name once failed with export_write_failed)."""
    drill = Drill(tmp_path)
    drill.run("P8")
    here = tmp_path / "exports"
    here.mkdir()
    args = ["export", drill.session, "-o", "session.jsonl"]
    result = maka(args, drill.data, env=drill.env, cwd=here)
    assert result.returncode == 0, result.stderr
    assert (here / "session.jsonl").is_file() and (here / "session.jsonl.bundle").is_file()
    other = tmp_path / "other"
    result = maka(["import", "session.jsonl", "--json"], other, env=drill.env, cwd=here)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["checkpointsCarried"] >= 1, result.stdout
    _, planned = _json(["plan", drill.session, "--json"], other, drill.env)
    assert planned["disposition"] == "continue" and "workspace_verified" in _codes(planned)


@pytest.mark.parametrize("name", [".hidden", "back\\slash.jsonl"])
def test_an_export_named_with_a_leading_dot_or_a_backslash_carries_its_snapshots(
    tmp_path: Path, name: str
) -> None:
    """Export writes the snapshots file beside any file name it accepts; import read the
    names ``.hidden.bundle`` and ``back\\slash.jsonl.bundle`` as no plain file and refused
    the export it had just written (import_checkpoints_invalid)."""
    drill = Drill(tmp_path)
    drill.run("P8")
    here = tmp_path / "exports"
    here.mkdir()
    result = maka(["export", drill.session, "-o", name], drill.data, env=drill.env, cwd=here)
    assert result.returncode == 0, result.stderr
    assert (here / (name + ".bundle")).is_file()
    other = tmp_path / "other"
    result = maka(["import", name, "--json"], other, env=drill.env, cwd=here)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["checkpointsCarried"] >= 1, result.stdout


def test_an_export_without_snapshots_imports_with_a_note_and_offers_the_rebaseline(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")
    out = tmp_path / "session.jsonl"
    _export(drill, out, "--no-checkpoints")
    assert not (tmp_path / "session.jsonl.bundle").exists()
    assert b"maka.checkpoints.v1" not in out.read_bytes()

    other = tmp_path / "other"
    code, imported = _json(["import", str(out), "--json"], other, drill.env)
    assert code == 0 and imported["checkpointsCarried"] == 0, imported
    code, doctor = _json(["doctor", "--json"], other, drill.env)
    assert code == 0 and doctor["ok"] is True, doctor
    [note] = [n for n in doctor["notes"] if n["code"] != "run_awaiting_repair"]
    assert note["code"] == "workspace_checkpoints_not_carried"
    assert note["sessionId"] == drill.session
    # what a resume does now: compare by the tree first (the rebaseline only when it changed)
    assert "compares the folder with the tree they recorded" in note["message"], note
    human = maka(["doctor"], other, env=drill.env)
    assert human.returncode == 0 and "note [workspace_checkpoints_not_carried]" in human.stdout
    # ``maka checkpoints`` says why they are not here, not that they were lost.
    listed = maka(["checkpoints", drill.session], other, env=drill.env)
    assert listed.returncode == 0, listed.stderr
    assert "MISSING" not in listed.stdout, listed.stdout
    assert "not here (not carried by the import)" in listed.stdout
    assert "imported without its snapshots" in listed.stdout
    code, document = _json(["checkpoints", drill.session, "--json"], other, drill.env)
    assert document["importedWithoutSnapshots"] is True, document
    # Exported again from there: the snapshots are said to be left behind by the import, not
    # damaged.
    again = maka(
        ["export", drill.session, "-o", str(tmp_path / "again.jsonl")], other, env=drill.env
    )
    assert again.returncode == 0, again.stderr
    assert "(its import did not bring them); the export carries none" in again.stderr
    assert "damaged" not in again.stderr

    # The folder as it was: its tree is the one the ledger recorded, so the plan continues
    # without the snapshot (compared by the tree); changed, only the rebaseline goes on.
    code, planned = _json(["plan", drill.session, "--json"], other, drill.env)
    assert planned["disposition"] == "continue", planned
    [verified] = [d for d in planned["diagnostics"] if d["code"] == "workspace_verified"]
    assert verified["detail"]["comparedBy"] == "treeId"
    (drill.work / "a.txt").write_text("changed after the export\n")
    code, planned = _json(["plan", drill.session, "--json"], other, drill.env)
    assert planned["rejectionReasons"] == ["workspace_checkpoint_missing"], planned
    assert "rebaseline" in planned["workspaceOptions"]
    args = ["resume", drill.session, "--json", "--permission-mode", "auto", "--rebaseline"]
    code, resumed = _json(args, other, drill.env)
    assert code == 0 and resumed["status"] == "completed", resumed


def test_a_snapshots_file_not_the_exports_own_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    drill = Drill(tmp_path)
    drill.run("P8")
    out = tmp_path / "session.jsonl"
    _export(drill, out)
    bundle = tmp_path / "session.jsonl.bundle"
    original = bundle.read_bytes()
    data = bytearray(original)
    data[-30] ^= 0x01
    bundle.write_bytes(bytes(data))

    other = tmp_path / "other"
    refused = maka(["import", str(out)], other, env=drill.env)
    assert refused.returncode == 2, refused.stderr
    assert "import_checkpoints_invalid" in refused.stderr
    assert "Traceback" not in refused.stderr
    # The refusal names the way on without them: it offered none.
    assert "nothing was imported" in refused.stderr, refused.stderr
    assert "run the import again with --no-checkpoints" in refused.stderr, refused.stderr
    assert not other.exists()

    bundle.unlink()
    missing = maka(["import", str(out)], other, env=drill.env)
    assert missing.returncode == 2 and "import_checkpoints_missing" in missing.stderr
    assert "(nor is" not in missing.stderr, "the file it names is named once"
    assert missing.stderr.count(bundle.name) == 1, missing.stderr
    assert not other.exists()

    # The export's own snapshots file, but its record rewritten to name a ref the ledger does
    # not record: refused by what the ledger records.
    bundle.write_bytes(original)
    lines = out.read_bytes().splitlines()
    record = json.loads(lines[-1])
    record["refs"] = record["refs"][:1]
    record["refs"][0]["ref"] = record["refs"][0]["ref"] + "-elsewhere"
    out.write_bytes(b"\n".join([*lines[:-1], json.dumps(record).encode()]) + b"\n")
    forged = maka(["import", str(out)], other, env=drill.env)
    assert forged.returncode == 2 and "import_checkpoints_invalid" in forged.stderr
    assert forged.stderr.count("--no-checkpoints") == 1, forged.stderr
    assert not other.exists()

    # The ledger alone can still be imported on purpose.
    alone = maka(["import", str(out), "--no-checkpoints"], other, env=drill.env)
    assert alone.returncode == 0, alone.stderr


def test_a_damaged_snapshot_is_left_out_so_the_export_still_imports(tmp_path: Path) -> None:
    """A blob whose stored bytes no longer hash to its name (damage in the data folder): the
    export re-hashes what it carries, leaves that snapshot out and says so, and the file
    imports elsewhere with the snapshots that are sound. Before, the export said it carried
    them all and no import could unpack its bundle."""
    drill = Drill(tmp_path)
    drill.run("P8")  # two snapshots: before the command, and after it wrote count.txt
    [store] = (drill.data / "checkpoints").glob("*.git")
    blob = user_git(drill.work, "hash-object", "count.txt").strip()
    loose = store / "objects" / blob[:2] / blob[2:]
    assert loose.is_file()
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"blob 2\x00y\n"))  # other bytes under the same name

    out = tmp_path / "session.jsonl"
    result = maka(["export", drill.session, "-o", str(out)], drill.data, env=drill.env)
    assert result.returncode == 0, result.stderr
    assert "1 of the session's snapshots of its folder are missing or damaged" in result.stderr
    last = json.loads(out.read_bytes().splitlines()[-1])
    assert len(last["refs"]) == 1
    code, imported = _json(["import", str(out), "--json"], tmp_path / "other", drill.env)
    assert code == 0 and imported["checkpointsCarried"] == 1, imported
    # The one left out is expected to be missing where it was imported: noted, not a problem
    # (the doctor failed on it while a file carrying none was only a note).
    code, checked = _json(["doctor", "--json"], tmp_path / "other", drill.env)
    assert code == 0, checked
    assert not [p for p in checked["problems"] if p["code"] == "workspace_checkpoint_missing"]
    [note] = [n for n in checked["notes"] if n["code"] == "workspace_checkpoints_not_carried"]
    assert "imported without 1 of its snapshots" in note["message"], note
    again = maka(["import", str(out)], tmp_path / "third", env=drill.env)
    assert "with 1 snapshots of its folder; the file did not hold the other 1" in again.stdout


def test_an_export_renamed_with_its_snapshots_file_still_carries_them(tmp_path: Path) -> None:
    """``x.jsonl`` and ``x.jsonl.bundle`` renamed together to ``y.*`` (as a user tidies a
    folder): the import takes ``y.jsonl.bundle``, whose bytes are the recorded ones."""
    drill = Drill(tmp_path)
    drill.run("P8")
    _export(drill, tmp_path / "x.jsonl")
    (tmp_path / "x.jsonl").rename(tmp_path / "y.jsonl")
    (tmp_path / "x.jsonl.bundle").rename(tmp_path / "y.jsonl.bundle")
    code, imported = _json(
        ["import", str(tmp_path / "y.jsonl"), "--json"], tmp_path / "o", drill.env
    )
    assert code == 0 and imported["checkpointsCarried"] == 2, imported
    # Another file under that name is still refused: its bytes are not the recorded ones.
    (tmp_path / "y.jsonl.bundle").write_bytes(b"not the snapshots")
    refused = maka(["import", str(tmp_path / "y.jsonl")], tmp_path / "o2", env=drill.env)
    assert refused.returncode == 2 and "[import_checkpoints_invalid]" in refused.stderr
