"""``maka timeline SESSION --json`` on the shared design's example ledgers, stored: the rows are
exactly those of the golden files kept in ``tests/data/timeline`` (``maka ledger timeline``'s on
the same ledgers), and the kept ledgers are the shared examples byte for byte. Skipped when the
shared examples are not beside the repository.

What the plan marks on rows (``replayed``, pinned ``reasons``) is left out of the comparison: the
file variant plans every unfinished ledger, while a stored session is planned only once startup
recovery has found its run interrupted (``tests/e2e/test_ledger_timeline_cli.py`` checks a
stored interrupted session's pins)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.event_model import RuntimeEvent
from tests.helpers.stored_run import import_run

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO.parent / "shared" / "examples"
EXAMPLE_DIRS = sorted(p for p in EXAMPLES.glob("*/") if (p / "ledger.jsonl").is_file())
KEPT = REPO / "tests" / "data" / "timeline"


def _maka() -> list[str]:
    script = Path(sys.executable).with_name("maka")
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def _store(data_dir: Path, ledger: Path) -> str:
    """The ledger imported as a stored session (its run's status from its ending, if any)."""
    events: list[RuntimeEvent] = [
        json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()
    ]
    return import_run(data_dir, events, "example")


@pytest.mark.skipif(not EXAMPLE_DIRS, reason=f"no example ledgers at {EXAMPLES}")
@pytest.mark.parametrize("folder", EXAMPLE_DIRS, ids=lambda path: path.name)
def test_a_stored_example_gives_the_golden_rows(folder: Path, tmp_path: Path) -> None:
    kept = KEPT / folder.name
    assert (kept / "ledger.jsonl").read_bytes() == (folder / "ledger.jsonl").read_bytes()
    data = tmp_path / "data"
    session_id = _store(data, folder / "ledger.jsonl")
    before = (data / "runtime.sqlite").read_bytes()
    env = {**os.environ, "MAKA_DATA_DIR": str(data), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("MAKA_FAILPOINT", None)
    done = subprocess.run(
        [*_maka(), "timeline", session_id, "--json"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (data / "runtime.sqlite").read_bytes() == before  # read, never written
    document = json.loads(done.stdout)
    golden = json.loads((kept / "timeline.json").read_text(encoding="utf-8"))
    assert document["sessionId"] == session_id
    assert [run["runId"] for run in document["runs"]] == [run["runId"] for run in golden["runs"]]
    for stored, expected in zip(document["runs"], golden["runs"], strict=True):
        assert stored["eventCount"] == expected["eventCount"]
        assert _unplanned(stored["rows"]) == _unplanned(expected["rows"])


def _unplanned(value: Any) -> Any:
    """The rows without what a plan marks on them."""
    if isinstance(value, list):
        return [_unplanned(item) for item in value]
    if isinstance(value, dict):
        return {k: _unplanned(v) for k, v in value.items() if k not in ("replayed", "reasons")}
    return value
