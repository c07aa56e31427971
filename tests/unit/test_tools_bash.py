"""The bash tool: output cap, timeout, exit codes, process-tree kill on cancel, background
shells tracked by pid and create time."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import psutil
import pytest

from runtime.base.cancel_token import CancelToken
from runtime.tools.bash_tool import BashTool
from runtime.tools.process_tree import BackgroundShellRegistry, ShellRecord
from runtime.tools.tool_contract import ToolContext


def _ctx(tmp_path: Path, **extra: object) -> ToolContext:
    return ToolContext(cwd=Path(os.path.realpath(tmp_path)), cancel=CancelToken(), **extra)  # type: ignore[arg-type]


def _run(ctx: ToolContext, **args: object) -> tuple[dict[str, object], bool]:
    tool = BashTool()
    output = tool.run(tool.prepare(args, ctx), ctx)
    return output.result, output.is_error


def test_runs_in_the_session_folder_and_reports_exit_code(tmp_path: Path) -> None:
    result, is_error = _run(_ctx(tmp_path), command="pwd; echo err >&2; exit 3")
    assert result["exitCode"] == 3 and is_error
    assert os.path.realpath(tmp_path) in str(result["output"])
    assert "err" in str(result["output"])


def test_output_is_capped_with_a_marker(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, output_cap_bytes=100)
    result, is_error = _run(ctx, command="head -c 5000 /dev/zero | tr '\\0' a")
    assert not is_error
    output = str(result["output"])
    assert output.startswith("a" * 100)
    assert "[output truncated: 4900 more bytes not shown]" in output


def test_timeout_kills_the_command(tmp_path: Path) -> None:
    started = time.monotonic()
    result, is_error = _run(_ctx(tmp_path), command="sleep 30", timeout_seconds=1)
    assert is_error and result["timedOut"] is True
    assert time.monotonic() - started < 10


def _pids_from(path: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(line) for line in path.read_text().split()]
            if len(pids) >= count:
                return pids
        time.sleep(0.05)
    raise AssertionError("the command never wrote its pids")


def test_cancel_kills_the_whole_process_tree(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    pid_file = tmp_path / "pids"
    # a child in the group, and a grandchild that escapes into its own session
    command = (
        f"sleep 60 & echo $! >> {pid_file}; setsid sh -c 'echo $$ >> {pid_file}; sleep 60' & wait"
    )
    outcome: dict[str, object] = {}

    def work() -> None:
        outcome["result"], outcome["is_error"] = _run(ctx, command=command)

    thread = threading.Thread(target=work)
    thread.start()
    pids = _pids_from(pid_file, 2)
    ctx.cancel.cancel()
    thread.join(15)
    assert not thread.is_alive()
    assert outcome["is_error"] is True
    assert outcome["result"]["cancelled"] is True  # type: ignore[index]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def test_background_shell_is_tracked_by_pid_and_create_time(tmp_path: Path) -> None:
    registry = BackgroundShellRegistry(tmp_path / "data" / "background-shells.jsonl")
    ctx = _ctx(tmp_path, shell_registry=registry, session_id="s1", run_id="r1")
    result, is_error = _run(ctx, command="sleep 30", background=True)
    assert not is_error
    live = registry.live_shells("s1")
    assert [record.pid for record in live] == [result["pid"]]
    assert registry.live_shells("other") == []
    # a record whose create time differs is a reused pid, not ours
    forged = ShellRecord(live[0].pid, live[0].create_time - 100, "s2", "r", "x", 0)
    registry.record(forged)
    assert registry.live_shells("s2") == []
    registry.stop_all("s1")
    assert registry.live_shells("s1") == []


def test_background_without_registry_fails_cleanly(tmp_path: Path) -> None:
    from runtime.tools.tool_contract import ToolFailure

    with pytest.raises(ToolFailure):
        _run(_ctx(tmp_path), command="true", background=True)


ESCAPES = {
    "setsid": "setsid sh -c '{body}' > /dev/null 2>&1 < /dev/null &",
    "double fork": "( sh -c '{body}' > /dev/null 2>&1 < /dev/null & )",
    "setsid in a double fork": "( setsid sh -c '{body}' > /dev/null 2>&1 < /dev/null & )",
    "nohup": "nohup sh -c '{body}' > /dev/null 2>&1 < /dev/null &",
}


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="a child subreaper is Linux only")
@pytest.mark.parametrize("subreaper", [True, False], ids=["subreaper", "tracker"])
@pytest.mark.parametrize("form", sorted(ESCAPES))
def test_a_process_that_detaches_is_stopped_when_the_call_ends(
    tmp_path: Path, form: str, subreaper: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the subreaper, or (the test-only switch) without it, as on macOS: then the
    supervisor's descendant tracker remembers the process and stops it."""
    if not subreaper:
        monkeypatch.setenv("MAKA_FAILPOINT", "tool_supervisor_no_subreaper")
    body = "echo $$ >> escaped.pid; sleep 3; echo escaped >> late.txt"
    wait = "while [ ! -s escaped.pid ]; do sleep 0.05; done"  # it runs before the call ends
    command = ESCAPES[form].format(body=body) + f"\n{wait}\necho spawned"
    result, is_error = _run(_ctx(tmp_path), command=command)
    assert not is_error and "spawned" in str(result["output"])
    (pid,) = _pids_from(tmp_path / "escaped.pid", 1)
    stopped = result.get("backgroundStopped")
    assert isinstance(stopped, int) and stopped >= 1, result  # its shell and its sleep
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    time.sleep(3.5)  # past the moment it would have written
    assert not (tmp_path / "late.txt").exists()


