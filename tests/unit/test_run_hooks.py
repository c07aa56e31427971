"""What the run loop hands off (``runtime/agent/run_hooks.py``), each piece on its own: the
checkpoint calls (nothing without a checkpointer, the checkpointer's calls and facts with one),
the request history and its pairing check, the ending of a provider error, and the ending of a
last step without a tool call. Then the run loop with a recording checkpointer: the checkpoint
calls land where the design puts them among the ledger writes (docs/design/workspace.md 2)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from runtime.agent import run_hooks
from runtime.agent.context_overflow import WAY_ON
from runtime.agent.event_builders import EventBuilder, RunIdentity
from runtime.agent.permission_policy import PermissionMode, PermissionPolicy
from runtime.agent.run_hooks import (
    LEAVES_THE_TURN_OUT,
    RequestHistory,
    provider_failure,
    run_checkpoints,
)
from runtime.agent.run_loop import (
    CONTENT_FILTER_MESSAGE,
    EMPTY_REPLY,
    LENGTH_MESSAGE,
    RunSettings,
    empty_reply_message,
    reply_ending,
    stub_reply_message,
)
from runtime.agent.session_service import SessionService
from runtime.agent.tool_runtime import ToolBoundaryError
from runtime.agent.workspace_checkpointer import WorkspaceCheckpointer
from runtime.base.cancel_token import CancelToken
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import CommitResult, RunHeader, RunStatus
from runtime.providers import history_projection
from runtime.providers.provider_port import (
    AssistantText,
    HistoryItem,
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    StreamEvent,
    ToolCall,
    ToolResult,
    UserText,
)
from runtime.providers.scripted_provider import ScriptedProvider, parse_script
from storage.ledger.ledger_store import SqliteLedgerStore, open_store

IDENTITY = "workspace:v1:11111111-2222-4333-8444-777777777777"
BUILDER = EventBuilder(RunIdentity("sess-h", "inv-h", "run-h", "turn-h"))


def _fact(name: str) -> RuntimeEvent:
    return cast(RuntimeEvent, {"id": name})


class RecordingCheckpointer:
    """Stands in for ``WorkspaceCheckpointer``: logs each call, returns the facts it is given."""

    def __init__(self, log: list[str], facts: list[list[RuntimeEvent]] | None = None) -> None:
        self.log = log
        self._facts = facts or []

    def _next_facts(self) -> list[RuntimeEvent]:
        return self._facts.pop(0) if self._facts else []

    def mode_json(self) -> dict[str, str]:
        self.log.append("mode_json")
        return {"mode": "git_v1"}

    def begin_first_capture(self) -> list[RuntimeEvent]:
        self.log.append("begin_first_capture")
        return self._next_facts()

    def ready_facts(self) -> list[RuntimeEvent]:
        self.log.append("ready_facts")
        return self._next_facts()

    def begin_capture(self, tool_name: str) -> None:
        self.log.append(f"begin_capture {tool_name}")

    def after_tool(self, tool_name: str) -> None:
        self.log.append(f"after_tool {tool_name}")

    def overlap_next_step(self) -> None:
        self.log.append("overlap_next_step")

    def join_facts(self) -> list[RuntimeEvent]:
        self.log.append("join_facts")
        return self._next_facts()


def _checkpointer(recording: RecordingCheckpointer) -> WorkspaceCheckpointer:
    return cast(WorkspaceCheckpointer, recording)


# ---- checkpoint calls -----------------------------------------------------------------------


def test_without_a_checkpointer_the_checkpoint_calls_do_nothing() -> None:
    hook = run_checkpoints(None)
    published: list[RuntimeEvent] = []
    assert hook.mode_json() is None
    assert hook.effects_done is None
    hook.capture_start(published.append)
    hook.overlap_next_step()
    hook.join(published.append)
    hook.ready(published.append)
    hook.before_call("bash", published.append)
    hook.after_tool("bash")
    assert published == []


def test_with_a_checkpointer_each_call_reaches_it_and_its_facts_are_published_in_order() -> None:
    log: list[str] = []
    facts = [[_fact("start")], [_fact("a"), _fact("b")], []]
    recording = RecordingCheckpointer(log, facts)
    hook = run_checkpoints(_checkpointer(recording))
    published: list[RuntimeEvent] = []

    assert hook.mode_json() == {"mode": "git_v1"}
    hook.capture_start(published.append)
    assert published == [_fact("start")]
    hook.overlap_next_step()
    hook.join(published.append)
    assert published == [_fact("start"), _fact("a"), _fact("b")]
    hook.join(published.append)  # nothing new: nothing published
    effects_done = hook.effects_done
    assert effects_done is not None
    effects_done("write_file")
    hook.after_tool("write_file")
    assert published == [_fact("start"), _fact("a"), _fact("b")]
    hook.before_call("read_file", published.append)
    hook.before_call("bash", published.append)
    assert log == [
        "mode_json",
        "begin_first_capture",
        "overlap_next_step",
        "join_facts",
        "join_facts",
        "begin_capture write_file",
        "after_tool write_file",
        "ready_facts",  # a read-only call: the first capture is not waited for
        "join_facts",  # a call that may write waits for it
    ]


# ---- request history ------------------------------------------------------------------------


def _run_events() -> list[RuntimeEvent]:
    return [
        BUILDER.user_message("list it", 1, t1_marker=True),
        BUILDER.function_call("op1", "c1", name="list_dir", args={}, step_id="s1", ts=2),
        BUILDER.bound_response(
            "op1", "c1", name="list_dir", result="a.txt", is_error=False, duration_ms=1, ts=3
        ),
    ]


def test_the_request_history_is_the_prior_history_then_the_runs_committed_events() -> None:
    prior: list[HistoryItem] = [UserText("earlier"), AssistantText("answered")]
    events = _run_events()
    history = RequestHistory(prior, events[:1])
    assert history.next_request() == (*prior, UserText("list it"))
    for event in events[1:]:
        history.append(event)
    assert history.next_request() == (
        *prior,
        UserText("list it"),
        ToolCall("c1", "list_dir", {}),
        ToolResult("c1", "list_dir", "a.txt"),
    )
    history.append(BUILDER.assistant_text("a.txt is there", 4, None))
    assert history.next_request()[-1] == AssistantText("a.txt is there")


@pytest.mark.parametrize(
    "unpaired",
    [ToolCall("p1", "bash", {}), ToolResult("p1", "bash", "out")],
    ids=["call without result", "result without call"],
)
def test_an_unpaired_item_in_the_prior_history_is_never_sent(unpaired: HistoryItem) -> None:
    history = RequestHistory([UserText("earlier"), unpaired], _run_events())
    with pytest.raises(ToolBoundaryError, match=r"unpaired tool calls \['p1'\]"):
        history.next_request()


class FoldedTurn:
    """Stands in for ``IncrementalHistory``: the items it is told to return, all folded."""

    def __init__(self, events: object) -> None:
        del events
        self.answers: list[tuple[HistoryItem, ...]] = []
        self.folded = True

    def append(self, event: RuntimeEvent) -> None:
        del event

    def items(self) -> tuple[HistoryItem, ...]:
        return self.answers.pop(0)


def test_a_folded_run_is_checked_from_its_newly_folded_items_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[tuple[HistoryItem, ...]] = []

    def counting(items: tuple[HistoryItem, ...]) -> list[str]:
        checked.append(tuple(items))
        return history_projection.unpaired_tool_calls(items)

    monkeypatch.setattr(run_hooks, "IncrementalHistory", FoldedTurn)
    monkeypatch.setattr(run_hooks, "unpaired_tool_calls", counting)
    prior = (UserText("earlier"),)
    history = RequestHistory(prior, ())
    turn = cast(FoldedTurn, history._turn)  # the stand-in installed above
    first = (UserText("go"), ToolCall("c1", "bash", {}), ToolResult("c1", "bash", "ok"))
    second = (*first, AssistantText("done"))
    turn.answers = [first, second, (*second, ToolCall("c2", "bash", {}))]
    assert history.next_request() == (*prior, *first)
    assert history.next_request() == (*prior, *second)
    assert checked == [prior, first, (AssistantText("done"),)]
    # A newly folded call without its result (the projection never yields one) is still caught.
    with pytest.raises(ToolBoundaryError, match=r"unpaired tool calls \['c2'\]"):
        history.next_request()


def test_an_open_run_is_checked_whole() -> None:
    history = RequestHistory([UserText("earlier")], ())
    turn = FoldedTurn(())
    turn.folded = False
    turn.answers = [(ToolResult("c9", "bash", "ok"),)]
    history._turn = turn  # type: ignore[assignment]
    with pytest.raises(ToolBoundaryError, match=r"unpaired tool calls \['c9'\]"):
        history.next_request()


# ---- the ending of a provider error ---------------------------------------------------------


def test_a_cancelled_run_or_a_cancelled_stream_ends_cancelled() -> None:
    timeout = ProviderError(ProviderErrorCode.TIMEOUT, "slow")
    assert provider_failure(timeout, "p", cancelled=True).cancelled
    stopped = ProviderError(ProviderErrorCode.CANCELLED, "the turn was cancelled")
    assert provider_failure(stopped, "p", cancelled=False).cancelled


def test_an_ordinary_provider_error_fails_the_run_with_the_providers_label() -> None:
    error = ProviderError(ProviderErrorCode.HTTP_ERROR, "HTTP 500")
    failure = provider_failure(error, "Local server", cancelled=False)
    assert not failure.cancelled
    assert failure.message == "Local server: HTTP 500"
    assert failure.reason is None
    assert not failure.leaves_turn_out
    assert not failure.refused


def test_an_overflow_leaves_the_turn_out_and_says_so() -> None:
    error = ProviderError(ProviderErrorCode.CONTEXT_OVERFLOW, "the prompt is too long")
    failure = provider_failure(error, "Local server", cancelled=False)
    assert failure.message == f"Local server: the prompt is too long. {WAY_ON}"
    assert failure.reason == "provider_context_overflow"
    assert failure.leaves_turn_out
    assert not failure.refused


def test_an_empty_stream_leaves_the_turn_out_as_refused_without_the_overflow_reason() -> None:
    error = ProviderError(ProviderErrorCode.EMPTY_STREAM, "no event at all")
    failure = provider_failure(error, "Local server", cancelled=False)
    assert failure.message == f"Local server: no event at all. {WAY_ON}"
    assert failure.reason is None
    assert failure.leaves_turn_out
    assert failure.refused


def test_only_an_overflow_and_an_empty_stream_leave_the_turn_out() -> None:
    assert {ProviderErrorCode.CONTEXT_OVERFLOW, ProviderErrorCode.EMPTY_STREAM} == set(
        LEAVES_THE_TURN_OUT
    )
    for code in ProviderErrorCode:
        if code is ProviderErrorCode.CANCELLED:
            continue
        failure = provider_failure(ProviderError(code, "x"), "p", cancelled=False)
        assert failure.leaves_turn_out is (code in LEAVES_THE_TURN_OUT), code


def test_the_message_of_a_provider_error_carries_no_bearer_token() -> None:
    error = ProviderError(ProviderErrorCode.HTTP_ERROR, "401 for Bearer sk-secret-value")
    failure = provider_failure(error, "p", cancelled=False)
    assert "sk-secret-value" not in failure.message
    assert failure.message.startswith("p: 401 for Bearer ")


# ---- the ending of a last step without a tool call ------------------------------------------


def test_a_reply_ends_with_its_finish_reason() -> None:
    assert reply_ending("end_turn", "done", None) == ("end_turn", None)


def test_a_reply_cut_off_by_the_length_limit_says_so_even_without_text() -> None:
    assert reply_ending("length", "half a sen", None) == ("length", LENGTH_MESSAGE)
    assert reply_ending("length", "", None) == ("length", LENGTH_MESSAGE)


def test_a_reply_the_servers_content_filter_cut_off_says_so() -> None:
    """It ended with stopReason content_filter and no word of why the reply stopped."""
    stop, message = reply_ending("content_filter", "Here is the fi", None)
    assert stop == "content_filter"
    assert message == CONTENT_FILTER_MESSAGE
    assert message.startswith("the reply was cut off: the server's content filter stopped it")


@pytest.mark.parametrize("finish", ["abort", "error", "cancelled"])
@pytest.mark.parametrize("text", ["partial", ""])
def test_a_reply_the_server_aborted_says_it_was_cut_off(finish: str, text: str) -> None:
    """``finish_reason: "abort"`` (vLLM, SGLang) after part of a reply ended the turn as an
    ordinary one with no notice; ``"error"`` with no text was an empty reply whose hint advised
    turning tool_choice off. Both say the server cut the reply off, and the transcript shows
    it as a notice with its code."""
    from runtime.agent.transcript_projection import _ending_notice

    stop, message = reply_ending(finish, text, "set MAKA_OPENAI_TOOL_CHOICE=off")
    assert stop == finish and message is not None
    assert message.startswith(
        f'the reply was cut off: the model server ended it with finish_reason "{finish}"'
    )
    assert "tool_choice" not in message.lower()
    ending: Any = {
        "id": "r_end",
        "status": "completed",
        "actions": {"stateDelta": {"stopReason": stop}},
        "content": {"kind": "error", "code": stop, "message": message},
    }
    notice = _ending_notice(ending, "r")
    assert notice is not None and notice.type == "notice", notice
    assert notice.code == finish and notice.text == message and notice.level == "warn"


def test_a_reply_without_text_is_an_empty_reply_with_the_providers_hint() -> None:
    assert reply_ending("end_turn", " \n", "raise n_ctx") == (
        EMPTY_REPLY,
        empty_reply_message("raise n_ctx"),
    )
    assert reply_ending("stop", "", None) == (EMPTY_REPLY, empty_reply_message(None))


def test_a_reply_that_is_only_the_opening_of_a_tool_call_is_an_empty_reply() -> None:
    stop, message = reply_ending("end_turn", "functions.edit_file:", "turn tool_choice off")
    assert stop == EMPTY_REPLY
    assert message == stub_reply_message("edit_file", "turn tool_choice off")
    assert message is not None and '"functions.edit_file:"' in message
    assert "nothing was run" in message and message.endswith("turn tool_choice off")
    assert reply_ending("stop", " functions.bash:\n", None)[0] == EMPTY_REPLY


def test_text_around_a_call_opening_is_an_ordinary_reply() -> None:
    for text in (
        'functions.edit_file: {"path": "a.py"}',
        "I will call functions.edit_file:",
        "Summary:",
        "edit_file:",
    ):
        assert reply_ending("end_turn", text, None) == ("end_turn", None), text
    # A reply cut off by the length limit stays a length ending whatever it held.
    assert reply_ending("length", "functions.bash:", None) == ("length", LENGTH_MESSAGE)


# ---- the run loop with a recording checkpointer ---------------------------------------------


class LoggingStore:
    """A real store that logs each ledger write into the shared log."""

    def __init__(self, inner: SqliteLedgerStore, log: list[str]) -> None:
        self._inner = inner
        self._log = log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def append_event(self, event: RuntimeEvent) -> CommitResult:
        self._log.append("event")
        return self._inner.append_event(event)

    def commit_tool_prepared(
        self, call_event: RuntimeEvent | None, dispatch_event: RuntimeEvent
    ) -> CommitResult:
        self._log.append("T1")
        return self._inner.commit_tool_prepared(call_event, dispatch_event)

    def commit_tool_outcome(self, response_event: RuntimeEvent) -> CommitResult:
        self._log.append("T2")
        return self._inner.commit_tool_outcome(response_event)

    def commit_run_ending(
        self, terminal_event: RuntimeEvent, status: RunStatus, failure_class: str | None
    ) -> CommitResult:
        self._log.append("ending")
        return self._inner.commit_run_ending(terminal_event, status, failure_class)


class LoggingProvider:
    name = "scripted"
    label = "scripted test provider"

    def __init__(self, inner: ScriptedProvider, log: list[str]) -> None:
        self._inner = inner
        self._log = log

    def stream(self, request: ProviderRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        self._log.append("model step")
        yield from self._inner.stream(request, cancel)


class Quiet:
    def text_delta(self, text: str) -> None:
        del text

    def thinking_delta(self, text: str) -> None:
        del text

    def committed(self, event: RuntimeEvent) -> None:
        del event

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None:
        del run_id, status, failure_class


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    instance = open_store(tmp_path / "data")
    yield instance
    instance.close()


def _write(call_id: str, path: str) -> dict[str, Any]:
    return {"id": call_id, "name": "write_file", "args": {"path": path, "content": "x"}}


def test_the_run_loop_joins_the_capture_before_each_t1_and_before_its_ending(
    store: SqliteLedgerStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    work = Path(os.path.realpath(work))
    log: list[str] = []
    script = parse_script(
        {
            "steps": [
                # the repeated id runs under an id of its own: its join, T1 and capture too
                {"toolCalls": [_write("c1", "a.txt"), _write("c1", "b.txt")]},
                {"text": "Written."},
            ]
        }
    )
    service = SessionService(
        store=LoggingStore(store, log),
        provider_factory=lambda: LoggingProvider(ScriptedProvider(script), log),
        owner_epoch=1,
        workspace_identity=lambda folder: IDENTITY,
        settings=RunSettings(max_steps=6),
    )

    def recording(header: RunHeader, folder: Path) -> WorkspaceCheckpointer:
        del header, folder
        return _checkpointer(RecordingCheckpointer(log))

    monkeypatch.setattr(service, "checkpointer_for", recording)
    session_id = service.create_session(work).session_id
    outcome = service.send_turn(session_id, "write", Quiet(), PermissionPolicy(PermissionMode.AUTO))
    assert outcome.status is RunStatus.COMPLETED
    assert (work / "a.txt").exists()
    assert (work / "b.txt").exists()
    assert log == [
        "mode_json",  # the first event declares the mode
        "begin_first_capture",  # begins before the first provider call
        "overlap_next_step",
        "model step",
        "ready_facts",  # right after the provider's answer (the first capture not waited for)
        "join_facts",  # before the T1 of a call that may write
        "T1",
        "begin_capture write_file",  # the tool returned: the capture starts with its T2
        "T2",
        "after_tool write_file",
        "join_facts",  # the second call (its id repeated the first's) waits for that capture
        "T1",
        "begin_capture write_file",
        "T2",
        "after_tool write_file",
        "overlap_next_step",  # the due capture overlaps the next step
        "model step",
        "ready_facts",
        "event",  # the reply
        "join_facts",  # before the ending
        "ending",
    ]
