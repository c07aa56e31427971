"""Two processes resume the same interrupted session at the same moment, 50 times over.

Both plan (both plans continue), meet at a barrier, and execute. The admission transaction lets
exactly one through: the provider is called exactly once per round and the loser is refused with
a stable code before any provider call.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.ledger.ledger_store import open_store
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    user_text,
)
from tests.helpers.resume_fixtures import recover, seed_interrupted_run

pytestmark = pytest.mark.crash

ROUNDS = 50
REPO = Path(__file__).resolve().parents[2]
IDS = RunIds("sess-race", "inv-race", "run-race", "turn-race")
LOSER_CODES = {"continuation_claim_conflict", "source_replay_changed"}


def _prepare(folder: Path) -> None:
    (folder / "work").mkdir(parents=True)
    call = call_event("c1", "bash", {"command": "true"}, ids=IDS, ts=2)
    events = [
        user_text("go", ids=IDS, marker=True),
        call,
        dispatch_event(call, recovery_mode="never_auto_retry"),
        bound_response(call, {"exitCode": 0}),
    ]
    with open_store(folder / "data") as store:
        seed_interrupted_run(store, IDS, events, cwd=str(folder / "work"))
    store, _ = recover(folder / "data")
    store.close()


def test_exactly_one_of_two_racing_resumes_calls_the_provider(tmp_path: Path) -> None:
    for index in range(ROUNDS):
        _prepare(tmp_path / f"round-{index}")
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.crash.resume_race_child",
                str(tmp_path),
                name,
                str(ROUNDS),
            ],
            cwd=REPO,
        )
        for name in ("a", "b")
    ]
    try:
        for index in range(ROUNDS):
            folder = tmp_path / f"round-{index}"
            deadline = time.monotonic() + 60
            while not ((folder / "ready-a").exists() and (folder / "ready-b").exists()):
                assert time.monotonic() < deadline, f"round {index}: racers never got ready"
                assert all(child.poll() is None for child in children), "a racer died"
                time.sleep(0.002)
            (folder / "go").touch()
        for child in children:
            assert child.wait(timeout=120) == 0
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    for index in range(ROUNDS):
        folder = tmp_path / f"round-{index}"
        calls = (folder / "provider-calls").read_text().splitlines()
        assert len(calls) == 1, f"round {index}: provider called {len(calls)} times"
        results = sorted((folder / f"result-{name}").read_text() for name in ("a", "b"))
        started = [r for r in results if r.startswith("started")]
        refused = [r for r in results if r.startswith("refused")]
        assert len(started) == 1 and len(refused) == 1, results
        assert refused[0].split()[1] in LOSER_CODES, refused
