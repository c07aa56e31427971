"""Workspace checkpoint facts: only their own writer commits them, the tool scanner passes over
them, and the planner's reading of a run's checkpoint state (docs/design/workspace.md sections
2 and 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from runtime.ledger.codes import WriterRejectionCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord, StoreRefusal
from runtime.ledger.tool_ledger_scanner import scan_tool_ledger
from runtime.ledger.workspace_facts import boundary_checkpoint, declared_mode, is_workspace_fact
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    user_text,
)

IDS = RunIds()


def _fact(
    event_id: str, *, failed: bool = False, tree: str = "a" * 40, **envelope: Any
) -> RuntimeEvent:
    body: dict[str, Any]
    if failed:
        key, body = (
            "workspaceCheckpointFailed",
            {
                "protocol": "workspace_checkpoint_v1",
                "workspaceIdentity": "workspace:v1:x",
                "runtimeHighWater": 1,
                "reasonCode": "checkpoint_git_failed",
            },
        )
    else:
        key, body = (
            "workspaceCheckpoint",
            {
                "protocol": "workspace_checkpoint_v1",
                "workspaceIdentity": "workspace:v1:x",
                "workspaceEpoch": 1,
                "runtimeHighWater": 1,
                "runtimeDigest": "sha256:" + "0" * 64,
                "checkpointRef": "refs/maka/s/r/1",
                "commitId": "b" * 40,
                "treeId": tree,
                "policyHash": "c" * 64,
            },
        )
    event = IDS.envelope(event_id, "system", "system", 2)
    event["modelVisibility"] = "hidden"
    event["actions"] = {key: body}
    event.update(envelope)
    return cast(RuntimeEvent, event)


@pytest.fixture
def store(tmp_path: Path) -> SqliteLedgerStore:
    opened = open_store(tmp_path)
    opened.create_session(SessionRecord(IDS.session_id, "/work", "s", 1))
    opened.create_run(
        RunHeader(
            IDS.run_id,
            IDS.session_id,
            IDS.invocation_id,
            IDS.turn_id,
            RunStatus.CREATED,
            "/work",
            opened.bump_owner_epoch(),
            1,
            1,
        )
    )
    opened.append_event(user_text(marker=True, ids=IDS))
    return opened


def test_only_the_workspace_fact_writer_commits_checkpoint_facts(store: SqliteLedgerStore) -> None:
    for fact in (_fact("ck1"), _fact("ck2", failed=True)):
        with pytest.raises(StoreRefusal) as refused:
            store.append_event(fact)
        assert refused.value.code == WriterRejectionCode.RESERVED_WORKSPACE_FACT
        assert store.commit_workspace_fact(fact).created
        assert not store.commit_workspace_fact(fact).created  # an exact retry
    visible = _fact("ck3", modelVisibility="visible")
    with pytest.raises(StoreRefusal):
        store.commit_workspace_fact(visible)
    with pytest.raises(StoreRefusal):
        store.commit_workspace_fact(user_text(event_id="u2", ids=IDS))
    events = [row.event for row in store.read_run_events(IDS.run_id)]
    assert [e["id"] for e in events if is_workspace_fact(e)] == ["ck1", "ck2"]
    assert not scan_tool_ledger(events).issues


def test_the_boundary_checkpoint_ages_only_with_writing_calls() -> None:
    first = user_text(marker=True, ids=IDS)
    read = call_event("r1", "read_file", {"path": "a"}, ids=IDS)
    write = call_event("w1", "bash", {"command": "x"}, ids=IDS)
    clean = boundary_checkpoint([first, _fact("ck1"), read, dispatch_event(read)])
    assert clean.checkpoint is not None and clean.stale_after is None and clean.failed is None
    stale = boundary_checkpoint([first, _fact("ck1"), write, dispatch_event(write)])
    assert stale.stale_after is not None and stale.stale_tool == "bash"
    recaptured = boundary_checkpoint(
        [
            first,
            _fact("ck1"),
            write,
            dispatch_event(write),
            bound_response(write),
            _fact("ck2", tree="d" * 40),
        ]
    )
    assert recaptured.stale_after is None
    assert recaptured.checkpoint is not None and recaptured.checkpoint["treeId"] == "d" * 40
    failed = boundary_checkpoint([first, _fact("ck1"), _fact("ck2", failed=True)])
    assert failed.failed is not None
    assert declared_mode([first]) is None


def test_the_desktop_carries_a_drifts_changed_files_to_the_banner() -> None:
    from app.host.resume_wire import parked_outcome as _parked
    from runtime.continuation.continuation_planner import ContinuationPlan, PlanDiagnostic
    from runtime.ledger.checkpoint_ports import PathChange, TreeChange, changed_paths_summary
    from runtime.ledger.codes import ParkReason

    changes = [TreeChange(f"f{n:03d}", PathChange.MODIFIED) for n in range(60)]
    drift = PlanDiagnostic(
        "workspace_drift", "60 files changed", detail=changed_paths_summary(changes)
    )
    plan = ContinuationPlan("s", "r", (ParkReason.WORKSPACE_DRIFT,), (drift,))
    [diagnostic] = _parked(plan).diagnostics
    assert [p.path for p in diagnostic.changed_paths] == [f"f{n:03d}" for n in range(50)]
    assert diagnostic.more_changed_paths == 10


def test_the_desktop_carries_where_a_damaged_record_is_to_the_banner() -> None:
    from app.host.resume_wire import parked_outcome as _parked
    from runtime.continuation.continuation_planner import ContinuationPlan, PlanDiagnostic
    from runtime.ledger.codes import ParkReason

    damaged = PlanDiagnostic(
        "tool_ledger_corruption", "generation 1: ledger issue orphan_response", "evt-9"
    )
    plan = ContinuationPlan("s", "r", (ParkReason.DANGLING_TOOL_STATE,), (damaged,))
    [diagnostic] = _parked(plan).diagnostics
    assert (diagnostic.code, diagnostic.event_id) == ("tool_ledger_corruption", "evt-9")


def test_the_desktop_carries_where_a_restored_copy_would_go_to_the_banner() -> None:
    from app.host.resume_wire import parked_outcome as _parked
    from runtime.continuation.continuation_planner import ContinuationPlan, PlanDiagnostic
    from runtime.ledger.codes import ParkReason

    place = PlanDiagnostic(
        "workspace_restore_place",
        "a restored copy would be made in a new folder, /w/mono-pkg-restored-1",
        detail={"path": "/w/mono-pkg-restored-1", "clone": True},
    )
    odd = PlanDiagnostic("workspace_restore_place", "no path", detail={"path": "x" * 5000})
    plan = ContinuationPlan("s", "r", (ParkReason.WORKSPACE_DRIFT,), (place, odd))
    named, too_long = _parked(plan).diagnostics
    assert named.path == "/w/mono-pkg-restored-1"
    assert named.clone is True and too_long.clone is None  # (no clone field: not said)
    assert too_long.path is None  # what does not fit the wire is left out, never cut


def test_the_desktop_carries_the_call_a_snapshot_went_stale_after_to_the_banner() -> None:
    from app.host.resume_wire import parked_outcome as _parked
    from runtime.continuation.continuation_planner import ContinuationPlan, PlanDiagnostic
    from runtime.ledger.codes import ParkReason

    stale = PlanDiagnostic(
        "workspace_checkpoint_stale",
        'the command "make" may have changed files after the last snapshot',
        detail={"subject": 'the command "make"', "checkpointRef": "refs/maka/s/r/1"},
    )
    odd = PlanDiagnostic("workspace_checkpoint_stale", "long", detail={"subject": "x" * 5000})
    plan = ContinuationPlan("s", "r", (ParkReason.WORKSPACE_CHECKPOINT_STALE,), (stale, odd))
    named, too_long = _parked(plan).diagnostics
    assert named.subject == 'the command "make"'
    assert too_long.subject is None  # what does not fit the wire is left out, never cut


def _git_v1_first() -> RuntimeEvent:
    first = user_text(marker=True, ids=IDS)
    first["actions"]["runtimeProtocol"]["workspaceCheckpoints"] = {"mode": "git_v1"}
    return first


@pytest.mark.parametrize(
    ("events", "evidence", "reason", "code"),
    [
        ("no-mode", None, None, "workspace_checkpoint_unavailable"),
        ("failed", None, "workspace_checkpoint_failed", "workspace_checkpoint_failed"),
        ("none-yet", None, None, "workspace_checkpoint_unavailable"),
        # The first snapshot goes on while read-only calls run: a stop in one, before the
        # snapshot's fact, has changed nothing (the run continues, as if stopped before it).
        ("none-yet-read", None, None, "workspace_checkpoint_unavailable"),
        ("none-yet-wrote", None, "workspace_checkpoint_stale", "workspace_checkpoint_stale"),
        ("stale", None, "workspace_checkpoint_stale", "workspace_checkpoint_stale"),
        ("clean", None, "workspace_checkpoint_missing", "workspace_checkpoint_missing"),
        ("clean", "absent", "workspace_checkpoint_missing", "workspace_checkpoint_missing"),
        ("clean", "equal", None, "workspace_verified"),
        ("clean", "drift", "workspace_drift", "workspace_drift"),
        ("clean", "unreadable", "safety_observation_unavailable", "safety_observation_unavailable"),
        ("clean", "no-git", "safety_observation_unavailable", "safety_observation_unavailable"),
    ],
)
def test_the_workspace_gate(
    events: str, evidence: str | None, reason: str | None, code: str
) -> None:
    from runtime.continuation.workspace_gate import CheckpointEvidence, workspace_gate
    from runtime.ledger.checkpoint_ports import PathChange, TreeChange

    write = call_event("w1", "bash", {"command": "x"}, ids=IDS)
    read = call_event("r1", "read_file", {"path": "a.txt"}, ids=IDS)
    ledgers = {
        "no-mode": [user_text(marker=True, ids=IDS)],
        "failed": [_git_v1_first(), _fact("ck1"), _fact("ck2", failed=True)],
        "none-yet": [_git_v1_first()],
        "none-yet-read": [_git_v1_first(), read, dispatch_event(read)],
        "none-yet-wrote": [_git_v1_first(), write, dispatch_event(write)],
        "stale": [_git_v1_first(), _fact("ck1"), write, dispatch_event(write)],
        "clean": [_git_v1_first(), _fact("ck1")],
    }
    drift = tuple(TreeChange(f"f{n:03d}", PathChange.ADDED) for n in range(60))
    given = {
        None: None,
        "absent": CheckpointEvidence(False),
        "equal": CheckpointEvidence(True),
        "drift": CheckpointEvidence(True, drift),
        "unreadable": CheckpointEvidence(True, problem="git failed"),
        # Git could not run: the snapshot could not be looked up, which is not "missing".
        "no-git": CheckpointEvidence(False, problem="git is not available"),
    }[evidence]
    [finding] = workspace_gate(ledgers[events], given)
    assert finding.code == code
    assert (finding.reason.value if finding.reason else None) == reason
    if code == "workspace_drift":
        assert len(finding.detail["changedPaths"]) == 50
        assert finding.detail["moreChangedPaths"] == 10
        assert finding.message.startswith("60 files changed")
    # Another workspace in the folder: nothing compared, nothing claimed (the identity gate parks).
    assert workspace_gate(ledgers["clean"], CheckpointEvidence(True, compared=False)) == []


def test_the_transcript_says_when_a_run_has_no_snapshots_or_one_failed() -> None:
    from runtime.agent.transcript_projection import transcript_of_run

    first = user_text(marker=True, ids=IDS)
    first["actions"]["runtimeProtocol"]["workspaceCheckpoints"] = {
        "mode": "unavailable",
        "reasonCode": "checkpoint_git_missing",
    }
    entries = transcript_of_run([first, _fact("ck1", failed=True)])
    assert [(e.type, e.code, e.level) for e in entries] == [
        ("user_message", None, "info"),
        ("notice", "checkpoint_git_missing", "info"),
        ("notice", "checkpoint_git_failed", "warn"),
    ]
    off = user_text(marker=True, ids=IDS)
    off["actions"]["runtimeProtocol"]["workspaceCheckpoints"] = {
        "mode": "unavailable",
        "reasonCode": "checkpoint_turned_off",
    }
    assert [e.type for e in transcript_of_run([off, _fact("ck2")])] == ["user_message"]


def test_a_verified_folder_names_the_big_files_it_did_not_compare() -> None:
    from runtime.continuation.workspace_gate import CheckpointEvidence, workspace_gate

    fact = _fact("ck1")
    fact["actions"]["workspaceCheckpoint"]["skippedPaths"] = ["big.bin", "b2", "b3", "b4"]
    [finding] = workspace_gate([_git_v1_first(), fact], CheckpointEvidence(True))
    assert finding.code == "workspace_verified" and finding.reason is None
    assert finding.message == (
        "the files are as they were at the stop, except 4 files over 50 MiB, not compared: "
        "big.bin, b2, b3 and 1 more"
    )
    assert finding.detail["skippedPaths"] == ["big.bin", "b2", "b3", "b4"]
    [plain] = workspace_gate([_git_v1_first(), _fact("ck1")], CheckpointEvidence(True))
    assert plain.message == "the files are as they were at the stop"


def test_changed_counts_say_empty_folders_as_folders() -> None:
    from runtime.ledger.workspace_facts import changed_count_words

    assert changed_count_words(["a.txt"]) == "1 file"
    assert changed_count_words(["a.txt", "b.txt"], more=3) == "5 files"
    assert changed_count_words(["logs/"]) == "1 folder"
    assert changed_count_words(["logs/", "cache/"]) == "2 folders"
    assert changed_count_words(["logs/", "a.txt"]) == "2 files and folders"
    assert changed_count_words(["logs/"], more=1) == "2 files and folders"


def test_the_mark_of_a_continuation_with_the_current_files_names_them() -> None:
    from runtime.ledger.workspace_facts import MARK_PATHS_NAMED, decision_mark

    few = {"compared": True, "changedPaths": [{"path": "b.txt"}, {"path": "count.txt"}]}
    # A continuation's start carries its lineage beside the baseline.
    start: dict[str, object] = {"continuationStart": {}}
    assert decision_mark({**start, "workspaceBaseline": few}) == (
        "Continued with your current files; 2 files changed: b.txt, count.txt"
    )
    many = {
        "compared": True,
        "changedPaths": [{"path": f"f{i}.txt"} for i in range(50)],
        "moreChangedPaths": 12,
    }
    named = ", ".join(f"f{i}.txt" for i in range(MARK_PATHS_NAMED))
    assert decision_mark({**start, "workspaceBaseline": many}) == (
        f"Continued with your current files; 62 files changed: {named} and 57 more"
    )
    assert decision_mark({**start, "workspaceBaseline": {"compared": False}}) == (
        "Continued with your current files; there was no snapshot to compare them with"
    )


def test_a_settled_baseline_is_a_workspace_fact_the_generic_append_refuses(
    store: SqliteLedgerStore,
) -> None:
    """docs/design/workspace.md section 3: only the attestation's transaction commits it."""
    from runtime.ledger.fact_events import EventIdentity, settled_baseline_event
    from runtime.ledger.workspace_facts import is_settled_baseline, workspace_fact_problem

    ids = EventIdentity(IDS.session_id, IDS.invocation_id, IDS.run_id, IDS.turn_id)
    body = {
        "protocol": "workspace_baseline_v1",
        "workspaceIdentity": "workspace:v1:x",
        "workspaceEpoch": 2,
        "checkpointRef": "refs/maka/s/r/2",
        "commitId": "b" * 40,
        "treeId": "a" * 40,
        "policyHash": "c" * 64,
        "changedPaths": [{"path": "count.txt", "change": "added"}],
        "moreChangedPaths": 0,
        "compared": True,
        "decidedBy": "local_user",
        "decidedAt": 1,
    }
    fact = settled_baseline_event(ids, "op1_attest_baseline", 1, body)
    assert is_settled_baseline(fact) and is_workspace_fact(fact)
    assert workspace_fact_problem(fact) is None
    with pytest.raises(StoreRefusal) as refused:
        store.append_event(fact)
    assert refused.value.code == WriterRejectionCode.RESERVED_WORKSPACE_FACT
    start = cast(RuntimeEvent, {**fact, "actions": {"workspaceBaseline": body, "x": {}}})
    assert not is_settled_baseline(start)  # a continuation's start event carries more


