"""The workspace identity marker: created once, atomically, 0600, never replaced when invalid."""

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
from storage.workspace_identity import (
    MARKER_NAME,
    WorkspaceMarkerError,
    read_workspace_identity,
    resolve_workspace_identity,
)

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
    assert sorted(path.name for path in tmp_path.iterdir()) == [MARKER_NAME]  # no temp left


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
def test_an_invalid_marker_is_an_error_and_is_never_replaced(
    tmp_path: Path, content: bytes, code: WorkspaceMarkerCode
) -> None:
    marker = tmp_path / MARKER_NAME
    marker.write_bytes(content)
    for resolve in (resolve_workspace_identity, read_workspace_identity):
        with pytest.raises(WorkspaceMarkerError) as error:
            resolve(tmp_path)
        assert error.value.code is code
    assert marker.read_bytes() == content


def test_a_symlinked_marker_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.json"
    real.write_text(
        '{"version":1,"workspaceId":"0f8fad5b-d9cb-469f-a165-70867728950e","createdAt":1}'
    )
    (tmp_path / MARKER_NAME).symlink_to(real)
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(tmp_path)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_SYMLINK
    dangling = tmp_path / "sub"
    dangling.mkdir()
    (dangling / MARKER_NAME).symlink_to(tmp_path / "missing")
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(dangling)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_SYMLINK
    assert (dangling / MARKER_NAME).is_symlink()


def test_a_directory_in_place_of_the_marker_is_refused(tmp_path: Path) -> None:
    (tmp_path / MARKER_NAME).mkdir()
    with pytest.raises(WorkspaceMarkerError) as error:
        resolve_workspace_identity(tmp_path)
    assert error.value.code is WorkspaceMarkerCode.WORKSPACE_MARKER_NOT_FILE
    assert (tmp_path / MARKER_NAME).is_dir()


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

    monkeypatch.setattr("storage.workspace_identity.os.fsync", broken_fsync)
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
        from storage.workspace_identity import resolve_workspace_identity
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
    assert sorted(path.name for path in folder.iterdir()) == [MARKER_NAME]
