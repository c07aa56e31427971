"""What ``maka run`` says of its turn when the host running it stops
(``app.commands.host_turn.host_stopped_words``): from the facts the ledger committed, never
"may have done part of its work" of a call that was never dispatched, and never "you can run it
again" of a turn with a call dispatched and no outcome."""

from __future__ import annotations

from app.commands.host_turn import _TurnLeft, host_stopped_words

PLAN = "maka plan S"


def _left(
    finished: tuple[str, ...] = (),
    running: tuple[str, ...] = (),
    unstarted: tuple[str, ...] = (),
    *,
    ended: bool = False,
    begun: bool = True,
) -> _TurnLeft:
    return _TurnLeft(ended, begun, finished, running, unstarted)


def test_a_call_dispatched_without_an_outcome_may_have_done_part_of_its_work() -> None:
    said = host_stopped_words(_left(("read_file", "list_dir"), ("bash",)), PLAN)
    assert said == (
        "1 tool call (bash) had started with no outcome recorded and may have done part of its "
        "work; it had finished 2 tool calls (read_file and list_dir): look before you run it "
        "again (maka plan S says what was recorded; the next start repairs what it left)"
    )


def test_finished_calls_only_still_ask_to_look_first() -> None:
    said = host_stopped_words(_left(("a", "b", "c", "d", "e"), (), ("write_file", "bash")), PLAN)
    assert said.startswith(
        "no tool call of it was running: it had finished 5 tool calls (a, b, c and 2 more); "
        "the model's calls to write_file and bash never ran: look before you run it again"
    ), said


def test_nothing_ran_says_it_can_run_again() -> None:
    said = host_stopped_words(_left((), (), ("write_file",), ended=True), PLAN)
    assert said == (
        "it had run no tool call, so it changed nothing; the model's call to write_file never "
        "ran: you can run it again (maka plan S says what was recorded)"
    )


def test_a_run_older_than_the_request_is_not_this_turn() -> None:
    """The host stopped before it began the turn's run: the latest run is an earlier one, and
    its calls are not this turn's."""
    said = host_stopped_words(_left(("write_file",), ("bash",), begun=False), PLAN)
    assert said == (
        "it had not begun its run, so nothing of it ran: you can run it again (maka plan S "
        "says what was recorded)"
    )


def test_an_unreadable_ledger_says_what_may_be() -> None:
    said = host_stopped_words(None, PLAN)
    assert said.startswith("so it may have done part of its work: look before you run it again")


def test_a_call_its_result_says_was_stopped_is_not_called_finished() -> None:
    """A host shut down (SIGTERM, Ctrl+C) stops the command it runs and records that result:
    the terminal said "no tool call of it was running: it had finished 1 tool call (bash)"
    while maka plan and maka timeline said it was stopped."""
    left = _TurnLeft(True, True, ("read_file",), (), (), ("bash",))
    said = host_stopped_words(left, PLAN)
    assert said == (
        "1 tool call (bash) was stopped part way (its result says so); it had finished 1 tool "
        "call (read_file): look before you run it again (maka plan S says what was recorded)"
    )
    two = host_stopped_words(_TurnLeft(True, True, (), (), (), ("bash", "bash")), PLAN)
    assert two.startswith("2 tool calls (bash and bash) were stopped part way"), two
