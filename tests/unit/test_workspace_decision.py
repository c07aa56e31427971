"""Which parks a user's workspace decision answers, and the notice a rebaseline ends with."""

from __future__ import annotations

from runtime.continuation.workspace_decision import baseline_notice, offered_decisions
from runtime.ledger.codes import ParkReason


def test_a_decision_is_offered_only_when_the_files_alone_stand_in_the_way() -> None:
    assert offered_decisions([ParkReason.WORKSPACE_DRIFT]) == ("rebaseline",)
    assert offered_decisions([ParkReason.WORKSPACE_CHECKPOINT_STALE]) == ("rebaseline",)
    assert offered_decisions([ParkReason.WORKSPACE_CHECKPOINT_FAILED]) == ("rebaseline",)
    assert offered_decisions([ParkReason.WORKSPACE_CHECKPOINT_MISSING]) == ("rebaseline",)
    both = [ParkReason.WORKSPACE_DRIFT, ParkReason.TOOL_CATALOG_MISMATCH]
    assert offered_decisions(both) == ()
    assert offered_decisions([ParkReason.DANGLING_TOOL_STATE]) == ()
    assert offered_decisions([]) == ()


def test_the_notice_lists_the_first_fifty_paths_then_a_count() -> None:
    changed = [{"path": f"f{i:03}.txt", "change": "modified"} for i in range(50)]
    text = baseline_notice({"changedPaths": changed, "moreChangedPaths": 7, "compared": True})
    assert text.startswith("Note from the host: 57 files in the folder changed since the last")
    assert "- f000.txt (modified)" in text and "- f049.txt (modified)" in text
    assert "- and 7 more" in text
    assert text.endswith("before you rely on what you saw of them earlier.")
    added = [{"path": "a", "change": "added"}]
    one = baseline_notice({"changedPaths": added, "moreChangedPaths": 0, "compared": True})
    assert "1 file in the folder changed" in one
    none = baseline_notice({"changedPaths": [], "moreChangedPaths": 0, "compared": True})
    assert "no file differs" in none
    unknown = baseline_notice({"changedPaths": [], "moreChangedPaths": 0, "compared": False})
    assert "no snapshot to tell which" in unknown
