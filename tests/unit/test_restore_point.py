"""Which snapshot a restored copy is made from and what it reflects (docs/design/workspace.md
section 4): the newest intact snapshot of the lineage, and the calls that may have written
after it."""

from __future__ import annotations

from typing import Any

from runtime.continuation.restore_point import LATER_CALLS_KEPT, find_restore_point
from runtime.ledger.restore_point_words import age_words, copy_reflects, restore_notice


def _snap(ref: str) -> Any:
    return {"actions": {"workspaceCheckpoint": {"checkpointRef": ref}}}


def _call(name: str, call_id: str) -> Any:
    return {"actions": {"toolDispatch": {"toolName": name, "providerToolCallId": call_id}}}


FAILED: Any = {"actions": {"workspaceCheckpointFailed": {"reasonCode": "checkpoint_git_failed"}}}


def _intact(*refs: str) -> Any:
    return lambda checkpoint: checkpoint["checkpointRef"] in refs


def test_the_boundary_snapshot_at_the_stop() -> None:
    run = [_snap("r/1"), _call("read_file", "c1"), _call("bash", "c2"), _snap("r/2")]
    point = find_restore_point([run], _intact("r/1", "r/2"))
    assert point is not None and point.kind == "at_stop" and dict(point.fields) == {}
    assert point.reflects == "the folder as it was at the stop"
    assert restore_notice(point.fields) is None


def test_a_failed_capture_makes_the_copy_predate_the_calls_before_it() -> None:
    run = [_snap("r/1"), _call("write_file", "c1"), FAILED, _call("bash", "c2")]
    point = find_restore_point([run], _intact("r/1"))
    assert point is not None and point.kind == "before_later_calls"
    assert point.fields["laterCalls"] == [
        {"toolName": "write_file", "toolCallId": "c1"},
        {"toolName": "bash", "toolCallId": "c2"},
    ]
    assert point.reflects == (
        "the folder as it was before the 2 calls that may have written (write_file c1, "
        "bash c2); what they changed is not in the copy"
    )
    notice = restore_notice(point.fields)
    assert notice is not None and "before your 2 calls that may have written" in notice
    assert "their results above say they ran" in notice


def test_a_lost_boundary_falls_back_to_the_latest_earlier_intact_one_across_generations() -> None:
    first = [_snap("a/1"), _call("bash", "c1"), _snap("a/2")]
    second: list[Any] = [
        {"actions": {"workspaceBaseline": {"checkpointRef": "b/0"}}},
        _call("edit_file", "c2"),
        _snap("b/1"),
    ]
    point = find_restore_point([first, second], _intact("a/1", "a/2"))
    assert point is not None and point.kind == "earlier_snapshot"
    assert point.checkpoint["checkpointRef"] == "a/2"
    assert point.fields["snapshotAfterCall"] == {"toolName": "bash", "toolCallId": "c1"}
    assert point.fields["lostCheckpointRef"] == "b/1"
    assert point.fields["laterCalls"] == [{"toolName": "edit_file", "toolCallId": "c2"}]
    assert point.reflects == (
        "the folder at an earlier point (the snapshot taken after the bash call c1, less than "
        "a minute before the stop), because the snapshot taken at the stop is gone; the agent's "
        "later changes (the edit_file call c2) are not in it"
    )
    assert find_restore_point([first, second], _intact()) is None


def test_many_later_calls_are_named_then_counted() -> None:
    run = [_snap("r/1"), *(_call("bash", f"c{i}") for i in range(LATER_CALLS_KEPT + 3))]
    point = find_restore_point([run], _intact("r/1"))
    assert point is not None
    assert len(point.fields["laterCalls"]) == LATER_CALLS_KEPT
    assert point.fields["moreLaterCalls"] == 3
    assert copy_reflects(point.fields).startswith(
        f"the folder as it was before the {LATER_CALLS_KEPT + 3} calls that may have written "
        "(bash c0, bash c1, bash c2, bash c3, bash c4 and 48 more)"
    )


def test_the_age_of_an_earlier_snapshot_is_said_in_words() -> None:
    hour = 3_600_000
    first = [{**_snap("a/1"), "ts": 1_000}, _call("bash", "c1"), {**_snap("a/2"), "ts": 2_000}]
    later = [_call("bash", "c2"), {**_snap("a/3"), "ts": 2_000 + 3 * hour + 5}]
    point = find_restore_point([first, later], _intact("a/1", "a/2"))
    assert point is not None and point.fields["snapshotAgeMs"] == 3 * hour + 5
    assert "(the snapshot taken after the bash call c1, 3 hours before the stop)" in (
        point.reflects
    )
    notice = restore_notice(point.fields)
    assert notice is not None and "3 hours before the stop" in notice
    assert [age_words(ms) for ms in (59_999, 60_000, 150_000, hour, 49 * hour)] == [
        "less than a minute",
        "1 minute",
        "2 minutes",
        "1 hour",
        "2 days",
    ]


def _model_call(name: str, call_id: str, args: Any) -> Any:
    return {"content": {"kind": "function_call", "id": call_id, "name": name, "args": args}}


def test_for_people_the_calls_are_named_by_what_they_did_and_for_the_model_by_id() -> None:
    long_command = "make " + "target " * 20
    run = [
        _snap("r/1"),
        _model_call("write_file", "c1", {"path": "notes/a.txt", "content": "x"}),
        _call("write_file", "c1"),
        _model_call("bash", "c2", {"command": "echo  x\n>> count.txt"}),
        _call("bash", "c2"),
        _model_call("bash", "c3", {"command": long_command}),
        _call("bash", "c3"),
    ]
    point = find_restore_point([run], _intact("r/1"))
    assert point is not None
    shortened = " ".join(long_command.split())[:59] + "…"
    assert point.reflects == (
        "the folder as it was before the 3 calls that may have written (write_file call on "
        f'notes/a.txt, command "echo x >> count.txt", command "{shortened}"); what they '
        "changed is not in the copy"
    )
    assert "c2" not in point.reflects
    notice = restore_notice(point.fields)  # the model knows its calls by id
    assert notice is not None and "(write_file c1, bash c2, bash c3)" in notice


def test_one_call_named_by_its_command_and_an_unknown_call_by_its_id() -> None:
    run = [_snap("r/1"), _model_call("bash", "c1", {"command": "rm -r build"}), _call("bash", "c1")]
    point = find_restore_point([run], _intact("r/1"))
    assert point is not None
    assert point.reflects == (
        'the folder as it was before the command "rm -r build"; what it changed is not in the copy'
    )
    assert copy_reflects(point.fields) == (
        "the folder as it was before the bash call c1; what it changed is not in the copy"
    )
