"""``maka ledger plan --json`` plans a long run in two processes (``ledger_plan_parts``): the
text is the serial plan's whether the child's part of the plan is taken, or the tail's events
come over and the whole run is planned here."""

from __future__ import annotations

import marshal
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.commands import ledger_plan_parts
from app.commands.ledger_json import plan_json_text
from app.commands.ledger_plan_parts import plan_json_text_in_parts
from runtime.fastplan import parallel_decode
from runtime.fastplan.plan_parts import facts_from_plain, facts_to_plain, plan_part
from runtime.ledger.event_model import RuntimeEvent
from runtime.recovery.resume_plan import ResumePlan, plan_resume
from tests.helpers.ledger_builders import (
    ALL_ENDINGS,
    ENDINGS,
    MIXED_EDITS,
    SECOND_INVOCATION,
    clean_ledger,
    mixed_ledger,
    model_text,
    to_jsonl,
    tool_turn,
    user_text,
    with_changes,
)

LEDGER = list(clean_ledger(len(ENDINGS) * 12))


@pytest.fixture(autouse=True)
def two_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(parallel_decode, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(parallel_decode, "CHILD_PIECE_LINES", 17)
    yield
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # every child was reaped


@pytest.fixture
def whole_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the whole run was planned in this process."""
    planned: list[int] = []

    def spy(events: list[RuntimeEvent], *args: object, **kwargs: object) -> ResumePlan:
        planned.append(len(events))
        return plan_resume(events, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger_plan_parts, "plan_resume", spy)
    return planned


def _serial(events: list[RuntimeEvent], expected: int | None = None) -> str:
    return plan_json_text(plan_resume(events, expected))


def _kind(item: RuntimeEvent) -> Any:
    content: Any = item.get("content")
    return content["kind"] if content is not None else None


def _file(folder: Path, events: list[RuntimeEvent]) -> Path:
    path = folder / "run.jsonl"
    path.write_bytes(to_jsonl(events))
    return path


@pytest.mark.parametrize("expected", [None, 3, len(LEDGER)])
def test_an_independent_tail_is_planned_by_the_child(
    tmp_path: Path, whole_runs: list[int], expected: int | None
) -> None:
    path = _file(tmp_path, LEDGER)
    assert plan_json_text_in_parts(path, expected) == _serial(LEDGER, expected)
    assert whole_runs == []


def test_a_tail_reusing_a_call_id_of_the_head_is_planned_here(
    tmp_path: Path, whole_runs: list[int]
) -> None:
    """The tail's scan is independent (another invocation), but a response pairs and is
    checked by call id across the whole run: the child's part is not taken."""
    first_call = next(e for e in LEDGER if _kind(e) == "function_call")
    reused = with_changes(
        first_call,
        id="evt-reused",
        sessionId=SECOND_INVOCATION.session_id,
        invocationId=SECOND_INVOCATION.invocation_id,
        runId=SECOND_INVOCATION.run_id,
        turnId=SECOND_INVOCATION.turn_id,
    )
    events = [*LEDGER, reused]
    assert plan_json_text_in_parts(_file(tmp_path, events), None) == _serial(events)
    assert whole_runs == [len(events)]


def test_a_ledger_of_batched_steps_is_planned_in_parts(
    tmp_path: Path, whole_runs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step writes its two calls, then their dispatches, then their responses: the cut
    lands on a step's first call, so the child's part is taken."""
    events: list[RuntimeEvent] = [user_text(marker=True)]
    for step in range(120):
        first, second = (tool_turn(f"c{step}-{n}", ts=10 + step) for n in (1, 2))
        events += [first[0], second[0], first[1], second[1], first[2], second[2]]
        events.append(model_text(f"step {step}", event_id=f"text-{step}", ts=10 + step))
    for share in (0.3, 0.55, 0.8):
        monkeypatch.setattr(ledger_plan_parts, "PARENT_SHARE", share)
        assert plan_json_text_in_parts(_file(tmp_path, events), None) == _serial(events)
    assert whole_runs == []


def test_when_the_child_dies_the_tail_is_planned_here(
    tmp_path: Path, whole_runs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_send = parallel_decode._send
    sent = {"count": 0}

    def send_then_die(write_fd: int, kind: int, offset: int, length: int) -> None:
        if sent["count"] == 2:
            os._exit(9)
        sent["count"] += 1
        real_send(write_fd, kind, offset, length)

    monkeypatch.setattr(parallel_decode, "_send", send_then_die)
    assert plan_json_text_in_parts(_file(tmp_path, LEDGER), None) == _serial(LEDGER)
    assert whole_runs == [len(LEDGER)]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data(), st.floats(0.05, 0.95), st.one_of(st.none(), st.integers(0, 60)))
def test_any_ledger_and_any_cut_give_the_serial_plan(
    monkeypatch: pytest.MonkeyPatch, data: st.DataObject, share: float, expected: int | None
) -> None:
    monkeypatch.setattr(ledger_plan_parts, "PARENT_SHARE", share)
    events = mixed_ledger(data.draw, edits=MIXED_EDITS, endings=ALL_ENDINGS)
    with tempfile.TemporaryDirectory() as folder:
        path = _file(Path(folder), events)
        assert plan_json_text_in_parts(path, expected) == _serial(events, expected)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_plan_facts_cross_to_the_child_and_back_unchanged(data: st.DataObject) -> None:
    """The child sends its part's facts as plain data (``marshal``); they come back equal."""
    events = mixed_ledger(data.draw, edits=MIXED_EDITS, endings=ALL_ENDINGS)
    facts = plan_part(events).facts
    plain = marshal.loads(marshal.dumps(facts_to_plain(facts)))
    assert facts_from_plain(plain) == facts
