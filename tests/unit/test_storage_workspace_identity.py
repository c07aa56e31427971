"""The workspace identity marker: created once, atomically, 0600, never replaced when invalid;
kept in a self-ignoring ``.maka`` folder, and a legacy ``.maka-workspace.json`` still recognised
(and moved into ``.maka`` without ever losing or replacing an identity)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.ledger.codes import WorkspaceMarkerCode
from storage.sessions.workspace_identity import (
    LEGACY_MARKER_NAME,
    MARKER_DIR,
    MARKER_NAME,
    WorkspaceMarkerError,
    marker_bytes,
    read_workspace_identity,
    resolve_workspace_identity,
)
from tests.helpers.user_git import user_git

REPO = Path(__file__).resolve().parents[2]


def test_first_resolution_creates_the_marker(tmp_path: Path) -> None:
    identity = resolve_workspace_identity(tmp_path)
    marker = tmp_path / MARKER_NAME
    value = json.loads(marker.read_bytes())
    assert set(value) == {"version", "workspaceId", "createdAt"}
    assert value["version"] == 1
    assert identity.identity == f"workspace:v1:{value['workspaceId']}"
    assert identity.realpath == tmp_path.resolve()
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600
    assert marker.read_bytes().endswith(b"\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == [MARKER_DIR]  # no temp left
    folder = tmp_path / MARKER_DIR
    assert sorted(path.name for path in folder.iterdir()) == [".gitignore", "workspace.json"]
    assert (folder / ".gitignore").read_bytes() == b"*\n"  # the folder ignores itself
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_the_marker_is_authoritative_and_stable(tmp_path: Path) -> None:
    first = resolve_workspace_identity(tmp_path)
    data = (tmp_path / MARKER_NAME).read_bytes()
    second = resolve_workspace_identity(tmp_path)
    assert second == first
    assert (tmp_path / MARKER_NAME).read_bytes() == data
    assert read_workspace_identity(tmp_path) == first


def test_identity_follows_the_folder_not_the_path(tmp_path: Path) -> None:
    original = tmp_path / "project"
    original.mkdir()
    identity = resolve_workspace_identity(original).identity
    moved = tmp_path / "renamed"
    original.rename(moved)
    resolved = resolve_workspace_identity(moved)
    assert resolved.identity == identity
    assert resolved.realpath == moved.resolve()
    link = tmp_path / "link"
    link.symlink_to(moved)
    assert resolve_workspace_identity(link).realpath == moved.resolve()


def test_reading_never_creates(tmp_path: Path) -> None:
    assert read_workspace_identity(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"{not json", WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID),
        (b'{"version":2,"workspaceId":"0f8fad5b-d9cb-469f-a165-70867728950e","createdAt":1}',
         WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID),
        (b'{"version":1,"workspaceId":"not-a-uuid","createdAt":1}',
         WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID),
        (b'{"version":1,"workspaceId":"0f8fad5b-d9cb-469f-a165-70867728950e"}',
         WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID),
        (b'{"version":1,"workspaceId":"0f8fad5b-d9cb-469f-a165-70867728950e","createdAt":1,'
         b'"extra":true}', WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID),
        (b'{"version":true,"workspaceId":"0f8fad5b-d9cb-469f-a165-70867728950e","createdAt":1}',
         WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID),
        (b"[1]", WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID),
        (b" " * 5000, WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID),
        (b"\xff\xfe", WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID),
    ],
)  # fmt: skip
@pytest.mark.parametrize("name", [MARKER_NAME, LEGACY_MARKER_NAME])
def test_an_invalid_marker_is_an_error_and_is_never_replaced(
    tmp_path: Path, content: bytes, code: WorkspaceMarkerCode, name: str
) -> None:
    marker = tmp_path / name
    marker.parent.mkdir(exist_ok=True)
    marker.write_bytes(content)
    for resolve in (resolve_workspace_identity, read_workspace_identity):
        with pytest.raises(WorkspaceMarkerError) as error:
            resolve(tmp_path)
        assert error.value.code is code
        # ... and says what the user can do about it
        assert "put it back as it was, or remove it" in error.value.message
    assert marker.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == [Path(name).parts[0]]


@pytest.mark.parametrize("name", [MARKER_NAME, LEGACY_MARKER_NAME])
def test_a_symlinked_marker_is_refused(tmp_path: Path, name: str) -> None:
    real = tmp_path / "elsewhere.json"
    real.write_text(
        '{"version":1,"workspaceId":"0f8fad5b-d9cb-469f-a165-70867728950e","createdAt":1}'
    )
    work = tmp_path / "work"
    (work / name).parent.mkdir(parents=True)
    (work / name).symlink_to(real)
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(work)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_SYMLINK
    dangling = tmp_path / "sub"
    (dangling / name).parent.mkdir(parents=True)
    (dangling / name).symlink_to(tmp_path / "missing")
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(dangling)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_SYMLINK
    assert (dangling / name).is_symlink()


@pytest.mark.parametrize("name", [MARKER_NAME, LEGACY_MARKER_NAME])
def test_a_directory_in_place_of_the_marker_is_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / name).mkdir(parents=True)
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(tmp_path)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_NOT_FILE
    assert (tmp_path / name).is_dir()


def test_a_maka_that_is_a_link_is_never_followed(tmp_path: Path) -> None:
    """A ``.maka`` pointing elsewhere, even at a valid marker, names no identity and is never
    written through."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resolve_workspace_identity(elsewhere)
    work = tmp_path / "work"
    work.mkdir()
    (work / MARKER_DIR).symlink_to(elsewhere / MARKER_DIR)
    assert read_workspace_identity(work) is None
    before = (elsewhere / MARKER_NAME).read_bytes()
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(work)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_SYMLINK
    assert (elsewhere / MARKER_NAME).read_bytes() == before
    assert sorted(p.name for p in work.iterdir()) == [MARKER_DIR]


