"""One turn = one run: header ``created -> running ->`` terminal, and the model loop between.

``start_turn`` creates the header, commits the user message (the run's first event, carrying the
T1 marker ``runtimeProtocol``: this run uses the durable T1/T2 store), marks the run running and
hands over to ``drive``. ``drive`` is the model loop, also used by a continuation whose first
event the admission transaction already committed.

What the model sees is rebuilt from *committed* events before every provider call (the session's
earlier runs plus this run so far), so it can never see a result T2 did not commit, and it never
holds an unpaired call (asserted before every request).

Endings, each a terminal event committed together with the terminal header
(``commit_run_ending``): ``completed`` (the model ended its turn, or the step limit was reached:
``stopReason: step_limit``), ``failed`` with ``provider_error`` or ``tool_boundary_failed``,
``cancelled`` with ``cancelled_by_user``. A reply cut off by the length limit completes with
``stopReason: length`` and says so; a last step with neither text nor a tool call completes with
``stopReason: provider_empty_reply`` and says so. A request that did not fit the model's context
window, or that the server answered with no event at all, fails with ``provider_error`` after a
host notice that leaves the turn out of later histories (``context_overflow``). Crash points:
P7 after a step's results reached the model history and before the next provider call; P8
before the terminal commit; P9 after it (the event and the header commit in one transaction, so
P9 leaves both).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from runtime.agent.context_overflow import overflow_notice
from runtime.agent.event_builders import EventBuilder, RunIdentity
from runtime.agent.permission_policy import PermissionAsker, PermissionPolicy
from runtime.agent.run_hooks import (
    Publish,
    RequestHistory,
    provider_failure,
    run_checkpoints,
)
from runtime.agent.tool_runtime import ModelToolCall, ToolBoundaryError, ToolRuntime
from runtime.agent.transcript_projection import ABORTED_FINISHES
from runtime.agent.workspace_checkpointer import WorkspaceCheckpointer
from runtime.base.cancel_token import (
    HOST_STOPPED,
    HOST_STOPPED_AT_QUESTION,
    OUTPUT_CLOSED,
    CancelToken,
)
from runtime.ledger.codes import FailureClass
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.ledger_errors import DecodeCode, LedgerError
from runtime.ledger.store_ports import RUN_STATUS_TO_EVENT, CommitResult, RunHeader, RunStatus
from runtime.providers.provider_port import (
    Finished,
    HistoryItem,
    Provider,
    ProviderError,
    ProviderErrorCode,
    ProviderRequest,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallReady,
    Usage,
    tool_call_stub,
)
from runtime.tools.tool_catalog import ToolCatalog
from runtime.tools.tool_contract import ToolContext

DEFAULT_MAX_STEPS = 200
"""Model steps one turn may take before it ends with ``stopReason: step_limit``. Real agent work
(a refactor, a test-fix loop) takes dozens of steps; the limit only guards against a model that
never ends its turn. ``maka run`` / ``tui`` / ``resume --max-steps`` and the desktop's Settings
change it."""
MAX_STEPS_RANGE = (1, 100_000)
STEP_LIMIT = "step_limit"
"""The terminal event's ``stopReason`` (and its error content's code) when the limit ends a turn."""
LENGTH_MESSAGE = (
    "the reply was cut off: the model reached its length limit (max_tokens) before it finished"
)
CONTENT_FILTER_MESSAGE = (
    "the reply was cut off: the server's content filter stopped it before it finished"
)
CUT_OFF = {
    "length": LENGTH_MESSAGE,
    "content_filter": CONTENT_FILTER_MESSAGE,
    **{
        reason: f'the reply was cut off: the model server ended it with finish_reason "{reason}" '
        "(it aborted or failed the request before the reply finished; its log may say why)"
        for reason in ABORTED_FINISHES
    },
}
"""The finish reasons of a reply cut off before it finished, and what its turn's ending says."""
EMPTY_REPLY = ProviderErrorCode.EMPTY_REPLY.value
"""The terminal event's ``stopReason`` (and its content's code) when the model's last step held
neither text nor a tool call: the turn completed, but nothing was said, which must never look
like an ordinary ending."""

