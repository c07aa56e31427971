"""Capturing a run's workspace checkpoints (docs/design/workspace.md section 2).

A run decides its checkpoint mode once, before its first event (which declares it). In mode
``git_v1`` the run captures at its start, before the first provider call, and after every tool
call that may write. That capture starts in a background thread the moment the tool returns (its
process exited: ``begin_capture``), in parallel with writing its T2, and commits its fact as soon
as both are done, pinned to the prefix that ends with the T2; it goes on while the model works on
its next step, and the run loop joins it before anything else happens: before the next T1, before
the run's ending, right after the provider's answer. So no side effect of a tool ever overlaps a
capture, the facts are published on the run's own thread, and a crash after a ``bash`` call's T2
finds its snapshot unrecorded only for as long as the capture takes beyond the T2 write
(``bench/bench_checkpoints.py`` measures that window, ``bench/torture_checkpoint_window.py`` how
often random kills land in it). A writing call refused before it ran has no such moment: its
capture starts with the model's next step (``after_tool``, ``overlap_next_step``).

The run's first capture (``begin_first_capture``) never holds up the model: in a big folder it
hashes every file, which may take many seconds. It runs in the background from the run's start
while the model works and while read-only calls (``read_file``, ``list_dir``, ``glob``) run; its
fact is committed on the run's thread at the first moment the capture is done and the run is
between two commits (``ready_facts``), and at the latest before the T1 of the first call that may
write and before the run's ending (``join_facts``): a snapshot describes the folder before any
write, and its fact is committed before that write's T1. A run stopped before its first fact with
no writing call dispatched is one that "stopped before its first snapshot" (its resume compares
nothing and parks on nothing: ``runtime/continuation/workspace_gate.py``).

A capture is artifact first (the carrier's commit and ref), then the ``workspaceCheckpoint`` fact
through the workspace-fact writer, pinned to the committed run prefix it belongs to
(``runtimeHighWater`` + ``runtimeDigest``). A capture that fails commits
``workspaceCheckpointFailed`` instead; nothing here ever fails the tool or the turn. Crash points:
``after_checkpoint_artifact`` (the ref exists, the fact does not) and ``after_checkpoint_fact``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from runtime.agent.event_builders import RunIdentity
from runtime.ledger.canonical_codec import prefix_digest
from runtime.ledger.checkpoint_ports import (
    CHECKPOINT_PROTOCOL,
    CheckpointCarrier,
    CheckpointError,
    CheckpointMode,
    ModeDecision,
    Snapshot,
    checkpoint_ref,
)
from runtime.ledger.codes import CheckpointFailureCode
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import CommitResult, StoredEvent
from runtime.ledger.workspace_facts import may_write, skipped_paths

_log = logging.getLogger(f"maka.{__name__}")  # the host logs "maka" to its log file
INITIAL_EPOCH = 1


class CheckpointFactStore(Protocol):
    def commit_workspace_fact(self, event: RuntimeEvent) -> CommitResult: ...

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...


class _FirstCapture:
    """The run's first capture while it runs in the background: its number, its thread and,
    once done, its artifact or why it failed."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.thread: threading.Thread | None = None
        self.snapshot: Snapshot | None = None
        self.failure: tuple[str, str] | None = None


