"""Which runs the CLI and the desktop offer Safe resume for, from one decision in the seam.

Each row is a real SQLite ledger whose latest run ended one way. The CLI's answer is the real
``maka plan SESSION --json`` (it continues, or parks because there is nothing to resume): the
seam takes up a run that ended before its turn was done (docs/design/recovery.md section 6: a
restart, a model server that failed, a ledger write that failed, a stop). The desktop's is the
session summary its host service sends the window (``interrupted``): the banner offers Safe resume
only when a restart failed the run (docs/design/desktop.md). Every run the banner offers, the
seam accepts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.host.desktop_services import DesktopServices
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunStatus
from storage.ledger.ledger_store import open_store
from storage.sessions.workspace_identity import resolve_workspace_identity
from tests.helpers.chat_server import chat_server, json_error, text_reply, tool_reply
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    model_text,
    terminal,
    user_text,
)
from tests.helpers.maka_run import committed_runs, maka
from tests.helpers.resume_fixtures import ensure_session, seed_interrupted_run

pytestmark = pytest.mark.e2e

IDS = RunIds("sess-offer", "inv-offer", "run-offer", "turn-offer")


@dataclass(frozen=True)
class Ending:
    """How the session's latest run ended; ``status`` None: it was cut off (no ending at all,
    startup recovery closes it); ``runs`` False: the session has no run yet."""

    status: RunStatus | None
    failure_class: str | None = None
    cli: bool = True
    banner: bool = False
    runs: bool = True


ENDINGS = {
    "maka restarted mid-turn": Ending(None, banner=True),
    "the model server failed": Ending(RunStatus.FAILED, "provider_error"),
    "a ledger write failed": Ending(RunStatus.FAILED, "tool_boundary_failed"),
    "the user stopped it": Ending(RunStatus.CANCELLED, "cancelled_by_user"),
    "the turn completed": Ending(RunStatus.COMPLETED, cli=False),
    "no turn yet": Ending(None, cli=False, runs=False),
}


def _turn() -> list[RuntimeEvent]:
    """A user message and a listing that ran and answered (paired: T1 and T2 committed)."""
    call = call_event("c1", "list_dir", {"path": "."}, ids=IDS, ts=2)
    return [
        user_text("list the files", ids=IDS, marker=True),
        call,
        dispatch_event(call),
        bound_response(call, {"entries": []}),
    ]


def _seed(data: Path, work: Path, ending: Ending) -> None:
    identity = resolve_workspace_identity(work).identity
    with open_store(data) as store:
        if not ending.runs:
            ensure_session(store, IDS.session_id, str(work))
            return
        seed_interrupted_run(store, IDS, _turn(), cwd=str(work), workspace_identity=identity)
        if ending.status is None:
            return  # cut off: the next start closes it with app_restarted
        if ending.status is RunStatus.COMPLETED:
            store.append_event(model_text("done", ids=IDS, event_id="evt-done", ts=5))
        event_status = {"failed": "failed", "cancelled": "cancelled"}.get(ending.status.value)
        delta: dict[str, str] = (
            {"failureClass": ending.failure_class}
            if ending.failure_class is not None
            else {"stopReason": "end_turn"}
        )
        store.commit_run_ending(
            terminal(IDS, status=event_status or "completed", ts=6, state_delta=delta),
            ending.status,
            ending.failure_class,
        )


def _cli_offers(data: Path) -> bool:
    env = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1", "MAKA_WORKSPACE_CHECKPOINTS": "off"}
    result = maka(["plan", IDS.session_id, "--json"], data, env=env)
    assert result.returncode in (0, 3), result.stderr
    plan = json.loads(result.stdout)
    if result.returncode == 0:
        return True
    # Parked: only "nothing to resume" means it was not offered; any other reason would be a
    # park of an offered run, which these ledgers must not produce.
    assert plan["rejectionReasons"] == ["resume_candidate_missing"], plan
    return False


def _desktop_offers(data: Path) -> bool:
    services = DesktopServices(open_store(data), data, safe_resume_enabled=True)
    try:
        services.recover_at_startup()
        return services.session_summary(IDS.session_id).interrupted
    finally:
        services.close()


@pytest.mark.parametrize("name", list(ENDINGS))
def test_the_banner_offers_safe_resume_only_for_runs_the_seam_takes_up(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ending = ENDINGS[name]
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    _seed(data, work, ending)
    monkeypatch.setenv("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "1")
    desktop = _desktop_offers(data)
    cli = _cli_offers(data)
    assert (cli, desktop) == (ending.cli, ending.banner), name
    assert cli or not desktop, "the banner offers a run the seam would refuse"


def test_a_turn_whose_model_server_failed_continues_with_maka_resume_without_repeating_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ``maka run`` against a local model server that answers one tool call and then
    fails (HTTP 503); ``maka sessions`` says ``maka resume`` continues it (the desktop shows the
    turn as failed, with no banner); ``maka resume`` carries the turn on once
    the server answers again: the command ran once, and the model got the paired history with
    no new user message."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    append = json.dumps({"command": "echo ran >> log.txt"})
    overloaded = {"error": {"message": "the model server is overloaded", "type": "server_error"}}
    replies = [tool_reply("b1", "bash", append), json_error(503, overloaded), text_reply("Done.")]
    with chat_server(replies) as server:
        env = {
            "MAKA_PROVIDER": "openai",
            "MAKA_OPENAI_BASE_URL": server.base_url,
            "MAKA_MODEL": "m",
            "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1",
            "MAKA_WORKSPACE_CHECKPOINTS": "off",
        }
        ran = maka(
            ["run", "--cwd", str(work), "--permission-mode", "auto", "log it"], data, env=env
        )
        assert ran.returncode == 1, ran.stdout + ran.stderr
        assert "provider_error" in ran.stderr
        assert (work / "log.txt").read_text() == "ran\n"
        [row] = json.loads(maka(["sessions", "--json"], data, env=env).stdout)["sessions"]
        assert (row["failureClass"], row["resumable"]) == ("provider_error", True)
        session_id = row["sessionId"]

        monkeypatch.setenv("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "1")
        services = DesktopServices(open_store(data), data, safe_resume_enabled=True)
        try:
            services.recover_at_startup()
            summary = services.session_summary(session_id)
        finally:
            services.close()
        assert (summary.failure_class, summary.interrupted) == ("provider_error", False)

        # The TUI says how the turn ended in words, its code after them.
        opened = maka(["tui", "--session", session_id], data, env=env, stdin="/quit\n")
        assert opened.returncode == 0, opened.stderr
        assert (
            "This session's last turn ended before it finished: The model could not be reached "
            "or answered with an error (provider_error)."
        ) in opened.stdout, opened.stdout

        resumed = maka(["resume", session_id], data, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "Done." in resumed.stdout
        requests = server.requests()
    assert (work / "log.txt").read_text() == "ran\n"  # the command did not run again
    assert len(requests) == 3
    roles = [message["role"] for message in requests[2]["messages"]]
    assert roles.count("user") == 1  # no new user message
    assert roles[-2:] == ["assistant", "tool"]  # the call and its result, paired
    runs = committed_runs(data)
    assert [(header.status, header.failure_class) for header, _ in runs] == [
        ("failed", "provider_error"),
        ("completed", None),
    ]
    assert runs[1][0].continuation_source is not None
    [row] = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"]
    assert row["resumable"] is False
    again = maka(
        ["plan", session_id, "--json"], data, env={"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
    )
    assert again.returncode == 3
