"""The file-write reconciler on a real store and a real folder: every observation, the paths it
refuses to follow, identity changes, idempotency, and that it never writes anything."""

from __future__ import annotations

import itertools
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.agent.event_builders import EventBuilder, RunIdentity
from runtime.agent.transcript_projection import transcript_of_run
from runtime.base.cancel_token import CancelToken
from runtime.ledger.canonical_codec import canonical_args_hash, canonical_json_bytes, operation_id
from runtime.ledger.codes import ReconcileObservation, ResolverReason, ResolverStatus, StoreCode
from runtime.ledger.event_model import FileStateEvidence, RuntimeEvent
from runtime.ledger.store_ports import CommitResult, StoreRefusal
from runtime.recovery.file_observation import (
    FileObservation,
    ObservationProblem,
    classify,
    observe_write_target,
)
from runtime.recovery.file_reconciler import FileReconciler, build_bundle, reconcile_targets
from runtime.recovery.recovery_resolver import resolve_recovery
from runtime.recovery.startup_recovery import StartupRecoveryReport, run_startup_recovery
from runtime.tools.file_state_evidence import digest_bytes
from runtime.tools.tool_catalog import default_catalog
from runtime.tools.tool_contract import PreparedCall, ToolContext
from storage.ledger.ledger_store import open_store
from storage.sessions.workspace_identity import (
    LEGACY_MARKER_NAME,
    MARKER_DIR,
    MARKER_NAME,
    marker_bytes,
    read_workspace_identity,
    resolve_workspace_identity,
)
from tests.helpers.ledger_builders import RunIds
from tests.helpers.resume_fixtures import seed_interrupted_run

_clock = itertools.count(10_000)


def _now() -> int:
    return next(_clock)


