"""One event of a session's interrupted run no longer decodes (its row edited outside Maka).
Startup recovery quarantines the run and Safe resume parks with ``runtime_ledger_unreadable``
(docs/design/recovery.md); ``maka plan`` and ``maka resume`` ended with ``store_corrupt``
(exit 1) instead, reading the run's calls for the list under the plan. A payload stored as text
(what a hand edit with a text-typed value leaves) printed a Python traceback."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}


def _interrupted(
    tmp_path: Path, *, checkpoints: bool = False
) -> tuple[Path, dict[str, str], str, str]:
    """A session whose second run was killed at P6; its data folder, env, session, run."""
    work = tmp_path / "work"
    work.mkdir()
    calls = [
        {"id": f"c{n}", "name": "write_file", "args": {"path": f"{n}.txt", "content": "x"}}
        for n in (1, 2)
    ]
    script = write_script(
        tmp_path / "script.json",
        [
            [{"text": "first"}],
            [{"toolCalls": [calls[0]]}, {"toolCalls": [calls[1]]}, {"text": "done"}],
        ],
    )
    env = {**scripted_env(script, checkpoints=checkpoints), **FLAG}
    data = tmp_path / "data"
    first = maka(["run", "--cwd", str(work), "hello"], data, env=env)
    assert first.returncode == 0, first.stderr
    session = committed_runs(data)[0][0].session_id
    killed = maka(
        ["run", "--session", session, "--permission-mode", "auto", "write two"],
        data,
        env={**env, "MAKA_FAILPOINT": "P6"},
    )
    assert killed.returncode == -9, killed.stderr
    run = next(h for h, _ in committed_runs(data) if h.status == "running").run_id
    return data, env, session, run


def _damage(data: Path, run: str, as_text: bool) -> None:
    with sqlite3.connect(data / "runtime.sqlite") as conn:
        (payload,) = conn.execute(
            "SELECT payload FROM runtime_events WHERE run_id = ? AND event_seq = 2", (run,)
        ).fetchone()
        event = json.loads(bytes(payload))
        event["bogusKey"] = 1
        text = json.dumps(event)
        conn.execute(
            "UPDATE runtime_events SET payload = ? WHERE run_id = ? AND event_seq = 2",
            (text if as_text else text.encode(), run),
        )


@pytest.mark.parametrize("as_text", [False, True])
def test_a_run_whose_event_no_longer_decodes_parks_its_session(
    tmp_path: Path, as_text: bool
) -> None:
    data, env, session, run = _interrupted(tmp_path)
    _damage(data, run, as_text)
    for command in (["plan", session], ["resume", session, "--permission-mode", "auto"]):
        result = maka(command, data, env=env)
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode == 3, (command, result.stdout, result.stderr)
        assert "runtime_ledger_unreadable" in result.stdout, result.stdout
    listed = maka(["sessions"], data, env=env)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    # The start above could not repair it (quarantined), so no start will: it does not await
    # repair ("repaired at the next start" was untrue), its record cannot be read.
    assert f"INTERRUPTED (its record cannot be read: maka plan {session} says why)" in (
        listed.stdout
    ), listed.stdout
    [row] = json.loads(maka(["sessions", "--json"], data, env=env).stdout)["sessions"]
    assert row["recordUnreadable"] is True and "awaitingRepair" not in row, row
    # The timeline shows the readable run and marks the damaged one (it refused the session).
    timeline = maka(["timeline", session], data, env=env)
    assert timeline.returncode == 0 and "Traceback" not in timeline.stderr, timeline.stderr
    assert "user: hello" in timeline.stdout, timeline.stdout
    assert f"run {run} [running, runtime_ledger_unreadable] 0 events" in timeline.stdout
    assert "its saved record cannot be read" in timeline.stdout, timeline.stdout
    # Export still refuses the session (a copy without a run would not import), saying which.
    exported = maka(["export", session, "-o", str(tmp_path / "out.jsonl")], data, env=env)
    assert exported.returncode != 0 and "[store_corrupt]: stored event" in exported.stderr
    if as_text:
        assert "payload is stored as text" in exported.stderr, exported.stderr


def test_the_desktop_shows_the_readable_runs_and_says_which_run_cannot_be_read(
    tmp_path: Path,
) -> None:
    """The window's transcript of such a session read "No messages yet" for a session whose
    first run is whole: one undecodable event emptied it. The readable runs are shown, and
    the damaged one is a notice with its code."""
    from app.host.desktop_services import DesktopServices
    from storage.ledger.ledger_store import open_store

    data, _env, session, run = _interrupted(tmp_path)
    _damage(data, run, as_text=False)
    services = DesktopServices(open_store(data), data, safe_resume_enabled=True)
    try:
        services.recover_at_startup()
        items = services.open_session(session).items
        [row] = [s for s in services.list_sessions() if s.session_id == session]
        one = services.session_summary(session)
    finally:
        services.close()
    # Nothing runs the quarantined run: the row said "Running", with a Stop that stopped nothing.
    for summary in (row, one):
        assert not summary.interrupted and summary.last_run_status == "failed", summary
        assert summary.failure_class == "runtime_ledger_unreadable", summary
    texts = [getattr(item, "text", "") for item in items]
    assert "hello" in texts and "first" in texts, texts  # the first run, whole
    [notice] = [
        getattr(item, "text", "")
        for item in items
        if getattr(item, "code", "") == "runtime_ledger_unreadable"
    ]
    assert "This run's saved history cannot be read" in notice, notice


def test_doctor_names_a_continuation_whose_source_history_was_changed(tmp_path: Path) -> None:
    """The source run's history changed in the database (a valid event, other words) after a
    continuation recorded its digest: ``maka doctor`` said ok, ``maka export`` wrote the file,
    and ``maka import`` of it then blamed the file. Doctor now names the continuation."""
    import rfc8785

    data, env, session, run = _interrupted(tmp_path)
    resumed = maka(["resume", session, "--permission-mode", "auto"], data, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert maka(["doctor"], data, env=env).returncode == 0
    with sqlite3.connect(data / "runtime.sqlite") as conn:
        (payload,) = conn.execute(
            "SELECT payload FROM runtime_events WHERE run_id = ? AND event_seq = 1", (run,)
        ).fetchone()
        event = json.loads(bytes(payload))
        assert event["content"]["kind"] == "text", event
        event["content"]["text"] = "write ONE"
        conn.execute(
            "UPDATE runtime_events SET payload = ? WHERE run_id = ? AND event_seq = 1",
            (rfc8785.dumps(event), run),
        )
    doctor = maka(["doctor", "--json"], data, env=env)
    assert doctor.returncode == 1, doctor.stdout
    [problem] = [
        p
        for p in json.loads(doctor.stdout)["problems"]
        if p["code"] == "source_prefix_digest_mismatch"
    ]
    assert f"continues run {run} after its event" in problem["message"], problem
    assert "changed in the database" in problem["message"], problem


def test_a_new_message_carries_the_session_on_without_the_unreadable_run(tmp_path: Path) -> None:
    """Every park says a new message carries the session on; with a run whose record no longer
    decodes, a new message failed with ``store_corrupt`` (the history read every run), so the
    session was locked out. The run is left out of the model's history, with a note saying so."""
    data, env, session, run = _interrupted(tmp_path)
    _damage(data, run, as_text=False)
    record = tmp_path / "requests.jsonl"
    script = write_script(
        tmp_path / "later.json", [[{"text": "carried on"}], [{"text": "carried on"}]]
    )
    later = {**env, **scripted_env(script, record)}
    ran = maka(["run", "--session", session, "and now?"], data, env=later)
    assert ran.returncode == 0, ran.stderr
    assert "carried on" in ran.stdout, ran.stdout
    [request] = [json.loads(line) for line in record.read_text().splitlines()]
    sent = json.dumps(request)
    assert "the saved record of an earlier turn of this conversation can no longer be read" in sent
    assert "write two" not in sent, sent  # the damaged run's own message is left out