def test_a_command_that_leaves_nothing_behind_reports_no_stopped_processes(tmp_path: Path) -> None:
    result, is_error = _run(_ctx(tmp_path), command="sleep 0.1; echo done")
    assert not is_error and "backgroundStopped" not in result


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="a child subreaper is Linux only")
def test_a_shell_whose_child_is_stopped_first_never_runs_its_next_command(tmp_path: Path) -> None:
    """Stopping is all at once: 24 detached shells each wait on a ``sleep``; were the sleeps
    ended one by one while their shells ran, a shell could wake and run its next command before
    its own signal arrived."""
    body = "echo $$ >> escaped.pid; sleep 30; echo late >> late.txt"
    spawn = f"setsid sh -c '{body}' > /dev/null 2>&1 < /dev/null &"
    wait = "while [ $(wc -l < escaped.pid) -lt 24 ]; do sleep 0.05; done"
    command = "touch escaped.pid\n" + "\n".join([spawn] * 24) + f"\n{wait}\necho spawned"
    result, is_error = _run(_ctx(tmp_path), command=command)
    assert not is_error and "spawned" in str(result["output"]), result
    pids = _pids_from(tmp_path / "escaped.pid", 24)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        for pid in pids
    ):
        time.sleep(0.05)
    time.sleep(0.5)
    assert not (tmp_path / "late.txt").exists()


def test_a_command_the_host_stopped_says_so(tmp_path: Path) -> None:
    """A command this host ended itself (its session leases could not be renewed): the result
    says Maka stopped it and why, not a bare exit by a signal the model would read as the
    command failing by itself."""
    from runtime.tools.process_identity import note_stopped_by_host

    pid_file = tmp_path / "pid"
    outcome: dict[str, object] = {}
    ctx = _ctx(tmp_path)

    def run() -> None:
        outcome["result"], outcome["is_error"] = _run(
            ctx, command=f"echo $$ > {pid_file}; sleep 30"
        )

    worker = threading.Thread(target=run)
    worker.start()
    [pid] = _pids_from(pid_file, 1)
    note_stopped_by_host(pid, "the session's lease could not be renewed")
    os.kill(pid, 15)
    worker.join(30)
    result = outcome["result"]
    assert isinstance(result, dict) and outcome["is_error"] is True
    assert result["stoppedByHost"] is True and result["exitCode"] == -15
    assert result["error"] == (
        "the command was stopped by Maka: the session's lease could not be renewed"
    )


def test_a_command_its_supervisor_ended_at_the_lease_deadline_says_so(tmp_path: Path) -> None:
    """The supervisor ends a command at the runway deadline by itself (the process could not
    renew its leases; ``maka run`` has no host to note it): its result said only "exit code
    -15", as if the command had failed."""
    from runtime.tools import supervised_spawn
    from runtime.tools.process_identity import LEASE_DEADLINE_WHY

    supervised_spawn.set_stop_deadline(time.monotonic() + 1.0)
    try:
        result, is_error = _run(_ctx(tmp_path), command="sleep 30")
    finally:
        with supervised_spawn._DEADLINE_LOCK:
            supervised_spawn._DEADLINE.clear()
    assert isinstance(result, dict) and is_error is True
    assert result["stoppedByHost"] is True and int(str(result["exitCode"])) < 0
    assert result["error"] == f"the command was stopped by Maka: {LEASE_DEADLINE_WHY}"