def _snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root`` with its bytes (or link target), inode and mtime."""
    found: dict[str, tuple[Any, ...]] = {}
    for path in sorted(root.rglob("*")):
        info = os.lstat(path)
        if path.is_symlink():
            body: Any = os.readlink(path)
        elif path.is_file():
            body = path.read_bytes()
        else:
            body = "dir"
        found[path.relative_to(root).as_posix()] = (body, info.st_ino, info.st_mtime_ns)
    return found


class Drill:
    """One interrupted run in a real store: a user turn and T1 of each prepared tool call."""

    def __init__(self, tmp_path: Path) -> None:
        self.data = tmp_path / "data"
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.identity = resolve_workspace_identity(self.work).identity
        self.ids = RunIds("sess-r", "inv-r", "run-r", "turn-r")
        self.builder = EventBuilder(RunIdentity("sess-r", "inv-r", "run-r", "turn-r"))
        self.ctx = ToolContext(
            cwd=Path(os.path.realpath(self.work)),
            cancel=CancelToken(),
            workspace_identity=self.identity,
        )
        self.events: list[RuntimeEvent] = [self.builder.user_message("go", 1, t1_marker=True)]
        self.prepared: dict[str, PreparedCall[Any]] = {}

    def dispatch(self, call_id: str, tool_name: str, args: Mapping[str, Any]) -> PreparedCall[Any]:
        tool = default_catalog().get(tool_name)
        assert tool is not None
        prepared = tool.prepare(args, self.ctx)
        op = operation_id("inv-r", call_id)
        ts = len(self.events) + 1
        self.events.append(
            self.builder.function_call(
                op, call_id, name=tool_name, args=dict(args), step_id="s1", ts=ts
            )
        )
        self.events.append(
            self.builder.tool_dispatch(
                op,
                call_id,
                name=tool_name,
                args_hash=canonical_args_hash(tool_name, dict(args)),
                recovery_mode=tool.recovery_mode,
                evidence=prepared.evidence,
                ts=ts + 1,
            )
        )
        self.prepared[call_id] = prepared
        return prepared

    def run_tool(self, call_id: str) -> Any:
        """The side effect happened (a crash at P4 follows)."""
        prepared = self.prepared[call_id]
        tool = default_catalog().get(prepared.tool_name)
        assert tool is not None
        return tool.run(prepared, self.ctx).result

    def crash(self) -> None:
        store = open_store(self.data)
        try:
            seed_interrupted_run(
                store, self.ids, self.events, cwd=str(self.work), workspace_identity=self.identity
            )
        finally:
            store.close()

    def recover(self) -> tuple[StartupRecoveryReport, FileReconciler, list[RuntimeEvent]]:
        """The next start: new store, new owner epoch, recovery with the real reconciler."""
        store = open_store(self.data)
        try:
            reconciler = FileReconciler(store, read_workspace_identity, _now)
            report = run_startup_recovery(store, _now, reconciler)
            events = [row.event for row in store.read_run_events("run-r")]
        finally:
            store.close()
        return report, reconciler, events


def _recovery_events(events: list[RuntimeEvent]) -> list[RuntimeEvent]:
    return [e for e in events if "toolRecovery" in (e.get("actions") or {})]


def _decision_payload(events: list[RuntimeEvent]) -> dict[str, Any]:
    decisions = [
        e["actions"]["toolRecovery"]["payload"]
        for e in _recovery_events(events)
        if e["actions"]["toolRecovery"]["kind"] == "maka.tool.recovery_decision"
    ]
    assert len(decisions) == 1
    return dict(decisions[0])


def _observation(events: list[RuntimeEvent]) -> str:
    facts = [
        e["actions"]["toolRecovery"]["payload"]["observation"]
        for e in _recovery_events(events)
        if e["actions"]["toolRecovery"]["kind"] == "maka.tool.reconcile_result"
    ]
    assert len(facts) == 1
    return str(facts[0])


# ---- matches_expected_state: completed, with the tool's normal result ------------------------


@pytest.mark.parametrize(
    ("tool_name", "args", "existing"),
    [
        ("write_file", {"path": "notes/new.txt", "content": "héllo\n"}, None),
        ("write_file", {"path": "a.txt", "content": "new"}, b"old"),
        ("edit_file", {"path": "a.txt", "old_string": "two", "new_string": "2"}, b"one two\n"),
    ],
)
def test_a_write_that_happened_is_completed_with_the_normal_result(
    tmp_path: Path, tool_name: str, args: dict[str, Any], existing: bytes | None
) -> None:
    drill = Drill(tmp_path)
    if existing is not None:
        (drill.work / args["path"]).write_bytes(existing)
    drill.dispatch("c1", tool_name, args)
    normal_result = drill.run_tool("c1")
    drill.crash()
    before = _snapshot(drill.work)
    report, reconciler, events = drill.recover()
    assert _snapshot(drill.work) == before  # recovery wrote nothing
    op = operation_id("inv-r", "c1")
    assert report.reconciled_operations == (op,)
    assert [o.observation for o in reconciler.outcomes] == ["matches_expected_state"]
    assert [o.created for o in reconciler.outcomes] == [True]
    ids = [e["id"] for e in events]
    assert ids[-5:] == [
        f"{op}_dispatch",
        f"{op}_reconcile",
        f"{op}_response",
        f"{op}_decision",
        "run-r_recovered_terminal",
    ]
    outcome = events[ids.index(f"{op}_response")]
    content = outcome.get("content")
    assert content is not None and content["kind"] == "function_response"
    assert "isError" not in content
    assert canonical_json_bytes(content["result"]) == canonical_json_bytes(normal_result)
    assert outcome.get("refs") == {"operationId": op, "toolCallId": "c1"}
    decision = _decision_payload(events)
    assert decision["disposition"] == "completed"
    assert decision["reasonCode"] == "reconcile_matches_expected_state"
    assert decision["outcomeEventId"] == f"{op}_response"
    assert decision["evidenceEventIds"] == [
        f"{op}_call",
        f"{op}_dispatch",
        f"{op}_reconcile",
        f"{op}_response",
    ]
    verdict = resolve_recovery(events).decisions[0]
    assert (verdict.status, verdict.reason) == (
        ResolverStatus.COMPLETED,
        ResolverReason.RECOVERY_BUNDLE_COMPLETED,
    )
    cards = [entry for entry in transcript_of_run(events) if entry.type == "tool_card"]
    assert [card.status for card in cards] == ["completed_after_recovery"]


# ---- parked observations ---------------------------------------------------------------------


def test_a_write_that_did_not_happen_parks_as_prior_state(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    (drill.work / "a.txt").write_bytes(b"old")
    drill.dispatch("c1", "write_file", {"path": "a.txt", "content": "new"})
    drill.dispatch("c2", "write_file", {"path": "fresh.txt", "content": "x"})
    drill.crash()
    before = _snapshot(drill.work)
    report, reconciler, events = drill.recover()
    assert _snapshot(drill.work) == before
    assert (drill.work / "a.txt").read_bytes() == b"old"
    assert not (drill.work / "fresh.txt").exists()  # never redone
    assert [(o.tool_call_id, o.observation, o.reason) for o in reconciler.outcomes] == [
        ("c1", "matches_prior_state", "reconcile_matches_prior_state"),
        ("c2", "matches_prior_state", "reconcile_matches_prior_state"),
    ]
    assert len(report.reconciled_operations) == 2
    verdicts = resolve_recovery(events).decisions
    assert [(v.status, v.reason) for v in verdicts] == [
        (ResolverStatus.PARKED, ResolverReason.RECONCILE_MATCHES_PRIOR_STATE)
    ] * 2
    kinds = [content["kind"] for e in events if (content := e.get("content")) is not None]
    assert "function_response" not in kinds  # a parked bundle has no outcome
    cards = [entry for entry in transcript_of_run(events) if entry.type == "tool_card"]
    assert [(c.status, c.park_reason) for c in cards] == [
        ("parked", "reconcile_matches_prior_state")
    ] * 2


@pytest.mark.parametrize(
    ("existing", "change"),
    [
        (b"old", lambda p: p.write_bytes(b"someone else's text")),
        (b"old", lambda p: p.unlink()),  # existed before, now gone: not the prior state
        (None, lambda p: p.write_bytes(b"made by hand")),
    ],
)
def test_a_file_changed_by_someone_else_parks_as_diverged_and_is_kept(
    tmp_path: Path, existing: bytes | None, change: Any
) -> None:
    drill = Drill(tmp_path)
    target = drill.work / "a.txt"
    if existing is not None:
        target.write_bytes(existing)
    drill.dispatch("c1", "write_file", {"path": "a.txt", "content": "new"})
    drill.crash()
    change(target)
    before = _snapshot(drill.work)
    _, reconciler, events = drill.recover()
    assert _snapshot(drill.work) == before  # the other edit is preserved byte for byte
    assert [o.observation for o in reconciler.outcomes] == ["diverged"]
    assert _decision_payload(events)["reasonCode"] == "reconcile_diverged"


def _make_symlink_target(work: Path) -> None:
    (work / "elsewhere.txt").write_bytes(b"new")  # even the expected bytes behind a link
    (work / "a.txt").unlink(missing_ok=True)
    (work / "a.txt").symlink_to(work / "elsewhere.txt")


def _make_symlinked_folder(work: Path) -> None:
    (work / "real").mkdir()
    (work / "real" / "a.txt").write_bytes(b"new")
    (work / "sub").rmdir()
    (work / "sub").symlink_to(work / "real")


@pytest.mark.parametrize(
    ("path", "damage", "problem"),
    [
        ("a.txt", _make_symlink_target, ObservationProblem.SYMLINK),
        ("sub/a.txt", _make_symlinked_folder, ObservationProblem.SYMLINK),
        ("a.txt", lambda w: (w / "a.txt").mkdir(), ObservationProblem.NOT_A_REGULAR_FILE),
        (
            "sub/a.txt",
            lambda w: (w / "sub").rmdir() or (w / "sub").write_bytes(b"f"),
            ObservationProblem.NOT_A_REGULAR_FILE,
        ),
        ("a.txt", lambda w: os.mkfifo(w / "a.txt"), ObservationProblem.NOT_A_REGULAR_FILE),
    ],
    ids=["symlink", "symlinked-folder", "directory", "folder-became-file", "fifo"],
)
def test_targets_that_are_not_plain_files_are_unreadable(
    tmp_path: Path, path: str, damage: Any, problem: ObservationProblem
) -> None:
    drill = Drill(tmp_path)
    (drill.work / "sub").mkdir()
    drill.dispatch("c1", "write_file", {"path": path, "content": "new"})
    drill.crash()
    damage(drill.work)
    evidence = drill.prepared["c1"].evidence
    assert evidence is not None
    observed = observe_write_target(str(drill.work), evidence, read_workspace_identity)
    assert observed.problem is problem
    before = _snapshot(drill.work)
    _, reconciler, events = drill.recover()
    assert _snapshot(drill.work) == before
    assert [o.observation for o in reconciler.outcomes] == ["unreadable"]
    assert _decision_payload(events)["reasonCode"] == "reconcile_unreadable"


def _replace_marker(work: Path) -> None:
    (work / MARKER_NAME).unlink()
    resolve_workspace_identity(work)  # a new workspace identity in the same folder


def _legacy_marker_of_another_workspace(work: Path) -> None:
    shutil.rmtree(work / MARKER_DIR)
    (work / LEGACY_MARKER_NAME).write_bytes(marker_bytes(str(uuid.uuid4()), 1))


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (_replace_marker, ObservationProblem.WORKSPACE_IDENTITY_CHANGED),
        (_legacy_marker_of_another_workspace, ObservationProblem.WORKSPACE_IDENTITY_CHANGED),
        (
            lambda w: (w / MARKER_NAME).unlink(),
            ObservationProblem.WORKSPACE_IDENTITY_MISSING,
        ),
        (
            lambda w: (w / MARKER_NAME).write_text("{not json"),
            ObservationProblem.WORKSPACE_UNREADABLE,
        ),
    ],
    ids=["identity-changed", "legacy-of-another", "marker-missing", "marker-corrupt"],
)
def test_a_changed_workspace_identity_is_unreadable_even_with_the_expected_bytes(
    tmp_path: Path, damage: Any, problem: ObservationProblem
) -> None:
    drill = Drill(tmp_path)
    drill.dispatch("c1", "write_file", {"path": "a.txt", "content": "new"})
    drill.run_tool("c1")
    drill.crash()
    damage(drill.work)
    evidence = drill.prepared["c1"].evidence
    assert evidence is not None
    observed = observe_write_target(str(drill.work), evidence, read_workspace_identity)
    assert observed.problem is problem
    before = _snapshot(drill.work)
    _, reconciler, events = drill.recover()
    assert _snapshot(drill.work) == before  # no marker is created by recovery either
    assert [o.observation for o in reconciler.outcomes] == ["unreadable"]
    assert _decision_payload(events)["reasonCode"] == "reconcile_unreadable"


def test_a_moved_session_folder_is_unreadable(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.dispatch("c1", "write_file", {"path": "a.txt", "content": "new"})
    drill.run_tool("c1")
    drill.crash()
    drill.work.rename(tmp_path / "moved")
    _, reconciler, _ = drill.recover()
    assert [o.observation for o in reconciler.outcomes] == ["unreadable"]
    assert not drill.work.exists()


# ---- what is left alone ----------------------------------------------------------------------


def test_bash_and_writes_without_evidence_stay_indeterminate(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.dispatch("b1", "bash", {"command": "echo hi > out.txt"})
    drill.ctx = ToolContext(cwd=drill.ctx.cwd, cancel=CancelToken(), workspace_identity=None)
    prepared = drill.dispatch("w1", "write_file", {"path": "a.txt", "content": "x"})
    assert prepared.evidence is None  # no identity, no evidence
    drill.crash()
    report, reconciler, events = drill.recover()
    assert report.reconciled_operations == ()
    assert reconciler.outcomes == []
    assert _recovery_events(events) == []
    verdicts = resolve_recovery(events).decisions
    assert {v.status for v in verdicts} == {ResolverStatus.INDETERMINATE}
    assert not (drill.work / "out.txt").exists() and not (drill.work / "a.txt").exists()


def test_only_reconcilable_operations_of_a_mixed_run_get_a_bundle(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.dispatch("b1", "bash", {"command": "true"})
    drill.dispatch("w1", "write_file", {"path": "a.txt", "content": "x"})
    drill.run_tool("w1")
    drill.crash()
    report, _, events = drill.recover()
    assert report.reconciled_operations == (operation_id("inv-r", "w1"),)
    verdicts = {v.tool_call_id: v.status for v in resolve_recovery(events).decisions}
    assert verdicts == {"b1": ResolverStatus.INDETERMINATE, "w1": ResolverStatus.COMPLETED}
    # the reason describes the ledger the crash left (it ended in a dispatch), not recovery's facts
    assert report.repaired[0].recovery_reason == "tool_interrupted"


# ---- idempotency and refusals ----------------------------------------------------------------


def test_recovery_is_idempotent_and_an_exact_bundle_retry_is_a_no_op(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.dispatch("c1", "write_file", {"path": "a.txt", "content": "x"})
    drill.run_tool("c1")
    drill.crash()
    _, _, events = drill.recover()
    again, reconciler, same = drill.recover()
    assert same == events and reconciler.outcomes == [] and again.reconciled_operations == ()
    store = open_store(drill.data)
    try:
        bundle = [e for e in events if "_recovered_terminal" not in e["id"]][-3:]
        result = store.commit_recovery_bundle(bundle[0], bundle[1], bundle[2])
        assert result.created is False
        assert [row.event for row in store.read_run_events("run-r")] == events
    finally:
        store.close()


def test_a_refused_bundle_leaves_the_operation_indeterminate(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.dispatch("c1", "write_file", {"path": "a.txt", "content": "x"})
    drill.crash()

    class RefusingWriter:
        def commit_recovery_bundle(self, *_: RuntimeEvent | None) -> CommitResult:
            raise StoreRefusal(StoreCode.STORE_CORRUPT, "disk on fire")

    store = open_store(drill.data)
    try:
        reconciler = FileReconciler(RefusingWriter(), read_workspace_identity, _now)
        report = run_startup_recovery(store, _now, reconciler)
        events = [row.event for row in store.read_run_events("run-r")]
    finally:
        store.close()
    assert report.reconciled_operations == ()
    assert reconciler.outcomes[0].error == "store_corrupt: disk on fire"
    assert [r.run_id for r in report.repaired] == ["run-r"]  # the ending is still repaired
    assert resolve_recovery(events).decisions[0].status is ResolverStatus.INDETERMINATE


def test_a_corrupt_ledger_offers_no_target(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.dispatch("c1", "write_file", {"path": "a.txt", "content": "x"})
    assert len(reconcile_targets(drill.events)) == 1
    duplicated = [*drill.events, drill.events[-1]]  # a duplicate dispatch: corruption
    assert reconcile_targets(duplicated) == []


# ---- the observation document and the decision table ----------------------------------------


def test_bundle_bytes_are_a_pure_function_of_the_observation(tmp_path: Path) -> None:
    drill = Drill(tmp_path)
    drill.dispatch("c1", "write_file", {"path": "a.txt", "content": "x"})
    (target,) = reconcile_targets(drill.events)
    seen = FileObservation("a.txt", drill.identity, exists=False)
    first, second = build_bundle(target, seen, 5), build_bundle(target, seen, 5)
    assert first == second
    other = build_bundle(
        target,
        FileObservation("a.txt", drill.identity, exists=True, sha256=digest_bytes(b"y"), size=1),
        5,
    )
    assert other.observation is ReconcileObservation.DIVERGED
    first_digest = first.reconcile["actions"]["toolRecovery"]["payload"]["observationDigest"]
    other_digest = other.reconcile["actions"]["toolRecovery"]["payload"]["observationDigest"]
    assert first_digest != other_digest


_SHAS = st.sampled_from([digest_bytes(b"a"), digest_bytes(b"b"), digest_bytes(b"c")])


@given(
    before_exists=st.booleans(),
    before_sha=_SHAS,
    after_sha=_SHAS,
    now_exists=st.booleans(),
    now_sha=_SHAS,
    problem=st.sampled_from([None, *ObservationProblem]),
)
def test_classification_follows_the_table(
    *,
    before_exists: bool,
    before_sha: str,
    after_sha: str,
    now_exists: bool,
    now_sha: str,
    problem: ObservationProblem | None,
) -> None:
    evidence: FileStateEvidence = {
        "kind": "file_state_v1",
        "path": "a.txt",
        "workspaceIdentity": "w",
        "before": {"exists": True, "sha256": before_sha, "size": 1}
        if before_exists
        else {"exists": False},
        "expectedAfter": {"exists": True, "sha256": after_sha, "size": 1},
    }
    seen = FileObservation(
        "a.txt",
        "w",
        exists=now_exists,
        sha256=now_sha if now_exists else None,
        size=1 if now_exists else None,
        problem=problem,
    )
    verdict = classify(seen, evidence)
    if problem is not None:
        assert verdict is ReconcileObservation.UNREADABLE
    elif now_exists and now_sha == after_sha:
        assert verdict is ReconcileObservation.MATCHES_EXPECTED_STATE
    elif (not before_exists and not now_exists) or (
        before_exists and now_exists and now_sha == before_sha
    ):
        assert verdict is ReconcileObservation.MATCHES_PRIOR_STATE
    else:
        assert verdict is ReconcileObservation.DIVERGED
    assert seen.digest.startswith("sha256:") and len(seen.digest) == 71


@pytest.mark.parametrize(
    "bad",
    ["", "/etc/passwd", "../x", "a/../b", "./a", ".maka-workspace.json", ".maka/workspace.json"],
)
def test_an_evidence_path_that_is_not_plain_is_unreadable(tmp_path: Path, bad: str) -> None:
    work = tmp_path / "w"
    work.mkdir()
    identity = resolve_workspace_identity(work).identity
    evidence: FileStateEvidence = {
        "kind": "file_state_v1",
        "path": bad,
        "workspaceIdentity": identity,
        "before": {"exists": False},
        "expectedAfter": {"exists": True, "sha256": digest_bytes(b"x"), "size": 1},
    }
    observed = observe_write_target(str(work), evidence, read_workspace_identity)
    assert observed.problem is ObservationProblem.PATH_INVALID
