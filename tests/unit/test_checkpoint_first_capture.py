"""The run's first snapshot never holds up the model (docs/design/workspace.md section 2): in a
big folder it hashes every file, so it runs in the background from the run's start while the
model works and while read-only calls run; the first call that may write waits for it, and its
fact is committed before that call's T1. A real turn (scripted provider, the real tools, the real
SQLite store and the real ``git`` carrier); the first capture is held deterministically until a
read-only call's T1 is committed, and only the order of the committed events is asserted."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.agent.session_service import SessionService
from runtime.ledger.checkpoint_ports import Snapshot
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import CommitResult, RunStatus, StoredEvent
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.ledger.ledger_store import SqliteLedgerStore
from tests.helpers.checkpointed_turn import (
    Script,
    checkpoint_facts,
    checkpointed_service,
    data_store,
    run_turn,
    work_folder,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git")

IDENTITY = "workspace:v1:11111111-2222-4333-8444-777777777777"
WAIT_S = 30.0  # only a wrong order ever waits this long (the capture held for a T1 never made)


def _script(*steps: dict[str, object]) -> tuple[tuple[dict[str, object], ...], ...]:
    return (steps,)


READ_THEN_WRITE = _script(
    {"text": "", "toolCalls": [{"id": "r1", "name": "list_dir", "args": {"path": "."}}]},
    {
        "text": "",
        "toolCalls": [
            {"id": "w1", "name": "write_file", "args": {"path": "new.txt", "content": "x"}}
        ],
    },
    {"text": "Done."},
)


class HeldCarrier(GitCheckpointStore):
    """The real carrier; its first capture waits until ``release`` is set (a slow first
    capture of a big folder, made deterministic)."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.release = threading.Event()
        self.released_in_time: list[bool] = []
        self.captures = 0

    def capture(
        self,
        folder: Path,
        workspace_identity: str,
        ref: str,
        message: str,
        *,
        rebuild_index: bool = False,
    ) -> Snapshot:
        self.captures += 1
        if self.captures == 1:
            self.released_in_time.append(self.release.wait(WAIT_S))
        return super().capture(
            folder, workspace_identity, ref, message, rebuild_index=rebuild_index
        )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    with data_store(tmp_path) as instance:
        yield instance


def _dispatch_seq(events: list[StoredEvent], tool: str) -> int:
    [seq] = [
        row.seq
        for row in events
        if (row.event.get("actions") or {}).get("toolDispatch", {}).get("toolName") == tool
    ]
    return seq


def _turn(
    store: SqliteLedgerStore, tmp_path: Path, script: Script, carrier: HeldCarrier
) -> tuple[SessionService, list[StoredEvent], RunStatus, Path]:
    work = work_folder(tmp_path)
    (work / "old.txt").write_text("old\n")
    service = checkpointed_service(store, carrier, script, lambda folder: IDENTITY)
    _, outcome = run_turn(service, work, "look, then write")
    return service, list(store.read_run_events(outcome.run_id)), outcome.status, work


def test_a_read_only_call_runs_while_the_first_capture_does_and_a_write_waits_for_it(
    store: SqliteLedgerStore, tmp_path: Path
) -> None:
    carrier = HeldCarrier(tmp_path / "data")
    prepared = store.commit_tool_prepared

    def t1(call: RuntimeEvent | None, dispatch: RuntimeEvent) -> CommitResult:
        result = prepared(call, dispatch)
        name = (dispatch.get("actions") or {}).get("toolDispatch", {}).get("toolName")
        if name == "list_dir":
            carrier.release.set()  # the read-only call's T1 is in: the first capture may end
        return result

    store.commit_tool_prepared = t1  # type: ignore[method-assign,assignment]
    _, events, status, work = _turn(store, tmp_path, READ_THEN_WRITE, carrier)
    assert status is RunStatus.COMPLETED
    assert carrier.released_in_time == [True], "the model's first step waited for the capture"
    facts = checkpoint_facts(events)
    assert len(facts) == 2, "the first snapshot, and the one after the write"
    first = facts[0]
    read_t1 = _dispatch_seq(events, "list_dir")
    write_t1 = _dispatch_seq(events, "write_file")
    # The model's first step and its read-only call came before the first snapshot's fact...
    assert read_t1 < first.seq
    # ...and the writing call's T1 after it: the snapshot describes the folder before the write.
    assert first.seq < write_t1 < facts[1].seq
    fact = first.event["actions"]["workspaceCheckpoint"]
    assert fact["runtimeHighWater"] == first.seq - 1, "pinned to the prefix before it"
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", fact["treeId"]],
        cwd=str(work),
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            "GIT_DIR": str(carrier.git_dir(IDENTITY)),
        },
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert "old.txt" in listed.split()
    assert "new.txt" not in listed.split(), "the first snapshot is of the folder before the write"


def test_the_run_ending_waits_for_the_first_capture(
    store: SqliteLedgerStore, tmp_path: Path
) -> None:
    """A turn of read-only calls only: the first capture is still recorded, before the end."""
    carrier = HeldCarrier(tmp_path / "data")
    prepared = store.commit_tool_prepared

    def t1(call: RuntimeEvent | None, dispatch: RuntimeEvent) -> CommitResult:
        result = prepared(call, dispatch)
        carrier.release.set()
        return result

    store.commit_tool_prepared = t1  # type: ignore[method-assign,assignment]
    script = _script(
        {"text": "", "toolCalls": [{"id": "r1", "name": "list_dir", "args": {"path": "."}}]},
        {"text": "Seen."},
    )
    _, events, status, _ = _turn(store, tmp_path, script, carrier)
    assert status is RunStatus.COMPLETED
    assert carrier.released_in_time == [True]
    [fact] = checkpoint_facts(events)
    assert _dispatch_seq(events, "list_dir") < fact.seq
    assert fact.seq < events[-1].seq, "the run's ending comes after the first snapshot's fact"
