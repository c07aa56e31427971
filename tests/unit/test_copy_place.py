"""Where a restored or branched copy goes by default (``runtime/continuation/copy_place.py``):
beside the folder, or beside the Git repository the folder is inside, never inside that
repository's work tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.continuation.branch_service import default_branch_path
from runtime.continuation.copy_place import copy_base
from runtime.continuation.workspace_transition import default_restore_path


def test_a_folder_inside_a_repository_is_copied_beside_the_repository(tmp_path: Path) -> None:
    top = tmp_path / "mono"
    (top / "packages" / "web").mkdir(parents=True)
    (top / ".git").mkdir()
    web = str(top / "packages" / "web")
    assert copy_base(web) == str(tmp_path / "mono-packages-web")
    assert default_restore_path(web) == tmp_path / "mono-packages-web-restored-1"
    (tmp_path / "mono-packages-web-restored-1").mkdir()
    assert default_restore_path(web) == tmp_path / "mono-packages-web-restored-2"
    assert default_branch_path(web) == tmp_path / "mono-packages-web-branch-1"
    # A linked worktree's .git is a file: the same.
    (top / ".git").rmdir()
    (top / ".git").write_text("gitdir: /elsewhere\n")
    assert copy_base(web + "/") == str(tmp_path / "mono-packages-web")


def test_a_repository_or_a_plain_folder_is_copied_beside_itself(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    plain = tmp_path / "plain" / "deeper"
    plain.mkdir(parents=True)
    assert copy_base(str(repo)) == str(repo)
    assert default_restore_path(str(repo)) == tmp_path / "repo-restored-1"
    assert copy_base(str(plain)) == str(plain)
    assert default_branch_path(str(plain)) == tmp_path / "plain" / "deeper-branch-1"


def test_beside_a_repository_that_cannot_be_written_the_copy_stays_beside_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository of the whole home folder: the folder above it is not the user's."""
    home = tmp_path / "home" / "me"
    (home / "projects" / "app").mkdir(parents=True)
    (home / ".git").mkdir()
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if Path(path) == home.parent else real(path, mode)
    )
    app = str(home / "projects" / "app")
    assert copy_base(app) == app
    assert default_restore_path(app) == home / "projects" / "app-restored-1"


def test_a_repository_nested_in_another_is_copied_beside_the_outer_one(tmp_path: Path) -> None:
    """A submodule (or a clone inside a larger checkout) is a work tree inside another: its copy
    beside it would be untracked in the outer repository's ``git status``."""
    outer = tmp_path / "app"
    core = outer / "libs" / "core"
    (core / "src").mkdir(parents=True)
    (outer / ".git").mkdir()
    (core / ".git").write_text("gitdir: ../../.git/modules/core\n")
    assert copy_base(str(core)) == str(tmp_path / "app-libs-core")
    assert default_restore_path(str(core)) == tmp_path / "app-libs-core-restored-1"
    # A package of the submodule: beside the outermost repository too.
    assert copy_base(str(core / "src")) == str(tmp_path / "app-libs-core-src")
    # Three deep: still beside the outermost.
    top = tmp_path / "top"
    (top / ".git").mkdir(parents=True)
    outer.rename(top / "app")
    assert copy_base(str(top / "app" / "libs" / "core")) == str(tmp_path / "top-app-libs-core")


def test_beside_an_outer_repository_that_cannot_be_written_the_inner_place_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project repository in a home folder that is a repository too: beside the project."""
    home = tmp_path / "home" / "me"
    project = home / "code" / "project"
    (project / "pkg").mkdir(parents=True)
    (project / ".git").mkdir()
    (home / ".git").mkdir()
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if Path(path) == home.parent else real(path, mode)
    )
    assert copy_base(str(project)) == str(project)
    assert copy_base(str(project / "pkg")) == str(home / "code" / "project-pkg")


def test_a_repository_of_the_home_folder_is_never_stepped_out_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dotfiles repository at ``~``: a copy beside the home folder would be outside every
    folder the user keeps (for the superuser, at the top of the file system), even when the
    folder above it can be written."""
    home = tmp_path / "home" / "me"
    project = home / "code" / "project"
    (project / "pkg").mkdir(parents=True)
    (home / ".git").mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert os.access(home.parent, os.W_OK)
    assert copy_base(str(project)) == str(project)
    assert copy_base(str(project / "pkg")) == str(project / "pkg")
    (project / ".git").mkdir()
    assert copy_base(str(project / "pkg")) == str(home / "code" / "project-pkg")
    # A repository above the home folder is not stepped out of either.
    (home / ".git").rmdir()
    (tmp_path / "home" / ".git").mkdir()
    assert copy_base(str(home / "notes")) == str(home / "notes")


def test_a_folder_named_near_the_limit_gets_a_copy_place_that_can_be_made(tmp_path: Path) -> None:
    """A folder whose name is near the 255 bytes a name may have: ``<name>-restored-1`` was
    offered by ``maka plan`` and failed at resume with "File name too long"."""
    for name in ("L" * 250, "é" * 120, "ab" * 100 + "x"):
        folder = tmp_path / name
        folder.mkdir()
        for place in (default_restore_path(str(folder)), default_branch_path(str(folder))):
            assert len(os.fsencode(place.name)) <= 255, place.name
            assert place.parent == tmp_path
            place.mkdir()  # it can be made
            assert place.name.startswith(name[:100])
    short = tmp_path / "short"
    short.mkdir()
    assert copy_base(str(short)) == str(short)  # a usual name is kept whole
