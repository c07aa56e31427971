"""The import's fast path (a whole new run validated at once, inserted in bulk) accepts exactly
the files the per-event writers accept, refuses with their code otherwise, and leaves the same
database, on clean and randomly damaged exports."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.ledger.canonical_codec import canonical_bytes
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from storage.ledger.bulk_run_writer import bulk_commit_new_run
from storage.ledger.ledger_store import open_store
from storage.ledger.sqlite_connection import DATABASE_NAME, Synchronous
from storage.sessions import session_import
from storage.sessions.session_export import header_line, session_line
from tests.helpers.ledger_builders import ENDINGS, RunIds, clean_ledger
from tests.helpers.store_workloads import db_state, fixed_clock

RUNS = (
    RunIds("sess-i", "inv-i1", "run-i1", "turn-i1"),
    RunIds("sess-i", "inv-i2", "run-i2", "turn-i2"),
)


def _export(ledgers: list[list[RuntimeEvent]]) -> list[bytes]:
    lines = [session_line(SessionRecord("sess-i", "/work", "t", 1))]
    for ids, events in zip(RUNS, ledgers, strict=False):
        ended = bool(events) and is_terminal(events[-1])
        header = RunHeader(
            run_id=ids.run_id,
            session_id=ids.session_id,
            invocation_id=ids.invocation_id,
            turn_id=ids.turn_id,
            status=RunStatus.COMPLETED if ended else RunStatus.RUNNING,
            cwd="/work",
            owner_epoch=1,
            created_at=5,
            updated_at=6,
            completed_at=7 if ended else None,
        )
        lines.append(header_line(header))
        lines.extend(canonical_bytes(event) for event in events)
    return lines


def _ledger(ids: RunIds, endings: list[str], suffix: str) -> list[RuntimeEvent]:
    events = clean_ledger(ids=ids, endings=endings)
    return [
        {**event, "id": f"{event['id']}-{suffix}"} if event["id"].startswith("evt-") else event
        for event in events
    ]


MUTATIONS = st.lists(
    st.tuples(st.sampled_from(["drop", "dup", "swap", "rename", "retool"]), st.integers(0, 200)),
    max_size=3,
)


def _mutate(lines: list[bytes], mutations: list[tuple[str, int]]) -> list[bytes]:
    lines = list(lines)
    for kind, position in mutations:
        events = [i for i, line in enumerate(lines) if not line.startswith(b'{"c')]
        if len(events) < 2:
            break
        index = events[position % len(events)]
        if kind == "drop":
            del lines[index]
        elif kind == "dup":
            lines.insert(index, lines[index])
        elif kind == "swap" and index + 1 < len(lines):
            lines[index], lines[index + 1] = lines[index + 1], lines[index]
        elif kind == "rename":
            lines[index] = lines[index].replace(b'"id":"', b'"id":"x', 1)
        elif kind == "retool":
            lines[index] = lines[index].replace(b'"Write"', b'"Edit"')
    return lines


def _import(folder: Path, data: bytes, *, bulk: bool) -> tuple[str, object]:
    with open_store(folder, clock=fixed_clock()) as store, _spy() as taken:
        store.set_synchronous(Synchronous.OFF)
        try:
            report = store.import_session(data, bulk=bulk)
        except LedgerError as error:
            return "refused", str(error.code)
        if bulk:
            # A clean export of new runs must really take the fast path.
            FAST_PATH_USES.extend(taken)
        return "ok", report


FAST_PATH_USES: list[bool] = []


@contextmanager
def _spy() -> Iterator[list[bool]]:
    """Record what ``bulk_commit_new_run`` answered during one import."""
    answers: list[bool] = []
    real = bulk_commit_new_run

    def recording(*args: Any, **kwargs: Any) -> bool:
        answer = real(*args, **kwargs)
        answers.append(answer)
        return answer

    with patch.object(session_import, "bulk_commit_new_run", recording):
        yield answers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    endings=st.lists(st.lists(st.sampled_from(ENDINGS), max_size=5), min_size=1, max_size=2),
    mutations=MUTATIONS,
)
def test_the_fast_path_agrees_with_the_writers(
    endings: list[list[str]], mutations: list[tuple[str, int]]
) -> None:
    ledgers = [
        _ledger(ids, chosen, str(i))
        for i, (ids, chosen) in enumerate(zip(RUNS, endings, strict=False))
    ]
    data = b"".join(line + b"\n" for line in _mutate(_export(ledgers), mutations))
    with tempfile.TemporaryDirectory() as root:
        fast, slow = Path(root) / "fast", Path(root) / "slow"
        verdicts = (_import(fast, data, bulk=True), _import(slow, data, bulk=False))
        assert verdicts[0] == verdicts[1]
        assert db_state(fast / DATABASE_NAME) == db_state(slow / DATABASE_NAME)
        if not mutations:
            assert verdicts[0][0] == "ok"


def test_clean_exports_take_the_fast_path() -> None:
    FAST_PATH_USES.clear()
    test_the_fast_path_agrees_with_the_writers.hypothesis.inner_test(  # type: ignore[attr-defined]
        [["response", "parked", "completed", "synthetic", "dangling"], ["response"]], []
    )
    assert FAST_PATH_USES == [True, True]
