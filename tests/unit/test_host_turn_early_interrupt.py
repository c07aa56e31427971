"""``maka run`` through a host: a Ctrl+C that comes right after the request went out. The
command said "interrupted" and ended while the host ran the turn to its end (it took the
command for one that went away). The request is now sent once Ctrl+C is handled, so such a
Ctrl+C cancels the turn the host starts."""

from __future__ import annotations

import argparse
import os
import queue
import signal
import sys
import time
from typing import Any

import pytest

from app.bridge_contract import (
    Message,
    TurnEndedPush,
    TurnsCancelRequest,
    TurnsRunRequest,
    TurnStartedPush,
)
from app.commands.host_turn import run_through_host

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to itself")


class _Host:
    """The host side: Ctrl+C arrives while the request is being sent."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self._pushes: queue.Queue[Message] = queue.Queue()

    def stream_without_timeout(self) -> None:
        pass

    def send(self, message: Message) -> None:
        self.sent.append(message)
        if isinstance(message, TurnsRunRequest):
            os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl+C, just after it went out
            time.sleep(0.5)  # (the main thread takes the signal meanwhile)
            self._pushes.put(
                TurnStartedPush(
                    session_id="s1", cwd="/w", provider_label="demo", correlation_id="run"
                )
            )
        elif isinstance(message, TurnsCancelRequest):
            self._pushes.put(
                TurnEndedPush(
                    session_id="s1",
                    run_id="r1",
                    status="cancelled",
                    failure_class="cancelled_by_user",
                    correlation_id="run",
                )
            )

    def receive(self) -> Message:
        return self._pushes.get(timeout=10)


def test_a_ctrl_c_just_after_the_request_cancels_the_turn(capsys: Any) -> None:
    host = _Host()
    args = argparse.Namespace(
        session=None, cwd="/w", prompt="run sleep 2", max_steps=None, provider=None
    )
    ended = run_through_host(args, host, "auto", lambda: None)  # type: ignore[arg-type]
    assert isinstance(ended, TurnEndedPush) and ended.status == "cancelled"
    assert [type(message) for message in host.sent] == [TurnsRunRequest, TurnsCancelRequest]
    assert "cancelling the turn" in capsys.readouterr().err


def test_a_ctrl_c_while_the_command_loads_is_said_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Ctrl+C before the command could handle it (its modules still loading) printed a
    Python traceback."""
    import app.cli

    def loading() -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(app.cli, "main", loading)
    with pytest.raises(SystemExit) as ended:
        app.cli.run_main()
    assert ended.value.code == 1
    assert capsys.readouterr().err == "maka: interrupted\n"


def test_a_request_that_never_left_is_not_said_to_have_run() -> None:
    """The host stopped before a resume's request went out: the command said the turn "may
    have done part of its work", though nothing was sent."""
    from app.commands.host_turn import _HostTurn
    from app.host.host_client import HostConnectionError
    from runtime.ledger.codes import HostCode

    def stopped() -> None:
        raise HostConnectionError(HostCode.HOST_STOPPED, "the host stopped before answering")

    turn = _HostTurn(_Host(), "auto", session_id="s1")  # type: ignore[arg-type]
    with pytest.raises(HostConnectionError) as raised:
        turn.follow(lambda: None, send=stopped)
    assert raised.value.message == "the host stopped before answering"
