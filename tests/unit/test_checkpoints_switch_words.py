"""``MAKA_WORKSPACE_CHECKPOINTS``: off, 0, false, no turn snapshots off; on, 1, true, yes (or
nothing) leave them on; any other word leaves them on and says so once (a typo such as ``of``
kept them on without a word)."""

from __future__ import annotations

import logging

import pytest

from storage.checkpoints import checkpoint_store
from storage.checkpoints.checkpoint_store import CHECKPOINTS_ENV, checkpoints_turned_off


@pytest.mark.parametrize(
    ("value", "off"),
    [
        *[("off", True), ("0", True), (" FALSE ", True), ("no", True)],
        *[("", False), ("on", False), ("1", False), ("True", False), ("yes", False)],
    ],
)
def test_the_known_words_say_nothing(
    value: str, off: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert checkpoints_turned_off({CHECKPOINTS_ENV: value}) is off
    assert caplog.records == []


def test_another_word_leaves_snapshots_on_and_says_so_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint_store, "_told_unknown", set())
    with caplog.at_level(logging.WARNING):
        assert checkpoints_turned_off({CHECKPOINTS_ENV: "of"}) is False
        assert checkpoints_turned_off({CHECKPOINTS_ENV: "of"}) is False
    said = [record.getMessage() for record in caplog.records]
    assert said == [
        "MAKA_WORKSPACE_CHECKPOINTS='of' is neither on nor off (on, 1, true, yes / off, 0, "
        "false, no): workspace snapshots stay on"
    ]
