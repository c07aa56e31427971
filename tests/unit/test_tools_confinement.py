"""Workspace confinement: every path trick is refused before anything runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.tools.tool_catalog import default_catalog
from runtime.tools.tool_contract import ToolContext, ToolRefusal, ToolRefusalCode
from runtime.tools.workspace_paths import (
    APP_DIR,
    LEGACY_WORKSPACE_MARKER,
    WORKSPACE_MARKER,
    resolve_workspace_path,
)
from storage.sessions import workspace_identity


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "inner.txt").write_text("inner")
    (tmp_path / "secret.txt").write_text("secret")
    (tmp_path / "outside_dir").mkdir()
    os.symlink(tmp_path / "secret.txt", root / "link_out")
    os.symlink(tmp_path / "outside_dir", root / "dir_out")
    os.symlink(root / "sub" / "inner.txt", root / "link_in")
    os.symlink(root / "link_out", root / "chain_out")
    os.symlink(tmp_path / "nowhere.txt", root / "dangling_out")
    return Path(os.path.realpath(root))


ESCAPES = [
    "../secret.txt",
    "sub/../../secret.txt",
    "./../ws/../secret.txt",
    "/etc/passwd",
    "link_out",
    "chain_out",
    "dir_out/new.txt",
    "dangling_out",
]


@pytest.mark.parametrize("raw", ESCAPES)
def test_escaping_paths_are_refused(workspace: Path, raw: str) -> None:
    with pytest.raises(ToolRefusal) as caught:
        resolve_workspace_path(workspace, raw)
    assert caught.value.code == ToolRefusalCode.PATH_OUTSIDE_WORKSPACE


def test_absolute_path_outside_via_parent_spelling(workspace: Path) -> None:
    with pytest.raises(ToolRefusal):
        resolve_workspace_path(workspace, str(workspace / ".." / "secret.txt"))


@pytest.mark.parametrize("raw", ["", "   ", "a\x00b", 3, None])
def test_invalid_paths_are_refused(workspace: Path, raw: object) -> None:
    with pytest.raises(ToolRefusal) as caught:
        resolve_workspace_path(workspace, raw)
    assert caught.value.code == ToolRefusalCode.PATH_INVALID


@pytest.mark.parametrize(
    ("raw", "relative"),
    [
        ("sub/inner.txt", "sub/inner.txt"),
        ("sub/../new.txt", "new.txt"),
        ("link_in", "sub/inner.txt"),
        (".", "."),
    ],
)
def test_paths_inside_are_accepted_however_spelled(
    workspace: Path, raw: str, relative: str
) -> None:
    assert resolve_workspace_path(workspace, raw).relative == relative
    absolute = str(workspace / raw)
    assert resolve_workspace_path(workspace, absolute).relative == relative


PROTECTED = [
    ".maka/workspace.json",
    ".maka/.gitignore",
    ".maka",
    ".maka/anything/new.txt",
    "sub/../.maka/workspace.json",
    "./.maka//workspace.json",
    ".MAKA/workspace.json",  # the same file on a case-insensitive file system
    "link_maka/workspace.json",  # a link to the folder: the resolved path decides
    ".maka-workspace.json",  # the legacy marker of folders from older versions
    ".Maka-Workspace.JSON",
]


@pytest.mark.parametrize("raw", PROTECTED)
def test_the_marker_and_its_folder_are_protected_from_writes(workspace: Path, raw: str) -> None:
    workspace_identity.resolve_workspace_identity(workspace)
    os.symlink(workspace / ".maka", workspace / "link_maka")
    for spelled in (raw, str(workspace / raw)):
        with pytest.raises(ToolRefusal) as caught:
            resolve_workspace_path(workspace, spelled, for_write=True)
        assert caught.value.code == ToolRefusalCode.PATH_PROTECTED
    assert resolve_workspace_path(workspace, ".maka/workspace.json").relative  # reading is fine
    assert resolve_workspace_path(workspace, ".maka-workspace.json").relative


@pytest.mark.parametrize("raw", ["sub/.maka/x.txt", ".makafile", ".maka-notes.txt", "maka/x"])
def test_names_like_the_apps_own_are_the_users(workspace: Path, raw: str) -> None:
    assert resolve_workspace_path(workspace, raw, for_write=True).relative == raw


def test_the_runtime_protects_the_names_storage_uses() -> None:
    assert APP_DIR == workspace_identity.MARKER_DIR
    assert WORKSPACE_MARKER == workspace_identity.MARKER_NAME
    assert LEGACY_WORKSPACE_MARKER == workspace_identity.LEGACY_MARKER_NAME


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": ".maka/workspace.json", "content": "{}"}),
        ("write_file", {"path": ".maka/.gitignore", "content": ""}),
        ("write_file", {"path": ".maka/workspace.json.tmp", "content": "{}"}),
        ("edit_file", {"path": ".maka/.gitignore", "old_string": "*", "new_string": "x"}),
        ("edit_file", {"path": ".maka/workspace.json", "old_string": "1", "new_string": "2"}),
        ("write_file", {"path": ".maka-workspace.json", "content": "{}"}),
    ],
)
def test_the_models_file_tools_cannot_change_the_marker(
    workspace: Path, tool: str, args: dict[str, object]
) -> None:
    identity = workspace_identity.resolve_workspace_identity(workspace)
    before = {p: p.read_bytes() for p in (workspace / ".maka").iterdir()}
    ctx = ToolContext(cwd=workspace, cancel=CancelToken(), workspace_identity=identity.identity)
    implementation = default_catalog().get(tool)
    assert implementation is not None
    with pytest.raises(ToolRefusal) as caught:
        implementation.prepare(args, ctx)
    assert caught.value.code == ToolRefusalCode.PATH_PROTECTED
    assert {p: p.read_bytes() for p in (workspace / ".maka").iterdir()} == before
    assert not (workspace / ".maka-workspace.json").exists()
    assert workspace_identity.resolve_workspace_identity(workspace) == identity


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../secret.txt"}),
        ("write_file", {"path": "link_out", "content": "x"}),
        ("edit_file", {"path": "chain_out", "old_string": "s", "new_string": "t"}),
        ("list_dir", {"path": "dir_out"}),
        ("glob", {"pattern": "../*.txt"}),
        ("glob", {"pattern": "/etc/*"}),
        ("glob", {"pattern": "*", "path": "dir_out"}),
    ],
)
def test_every_path_tool_refuses_in_prepare(
    workspace: Path, tool: str, args: dict[str, object]
) -> None:
    ctx = ToolContext(cwd=workspace, cancel=CancelToken(), workspace_identity="workspace:v1:x")
    implementation = default_catalog().get(tool)
    assert implementation is not None
    with pytest.raises(ToolRefusal):
        implementation.prepare(args, ctx)
    assert (workspace.parent / "secret.txt").read_text() == "secret"


def test_glob_never_reports_files_reached_through_outside_links(workspace: Path) -> None:
    ctx = ToolContext(cwd=workspace, cancel=CancelToken())
    glob = default_catalog().get("glob")
    assert glob is not None
    output = glob.run(glob.prepare({"pattern": "**/*"}, ctx), ctx)
    matches = output.result["matches"]
    assert "sub/inner.txt" in matches
    assert not any(match.startswith(("link_out", "dir_out", "chain_out")) for match in matches)
