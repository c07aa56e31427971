"""Session export and import: a round trip reproduces the file byte for byte; import goes
through the writers, is idempotent, refuses conflicts, invalid lines, smuggled facts and (unless
asked) a torn tail, and never writes anything when it refuses."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from runtime.ledger.canonical_codec import prefix_digest
from runtime.ledger.codes import TransferCode
from runtime.ledger.continuation_ports import ContinuationClaim
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunHeader, RunStatus
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.ledger_builders import (
    RunIds,
    call_event,
    clean_ledger,
    dispatch_event,
    model_text,
    terminal,
    user_text,
)
from tests.helpers.store_workloads import add_run, commit_ledger, db_state

SOURCE = RunIds("sess-x", "inv-a", "run-a", "turn-a")
TARGET = RunIds("sess-x", "inv-b", "run-b", "turn-b")
OPEN = RunIds("sess-x", "inv-c", "run-c", "turn-c")
DIGEST = "sha256:" + "cd" * 32


def _admit_continuation(store: SqliteLedgerStore) -> None:
    rows = store.read_run_events(SOURCE.run_id)
    identity = {
        "sessionId": SOURCE.session_id,
        "invocationId": SOURCE.invocation_id,
        "runId": SOURCE.run_id,
        "turnId": SOURCE.turn_id,
    }
    digest = prefix_digest(identity, [(row.seq, row.payload) for row in rows])
    claim = ContinuationClaim(
        claim_id="claim-1",
        session_id=SOURCE.session_id,
        boundary_digest=DIGEST,
        source_run_id=SOURCE.run_id,
        source_high_water=rows[-1].seq,
        source_prefix_digest=digest,
        source_terminal_event_id=rows[-1].event["id"],
        target_run_id=TARGET.run_id,
        start_event_id="start-b",
        provider_replay_digest=DIGEST,
        automatic=False,
        created_at=500,
    )
    header = RunHeader(
        run_id=TARGET.run_id,
        session_id=TARGET.session_id,
        invocation_id=TARGET.invocation_id,
        turn_id=TARGET.turn_id,
        status=RunStatus.CREATED,
        cwd="/work",
        owner_epoch=3,
        created_at=500,
        updated_at=500,
        workspace_identity="workspace:v1:11111111-1111-4111-8111-111111111111",
        parent_run_id=SOURCE.run_id,
        continuation_source={"sourceRunId": SOURCE.run_id, "claimId": "claim-1"},
    )
    start: dict[str, Any] = {
        "id": "start-b",
        **{key: value for key, value in identity.items() if key == "sessionId"},
        "invocationId": TARGET.invocation_id,
        "runId": TARGET.run_id,
        "turnId": TARGET.turn_id,
        "ts": 500,
        "partial": False,
        "role": "system",
        "author": "system",
        "actions": {
            "runtimeProtocol": {"toolBoundary": "t1_after_preflight_v1"},
            "continuationStart": {
                "protocol": "continuation_start_v2",
                "provenance": "runtime_admission",
                "claimId": "claim-1",
                "boundaryDigest": DIGEST,
                "immediateSource": {**identity, "highWater": rows[-1].seq, "prefixDigest": digest},
                "replayManifestDigest": DIGEST,
                "providerProjectionVersion": 1,
                "providerReplayDigest": DIGEST,
            },
        },
    }
    store.admit_continuation(claim, header, start)  # type: ignore[arg-type]


def _seed(data_dir: Path) -> SqliteLedgerStore:
    """A session with a completed run (every kind of tool turn), its continuation (ended
    failed) and an interrupted run left open with a dangling tool call."""
    store = open_store(data_dir)
    for _ in range(3):
        store.bump_owner_epoch()
    add_run(store, SOURCE, epoch=3)
    commit_ledger(store, clean_ledger(5, ids=SOURCE))
    _admit_continuation(store)
    store.append_event(model_text("continuing", ids=TARGET, event_id="b-text"))
    ending = terminal(
        TARGET, event_id="b-end", status="failed", state_delta={"failureClass": "provider_error"}
    )
    store.commit_run_ending(ending, RunStatus.FAILED, "provider_error")
    add_run(store, OPEN, epoch=3)
    store.mark_run_running(OPEN.run_id)
    call = call_event("dangling", ids=OPEN)
    opening = user_text(ids=OPEN, marker=True, event_id="c-user")
    commit_ledger(store, [opening, call, dispatch_event(call)])
    return store


def _export(store: SqliteLedgerStore, session_id: str = SOURCE.session_id) -> bytes:
    buffer = io.BytesIO()
    store.export_session(session_id, buffer)
    return buffer.getvalue()


@pytest.fixture
def exported(tmp_path: Path) -> bytes:
    with _seed(tmp_path / "origin") as store:
        assert store.diagnose().ok
        return _export(store)


def test_round_trip_reproduces_the_file_and_the_projections(
    exported: bytes, tmp_path: Path
) -> None:
    lines = exported.split(b"\n")
    assert lines[-1] == b"" and lines[0].startswith(b'{"createdAt":1,')
    assert sum(b'"kind":"maka.run_header.v1"' in line for line in lines) == 3
    assert sum(b'"kind":"maka.continuation_claim.v1"' in line for line in lines) == 1
    with open_store(tmp_path / "copy") as copy:
        report = copy.import_session(exported)
        assert (report.runs, report.events_created, report.events_existing) == (
            3,
            report.events_read,
            0,
        )
        assert _export(copy) == exported
        assert copy.diagnose().ok
        assert copy.find_claim_by_target(TARGET.run_id) is not None
        assert copy.read_owner_epoch() >= 3
        header = copy.read_run_header(OPEN.run_id)
        assert header is not None and header.status is RunStatus.RUNNING
        assert len(copy.list_unsettled_tool_operations()) == 2  # dangling in run a and run c


def test_import_is_idempotent(exported: bytes, tmp_path: Path) -> None:
    with open_store(tmp_path / "copy") as copy:
        copy.import_session(exported)
        before = db_state(tmp_path / "copy" / DATABASE_NAME)
        again = copy.import_session(exported)
        assert (again.events_created, again.events_existing) == (0, again.events_read)
        assert db_state(tmp_path / "copy" / DATABASE_NAME) == before


def test_import_into_the_origin_is_a_no_op(tmp_path: Path) -> None:
    with _seed(tmp_path / "origin") as store:
        data = _export(store)
        before = db_state(store.path)
        assert store.import_session(data).events_created == 0
        assert db_state(store.path) == before


def _refused(store: SqliteLedgerStore, data: bytes, **options: bool) -> str:
    before = db_state(store.path)
    with pytest.raises(LedgerError) as error:
        store.import_session(data, **options)
    assert db_state(store.path) == before
    return str(error.value.code)


def _replace_line(data: bytes, needle: bytes, old: bytes, new: bytes) -> bytes:
    lines = data.split(b"\n")
    hits = [index for index, line in enumerate(lines) if needle in line]
    assert hits, needle
    lines[hits[0]] = lines[hits[0]].replace(old, new)
    return b"\n".join(lines)


def test_a_conflicting_file_is_refused(exported: bytes, tmp_path: Path) -> None:
    with open_store(tmp_path / "copy") as copy:
        copy.import_session(exported)
        edited_event = _replace_line(exported, b'"id":"b-text"', b"continuing", b"rewritten")
        assert _refused(copy, edited_event) == "identity_conflict"
        edited_header = _replace_line(
            exported, b'"runId":"run-c","sessionId"', b'"cwd":"/work"', b'"cwd":"/else"'
        )
        assert _refused(copy, edited_header) == "identity_conflict"
        edited_claim = _replace_line(
            exported, b"maka.continuation_claim.v1", b'"createdAt":500', b'"createdAt":501'
        )
        assert _refused(copy, edited_claim) == "identity_conflict"


def test_a_torn_tail_is_refused_unless_accepted(exported: bytes, tmp_path: Path) -> None:
    last_line = exported[:-1].rsplit(b"\n", 1)[1]
    assert b'"id":"b-end"' in last_line  # runs are exported oldest first: run b ends the file
    torn = exported[:-25]  # the terminal line loses its end and its newline
    with open_store(tmp_path / "copy") as copy:
        assert _refused(copy, torn) == TransferCode.IMPORT_TORN_TAIL
        report = copy.import_session(torn, accept_torn_tail=True)
        assert report.dropped_bytes == len(last_line) - 24
        assert [row.event["id"] for row in copy.read_run_events(TARGET.run_id)] == [
            "start-b",
            "b-text",
        ]
        # The ending was in the dropped tail: the header must not claim it.
        header = copy.read_run_header(TARGET.run_id)
        assert header is not None and header.status is RunStatus.CREATED
        assert copy.diagnose().ok
        # The same torn file again is a no-op; the complete file then carries the open run
        # on with the ending the torn one lost.
        assert copy.import_session(torn, accept_torn_tail=True).events_created == 0
        assert copy.import_session(exported).events_created == 1
        assert [row.event["id"] for row in copy.read_run_events(TARGET.run_id)] == [
            "start-b",
            "b-text",
            "b-end",
        ]
        ended = copy.read_run_header(TARGET.run_id)
        assert ended is not None and ended.status is not RunStatus.CREATED
        assert copy.diagnose().ok


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda d: d.replace(b'"partial":false', b'"partial":"no"', 1), "import_line_invalid"),
        (lambda d: d.replace(b"\n", b"\n\n", 3), "import_line_invalid"),
        (lambda d: d.split(b"\n", 1)[1], "import_structure_invalid"),
        (
            lambda d: _replace_line(d, b'"id":"b-text"', b'"runId":"run-b"', b'"runId":"run-a"'),
            "import_structure_invalid",
        ),
        (lambda d: b"", "import_structure_invalid"),
    ],
)
def test_invalid_files_are_refused_before_anything_is_written(
    exported: bytes, tmp_path: Path, mutate: Any, code: str
) -> None:
    with open_store(tmp_path / "copy") as copy:
        assert _refused(copy, mutate(exported)) == code


def _drop_line(data: bytes, needle: bytes) -> bytes:
    return b"\n".join(line for line in data.split(b"\n") if needle not in line)


def test_facts_the_writers_refuse_are_refused(exported: bytes, tmp_path: Path) -> None:
    with open_store(tmp_path / "copy") as copy:
        # A dispatch whose call is missing: T1 refuses it.
        no_call = _drop_line(exported, b'"kind":"function_call","name":"Write"},"id":"toolop_')
        assert _refused(copy, no_call) in {"event_order_conflict", "identity_conflict"}
        # A terminal event that is not the last of its run.
        lines = exported.split(b"\n")
        end = next(i for i, line in enumerate(lines) if b'"id":"evt-terminal"' in line)
        lines[end], lines[end - 1] = lines[end - 1], lines[end]
        assert _refused(copy, b"\n".join(lines)) in {"run_sealed", "import_structure_invalid"}
        # Two lines for one event id.
        doubled = exported + exported.split(b"\n")[-2] + b"\n"
        assert _refused(copy, doubled) in {"identity_conflict", "run_sealed"}
        assert copy.list_sessions() == []


def test_an_unknown_session_cannot_be_exported(tmp_path: Path) -> None:
    with open_store(tmp_path / "data") as store, pytest.raises(LedgerError) as error:
        store.export_session("nope", io.BytesIO())
    assert error.value.code == TransferCode.SESSION_NOT_FOUND
