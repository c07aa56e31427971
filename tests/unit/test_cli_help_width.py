"""The command's parsers lay out help and usage exactly as argparse does by default (the width
of ``COLUMNS``, else of the terminal, else 80), without importing ``shutil`` to find it."""

from __future__ import annotations

import argparse

import pytest

from app.cli import UsageParser, terminal_columns

DESCRIPTION = "list sessions; relocate, rename or remove one " * 4


def _fill(
    parser: argparse.ArgumentParser,
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    parser.add_argument("--data-dir", help="data directory (default: MAKA_DATA_DIR or per-user)")
    parser.add_argument("--json", action="store_true", help="print one JSON document " * 5)
    parser.add_argument("session", nargs="?", help="the session to act on")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub = commands.add_parser("relocate", help="move a session to another folder " * 3)
    sub.add_argument("--to", required=True, help="the new folder, which must exist " * 3)
    return parser, sub


@pytest.mark.parametrize("columns", ["30", "60", "81", "200", "0", "-5", "wide", None])
def test_help_is_laid_out_as_argparse_lays_it_out(
    monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    ours, ours_sub = _fill(UsageParser(prog="maka sessions", description=DESCRIPTION))
    theirs, theirs_sub = _fill(
        argparse.ArgumentParser(prog="maka sessions", description=DESCRIPTION)
    )
    assert ours.format_help() == theirs.format_help()
    assert ours.format_usage() == theirs.format_usage()
    assert isinstance(ours_sub, UsageParser)
    assert ours_sub.prog == theirs_sub.prog
    assert ours_sub.format_help() == theirs_sub.format_help()


def test_the_width_is_shutils(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    for columns in ("1", "93", "0", "x"):
        monkeypatch.setenv("COLUMNS", columns)
        assert terminal_columns() == shutil.get_terminal_size().columns
    monkeypatch.delenv("COLUMNS")
    assert terminal_columns() == shutil.get_terminal_size().columns