# What a turn's ending says when something other than the user's cancel stopped it.
_STOPPED_BECAUSE = {
    HOST_STOPPED_AT_QUESTION: (
        "Maka stopped the turn at a permission question no window or terminal could answer; "
        "the call did not run"
    ),
    HOST_STOPPED: "Maka stopped the turn: the Maka process running it was shut down",
    OUTPUT_CLOSED: "The turn was stopped: the program reading its output ended",
}


def empty_reply_message(hint: str | None) -> str:
    """The sentence of a turn that ended with an empty reply, with the provider's ``hint``."""
    message = "the model ended its turn without any text or tool call (an empty reply)"
    if hint:
        return f"{message}; {hint}"
    return f"{message}; ask again, and if it keeps happening the server's log may say why"


def step_limit_message(steps: int) -> str:
    """The sentence the terminal event carries when the step limit ends a turn."""
    noun = "model step" if steps == 1 else "model steps"
    return (
        f"the turn stopped at its step limit of {steps} {noun}; send a message to let it "
        "continue, or raise the limit (--max-steps, or Settings in the desktop app)"
    )


def stub_reply_message(name: str, hint: str | None) -> str:
    """The sentence of a turn whose whole reply was the opening of a call to ``name``."""
    message = (
        f'the model\'s reply was only "functions.{name}:", the start of a call to {name} with '
        "no arguments, so nothing was run (an empty reply)"
    )
    if hint:
        return f"{message}; {hint}"
    return f"{message}; ask again, and if it keeps happening the server's log may say why"


def reply_ending(finish: str, text: str, empty_reply_hint: str | None) -> tuple[str, str | None]:
    """The ``stopReason`` and message of a turn whose last step called no tool: its ``finish``
    reason (a reply cut off by the length limit says so), or ``provider_empty_reply`` when the
    step held no ``text`` either (with the provider's ``empty_reply_hint``) or only the opening
    of a tool call written as text (``functions.edit_file:``), which did nothing either."""
    if finish in ABORTED_FINISHES:
        return finish, CUT_OFF[finish]  # (not an empty reply: the server said it stopped)
    if finish != "length" and not text.strip():
        return EMPTY_REPLY, empty_reply_message(empty_reply_hint)
    stub = tool_call_stub(text) if finish != "length" else None
    if stub is not None:
        return EMPTY_REPLY, stub_reply_message(stub, empty_reply_hint)
    return finish, CUT_OFF.get(finish)


def check_max_steps(value: int) -> int:
    """``value`` when it is a valid step limit; ``ValueError`` naming the range otherwise."""
    low, high = MAX_STEPS_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"the step limit must be a whole number from {low} to {high:,}")
    return value


DEFAULT_SYSTEM_PROMPT = (
    "You are an agent working in the user's project folder. Use the tools to read and change "
    "files and to run commands. Paths are relative to the project folder. Be brief."
)


class RunStore(Protocol):
    def start_run(self, header: RunHeader, first_event: RuntimeEvent) -> CommitResult: ...

    def mark_run_running(self, run_id: str) -> None: ...

    def append_event(self, event: RuntimeEvent) -> CommitResult: ...

    def commit_tool_prepared(
        self, call_event: RuntimeEvent | None, dispatch_event: RuntimeEvent
    ) -> CommitResult: ...

    def commit_tool_outcome(self, response_event: RuntimeEvent) -> CommitResult: ...

    def commit_workspace_fact(self, event: RuntimeEvent) -> CommitResult: ...

    def commit_run_ending(
        self, terminal_event: RuntimeEvent, status: RunStatus, failure_class: str | None
    ) -> CommitResult: ...