class WorkspaceCheckpointer:
    """The checkpoints of one run."""

    def __init__(
        self,
        *,
        carrier: CheckpointCarrier,
        store: CheckpointFactStore,
        identity: RunIdentity,
        folder: Path,
        workspace_identity: str,
        mode: ModeDecision,
        clock: Callable[[], int],
        epoch: int = INITIAL_EPOCH,
    ) -> None:
        self._carrier = carrier
        self._store = store
        self._identity = identity
        self._folder = folder
        self._workspace = workspace_identity
        self.mode = mode
        self._clock = clock
        self._epoch = epoch
        self._count = 0
        self._thread: threading.Thread | None = None
        self._due = False
        self._done: list[RuntimeEvent] = []
        # Set once the T2 of the call whose capture started early is committed (or the capture
        # is joined first): its fact is pinned to the prefix then.
        self._outcome_written: threading.Event | None = None
        # The run's first capture while it runs in the background (``begin_first_capture``).
        self._first: _FirstCapture | None = None

    @property
    def active(self) -> bool:
        return self.mode.mode is CheckpointMode.GIT_V1

    def mode_json(self) -> dict[str, str]:
        return self.mode.to_json()

    # ---- the run loop's calls ------------------------------------------------------------------
    def capture_now(self) -> list[RuntimeEvent]:
        """Capture synchronously (the run's start); the committed facts to publish."""
        self.join_facts()
        if self.active:
            self._capture()
        return self.join_facts()

    def begin_first_capture(self) -> list[RuntimeEvent]:
        """The run's start: its first capture begins in the background (the model's first step
        and read-only calls go on meanwhile); its fact is recorded by ``ready_facts`` once it is
        done, or by ``join_facts`` (before a writing call's T1, before the run's ending)."""
        done = self.join_facts()
        if not self.active:
            return done
        self._count += 1
        first = _FirstCapture(self._count)
        thread = threading.Thread(
            target=self._take_first, args=(first,), name="maka-first-checkpoint", daemon=True
        )
        first.thread = thread
        self._first = first
        thread.start()
        return done

    def _take_first(self, first: _FirstCapture) -> None:
        first.snapshot, first.failure = self._take(first.count)

    def ready_facts(self) -> list[RuntimeEvent]:
        """Like ``join_facts``, but the run's first capture is only recorded when it is already
        done (the model's step is over, or a read-only call comes next): it is never waited
        for here."""
        first = self._first
        if first is not None and first.thread is not None and first.thread.is_alive():
            self._wait_thread()
            done, self._done = self._done, []
            return done
        return self.join_facts()

    @property
    def first_pending(self) -> bool:
        """Whether the run's first capture is still to be recorded."""
        return self._first is not None

    def begin_capture(self, tool_name: str) -> None:
        """A dispatched tool returned (its process exited) and its T2 is about to be written:
        when it may write, start the capture now, in parallel with the T2; its fact waits for
        ``after_tool``."""
        if not (self.active and may_write(tool_name)):
            return
        self._wait_thread()
        self._due = False
        written = threading.Event()
        self._outcome_written = written
        thread = threading.Thread(
            target=self._capture, args=(written,), name="maka-checkpoint", daemon=True
        )
        self._thread = thread
        thread.start()

    def after_tool(self, tool_name: str) -> None:
        """A tool call's T2 committed: the capture begun when it returned may record its fact
        now; otherwise a capture is due when the tool may write. It starts when the model's next
        step does (``overlap_next_step``), or runs at once when something else comes first
        (``join_facts``: the next T1, the run's ending)."""
        if self._release():
            return
        if self.active and may_write(tool_name):
            self._due = True

    def _release(self) -> bool:
        written, self._outcome_written = self._outcome_written, None
        if written is None:
            return False
        written.set()
        return True

    def _wait_thread(self) -> None:
        self._release()  # (a T2 that was never written: the fact pins the prefix as it is)
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def overlap_next_step(self) -> None:
        """Start the due capture in the background while the model works on its next step."""
        if not self._due:
            return
        self._due = False
        thread = threading.Thread(target=self._capture, name="maka-checkpoint", daemon=True)
        self._thread = thread
        thread.start()

    def join_facts(self) -> list[RuntimeEvent]:
        """Finish the capture in progress (or the one due); the facts committed since the last
        call, to publish on the run's thread. The run's first capture is waited for and
        recorded first."""
        self._join_first()
        self._wait_thread()
        if self._due:
            self._due = False
            self._capture()
        done, self._done = self._done, []
        return done

    def _join_first(self) -> None:
        first, self._first = self._first, None
        if first is None:
            return
        if first.thread is not None:
            first.thread.join()
        self._record(first.count, first.snapshot, first.failure)

    # ---- one capture ---------------------------------------------------------------------------
    def _capture(self, outcome_written: threading.Event | None = None) -> None:
        """Artifact first, then the fact pinned to the committed prefix: the one that ends with
        the tool's T2 when the capture began as the tool returned (``outcome_written``)."""
        self._count += 1
        count = self._count
        snapshot, failure = self._take(count)
        if outcome_written is not None:
            outcome_written.wait()
        self._record(count, snapshot, failure)

    def _take(self, count: int) -> tuple[Snapshot | None, tuple[str, str] | None]:
        """The artifact: the carrier's commit and ref, or why it failed."""
        ref = checkpoint_ref(self._identity.session_id, self._identity.run_id, count)
        try:
            return self._carrier.capture(
                self._folder, self._workspace, ref, f"maka checkpoint {ref}"
            ), None
        except CheckpointError as error:
            return None, (error.code.value, error.message)
        except Exception as error:
            return None, (CheckpointFailureCode.CHECKPOINT_GIT_FAILED.value, str(error))

    def _record(
        self, count: int, snapshot: Snapshot | None, failure: tuple[str, str] | None
    ) -> None:
        """The fact of a capture, pinned to the run's committed prefix as it is now."""
        try:
            rows = self._store.read_run_events(self._identity.run_id)
            if not rows:
                return
            high_water = rows[-1].seq
            digest = prefix_digest(self._identity_json(), ((row.seq, row.payload) for row in rows))
        except Exception as error:  # no prefix to pin: nothing can be recorded
            _log.warning("checkpoint skipped: the run's events could not be read: %s", error)
            return
        if failure is not None or snapshot is None:
            code, message = failure or (CheckpointFailureCode.CHECKPOINT_GIT_FAILED.value, "")
            self._commit(self._failed(count, high_water, code, message))
            return
        failpoint(CrashPoint.AFTER_CHECKPOINT_ARTIFACT)
        fact: dict[str, Any] = {
            "protocol": CHECKPOINT_PROTOCOL,
            "workspaceIdentity": self._workspace,
            "workspaceEpoch": self._epoch,
            "runtimeHighWater": high_water,
            "runtimeDigest": digest,
            "checkpointRef": snapshot.ref,
            "commitId": snapshot.commit_id,
            "treeId": snapshot.tree_id,
            "policyHash": snapshot.policy_hash,
            **skipped_paths(snapshot.skipped),
        }
        if self._commit(self._event(count, "workspaceCheckpoint", fact)):
            failpoint(CrashPoint.AFTER_CHECKPOINT_FACT)

    def _identity_json(self) -> dict[str, str]:
        i = self._identity
        return {
            "sessionId": i.session_id,
            "invocationId": i.invocation_id,
            "runId": i.run_id,
            "turnId": i.turn_id,
        }

    def _failed(self, count: int, high_water: int, code: str, message: str) -> RuntimeEvent:
        body = {
            "protocol": CHECKPOINT_PROTOCOL,
            "workspaceIdentity": self._workspace,
            "runtimeHighWater": high_water,
            "reasonCode": code,
            "message": message[:500],
        }
        return self._event(count, "workspaceCheckpointFailed", body)

    def _event(self, count: int, key: str, body: dict[str, Any]) -> RuntimeEvent:
        i = self._identity
        return cast(
            RuntimeEvent,
            {
                "id": f"{i.run_id}_ckpt{count:04d}",
                "sessionId": i.session_id,
                "invocationId": i.invocation_id,
                "runId": i.run_id,
                "turnId": i.turn_id,
                "ts": self._clock(),
                "partial": False,
                "role": "system",
                "author": "system",
                "modelVisibility": "hidden",
                "actions": {key: body},
            },
        )

    def _commit(self, event: RuntimeEvent) -> bool:
        try:
            self._store.commit_workspace_fact(event)
        except Exception as error:  # never fails the tool or the turn
            _log.warning("checkpoint fact %s not committed: %s", event["id"], error)
            return False
        self._done.append(event)
        return True
