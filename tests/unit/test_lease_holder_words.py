"""Who holds a session's lease, said as it is: a holder that is a process of this computer
that is gone (a killed ``maka run``) was called "another host" whose data folder to use."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from runtime.continuation.resume_gates import LatestRun, held_elsewhere_words


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(30)
    return child.pid


def test_a_gone_process_of_this_computer_is_said_to_be_gone() -> None:
    holder = f"{socket.gethostname()}:{_dead_pid()}:0123456789ab"
    words = held_elsewhere_words("s1", holder)
    assert "a Maka process of this computer that is gone" in words, words
    assert "that host's data folder" not in words


def test_a_live_process_or_another_computer_is_another_host() -> None:
    for holder in (
        f"{socket.gethostname()}:{os.getppid()}:0123456789ab",
        f"elsewhere.example:{_dead_pid()}:0123456789ab",
        "no-pid-here",
    ):
        words = held_elsewhere_words("s1", holder)
        assert "is held by another host" in words, (holder, words)
        # A running host keeps its sessions' leases: waiting alone never frees one.
        assert "or stop that host" in words, words


class _Leased:
    """A shared ledger's reads: one session's runs, and who holds its lease."""

    def __init__(self, holder: str, status: str = "running") -> None:
        from runtime.ledger.store_ports import RunHeader, RunStatus

        self.holder = holder
        self.run = RunHeader(
            "run-1", "s1", "inv-1", "turn-1", RunStatus(status), "/w", 1, 5, 6,
            workspace_identity="ws",
        )  # fmt: skip

    def live_lease_holders(self) -> dict[str, str]:
        return {"s1": self.holder}

    def list_session_runs(self, session_id: str) -> list[object]:
        return [self.run]

    def read_owner_epoch(self) -> int:
        return 1

    def read_run_header(self, run_id: str) -> object:
        return self.run


def test_safe_resume_off_says_a_gone_holder_is_gone_as_on_does() -> None:
    """Off, the planner parked ``resume_feature_disabled`` before looking at the lease: the
    unended run then read as a turn still running, and its dead holder as a host to answer."""
    from typing import Any

    from app.host.plan_report import lease_holder, plan_summary
    from runtime.continuation.resume_gates import feature_enabled, latest_not_running

    holder = f"{socket.gethostname()}:{_dead_pid()}:0123456789ab"
    store: Any = _Leased(holder)
    said = []
    for enabled in (False, True):
        run = LatestRun("s1", store, None, enabled, lambda header: "/w")
        plan = feature_enabled(run) or latest_not_running(_listed(run))
        assert plan is not None and [r.value for r in plan.rejection_reasons] == ["session_busy"]
        assert plan.diagnostics[0].detail == {"holder": holder, "holderGone": True}
        said.append(plan_summary(plan, lease=lease_holder(store, "s1")))
    assert said[0] == said[1]
    text = "\n".join(said[0])
    assert f"{holder}, a Maka process of this computer that is gone (killed or crashed)" in text
    assert "still running" not in text and "running right now" not in text, text
    assert "holds this session's lease now" not in text, text


def test_off_and_a_live_holder_or_an_ended_run_park_as_before() -> None:
    from typing import Any

    from runtime.continuation.resume_gates import feature_enabled

    live = f"{socket.gethostname()}:{os.getppid()}:0123456789ab"
    dead = f"{socket.gethostname()}:{_dead_pid()}:0123456789ab"
    for store in (_Leased(live), _Leased(dead, "failed")):
        leased: Any = store
        plan = feature_enabled(LatestRun("s1", leased, None, False, lambda header: "/w"))
        assert plan is not None, store.holder
        assert [r.value for r in plan.rejection_reasons] == ["resume_feature_disabled"]
    # A run that finished normally has nothing to resume, whatever the setting.
    ended: Any = _Leased(dead, "completed")
    plan = feature_enabled(LatestRun("s1", ended, None, False, lambda header: "/w"))
    assert plan is not None
    assert [r.value for r in plan.rejection_reasons] == ["resume_candidate_missing"]


def test_a_live_holder_elsewhere_is_named_and_no_refused_command_offered() -> None:
    from app.host.plan_report import LeaseHolder, plan_summary
    from runtime.continuation.continuation_planner import park
    from runtime.ledger.codes import ParkReason

    plan = park("s1", "run-1", ParkReason.RESUME_CANDIDATE_MISSING, "finished")
    alone = "\n".join(plan_summary(plan))
    assert "carry on with a new message" in alone
    text = "\n".join(plan_summary(plan, lease=LeaseHolder("m:1:ab", gone=False)))
    assert "Host m:1:ab holds this session's lease now" in text, text
    assert "carry on with a new message" not in text, text
    gone = "\n".join(plan_summary(plan, lease=LeaseHolder("m:1:ab", gone=True)))
    assert "m:1:ab, a Maka process of this computer that is gone" in gone, gone
    assert "wait for the gone process's lease to run out" in gone, gone


def test_a_sessions_row_says_its_gone_holder_is_gone() -> None:
    from app.host.session_rows import host_fields, host_flag

    dead = f"{socket.gethostname()}:{_dead_pid()}:0123456789ab"
    row = host_fields(dead)
    assert row == {"host": dead, "hostGone": True}
    assert "a Maka process of this computer that is gone (killed or crashed)" in host_flag(row)
    live = host_fields("elsewhere.example:7:0123456789ab")
    assert live == {"host": "elsewhere.example:7:0123456789ab"}
    assert host_flag(live) == "  host elsewhere.example:7:0123456789ab"
    assert host_flag(host_fields(None)) == ""


def _listed(run: LatestRun) -> LatestRun:
    from runtime.continuation.resume_gates import runs_listed

    assert runs_listed(run) is None
    return run
