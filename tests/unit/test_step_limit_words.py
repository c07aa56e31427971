"""The step limit's sentence counts its steps in good English."""

from __future__ import annotations

import pytest

from runtime.agent.run_loop import step_limit_message


@pytest.mark.parametrize(("steps", "words"), [(1, "1 model step;"), (2, "2 model steps;")])
def test_the_step_limit_sentence_agrees_with_its_number(steps: int, words: str) -> None:
    assert f"step limit of {words}" in step_limit_message(steps)
