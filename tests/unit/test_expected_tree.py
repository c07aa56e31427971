"""The expected tree at the boundary (docs/design/workspace.md section 3): the newest checkpoint
rolled forward over the writing calls the ledger proves; anything else after it leaves it stale."""

from __future__ import annotations

from runtime.continuation.expected_tree import expected_tree, rolled_source, rolled_words
from tests.helpers.expected_tree_events import IDS, run_start, write_dispatched
from tests.helpers.ledger_builders import (
    attestation_bundle,
    bound_response,
    call_event,
    decision_event,
    dispatch_event,
    reconcile_event,
)
from tests.unit.test_workspace_facts import _fact


def test_a_completed_write_rolls_the_checkpoint_forward_the_newest_write_winning() -> None:
    first = write_dispatched("w1", "a.txt", "1", 1)
    second = write_dispatched("w2", "a.txt", "2", 2)
    third = write_dispatched("w3", "b.txt", "3", 3)
    events = [run_start(), _fact("ck1")]
    for call, dispatch in (first, second, third):
        events += [call, dispatch, bound_response(call, {"path": "x"}, is_error=False)]
    tree = expected_tree(events)
    assert tree.stale_after is None and tree.checkpoint is not None
    assert {path: f.sha256 for path, f in tree.files.items()} == {
        "a.txt": "sha256:" + "2" * 64,
        "b.txt": "sha256:" + "3" * 64,
    }
    assert [(c.tool_call_id, c.how, c.path) for c in tree.rolled] == [
        ("w1", "completed", "a.txt"),
        ("w2", "completed", "a.txt"),
        ("w3", "completed", "b.txt"),
    ]
    assert rolled_words(tree.rolled[:1]) == "the write_file call w1 (a.txt)"
    assert rolled_words(tree.rolled).startswith("3 calls (write_file w1 (a.txt), ")
    assert rolled_source(tree.rolled) == "as the saved history proves"


def test_a_write_without_a_result_or_with_an_error_leaves_it_stale() -> None:
    call, dispatch = write_dispatched("w1", "a.txt", "1", 1)
    dangling = expected_tree([run_start(), _fact("ck1"), call, dispatch])
    assert dangling.stale_after == dispatch["id"] and dangling.stale_tool == "write_file"
    failed = bound_response(call, "cannot write", is_error=True)
    errored = expected_tree([run_start(), _fact("ck1"), call, dispatch, failed])
    assert errored.stale_after == dispatch["id"]


def test_bash_leaves_it_stale_unless_the_user_said_it_did_not_run() -> None:
    call = call_event("b1", "bash", {"command": "echo x >> f"}, ids=IDS)
    dispatch = dispatch_event(call, recovery_mode="never_auto_retry")
    ran = bound_response(call, {"exitCode": 0}, is_error=False)
    assert expected_tree([run_start(), _fact("ck1"), call, dispatch, ran]).stale_tool == "bash"
    settled = attestation_bundle(call, dispatch, ran=False)
    tree = expected_tree([run_start(), _fact("ck1"), call, dispatch, *settled])
    assert tree.stale_after is None
    assert [(c.tool_call_id, c.how, c.path) for c in tree.rolled] == [("b1", "not_run", None)]
    said_ran = attestation_bundle(call, dispatch, ran=True)
    assert (
        expected_tree([run_start(), _fact("ck1"), call, dispatch, *said_ran]).stale_tool == "bash"
    )


def test_without_a_checkpoint_a_proven_write_is_still_stale() -> None:
    call, dispatch = write_dispatched("w1", "a.txt", "1", 1)
    done = bound_response(call, {"path": "a.txt"}, is_error=False)
    tree = expected_tree([run_start(), call, dispatch, done])
    assert tree.checkpoint is None and tree.stale_after == dispatch["id"] and tree.wrote


def test_a_call_that_changed_nothing_says_how_that_is_known() -> None:
    """A write recovery found untouched is known by recovery's look at the file (the tool had
    begun: at P3 its temporary file was written), a call the user settled by their answer:
    neither reads "it did not run, as the saved history proves" before anyone answered."""
    call, dispatch = write_dispatched("w1", "a.txt", "1", 1)
    reconcile = reconcile_event(call, "matches_prior_state")
    parked = [call, dispatch, reconcile, decision_event(call, dispatch, reconcile)]
    found = expected_tree([run_start(), _fact("ck1"), *parked])
    assert found.stale_after is None
    assert [(c.how, c.path, c.found_unchanged) for c in found.rolled] == [
        ("not_run", None, "a.txt")
    ]
    assert found.rolled[0].to_json() == {
        "toolName": "write_file",
        "toolCallId": "w1",
        "how": "not_run",
    }
    words = rolled_words(found.rolled)
    assert words == "the write_file call w1 (recovery found a.txt as it was before the write)"
    assert rolled_source(found.rolled) == "as the saved history records"

    bash = call_event("b1", "bash", {"command": "echo x >> f"}, ids=IDS)
    bash_dispatch = dispatch_event(bash, recovery_mode="never_auto_retry")
    settled = attestation_bundle(bash, bash_dispatch, ran=False)
    said = expected_tree([run_start(), _fact("ck1"), bash, bash_dispatch, *settled])
    assert rolled_words(said.rolled) == "the bash call b1 (you confirmed it did not run)"
    assert rolled_source(said.rolled) == "as the saved history records"