def test_retention_trims_around_a_run_whose_record_no_longer_decodes(tmp_path: Path) -> None:
    """Snapshot retention read every run's events: one undecodable event made every pass fail
    ("workspace checkpoint retention failed: store_corrupt"), so no session's snapshots were
    ever trimmed again. The damaged run's snapshots are kept untouched; the rest is trimmed."""
    from storage.checkpoints.checkpoint_retention import run_retention
    from storage.checkpoints.checkpoint_store import GitCheckpointStore
    from storage.ledger.ledger_store import open_store

    data, _env, _session, run = _interrupted(tmp_path, checkpoints=True)
    _damage(data, run, as_text=False)
    carrier = GitCheckpointStore(data)
    [repository] = list(carrier.root.glob("*.git"))
    before = carrier.refs_in(repository)
    assert any(f"/{run}/" in ref for ref in before), before
    store = open_store(data, read_only=True)
    try:
        result = run_retention(store, carrier)
    finally:
        store.close()
    assert result.errors == [], result.errors
    after = carrier.refs_in(repository)
    assert {ref for ref in before if f"/{run}/" in ref} <= set(after), (before, after)


def test_doctor_and_checkpoints_read_around_a_run_whose_record_no_longer_decodes(
    tmp_path: Path,
) -> None:
    """``maka doctor`` printed only ``store_corrupt`` for the whole data folder (no other check
    ran), and ``maka checkpoints`` refused the session. Doctor now names the event
    (``event_unreadable``) with every other check done, and does not call the damaged run's
    snapshots orphans (retention keeps them); ``maka checkpoints`` lists the readable runs."""
    data, env, session, run = _interrupted(tmp_path, checkpoints=True)
    _damage(data, run, as_text=False)
    doctor = maka(["doctor", "--json"], data, env=env)
    assert doctor.returncode == 1, doctor.stdout
    document = json.loads(doctor.stdout)
    codes = [problem["code"] for problem in document["problems"]]
    assert codes == ["event_unreadable"], document["problems"]
    assert document["workspaceCheckpoints"]["orphans"] == [], document["workspaceCheckpoints"]
    listed = maka(["checkpoints", session], data, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "present" in listed.stdout, listed.stdout
