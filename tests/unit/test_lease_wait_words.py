"""How long a gone process's lease still holds the session is said as this computer's lease
settings say: with ``MAKA_SESSION_LEASE_TTL_MS`` set (short leases), ``maka plan`` said "half a
minute with the default lease settings" of a lease that ran out in three seconds."""

from __future__ import annotations

import socket

import pytest

from runtime.continuation.resume_gates import held_elsewhere_words, lease_wait_words


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (None, "half a minute with the default lease settings"),
        ("3000", "at most 3 s with this computer's lease settings"),
        ("2500", "at most 2.5 s with this computer's lease settings"),
        ("soon", "half a minute with the default lease settings"),
    ],
)
def test_the_wait_follows_the_lease_setting(
    monkeypatch: pytest.MonkeyPatch, value: str | None, said: str
) -> None:
    if value is None:
        monkeypatch.delenv("MAKA_SESSION_LEASE_TTL_MS", raising=False)
    else:
        monkeypatch.setenv("MAKA_SESSION_LEASE_TTL_MS", value)
    assert lease_wait_words() == said


def test_a_refusal_for_a_gone_holder_says_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAKA_SESSION_LEASE_TTL_MS", "3000")
    gone = f"{socket.gethostname()}:999999:abc"  # (no such process here)
    words = held_elsewhere_words("session_s", gone)
    assert "at most 3 s with this computer's lease settings" in words, words
    assert "half a minute" not in words
