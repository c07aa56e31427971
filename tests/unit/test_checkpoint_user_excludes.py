"""The user's own excludes file (``core.excludesFile``, by default ``~/.config/git/ignore``)
applies to the snapshots of a folder in a Git repository, as ``git status`` applies it
(docs/design/workspace.md section 1): which file it is and what a value in a configuration file
reads as are checked against the real ``git``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from storage.checkpoints.checkpoint_enclosing import _core_excludes_file, excludes_file, user_rules
from tests.unit.test_checkpoint_enclosing import _monorepo, _snapshot_names

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

_CONFIG_VARS = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")


def _users_git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The user's ``git`` with the environment the test set (``HOME`` and the like)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _CONFIG_VARS}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home of the test's own: no system configuration, no ``XDG_CONFIG_HOME``."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return folder


def _repository(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    assert _users_git(folder, "init", "-q").returncode == 0
    for name in ("main.py", "notes.swp", ".idea/workspace.xml", "sub/.idea/x", "sub/keep.swp"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(name)
    return folder


def _git_ignores(folder: Path, name: str) -> bool:
    return _users_git(folder, "check-ignore", "-q", "--no-index", name).returncode == 0


def test_the_default_excludes_file_keeps_editor_files_out(tmp_path: Path, home: Path) -> None:
    folder = _repository(tmp_path)
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("*.swp\n!keep.swp\n/.idea/\n")
    names = sorted(_snapshot_names(tmp_path, folder))
    assert names == [".maka/permissions", "main.py", "sub/.idea/x", "sub/keep.swp"]
    for name in ("notes.swp", ".idea/workspace.xml", "sub/.idea/x", "sub/keep.swp", "main.py"):
        assert _git_ignores(folder, name) == (f"{name}" not in names), name


def test_the_file_the_configuration_names_wins_and_a_repository_setting_over_the_users(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _repository(tmp_path)
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("*.py\n")  # not read: another is named
    (home / "mine.ignore").write_text("*.swp\n")
    (home / ".gitconfig").write_text(
        '[user]\n\tname = u\n[core]\n\texcludesFile = "~/mine.ignore"\n'
    )
    assert excludes_file(folder) == home / "mine.ignore"
    assert "main.py" in _snapshot_names(tmp_path, folder)
    assert _git_ignores(folder, "notes.swp") and not _git_ignores(folder, "main.py")
    # The repository's own setting comes last; a relative path is the work tree's.
    (folder / "repo.ignore").write_text("main.py\n")
    with open(folder / ".git" / "config", "a") as config:
        config.write("[core]\n    excludesfile = repo.ignore ; the repository's\n")
    assert excludes_file(folder) == folder / "repo.ignore"
    assert _git_ignores(folder, "main.py") and not _git_ignores(folder, "notes.swp")
    # GIT_CONFIG_GLOBAL stands for the user's files, as Git reads it.
    named = tmp_path / "global.config"
    named.write_text("[core]\nexcludesFile =\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(named))
    (folder / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    assert excludes_file(folder) is None
    assert user_rules(folder) == ""


@pytest.mark.parametrize("where", ["include", "includeIf", "includeIf-elsewhere"])
def test_an_excludes_file_named_in_an_included_file_is_read_as_git_reads_it(
    tmp_path: Path, home: Path, where: str
) -> None:
    """A work/personal split (``includeIf "gitdir:~/projects/"``) or a plain ``include``: the
    setting was read from the top file only, so an editor's swap file stayed in the snapshots
    though ``git status`` ignores it."""
    work = tmp_path / "work"
    work.mkdir()
    folder = _repository(work)
    (home / "work.cfg").write_text("[core]\n\texcludesFile = ~/work.ignore\n")
    (home / "work.ignore").write_text("*.swp\n")
    condition = {
        "include": "[include]",
        "includeIf": f'[includeIf "gitdir:{work}/"]',
        "includeIf-elsewhere": '[includeIf "gitdir:~/elsewhere/"]',
    }[where]
    (home / ".gitconfig").write_text(f"{condition}\n\tpath = work.cfg\n[user]\n\tname = u\n")
    ignored = _git_ignores(folder, "notes.swp")
    assert ignored == (where != "includeIf-elsewhere")  # what Git itself says
    names = _snapshot_names(tmp_path, folder)
    assert ("notes.swp" not in names) == ignored, names


def test_a_package_of_a_monorepo_reads_the_anchored_rules_from_its_top(
    tmp_path: Path, home: Path
) -> None:
    _top, package = _monorepo(tmp_path)
    (package / "generated").mkdir()
    (package / "generated" / "x.js").write_text("x\n")
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("/packages/app/generated/\n/other/\n")
    assert user_rules(package) == "/generated/\n"
    assert "generated/x.js" not in _snapshot_names(tmp_path, package)


def test_a_folder_in_no_repository_keeps_everything(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "notes.swp").write_text("swap\n")
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("*.swp\n")
    assert user_rules(folder) == ""
    assert "notes.swp" in _snapshot_names(tmp_path, folder)


_VALUE_CHARS = st.sampled_from(list('ab ~/."#;\\\tnt\n'))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(_VALUE_CHARS, max_size=16))
def test_a_value_reads_as_git_reads_it(tmp_path: Path, text: str) -> None:
    config = tmp_path / "value.config"
    config.write_text(f"[core]\n\texcludesFile = {text}\n")
    done = subprocess.run(
        ["git", "config", "--file", str(config), "--get", "core.excludesFile"],
        check=False,
        capture_output=True,
        text=True,
    )
    assume(done.returncode == 0)  # a value Git refuses (an open quote, a bad escape)
    assert _core_excludes_file(config, None) == done.stdout.removesuffix("\n")
