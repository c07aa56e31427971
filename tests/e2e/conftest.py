"""Fixtures the end-to-end tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.maka_process import MainProcess


@pytest.fixture
def processes() -> Iterator[list[MainProcess]]:
    """Main processes a test started (it appends them): each is stopped at the end."""
    started: list[MainProcess] = []
    yield started
    for process in started:
        process.stop()
