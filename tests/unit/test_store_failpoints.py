"""The store's failpoint hook reads ``MAKA_FAILPOINT`` as ``os.environ`` has it at each call."""

from __future__ import annotations

import pytest

from storage import store_failpoints


def test_the_armed_point_follows_the_environment_at_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(store_failpoints.FAILPOINT_ENV, raising=False)
    assert store_failpoints._wanted() is None
    monkeypatch.setenv(store_failpoints.FAILPOINT_ENV, "t1_after_commit")
    assert store_failpoints._wanted() == "t1_after_commit"
    store_failpoints.store_failpoint("t2_after_commit")  # another point: the process lives on
    monkeypatch.setenv(store_failpoints.FAILPOINT_ENV, "t2_after_commit")
    assert store_failpoints._wanted() == "t2_after_commit"
    monkeypatch.delenv(store_failpoints.FAILPOINT_ENV)
    assert store_failpoints._wanted() is None
