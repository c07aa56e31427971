"""Warnings a terminal command's code logs, said in the command's own form.

A terminal command (``maka run``, ``resume``, ``tui``, ``settle``, ...) configures no log file:
the desktop and ``maka host`` do (``<data>/logs/main.log``, warnings on stderr). Without a
handler Python's last-resort one printed a warning bare (a server's ``DETAIL:`` line alone on a
line, during a PostgreSQL outage) and a logged exception with its traceback. Installed by the
commands that own the data folder (``cli_session_host.owned_store``), not at start: ``logging``
imports ``threading``, which the small commands leave out (tests/e2e/test_small_command_imports.py).
"""

from __future__ import annotations

import logging
import sys


class _TerminalWarning(logging.Formatter):
    """``maka: warning: message``, its further lines indented, never a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().splitlines() or [""]
        return "\n".join([f"maka: warning: {lines[0]}", *(f"  {line}" for line in lines[1:])])


def terminal_warnings() -> None:
    """Say the ``maka`` loggers' warnings on stderr in the command's form (once per process;
    nothing when a host configured the log already)."""
    logger = logging.getLogger("maka")
    if logger.handlers:
        return  # (a host's own log, or installed before)
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_TerminalWarning())
    logger.addHandler(handler)
