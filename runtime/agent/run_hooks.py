"""What the run loop (``run_loop.RunLoop.drive``) hands off, so that it reads as the model loop.

- ``RunCheckpoints``: the run's workspace checkpoint calls (``workspace_checkpointer``): begin
  the first capture at the start (in the background: the model's first step and read-only calls
  go on meanwhile), overlap the due capture with the model's next step, join the capture in
  progress before the next T1 of a call that may write and before the run's ending (before a
  read-only call and after the model's answer: the first capture's fact is published when it is
  done, never waited for), note each settled tool. A run without a checkpointer gets the base
  class, whose calls do nothing.
- ``RequestHistory``: the provider history of each request, rebuilt from committed events (the
  session's earlier runs, then this run so far), checked for unpaired tool calls before it is
  ever sent.
- ``provider_failure``: how a ``ProviderError`` ends the run (cancelled, or failed with
  ``provider_error``; an overflow or an empty stream also leaves the turn out of later histories).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from runtime.agent.context_overflow import WAY_ON
from runtime.agent.tool_runtime import ToolBoundaryError
from runtime.agent.workspace_checkpointer import WorkspaceCheckpointer
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.workspace_facts import may_write
from runtime.providers.history_projection import IncrementalHistory, unpaired_tool_calls
from runtime.providers.provider_port import HistoryItem, ProviderError, ProviderErrorCode
from runtime.providers.secret_redaction import redact_secrets

Publish = Callable[[RuntimeEvent], None]
"""Makes a committed event part of the run: its history and its observer."""


class RunCheckpoints:
    """The run loop's checkpoint calls for a run without a checkpointer: each does nothing."""

    def mode_json(self) -> dict[str, str] | None:
        """The checkpoint mode the run's first event declares (None: no declaration)."""
        return None

    @property
    def effects_done(self) -> Callable[[str], None] | None:
        """Called by the tool runtime when a dispatched tool returned (None: nobody is told)."""
        return None

    def capture_start(self, publish: Publish) -> None:
        """The run's first capture begins, before its first provider call (in the background:
        it never holds the model up)."""

    def overlap_next_step(self) -> None:
        """The capture due after the last T2 starts while the model works on its next step."""

    def join(self, publish: Publish) -> None:
        """The capture in progress finishes and its facts are published: before anything else
        happens (the next T1 of a call that may write, the run's ending)."""

    def ready(self, publish: Publish) -> None:
        """Like ``join`` (right after the provider's answer, before a read-only call's T1), but
        the run's first capture is not waited for: its fact is published if it is done."""

    def before_call(self, tool_name: str, publish: Publish) -> None:
        """Before a tool call is settled: ``join`` when it may write, else ``ready``."""
        if may_write(tool_name):
            self.join(publish)
        else:
            self.ready(publish)

    def after_tool(self, tool_name: str) -> None:
        """A tool call's T2 committed."""


class _Capturing(RunCheckpoints):
    """The calls of a run with a checkpointer (whatever its mode: it decides what to capture)."""

    def __init__(self, checkpointer: WorkspaceCheckpointer) -> None:
        self._checkpointer = checkpointer

    def mode_json(self) -> dict[str, str] | None:
        return self._checkpointer.mode_json()

    @property
    def effects_done(self) -> Callable[[str], None] | None:
        return self._checkpointer.begin_capture

    def capture_start(self, publish: Publish) -> None:
        for fact in self._checkpointer.begin_first_capture():
            publish(fact)

    def overlap_next_step(self) -> None:
        self._checkpointer.overlap_next_step()

    def join(self, publish: Publish) -> None:
        for fact in self._checkpointer.join_facts():
            publish(fact)

    def ready(self, publish: Publish) -> None:
        for fact in self._checkpointer.ready_facts():
            publish(fact)

    def after_tool(self, tool_name: str) -> None:
        self._checkpointer.after_tool(tool_name)


def run_checkpoints(checkpointer: WorkspaceCheckpointer | None) -> RunCheckpoints:
    """The checkpoint calls of a run with ``checkpointer`` (None: calls that do nothing)."""
    return RunCheckpoints() if checkpointer is None else _Capturing(checkpointer)


class RequestHistory:
    """The history of each provider request: ``prior`` (the session's earlier runs), then the
    run's committed events (``append`` each one as it commits).

    The run's part is kept incrementally (``IncrementalHistory``): a step projects its own
    events, not the whole turn again, so a turn of thousands of steps stays flat per step. The
    pairing check is incremental too while it can be: when ``prior`` is paired and the run's
    items are all folded, only the items folded since the last request are checked."""

    def __init__(self, prior: Sequence[HistoryItem], run_events: Iterable[RuntimeEvent]) -> None:
        self._turn = IncrementalHistory(run_events)
        self._prior = tuple(prior)
        self._prior_paired = not unpaired_tool_calls(self._prior)
        self._checked = 0  # the run's items already checked for pairing

    def append(self, event: RuntimeEvent) -> None:
        self._turn.append(event)

    def next_request(self) -> tuple[HistoryItem, ...]:
        """The history of the next request; ``ToolBoundaryError`` when it holds an unpaired tool
        call (which cannot happen by construction: such a request is never sent)."""
        turn_items = self._turn.items()
        history = (*self._prior, *turn_items)
        if self._prior_paired and self._turn.folded:
            unpaired = unpaired_tool_calls(turn_items[self._checked :])
            self._checked = len(turn_items)
        else:
            unpaired = unpaired_tool_calls(history)
        if unpaired:
            raise ToolBoundaryError("history", f"unpaired tool calls {unpaired}")
        return history


LEAVES_THE_TURN_OUT = frozenset(
    {ProviderErrorCode.CONTEXT_OVERFLOW, ProviderErrorCode.EMPTY_STREAM}
)
"""Failures that leave the turn out of later histories (``context_overflow``): an overflow, and
a request the server accepted and answered with no event at all (how some servers report an
overflow), so one refused prompt can never make every later turn fail the same way."""


@dataclass(frozen=True, slots=True)
class ProviderFailure:
    """How a ``ProviderError`` ends the run."""

    cancelled: bool
    """The run ends ``cancelled`` (``cancelled_by_user``); the fields below are unused."""
    message: str = ""
    """The failed ending's message (the provider's label first, secrets redacted)."""
    reason: str | None = None
    """The failed ending's reason: ``context_overflow`` when the request did not fit."""
    leaves_turn_out: bool = False
    """A host notice leaves the turn out of later histories before the ending."""
    refused: bool = False
    """The server answered with no event at all (the notice says so)."""


def provider_failure(error: ProviderError, label: str, *, cancelled: bool) -> ProviderFailure:
    """The ending of a run whose provider step raised ``error``; ``label`` names the provider,
    ``cancelled``: the run's cancel token was set."""
    if cancelled or error.code is ProviderErrorCode.CANCELLED:
        return ProviderFailure(cancelled=True)
    message = f"{label}: {error.message}"
    leaves_out = error.code in LEAVES_THE_TURN_OUT
    if leaves_out:
        message = f"{message}. {WAY_ON}"
    overflow = error.code is ProviderErrorCode.CONTEXT_OVERFLOW
    return ProviderFailure(
        cancelled=False,
        message=redact_secrets(message),
        reason=ProviderErrorCode.CONTEXT_OVERFLOW.value if overflow else None,
        leaves_turn_out=leaves_out,
        refused=error.code is ProviderErrorCode.EMPTY_STREAM,
    )