def test_a_maka_file_of_the_users_is_never_touched(tmp_path: Path) -> None:
    (tmp_path / MARKER_DIR).write_text("mine")
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(tmp_path)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_NOT_FILE
    assert (tmp_path / MARKER_DIR).read_text() == "mine"
    # With a legacy marker the folder keeps its identity there.
    legacy = marker_bytes("0f8fad5b-d9cb-469f-a165-70867728950e", 1)
    (tmp_path / LEGACY_MARKER_NAME).write_bytes(legacy)
    found = resolve_workspace_identity(tmp_path)
    assert found.workspace_id == "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert (tmp_path / LEGACY_MARKER_NAME).read_bytes() == legacy
    assert (tmp_path / MARKER_DIR).read_text() == "mine"


def test_a_missing_folder_or_a_file_is_not_a_workspace(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(tmp_path / "missing")
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_NOT_FOUND
    plain = tmp_path / "file.txt"
    plain.write_text("x")
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(plain)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_NOT_FOUND


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_an_unwritable_folder_fails_without_leaving_anything(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(WorkspaceMarkerError) as error:
            resolve_workspace_identity(folder)
        assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


def test_a_failed_write_leaves_no_marker_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_fsync(handle: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("storage.sessions.workspace_identity.os.fsync", broken_fsync)
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(tmp_path)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_WRITE_FAILED
    assert list(tmp_path.iterdir()) == []


def test_concurrent_creators_converge_on_one_identity(tmp_path: Path) -> None:
    """Four real processes race to create the marker: one wins, all report its identity."""
    script = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from storage.sessions.workspace_identity import resolve_workspace_identity
        start = Path(sys.argv[2])
        while not start.exists():
            time.sleep(0.001)
        print(resolve_workspace_identity(Path(sys.argv[1])).identity)
        """
    )
    start = tmp_path / "start"
    folder = tmp_path / "shared"
    folder.mkdir()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(folder), str(start)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    start.write_text("go")
    identities = {child.communicate(timeout=60)[0].strip() for child in children}
    assert all(child.returncode == 0 for child in children)
    assert len(identities) == 1
    assert sorted(path.name for path in folder.iterdir()) == [MARKER_DIR]
    inside = sorted(path.name for path in (folder / MARKER_DIR).iterdir())
    assert inside == [".gitignore", "workspace.json"]


LEGACY_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"
OTHER_ID = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"


def test_a_legacy_marker_is_read_without_being_moved(tmp_path: Path) -> None:
    data = marker_bytes(LEGACY_ID, 7)
    (tmp_path / LEGACY_MARKER_NAME).write_bytes(data)
    found = read_workspace_identity(tmp_path)
    assert found is not None and found.identity == f"workspace:v1:{LEGACY_ID}"
    assert found.created_at == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == [LEGACY_MARKER_NAME]  # read only


def test_resolving_moves_a_legacy_marker_into_maka(tmp_path: Path) -> None:
    (tmp_path / LEGACY_MARKER_NAME).write_bytes(marker_bytes(LEGACY_ID, 7))
    resolved = resolve_workspace_identity(tmp_path)
    assert resolved.identity == f"workspace:v1:{LEGACY_ID}" and resolved.created_at == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER_DIR]
    assert (tmp_path / MARKER_NAME).read_bytes() == marker_bytes(LEGACY_ID, 7)
    assert stat.S_IMODE((tmp_path / MARKER_NAME).stat().st_mode) == 0o600
    assert (tmp_path / MARKER_DIR / ".gitignore").read_bytes() == b"*\n"
    assert resolve_workspace_identity(tmp_path) == resolved
    assert read_workspace_identity(tmp_path) == resolved


def test_a_migration_that_cannot_write_keeps_the_legacy_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = marker_bytes(LEGACY_ID, 7)
    (tmp_path / LEGACY_MARKER_NAME).write_bytes(data)

    def read_only(path: object, mode: int = 0o777) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("storage.sessions.workspace_identity.os.mkdir", read_only)
    assert resolve_workspace_identity(tmp_path).identity == f"workspace:v1:{LEGACY_ID}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [LEGACY_MARKER_NAME]
    assert (tmp_path / LEGACY_MARKER_NAME).read_bytes() == data


def test_a_migration_cut_short_is_finished(tmp_path: Path) -> None:
    """Both markers naming the same workspace (a crash between writing the new one and
    removing the old one): the identity holds and the legacy file goes."""
    resolve_workspace_identity(tmp_path)
    value = json.loads((tmp_path / MARKER_NAME).read_bytes())
    (tmp_path / LEGACY_MARKER_NAME).write_bytes(marker_bytes(value["workspaceId"], 1))
    assert read_workspace_identity(tmp_path) is not None
    assert resolve_workspace_identity(tmp_path).workspace_id == value["workspaceId"]
    assert not (tmp_path / LEGACY_MARKER_NAME).exists()


def test_markers_that_disagree_are_an_error_and_both_stay(tmp_path: Path) -> None:
    (tmp_path / MARKER_DIR).mkdir()
    (tmp_path / MARKER_NAME).write_bytes(marker_bytes(LEGACY_ID, 1))
    (tmp_path / LEGACY_MARKER_NAME).write_bytes(marker_bytes(OTHER_ID, 1))
    for resolve in (resolve_workspace_identity, read_workspace_identity):
        with pytest.raises(WorkspaceMarkerError) as error:
            resolve(tmp_path)
        assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKERS_DISAGREE
        assert LEGACY_MARKER_NAME in error.value.message
    assert (tmp_path / MARKER_NAME).read_bytes() == marker_bytes(LEGACY_ID, 1)
    assert (tmp_path / LEGACY_MARKER_NAME).read_bytes() == marker_bytes(OTHER_ID, 1)


def test_a_damaged_legacy_marker_beside_a_valid_one_is_an_error(tmp_path: Path) -> None:
    resolve_workspace_identity(tmp_path)
    (tmp_path / LEGACY_MARKER_NAME).write_text("{not json")
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(tmp_path)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_INVALID
    assert (tmp_path / LEGACY_MARKER_NAME).read_text() == "{not json"


def test_the_ignore_file_is_put_back_but_never_rewritten(tmp_path: Path) -> None:
    first = resolve_workspace_identity(tmp_path)
    ignore = tmp_path / MARKER_DIR / ".gitignore"
    ignore.unlink()
    assert resolve_workspace_identity(tmp_path) == first
    assert ignore.read_bytes() == b"*\n"
    ignore.write_text("# mine\n*.json\n")
    assert resolve_workspace_identity(tmp_path) == first
    assert ignore.read_text() == "# mine\n*.json\n"


def test_the_marker_stays_out_of_the_users_git_status(tmp_path: Path) -> None:
    user_git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    resolve_workspace_identity(tmp_path)
    assert user_git(tmp_path, "status", "--porcelain", "--untracked-files=all") == "?? a.txt\n"
    user_git(tmp_path, "add", "-A")
    assert user_git(tmp_path, "diff", "--cached", "--name-only") == "a.txt\n"