def test_a_stale_park_names_the_command_and_the_files_that_differ_from_the_last_snapshot() -> None:
    from runtime.continuation.workspace_gate import CheckpointEvidence, workspace_gate
    from runtime.ledger.checkpoint_ports import PathChange, TreeChange

    write = call_event("w1", "bash", {"command": "make all"}, ids=IDS)
    stale = [_git_v1_first(), _fact("ck1"), write, dispatch_event(write)]
    [unknown] = workspace_gate(stale, None)  # the folder could not be compared with it
    assert unknown.message == (
        'the command "make all" may have changed files after the last snapshot'
    )
    assert "changedPaths" not in unknown.detail
    assert unknown.detail["subject"] == 'the command "make all"'  # the banner's words
    changes = (TreeChange("out.o", PathChange.ADDED), TreeChange("a.c", PathChange.MODIFIED))
    [listed] = workspace_gate(stale, CheckpointEvidence(True, changes, stale_compared=True))
    assert listed.reason is not None and listed.reason.value == "workspace_checkpoint_stale"
    assert listed.message.endswith("; 2 files differ from that snapshot")
    assert listed.detail["changedPaths"] == [
        {"path": "out.o", "change": "added"},
        {"path": "a.c", "change": "modified"},
    ]
    [same] = workspace_gate(stale, CheckpointEvidence(True, (), stale_compared=True))
    assert same.reason is not None  # still parked: the command may have done more
    assert same.message.endswith("; no file in the folder differs from that snapshot")
