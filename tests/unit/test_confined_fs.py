"""A folder swapped for a link between preflight and the tool's run is never followed.

Deterministic companions of the race test (``tests/e2e/test_confinement_race.py``): preflight
sees a real folder ``sub``; before the run it becomes a link to a folder outside holding files of
the same names. ``read_file`` must not return the outside file's content, ``list_dir`` must not
list the outside folder, ``write_file`` / ``edit_file`` must not write there, and no temporary
file may appear there. Also with the path-based fallback used where ``dir_fd`` is missing
(Windows), which re-verifies the final path.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.tools import confined_fs
from runtime.tools.tool_catalog import default_catalog
from runtime.tools.tool_contract import Tool, ToolContext, ToolFailure

IDENTITY = "workspace:v1:0b0e6a8e-4a52-4c1b-9a8f-5a8e5d7f2c11"


@pytest.fixture(params=["dir_fd", "path_fallback"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "path_fallback":
        monkeypatch.setattr(confined_fs, "DIR_FD_SUPPORTED", False)
    return str(request.param)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[ToolContext, Path]:
    root = Path(os.path.realpath(tmp_path / "ws"))
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("inside old\n")
    outside = Path(os.path.realpath(tmp_path / "outside"))
    outside.mkdir()
    (outside / "f.txt").write_text("outside secret old\n")
    ctx = ToolContext(cwd=root, cancel=CancelToken(), workspace_identity=IDENTITY)
    return ctx, outside


def _swap(ctx: ToolContext, outside: Path) -> None:
    shutil.rmtree(ctx.cwd / "sub")
    (ctx.cwd / "sub").symlink_to(outside, target_is_directory=True)


def _tool(name: str) -> Tool[Any]:
    tool = default_catalog().get(name)
    assert tool is not None
    return tool


def _outside_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "outside secret old\n"


def test_read_file_does_not_follow_a_swapped_folder(
    mode: str, layout: tuple[ToolContext, Path]
) -> None:
    ctx, outside = layout
    tool = _tool("read_file")
    prepared = tool.prepare({"path": "sub/f.txt"}, ctx)
    _swap(ctx, outside)
    with pytest.raises(ToolFailure) as failure:
        tool.run(prepared, ctx)
    assert "secret" not in failure.value.message
    _outside_untouched(outside)


def test_list_dir_does_not_follow_a_swapped_folder(
    mode: str, layout: tuple[ToolContext, Path]
) -> None:
    ctx, outside = layout
    tool = _tool("list_dir")
    prepared = tool.prepare({"path": "sub"}, ctx)
    _swap(ctx, outside)
    with pytest.raises(ToolFailure):
        tool.run(prepared, ctx)


@pytest.mark.parametrize(
    "call",
    [
        ("write_file", {"path": "sub/f.txt", "content": "new\n"}),
        ("write_file", {"path": "sub/new.txt", "content": "new\n"}),
        ("edit_file", {"path": "sub/f.txt", "old_string": "old", "new_string": "new"}),
    ],
)
def test_writes_do_not_follow_a_swapped_folder(
    mode: str, layout: tuple[ToolContext, Path], call: tuple[str, dict[str, str]]
) -> None:
    ctx, outside = layout
    name, args = call
    tool = _tool(name)
    prepared = tool.prepare(args, ctx)
    _swap(ctx, outside)
    with pytest.raises(ToolFailure):
        tool.run(prepared, ctx)
    _outside_untouched(outside)


def test_a_write_into_a_folder_moved_meanwhile_says_so(tmp_path: Path) -> None:
    """The folder is renamed after the walk and before the check: the bytes are in the moved
    folder, inside the workspace, and the result does not claim the recorded path."""
    root = Path(os.path.realpath(tmp_path))
    (root / "sub").mkdir()
    with confined_fs.open_parent(root, "sub/f.txt", create=True) as (folder, name):
        (root / "sub").rename(root / "moved")
        temp = confined_fs.write_new_bytes_at(folder, name, b"x", 0o644)
        confined_fs.rename_at(folder, temp, name)
        assert not confined_fs.same_folder(root, "sub", folder)
    assert (root / "moved" / "f.txt").read_bytes() == b"x"
