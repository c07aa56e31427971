"""A parked write in the real desktop processes: ``maka run`` writing a file is SIGKILLed at P3
(the temporary file is complete, the target untouched); the real main process starts with Safe
resume on, recovery parks the write with ``reconcile_matches_prior_state`` and removes Maka's own
temporary file, auto-resume parks, and a real ``RendererBridge`` with a real banner connects.

The banner says what the card says: "The write did not happen.", not the generic sentence about
an unknown outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from renderer.interrupted_banner import BannerState
from tests.helpers.desktop_window import connected_banner
from tests.helpers.maka_process import MainProcess, start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
CONTENT = "hello, parked world\n"
SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Writing.",
            "toolCalls": [
                {"id": "w1", "name": "write_file", "args": {"path": "out.txt", "content": CONTENT}}
            ],
        },
        {"text": "Written."},
    ]
]
WAIT_MS = 30_000


def test_a_write_that_did_not_happen_says_so_in_the_banner_headline(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", SCRIPT))
    crashed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write it"],
        data,
        env={**env, "MAKA_FAILPOINT": "P3"},
    )
    assert crashed.returncode == -9, crashed.stderr
    assert [p.name for p in work.iterdir() if p.name.startswith(".out.txt.maka-")]
    session_id = committed_runs(data)[0][0].session_id

    main = start_main(data, {**env, **FLAG}).wait_ready()
    processes.append(main)
    banner, bridge = connected_banner(qtbot, main, session_id, WAIT_MS)
    qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    if banner.title_label.text() != "The write did not happen.":
        # auto-resume may not have parked yet when the banner connected: ask once more
        banner.request_resume()
        qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    assert banner.title_label.text() == "The write did not happen."
    (reason,) = banner.reason_labels
    assert "the file is as it was" in reason.text()
    assert "outcome is unknown" not in reason.text()
    body = banner.body_label.text()
    assert "ask for the write again" in body
    # The card's answer is named too: confirming lets Safe resume continue.
    assert "confirm on its card below that the write did not happen" in body
    details = banner.details_label.text()
    assert "reconcile_matches_prior_state" in details and "out.txt" in details
    assert not work.joinpath("out.txt").exists(), "never redone"
    assert not [p for p in work.iterdir() if p.name.startswith(".out.txt.maka-")], (
        "Maka's own temporary file is removed by recovery"
    )
    assert bridge.settle_call(session_id, "w1", False, None)
    qtbot.waitUntil(lambda: banner.state is BannerState.IDLE, timeout=WAIT_MS)
    assert banner.action_button.text() == "Safe resume"  # checked again: nothing holds it
    assert not work.joinpath("out.txt").exists(), "confirming redoes nothing"
    bridge.stop()
    assert main.terminate() == 0
