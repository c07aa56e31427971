"""A terminal command's wait at its end for its snapshot store's absorption
(app/commands/cli_session_host.py): silent when the copy is done within a second, a note when
it takes longer, and a second note when the command stops waiting before it is done, so the
user is not left believing the store is self-contained."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.commands.cli_session_host import ABSORB_WAIT_S, _let_absorption_finish
from storage.checkpoints.checkpoint_store import GitCheckpointStore


class _Store(GitCheckpointStore):
    def __init__(self, root: Path, answers: list[bool]) -> None:
        super().__init__(root)
        self.answers = answers
        self.waits: list[float | None] = []

    def wait_absorbing(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return self.answers.pop(0)


@pytest.mark.parametrize(
    ("answers", "notes", "waits"),
    [
        ([True], 0, [1.0]),
        ([False, True], 1, [1.0, ABSORB_WAIT_S]),
        ([False, False], 2, [1.0, ABSORB_WAIT_S]),
    ],
)
def test_the_wait_says_what_it_is_doing_and_when_it_gives_up(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    answers: list[bool],
    notes: int,
    waits: list[float],
) -> None:
    store = _Store(tmp_path / "data", answers)
    _let_absorption_finish(store)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == notes and store.waits == waits
    if notes == 2:
        assert err[1].startswith(f"maka: stopped waiting for that copy after {ABSORB_WAIT_S:.0f} s")
        assert "next session in this folder goes on with it" in err[1]


def test_a_carrier_that_is_not_a_git_store_is_not_waited_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _let_absorption_finish(object())
    assert capsys.readouterr().err == ""
