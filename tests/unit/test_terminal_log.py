"""A warning logged while a terminal command runs is said in the command's form
(``app/terminal_log.py``): ``maka: warning:`` with its further lines indented and no traceback.
Python's last-resort handler printed the bare text (a PostgreSQL ``DETAIL:`` line alone) and a
logged exception's traceback."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from app.terminal_log import terminal_warnings


@pytest.fixture
def maka_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("maka")
    before = list(logger.handlers)
    logger.handlers.clear()
    yield logger
    logger.handlers[:] = before


def test_a_warning_is_said_in_the_command_s_form(
    maka_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal_warnings()
    terminal_warnings()  # once per process: one handler
    assert len(maka_logger.handlers) == 1
    log = logging.getLogger("maka.storage.ledger.postgres_connection")
    log.warning("the server closed the connection\nDETAIL: %s", "the database is shutting down")
    try:
        raise OSError("no route")
    except OSError:
        log.exception("renewing the session leases failed")
    log.info("not said")
    err = capsys.readouterr().err
    assert err == (
        "maka: warning: the server closed the connection\n"
        "  DETAIL: the database is shutting down\n"
        "maka: warning: renewing the session leases failed\n"
    ), err


def test_a_host_s_own_log_is_left_as_it_is(maka_logger: logging.Logger) -> None:
    own = logging.NullHandler()
    maka_logger.addHandler(own)
    terminal_warnings()
    assert maka_logger.handlers == [own]
