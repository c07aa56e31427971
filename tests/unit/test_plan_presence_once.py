"""``maka plan`` decides whether the boundary snapshot is whole once (docs/design/workspace.md
section 3): the restore point, the workspace gate's evidence and the snapshot a rebaseline would
compare with all ask the same question, and each answer walks every object under the snapshot.
A real turn (scripted provider, real store, the real ``git`` carrier) fails after a write, the
folder drifts, and the plan is made with the real safety inspector."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.host.resume_seam import resume_service
from runtime.continuation.resume_service import ResumeService
from runtime.ledger.codes import ParkReason
from runtime.ledger.store_ports import RunStatus
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.ledger.ledger_store import SqliteLedgerStore
from storage.sessions.workspace_identity import resolve_workspace_identity
from tests.helpers.checkpointed_turn import (
    checkpointed_service,
    data_store,
    run_turn,
    work_folder,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git")

SCRIPT = (
    (
        {
            "text": "",
            "toolCalls": [
                {"id": "w1", "name": "write_file", "args": {"path": "a.txt", "content": "a"}}
            ],
        },
        {"error": {"message": "the server went away"}},
    ),
)


class CountingCarrier(GitCheckpointStore):
    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.presence_checks = 0

    def has_snapshot(self, workspace_identity: str, commit_id: str, tree_id: str) -> bool:
        self.presence_checks += 1
        return super().has_snapshot(workspace_identity, commit_id, tree_id)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    with data_store(tmp_path) as instance:
        yield instance


def _resume_seam(store: SqliteLedgerStore, carrier: GitCheckpointStore) -> ResumeService:
    return resume_service(
        store,
        lambda: ("read_file", "write_file", "edit_file", "bash", "list_dir", "glob"),
        None,
        enabled=True,
        clock=lambda: 1,
        lifecycle=None,
        checkpoints=carrier,
    )


def test_a_plan_looks_the_boundary_snapshot_up_once(
    store: SqliteLedgerStore, tmp_path: Path
) -> None:
    work = work_folder(tmp_path)
    carrier = CountingCarrier(tmp_path / "data")
    service = checkpointed_service(
        store, carrier, SCRIPT, lambda folder: resolve_workspace_identity(folder).identity
    )
    session_id, outcome = run_turn(service, work, "write")
    assert outcome.status is RunStatus.FAILED
    (work / "b.txt").write_text("changed behind the agent's back\n")
    seam = _resume_seam(store, carrier)
    carrier.presence_checks = 0
    plan = seam.plan_latest(session_id)
    assert ParkReason.WORKSPACE_DRIFT in plan.rejection_reasons, plan.rejection_reasons
    assert "rebaseline" in plan.workspace_options
    assert carrier.presence_checks == 1


def test_the_plan_says_where_a_snapshot_kept_by_another_host_may_be(
    store: SqliteLedgerStore, tmp_path: Path
) -> None:
    """A host that took the session over plans with its own checkpoint store, where the
    snapshot the other host took is not: the park says where it may be (the carrier's note
    reaches the gate through the plan's one-answer-per-snapshot wrapper)."""
    work = work_folder(tmp_path)
    carrier = CountingCarrier(tmp_path / "data")
    service = checkpointed_service(
        store, carrier, SCRIPT, lambda folder: resolve_workspace_identity(folder).identity
    )
    session_id, outcome = run_turn(service, work, "write")
    assert outcome.status is RunStatus.FAILED
    elsewhere = CountingCarrier(tmp_path / "other-host")
    elsewhere.missing_note = "a snapshot another host took is in that host's data folder"
    seam = _resume_seam(store, elsewhere)
    # Unchanged, the folder's tree is the one the snapshot recorded: verified without it.
    plan = seam.plan_latest(session_id)
    (verified,) = [d for d in plan.diagnostics if d.code == "workspace_verified"]
    assert verified.detail["comparedBy"] == "treeId"
    (work / "added.txt").write_text("changed after the stop\n")
    plan = seam.plan_latest(session_id)
    assert ParkReason.WORKSPACE_CHECKPOINT_MISSING in plan.rejection_reasons
    (missing,) = [d for d in plan.diagnostics if d.code == "workspace_checkpoint_missing"]
    assert missing.message.endswith(f"({elsewhere.missing_note})"), missing.message
