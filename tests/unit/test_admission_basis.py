"""The snapshot a continuation's admission was based on (``admission_basis``), standing in for
the boundary checkpoint of a continuation stopped before its first snapshot with nothing run;
and the planner's workspace gate judging it. One table each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from runtime.continuation.admission_basis import PARENT, RESTORED_COPY, admission_basis
from runtime.continuation.continuation_planner import (
    Boundary,
    FreshIds,
    PlannerInput,
    SafetyObservation,
    workspace_checkpoint,
)
from runtime.continuation.continuation_replay import ImmutablePrefix, ReplayPlan, RunIdentity
from runtime.continuation.lineage_reader import Lineage
from runtime.continuation.workspace_gate import CheckpointEvidence
from runtime.ledger.checkpoint_ports import PathChange, TreeChange
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus

HERE, COPY, OTHER = "workspace:v1:here", "workspace:v1:copy", "workspace:v1:other"
Events = tuple[RuntimeEvent, ...]


def _event(run: str, n: int, **fields: Any) -> RuntimeEvent:
    body: dict[str, Any] = {
        "id": f"{run}-{n}",
        "sessionId": "s",
        "invocationId": f"inv-{run}",
        "runId": run,
        "turnId": f"turn-{run}",
        "ts": n,
        "partial": False,
        "role": "system",
        "author": "system",
        **fields,
    }
    return cast(RuntimeEvent, body)


def _first(run: str, mode: str = "git_v1", **actions: Any) -> RuntimeEvent:
    protocol = {"toolBoundary": "t1_after_preflight_v1", "workspaceCheckpoints": {"mode": mode}}
    return _event(run, 0, actions={"runtimeProtocol": protocol, **actions})


def _start(run: str, mode: str = "git_v1", **actions: Any) -> RuntimeEvent:
    return _first(run, mode, continuationStart={"protocol": "continuation_start_v2"}, **actions)


def _snapshot(ref: str, workspace: str = HERE, epoch: int = 1) -> dict[str, Any]:
    return {
        "workspaceIdentity": workspace,
        "workspaceEpoch": epoch,
        "checkpointRef": ref,
        "commitId": "c" * 40,
        "treeId": "t" * 40,
    }


def _checkpoint(run: str, n: int, ref: str, workspace: str = HERE) -> RuntimeEvent:
    return _event(run, n, actions={"workspaceCheckpoint": _snapshot(ref, workspace)})


def _failed(run: str, n: int) -> RuntimeEvent:
    return _event(run, n, actions={"workspaceCheckpointFailed": {"reasonCode": "x"}})


def _dispatch(run: str, n: int, tool: str) -> RuntimeEvent:
    dispatch = {"toolName": tool, "providerToolCallId": f"c{n}", "operationId": f"op{n}"}
    return _event(run, n, actions={"toolDispatch": dispatch})


def _asked(run: str, n: int, tool: str) -> RuntimeEvent:
    content = {"kind": "function_call", "id": f"c{n}", "name": tool, "args": {}}
    return _event(run, n, role="assistant", author="model", content=content)


def _end(run: str) -> RuntimeEvent:
    return _event(run, 99, status="interrupted")


TRANSITION = {
    "kind": "isolated_restore",
    "fromIdentity": HERE,
    "toIdentity": COPY,
    "checkpointRef": "refs/p/1",
    "commitId": "c" * 40,
    "treeId": "t" * 40,
    "workspaceEpoch": 2,
}
PARENT_RUN: Events = (_first("p"), _checkpoint("p", 1, "refs/p/1"), _end("p"))
STOPPED: Events = (_start("c"), _end("c"))
RESTORED: Events = (_start("c", workspaceTransition=TRANSITION), _end("c"))
BASELINE = {**_snapshot("refs/b/0", epoch=2), "protocol": "workspace_baseline_v1"}


@pytest.mark.parametrize(
    ("generations", "identity", "expected"),
    [
        # A plain continuation stopped before its snapshot: its parent's boundary snapshot.
        ([PARENT_RUN, STOPPED], HERE, (PARENT, "refs/p/1", "p")),
        # Read-only calls change nothing.
        (
            [PARENT_RUN, (_start("c"), _dispatch("c", 1, "read_file"), _end("c"))],
            HERE,
            (PARENT, "refs/p/1", "p"),
        ),
        # Any call that may write keeps today's rule (conservative: asked for, or dispatched).
        ([PARENT_RUN, (_start("c"), _dispatch("c", 1, "bash"), _end("c"))], HERE, None),
        ([PARENT_RUN, (_start("c"), _dispatch("c", 1, "write_file"), _end("c"))], HERE, None),
        ([PARENT_RUN, (_start("c"), _asked("c", 1, "edit_file"), _end("c"))], HERE, None),
        # A snapshot or a failed capture of its own: judged by it.
        ([PARENT_RUN, (_start("c"), _checkpoint("c", 1, "refs/c/1"), _end("c"))], HERE, None),
        ([PARENT_RUN, (_start("c"), _failed("c", 1), _end("c"))], HERE, None),
        ([PARENT_RUN, (_start("c", workspaceBaseline=BASELINE), _end("c"))], HERE, None),
        # Not a continuation, or one without checkpoints.
        ([PARENT_RUN], HERE, None),
        ([(_first("c"), _end("c"))], HERE, None),
        ([PARENT_RUN, (_start("c", mode="unavailable"), _end("c"))], HERE, None),
        # The parent's boundary is stale, failed, or of another workspace: no basis.
        ([(*PARENT_RUN[:2], _dispatch("p", 2, "bash"), _end("p")), STOPPED], HERE, None),
        ([(*PARENT_RUN[:2], _failed("p", 2), _end("p")), STOPPED], HERE, None),
        ([PARENT_RUN, STOPPED], OTHER, None),
        ([PARENT_RUN, STOPPED], None, None),
        # A parent without checkpoints has nothing to offer.
        ([(_first("p", mode="unavailable"), _end("p")), STOPPED], HERE, None),
        # A parent that began with a rebaseline: its baseline is its boundary snapshot.
        (
            [PARENT_RUN, (_start("b", workspaceBaseline=BASELINE), _end("b")), STOPPED],
            HERE,
            (PARENT, "refs/b/0", "b"),
        ),
        # A restored copy: the snapshot it was made from, compared with the copy.
        ([PARENT_RUN, RESTORED], COPY, (RESTORED_COPY, "refs/p/1", "c")),
        ([PARENT_RUN, RESTORED], HERE, None),
        # Several generations stopped before their snapshot: walked up to the basis.
        ([PARENT_RUN, (_start("m"), _end("m")), STOPPED], HERE, (PARENT, "refs/p/1", "p")),
        (
            [PARENT_RUN, (_start("m", workspaceTransition=TRANSITION), _end("m")), STOPPED],
            COPY,
            (RESTORED_COPY, "refs/p/1", "m"),
        ),
        # A middle generation that wrote: it decides (stale), nothing older is looked at.
        ([PARENT_RUN, (_start("m"), _dispatch("m", 1, "bash"), _end("m")), STOPPED], HERE, None),
    ],
)
def test_admission_basis(
    generations: list[Events], identity: str | None, expected: tuple[str, str, str] | None
) -> None:
    basis = admission_basis(generations, identity)
    if expected is None:
        assert basis is None
        return
    assert basis is not None
    assert (basis.kind, basis.checkpoint["checkpointRef"], basis.run_id) == expected
    assert basis.folder_identity == identity


def test_a_restored_copy_basis_names_the_store_holding_the_snapshot_and_the_new_epoch() -> None:
    basis = admission_basis([PARENT_RUN, RESTORED], COPY)
    assert basis is not None
    assert basis.checkpoint["workspaceIdentity"] == HERE  # the original folder's store
    assert basis.checkpoint["workspaceEpoch"] == 2
    assert basis.checkpoint["treeId"] == "t" * 40


def _header(run: str, identity: str) -> RunHeader:
    return RunHeader(
        run,
        "s",
        f"inv-{run}",
        f"turn-{run}",
        RunStatus.FAILED,
        "/w",
        1,
        1,
        1,
        workspace_identity=identity,
    )


def _gate_boundary(
    generations: Sequence[Events], identity: str, evidence: CheckpointEvidence | None
) -> Boundary:
    prefixes = tuple(
        ImmutablePrefix(
            RunIdentity("s", f"inv-{g[0]['runId']}", g[0]["runId"], f"turn-{g[0]['runId']}"),
            tuple(g),
            len(g),
            "sha256:" + "1" * 64,
        )
        for g in generations
    )
    headers = tuple(_header(g[0]["runId"], identity) for g in generations)
    lineage = Lineage(prefixes, headers)
    given = PlannerInput(
        session_id="s",
        source=headers[-1],
        lineage=lineage,
        existing_claim=None,
        claim_authority_error=None,
        observation=SafetyObservation(identity, "/w", True, ()),
        ids=FreshIds("i", "r", "t", "cl", "st"),
        checkpoint_evidence=evidence,
    )
    replay = ReplayPlan((), "sha256:" + "2" * 64, "sha256:" + "3" * 64, (), ())
    return Boundary(given, lineage, replay, prefixes[-1])


CHANGED = (TreeChange("a.txt", PathChange.MODIFIED),)


@pytest.mark.parametrize(
    ("generations", "identity", "evidence", "expected"),
    [
        # The basis is intact and the files match: verified against it.
        (
            [PARENT_RUN, STOPPED],
            HERE,
            CheckpointEvidence(True, basis=True),
            [(None, "workspace_verified")],
        ),
        (
            [PARENT_RUN, RESTORED],
            COPY,
            CheckpointEvidence(True, basis=True),
            [(None, "workspace_verified")],
        ),
        # The files differ from it: drift, with the two ways forward.
        (
            [PARENT_RUN, STOPPED],
            HERE,
            CheckpointEvidence(True, CHANGED, basis=True),
            [("workspace_drift", "workspace_drift")],
        ),
        # The basis is not intact (no evidence about it): today's park.
        (
            [PARENT_RUN, STOPPED],
            HERE,
            None,
            [("workspace_checkpoint_stale", "workspace_checkpoint_stale")],
        ),
        # Evidence that is not about the basis never stands in for it.
        (
            [PARENT_RUN, STOPPED],
            HERE,
            CheckpointEvidence(True),
            [("workspace_checkpoint_stale", "workspace_checkpoint_stale")],
        ),
        # A writing call in the continuation: today's park, whatever the evidence says.
        (
            [PARENT_RUN, (_start("c"), _dispatch("c", 1, "bash"), _end("c"))],
            HERE,
            CheckpointEvidence(True, basis=True),
            [("workspace_checkpoint_stale", "workspace_checkpoint_stale")],
        ),
        # A problem comparing with the basis parks as any observation problem does.
        (
            [PARENT_RUN, STOPPED],
            HERE,
            CheckpointEvidence(True, problem="git failed", basis=True),
            [("safety_observation_unavailable", "safety_observation_unavailable")],
        ),
    ],
)
def test_the_workspace_gate_judges_the_basis(
    generations: list[Events],
    identity: str,
    evidence: CheckpointEvidence | None,
    expected: list[tuple[str | None, str]],
) -> None:
    findings = workspace_checkpoint(_gate_boundary(generations, identity, evidence))
    codes = [(f.reason.value if f.reason else None, f.diagnostic.code) for f in findings]
    assert codes == expected
    if expected[0][1] in ("workspace_verified", "workspace_drift"):
        detail = findings[0].diagnostic.detail
        assert detail["checkpointRef"] == "refs/p/1"
        assert detail["basis"] in (PARENT, RESTORED_COPY)
        assert "the interrupted resume started from" in findings[0].diagnostic.message
