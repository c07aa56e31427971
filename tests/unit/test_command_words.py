"""``maka_command``: the one wording of a ``maka`` command Maka suggests (docs/design/cli.md,
"Commands Maka suggests"). Without a data folder given on the command line it is ``maka`` and the
words; with one, ``--data-dir`` and the folder, absolute and quoted for a POSIX shell, come right
after ``maka``, so ``shlex.split`` of the suggestion gives the folder back whatever it holds."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cli import main
from runtime.ledger.command_words import maka_command, suggest_data_dir, suggested_data_dir

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _nothing_given() -> Iterator[None]:
    before = suggest_data_dir(None)
    yield
    suggest_data_dir(before)


def test_without_a_folder_given_the_command_is_as_typed() -> None:
    assert maka_command("plan S") == "maka plan S"
    assert maka_command("settle S c1 --ran (or --not-run) [--note TEXT]") == (
        "maka settle S c1 --ran (or --not-run) [--note TEXT]"
    )
    assert maka_command() == "maka"


def test_a_folder_with_spaces_and_quotes_is_quoted_right_after_maka() -> None:
    folder = '/tmp/it\'s my "data" $HOME `x`'
    suggest_data_dir(folder)
    worded = maka_command("resume S --rebaseline")
    assert worded == "maka --data-dir '/tmp/it'\"'\"'s my \"data\" $HOME `x`' resume S --rebaseline"
    assert shlex.split(worded) == ["maka", "--data-dir", folder, "resume", "S", "--rebaseline"]
    assert maka_command() == f"maka --data-dir {shlex.quote(folder)}"


def test_a_plain_folder_is_not_quoted_and_a_relative_one_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    suggest_data_dir("data")
    assert suggested_data_dir() == str(tmp_path / "data")
    assert maka_command("doctor") == f"maka --data-dir {shlex.quote(str(tmp_path / 'data'))} doctor"


def test_suggest_data_dir_returns_the_folder_said_before() -> None:
    assert suggest_data_dir("/a") is None
    assert suggest_data_dir(None) == "/a"
    assert suggested_data_dir() is None


def test_the_command_line_sets_it_for_the_command_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maka --data-dir D ...`` (the option before or after the command) words its suggestions
    with D, absolute, while it runs, and leaves the setting as it found it (a test calling
    ``main`` twice, the desktop's process ending)."""
    seen = _spy_on_ledger(monkeypatch)
    monkeypatch.chdir(tmp_path)
    main(["--data-dir", "a folder", "ledger", "check", "x.jsonl"])
    main(["ledger", "--data-dir", str(tmp_path / "b"), "check", "x.jsonl"])
    main(["ledger", "check", "x.jsonl"])
    assert seen == [str(tmp_path / "a folder"), str(tmp_path / "b"), None]
    assert suggested_data_dir() is None


def _spy_on_ledger(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """``maka ledger``'s run replaced by one that notes the folder suggestions carry."""
    from app.commands import ledger_cmd

    seen: list[str | None] = []

    def run(args: object) -> int:
        del args
        seen.append(suggested_data_dir())
        return 0

    monkeypatch.setattr(ledger_cmd, "run", run)
    return seen


def test_a_folder_from_the_environment_is_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _spy_on_ledger(monkeypatch)
    monkeypatch.setenv("MAKA_DATA_DIR", str(tmp_path / "data"))
    main(["ledger", "check", "x.jsonl"])
    assert seen == [None]


PATH_TEXT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40
)


@given(PATH_TEXT, PATH_TEXT)
def test_splitting_a_suggestion_gives_the_folder_back(name: str, more: str) -> None:
    folder = os.path.join("/", name, more)
    before = suggest_data_dir(folder)
    try:
        worded = maka_command("plan S")
        assert shlex.split(worded) == ["maka", "--data-dir", os.path.abspath(folder), "plan", "S"]
    finally:
        suggest_data_dir(before)


def _windows_argv(line: str) -> list[str]:
    """A command line split as the C runtime splits it on Windows (the rules
    ``CommandLineToArgvW`` documents: backslashes are literal unless before a quote, 2n
    backslashes and a quote are n backslashes and a quote mark toggling quoting)."""
    words: list[str] = []
    word, quoted, started, i = "", False, False, 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            run = len(line[i:]) - len(line[i:].lstrip("\\"))
            if i + run < len(line) and line[i + run] == '"':
                word += "\\" * (run // 2)
                if run % 2:
                    word += '"'
                    i += run + 1
                else:
                    i += run
                started = True
                continue
            word += "\\" * run
            i += run
            started = True
            continue
        if char == '"':
            quoted = not quoted
            started = True
        elif char in " \t" and not quoted:
            if started:
                words.append(word)
            word, started = "", False
        else:
            word += char
            started = True
        i += 1
    if started:
        words.append(word)
    return words


@given(
    st.text(
        alphabet=st.characters(exclude_characters='"\0', exclude_categories=["Cs"]),
        min_size=1,
    )
)
def test_on_windows_the_folder_is_one_word_again(name: str) -> None:
    from runtime.ledger.command_words import shell_quoted

    folder = "C:\\Users\\me\\" + name
    quoted = shell_quoted(folder, windows=True)
    assert _windows_argv(f"maka --data-dir {quoted} plan S") == [
        "maka", "--data-dir", folder, "plan", "S",
    ]  # fmt: skip


def test_on_windows_a_plain_folder_is_bare_and_a_spaced_one_double_quoted() -> None:
    from runtime.ledger.command_words import shell_quoted

    assert shell_quoted("C:\\Users\\me\\maka-data", windows=True) == "C:\\Users\\me\\maka-data"
    assert shell_quoted("C:\\Users\\Jo Ann\\data", windows=True) == '"C:\\Users\\Jo Ann\\data"'
    assert shell_quoted("C:\\", windows=True) == "C:\\"
    assert shell_quoted("C:\\a b\\", windows=True) == '"C:\\a b\\\\"'


def test_a_request_s_wording_overrides_the_process_s_and_is_put_back() -> None:
    """A host answering a terminal words as the terminal would alone, inside the request and
    in work started from it with a copy of its context (the host's turn and query threads)."""
    import contextvars
    import threading

    from runtime.ledger.command_words import wording_for

    suggest_data_dir("/host/data")
    with wording_for(None):
        assert maka_command("plan S") == "maka plan S"
        seen: list[str] = []
        context = contextvars.copy_context()
        worker = threading.Thread(target=context.run, args=(lambda: seen.append(maka_command()),))
        worker.start()
        worker.join()
        assert seen == ["maka"]
    with wording_for("/terminal's data"):
        assert maka_command("plan S") == "maka --data-dir '/terminal'\"'\"'s data' plan S"
    assert maka_command("plan S") == "maka --data-dir /host/data plan S"