class RunObserver(Protocol):
    """Live view of a run; called on the run's thread. Committed events arrive after commit."""

    def text_delta(self, text: str) -> None: ...

    def thinking_delta(self, text: str) -> None: ...

    def committed(self, event: RuntimeEvent) -> None: ...

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None: ...


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run_id: str
    status: RunStatus
    failure_class: str | None = None
    stop_reason: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class RunSettings:
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_steps: int = DEFAULT_MAX_STEPS
    result_cap_bytes: int = 128 * 1024

    def __post_init__(self) -> None:
        check_max_steps(self.max_steps)


@dataclass(slots=True)
class _Step:
    text: str = ""
    thinking: str = ""
    signature: str | None = None
    usage: tuple[int, int] | None = None
    finish: str = "end_turn"
    empty_reply_hint: str | None = None


class RunLoop:
    def __init__(
        self,
        *,
        store: RunStore,
        provider: Provider,
        catalog: ToolCatalog,
        policy: PermissionPolicy,
        asker: PermissionAsker,
        observer: RunObserver,
        clock: Callable[[], int],
        settings: RunSettings | None = None,
        checkpointer: WorkspaceCheckpointer | None = None,
    ) -> None:
        self._checkpoints = run_checkpoints(checkpointer)
        self._store = store
        self._provider = provider
        self._catalog = catalog
        self._policy = policy
        self._asker = asker
        self._observer = observer
        self._clock = clock
        self._settings = settings or RunSettings()

    def start_turn(
        self,
        header: RunHeader,
        text: str,
        prior_history: Sequence[HistoryItem],
        tool_context: ToolContext,
        *,
        unanswered: Sequence[RuntimeEvent] = (),
    ) -> RunOutcome:
        """Create the run, commit the user message (with the T1 marker) and drive the loop.
        ``unanswered``: earlier turns' messages the model never answered, which an overflow of
        this turn leaves out too (``context_overflow``)."""
        identity = RunIdentity(
            header.session_id, header.invocation_id, header.run_id, header.turn_id
        )
        builder = EventBuilder(identity)
        mode = self._checkpoints.mode_json()
        first = builder.user_message(text, self._clock(), t1_marker=True, checkpoint_mode=mode)
        self._store.start_run(header, first)  # one transaction: never a run without events
        self._observer.run_status(header.run_id, RunStatus.CREATED, None)
        self._observer.committed(first)
        self._store.mark_run_running(header.run_id)
        self._observer.run_status(header.run_id, RunStatus.RUNNING, None)
        return self.drive(builder, prior_history, [first], tool_context, unanswered=unanswered)

    def drive(
        self,
        builder: EventBuilder,
        prior_history: Sequence[HistoryItem],
        run_events: Sequence[RuntimeEvent],
        tool_context: ToolContext,
        *,
        unanswered: Sequence[RuntimeEvent] = (),
    ) -> RunOutcome:
        """The model loop for a run whose header is running and whose first event is committed.

        Each step: the request's history from committed events, the provider's answer, its
        events committed, then each new tool call settled (T1, the tool, T2). The capture in
        progress is joined before anything else happens (``RunCheckpoints.join``)."""
        committed: list[RuntimeEvent] = list(run_events)
        history = RequestHistory(prior_history, committed)

        def publish(event: RuntimeEvent) -> None:
            committed.append(event)
            history.append(event)
            self._observer.committed(event)

        cancel = tool_context.cancel
        tools = self._tool_runtime(builder, tool_context, publish)
        checkpoints = self._checkpoints
        # Every call id the model's history holds: a new call reusing one (a server that numbers
        # its calls call_0, call_1... afresh each reply) gets an id of its own, never dropped.
        used_call_ids = {item.call_id for item in prior_history if isinstance(item, ToolCall)}
        steps = 0
        checkpoints.capture_start(publish)  # begins before the first provider call
        try:
            while True:
                if cancel.is_cancelled():
                    return self._cancelled(builder, publish, cancel)
                if steps >= self._settings.max_steps:
                    return self._finish(
                        builder,
                        publish,
                        RunStatus.COMPLETED,
                        stop_reason=STEP_LIMIT,
                        message=step_limit_message(steps),
                    )
                steps += 1
                request_history = history.next_request()
                checkpoints.overlap_next_step()  # the capture after the last T2 overlaps the step
                try:
                    step, calls = self._model_step(request_history, cancel)
                finally:
                    checkpoints.ready(publish)  # right after the provider's answer
                step_id = f"{builder.identity.run_id}_s{steps}"
                self._commit_reply(builder, publish, step)
                if cancel.is_cancelled():
                    return self._cancelled(builder, publish, cancel)
                if not calls:
                    stop_reason, message = reply_ending(
                        step.finish, step.text, step.empty_reply_hint
                    )
                    return self._finish(
                        builder,
                        publish,
                        RunStatus.COMPLETED,
                        stop_reason=stop_reason,
                        message=message,
                    )
                for call in calls:
                    if cancel.is_cancelled():
                        break
                    call_id = unique_call_id(call.call_id, used_call_ids)
                    used_call_ids.add(call_id)
                    checkpoints.before_call(call.name, publish)  # before the next T1
                    tools.settle(ModelToolCall(call_id, call.name, call.args, step_id))
                    checkpoints.after_tool(call.name)
                failpoint(CrashPoint.P7)
        except ProviderError as error:
            return self._provider_failed(
                error, builder, publish, run_events=committed, unanswered=unanswered, cancel=cancel
            )
        except ToolBoundaryError as error:
            return self._finish(
                builder,
                publish,
                RunStatus.FAILED,
                failure_class=FailureClass.TOOL_BOUNDARY_FAILED,
                message=str(error),
            )

    def _tool_runtime(
        self, builder: EventBuilder, tool_context: ToolContext, publish: Publish
    ) -> ToolRuntime:
        return ToolRuntime(
            writer=self._store,
            builder=builder,
            catalog=self._catalog,
            policy=self._policy,
            asker=self._asker,
            tool_context=tool_context,
            clock=self._clock,
            publish=publish,
            result_cap_bytes=self._settings.result_cap_bytes,
            effects_done=self._checkpoints.effects_done,
        )

    def _model_step(
        self, history: tuple[HistoryItem, ...], cancel: CancelToken
    ) -> tuple[_Step, list[ToolCallReady]]:
        request = ProviderRequest(self._settings.system_prompt, history, self._catalog.specs())
        step = _Step()
        calls: list[ToolCallReady] = []
        finished = False
        for item in self._provider.stream(request, cancel):
            if cancel.is_cancelled():
                raise ProviderError(ProviderErrorCode.CANCELLED, "the turn was cancelled")
            if isinstance(item, TextDelta):
                step.text += item.text
                self._observer.text_delta(item.text)
            elif isinstance(item, ThinkingDelta):
                step.thinking += item.text
                step.signature = item.signature or step.signature
                self._observer.thinking_delta(item.text)
            elif isinstance(item, ToolCallReady):
                calls.append(item)
            elif isinstance(item, Usage):
                step.usage = (item.input_tokens, item.output_tokens)
            elif isinstance(item, Finished):
                step.finish = item.reason
                step.empty_reply_hint = item.empty_reply_hint
                finished = True
        if not finished:
            raise ProviderError(
                ProviderErrorCode.CONNECTION_LOST, "the provider stream ended without finishing"
            )
        return step, calls

    def _commit_reply(self, builder: EventBuilder, publish: Publish, step: _Step) -> None:
        """The step's events committed; a value from the model server that no event may hold
        fails the turn as a malformed reply (the run ends failed, nothing of the reply kept),
        never leaving it marked running behind an error."""
        try:
            self._commit_step(builder, publish, step)
        except LedgerError as error:
            if error.code != DecodeCode.EVENT_SCHEMA_INVALID:
                raise
            raise ProviderError(
                ProviderErrorCode.MALFORMED_STREAM,
                f"the model server's reply holds a value no record can hold ({error.message}); "
                "nothing of that reply was recorded",
            ) from None

    def _commit_step(self, builder: EventBuilder, publish: Publish, step: _Step) -> None:
        events: list[RuntimeEvent] = []
        if step.thinking:
            events.append(builder.thinking(step.thinking, step.signature, self._clock()))
        if step.text:
            events.append(builder.assistant_text(step.text, self._clock(), step.usage))
        elif step.usage is not None:
            events.append(builder.usage_only(step.usage, self._clock()))
        for event in events:
            self._store.append_event(event)
            publish(event)

    def _provider_failed(
        self,
        error: ProviderError,
        builder: EventBuilder,
        publish: Publish,
        *,
        run_events: Sequence[RuntimeEvent],
        unanswered: Sequence[RuntimeEvent],
        cancel: CancelToken,
    ) -> RunOutcome:
        """The run's ending after ``error`` (``provider_failure``); an overflow first commits the
        host notice that leaves the turn out of later histories, when there is one."""
        failure = provider_failure(error, self._provider.label, cancelled=cancel.is_cancelled())
        if failure.cancelled:
            return self._cancelled(builder, publish, cancel)
        if failure.leaves_turn_out:
            notice = overflow_notice(
                builder, run_events, self._clock(), unanswered, refused=failure.refused
            )
            if notice is not None:
                self._store.append_event(notice)
                publish(notice)
        return self._finish(
            builder,
            publish,
            RunStatus.FAILED,
            failure_class=FailureClass.PROVIDER_ERROR,
            message=failure.message,
            reason=failure.reason,
        )

    def _cancelled(
        self, builder: EventBuilder, publish: Publish, cancel: CancelToken | None = None
    ) -> RunOutcome:
        reason = cancel.reason if cancel is not None else None
        said = _STOPPED_BECAUSE.get(reason or "")
        if said is not None:
            # Not a cancel of the user's: the ending says what stopped the turn (its reason;
            # its abort source is the host's where Maka stopped it).
            return self._finish(
                builder,
                publish,
                RunStatus.CANCELLED,
                failure_class=FailureClass.CANCELLED_BY_USER,
                message=said,
                reason=reason,
            )
        return self._finish(
            builder,
            publish,
            RunStatus.CANCELLED,
            failure_class=FailureClass.CANCELLED_BY_USER,
            message="The turn was stopped before it finished",
        )

    def _finish(
        self,
        builder: EventBuilder,
        publish: Publish,
        status: RunStatus,
        *,
        stop_reason: str | None = None,
        failure_class: FailureClass | None = None,
        message: str | None = None,
        reason: str | None = None,
    ) -> RunOutcome:
        self._checkpoints.join(publish)  # a capture in progress commits before the ending
        terminal = builder.terminal(
            RUN_STATUS_TO_EVENT[status],  # type: ignore[arg-type]
            self._clock(),
            stop_reason=stop_reason,
            failure_class=failure_class,
            message=message,
            reason=reason,
        )
        failpoint(CrashPoint.P8)
        self._store.commit_run_ending(
            terminal, status, failure_class.value if failure_class else None
        )
        failpoint(CrashPoint.P9)
        publish(terminal)
        run_id = builder.identity.run_id
        self._observer.run_status(run_id, status, failure_class.value if failure_class else None)
        return RunOutcome(
            run_id,
            status,
            failure_class.value if failure_class else None,
            stop_reason,
            message,
        )


def unique_call_id(wanted: str, used: set[str]) -> str:
    """The id a tool call is recorded and answered under: the model's own, unless it is empty or
    one the history already holds (a repeated id would be a second operation of one call: its
    dispatch refused, or its result taken for the first's), then ``<id>~2``, ``~3``... The model
    sees its call under that id, with its result, in the next request."""
    if wanted and wanted not in used:
        return wanted
    base = wanted or "call"
    n = 2
    while f"{base}~{n}" in used:
        n += 1
    return f"{base}~{n}"
