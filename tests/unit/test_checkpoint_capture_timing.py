"""The snapshot after a writing call starts the moment the tool returns, in parallel with writing
its T2, and its fact is pinned to the prefix that ends with that T2 (docs/design/workspace.md
sections 2 and 3: the window between a ``bash`` call's T2 and its snapshot's fact is as short as the
capture). A real turn (scripted provider, the real ``bash`` tool, real SQLite store, the real
``git`` carrier): the T2 write waits until a capture has begun, which happens only when the
capture starts before the T2, never after it."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.ledger.checkpoint_ports import Snapshot
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import CommitResult, RunStatus
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.ledger.ledger_store import SqliteLedgerStore
from tests.helpers.checkpointed_turn import (
    checkpoint_facts,
    checkpointed_service,
    data_store,
    run_turn,
    work_folder,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git")

IDENTITY = "workspace:v1:11111111-2222-4333-8444-666666666666"
WAIT_S = 60.0  # generous: the machine may be loaded; only a wrong order ever waits this long
SCRIPT = (
    (
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> n.txt"}}],
        },
        {"text": "Counted."},
    ),
)


class WatchedCarrier(GitCheckpointStore):
    """The real carrier; says when a capture has begun and what the folder held then."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.after_tool = threading.Event()  # the capture after the run's first one began
        self.seen: list[str] = []

    def capture(
        self,
        folder: Path,
        workspace_identity: str,
        ref: str,
        message: str,
        *,
        rebuild_index: bool = False,
    ) -> Snapshot:
        counted = folder / "n.txt"
        self.seen.append(counted.read_text() if counted.exists() else "")
        if len(self.seen) >= 2:
            self.after_tool.set()
        return super().capture(
            folder, workspace_identity, ref, message, rebuild_index=rebuild_index
        )


def _kind(event: RuntimeEvent) -> str | None:
    content = event.get("content")
    return None if content is None else content["kind"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    with data_store(tmp_path) as instance:
        yield instance


def test_the_capture_after_bash_starts_before_its_t2_and_pins_the_t2(
    store: SqliteLedgerStore, tmp_path: Path
) -> None:
    work = work_folder(tmp_path)
    carrier = WatchedCarrier(tmp_path / "data")
    order: list[str] = []
    commit_outcome = store.commit_tool_outcome

    def t2_after_a_capture_began(response: RuntimeEvent) -> CommitResult:
        began = carrier.after_tool.wait(WAIT_S)
        order.append("capture began" if began else "no capture yet")
        order.append("T2")
        return commit_outcome(response)

    store.commit_tool_outcome = t2_after_a_capture_began  # type: ignore[method-assign,assignment]
    service = checkpointed_service(store, carrier, SCRIPT, lambda folder: IDENTITY)
    _, outcome = run_turn(service, work, "count once")
    assert outcome.status is RunStatus.COMPLETED
    # The T2 waited for a capture that was already under way: it began as the tool returned.
    assert order == ["capture began", "T2"]
    assert carrier.seen[-1] == "x\n", "the capture sees what the command did"

    events = list(store.read_run_events(outcome.run_id))
    [t2] = [r for r in events if _kind(r.event) == "function_response"]
    facts = checkpoint_facts(events)
    after = [r for r in facts if r.seq > t2.seq]
    assert len(after) == 1, "one snapshot after the call"
    fact = after[0].event.get("actions", {})["workspaceCheckpoint"]
    assert fact["runtimeHighWater"] == t2.seq, "pinned to the prefix that ends with the T2"
    assert after[0].seq == t2.seq + 1, "the fact is the next event after the T2"
