"""Chaos on PostgreSQL with real processes, bounded for CI (docs/design/hosts.md section 3): three
``maka host`` processes on one server; one is killed (SIGKILL) mid-turn and another continues its
session after the lease; one is stopped (SIGSTOP) past its lease while its command runs, another
takes over, and once continued its command is already gone and its next write is refused with
``session_lease_lost``; the server ends one host's connections again and again mid-turn (its
turn ends with ``store_io_failed``, the host reconnects, repairs its run and continues it); the
network of that host (its connections go through a loopback proxy) goes silent mid-turn: its
calls meet their deadline instead of waiting forever, another host takes the session over and
continues it, and once the proxy forwards again the host serves a new turn to completion.
After the rounds: no side effect twice, nothing committed after a run's recovered ending,
gap-free sequences, no unpaired call, every session completed or parked with a documented code.
``bench/host_chaos.py`` runs more rounds (tests/helpers/host_chaos.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.host_chaos import TTL_MS, Rig, check_invariants

pytestmark = [
    pytest.mark.crash,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP and the POSIX tool supervisor"),
]


def test_three_hosts_survive_a_kill_and_a_stop(tmp_path: Path, postgres_url: str) -> None:
    rig = Rig(postgres_url, tmp_path)
    try:
        a, b = (rig.start_host(name) for name in ("a", "b"))
        c = rig.start_host("c", proxied=True)
        killed = rig.kill_round(a, tmp_path / "work-kill")
        stopped = rig.stop_round(b, tmp_path / "work-stop")
        cut = rig.cut_round(c, tmp_path / "work-cut")
        silent = rig.silent_round(c, tmp_path / "work-silent")
        counts = check_invariants(
            rig,
            {
                "kill": tmp_path / "work-kill",
                "stop": tmp_path / "work-stop",
                "cut": tmp_path / "work-cut",
                "silent": tmp_path / "work-silent",
                "silent-again": tmp_path / "work-silent-again",
            },
        )
    finally:
        rig.stop_all()
    ttl = TTL_MS / 1000
    assert killed["takeover_s"] < ttl + 5 + 2.5 + 1, killed  # + the step's stream, + a sweep
    assert stopped["takeover_s"] < ttl + 5, stopped
    assert (tmp_path / "work-kill" / "side.txt").read_text() == "one\n"
    assert (tmp_path / "work-stop" / "side.txt").read_text() == "one\n"
    # The stopped command's outcome is unknown: parked, not re-run. The cut round's session may
    # park too (safety_observation_unavailable): when its turn meets a cut early, the host's
    # repair and resume can run while the server is still ending its connections, and the
    # resume's observation of the workspace fails; a documented code, checked above.
    assert 1 <= counts["parked"] <= 2, counts
    assert (tmp_path / "work-cut" / "side.txt").read_text() == "one\n"
    assert cut["connections_ended"] >= 1
    assert silent["takeover_s"] < ttl + 5, silent  # the silent host's lease ran out on time
    assert (tmp_path / "work-silent" / "side.txt").read_text() == "one\n"
    assert (tmp_path / "work-silent-again" / "side.txt").read_text() == "one\n"
    assert silent["deadline_hits"] >= 1, silent  # its calls met their deadline, none hung
