"""A turn whose history did not fit the model's context window, killed by SIGKILL at P8 (its
notice committed, its ending not): the real main process starts with automatic resume on and
the banner opens parked on ``provider_history_too_long``, telling the user to send a new,
shorter message; it never sends the same history again."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from renderer.interrupted_banner import BannerState
from tests.e2e.test_context_overflow_resume_cli import _overflowed
from tests.e2e.test_desktop_auto_resume_park import WAIT_MS, _renderer
from tests.helpers.maka_process import MainProcess, main_log, start_main
from tests.helpers.maka_run import committed_runs

pytestmark = pytest.mark.e2e


def test_the_banner_parks_a_resume_that_would_overflow_again(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, env = _overflowed(tmp_path, "P8")
    session_id = committed_runs(data)[0][0].session_id
    main = start_main(data, env).wait_ready()
    processes.append(main)
    deadline = time.monotonic() + 60
    while "auto-resume outcome: ResumeParked" not in main_log(data):
        assert time.monotonic() < deadline, main_log(data)
        qtbot.wait(50)
    banner, bridge = _renderer(qtbot, main, session_id)
    qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    assert [label.property("code") for label in banner.reason_labels] == [
        "provider_history_too_long"
    ]
    assert "Send a new, shorter message" in banner.body_label.text()
    assert not banner.action_button.isVisible()
    bridge.stop()
    assert main.terminate() == 0
    requests = (tmp_path / "requests.jsonl").read_text().splitlines()
    assert len(requests) == 1, [json.loads(r)["history"] for r in requests]
    assert len(committed_runs(data)) == 1
