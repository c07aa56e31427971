"""Who holds a session's lease, said as it is: a holder that is a process of this computer
that is gone (a killed ``maka run``) was called "another host" whose data folder to use."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from runtime.continuation.resume_gates import held_elsewhere_words


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
