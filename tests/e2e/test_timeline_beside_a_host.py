"""``maka timeline`` beside a running host plans as that host would: with Safe resume on in the
host (its own variable) and unset in the user's shell, it said "Safe resume is turned off on
this computer" while ``maka plan`` (through the host) named the real reason."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.crashed_session import FLAG, crashed_run
from tests.helpers.maka_process import start_main
from tests.helpers.maka_run import maka

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets"),
]


def test_timeline_beside_a_host_uses_the_hosts_safe_resume_setting(tmp_path: Path) -> None:
    crashed = crashed_run(tmp_path, "P5")  # a park with Safe resume on: the call's outcome
    shell = dict(crashed.env)  # the user's shell: no MAKA_RUNTIME_SAFE_BOUNDARY_RESUME
    host = start_main(crashed.data, {**crashed.env, **FLAG}, "host").wait_ready()
    try:
        plan = maka(["plan", crashed.session_id], crashed.data, env=shell)
        timeline = maka(["timeline", crashed.session_id], crashed.data, env=shell)
        # The command's own variable still decides for itself.
        off = maka(
            ["timeline", crashed.session_id],
            crashed.data,
            env={**shell, "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "0"},
        )
    finally:
        host.stop()
    assert plan.returncode == 3 and "resume_feature_disabled" not in plan.stdout, plan.stdout
    assert timeline.returncode == 0, timeline.stderr
    assert "resume_feature_disabled" not in timeline.stdout, timeline.stdout
    assert "Safe resume: park (reasons: " in timeline.stdout, timeline.stdout
    assert "resume_feature_disabled" in off.stdout, off.stdout
