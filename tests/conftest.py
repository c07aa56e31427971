"""Suite-wide settings: Qt offscreen, a per-test data directory, no user data touched."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.pop("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", None)
os.environ.pop("MAKA_FAILPOINT", None)


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh data directory, also exported as MAKA_DATA_DIR for child processes."""
    path = tmp_path / "data"
    path.mkdir()
    monkeypatch.setenv("MAKA_DATA_DIR", str(path))
    yield path
