"""Suite-wide settings: Qt offscreen, a per-test data directory, no user data touched."""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.pop("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", None)
os.environ.pop("MAKA_FAILPOINT", None)
# Snapshots honour the user's Git excludes file, by default under XDG_CONFIG_HOME: the suite
# reads an empty one, not the machine's (tests of it set their own HOME).
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="maka-tests-config-")

TESTS = Path(__file__).resolve().parent

FOLDER_MARKERS = {
    "unit": "unit",
    "contract": "contract",
    "crash": "crash",
    "gui": "gui",
    "e2e": "e2e",
    "real_server": "real_server",
}
"""Each test folder's marker, added to every test in it: ``-m`` selects a tier by what the tests
are (``-m "not e2e and not crash"`` is the fast tier), whatever their modules declare."""


def folder_marker(path: Path) -> str | None:
    """The marker of the test folder ``path`` (a test module) lies in, or None."""
    try:
        folder = path.resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return FOLDER_MARKERS.get(folder)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marker = folder_marker(item.path)
        if marker is not None and item.get_closest_marker(marker) is None:
            item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh data directory, also exported as MAKA_DATA_DIR for child processes."""
    path = tmp_path / "data"
    path.mkdir()
    monkeypatch.setenv("MAKA_DATA_DIR", str(path))
    yield path


@pytest.fixture(autouse=True)
def _collect_on_the_qt_thread(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that drives Qt in this process (a gui or e2e test, or one using ``qtbot``) runs with
    Python's automatic cycle collector off, and its garbage is collected here, on the Qt thread,
    when it ends: as in the desktop's main process (``app.gui_thread_gc``), a Qt object is never
    freed by a collection that happens to start on one of the test's worker threads."""
    node = request.node
    uses_qt = "qtbot" in request.fixturenames or any(
        node.get_closest_marker(marker) is not None for marker in ("gui", "e2e")
    )
    if not uses_qt or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.enable()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster for the whole test session (``tests/helpers/
    postgres_cluster.py``). Skipped, with the reason, only when PostgreSQL or psycopg is not
    installed and ``CI`` is not set; under CI a missing PostgreSQL fails the tests that need it."""
    from tests.helpers.postgres_cluster import PostgresCluster, find_bin_dir

    bin_dir = find_bin_dir()
    missing = []
    if bin_dir is None:
        missing.append("PostgreSQL's initdb and pg_ctl (PATH, /usr/lib/postgresql/*/bin)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing.append("psycopg (pip install -e '.[postgres]')")
    if missing:
        reason = "the PostgreSQL engine's tests need " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must install them (.ci/run)")
        pytest.skip(reason)
    assert bin_dir is not None
    cluster = PostgresCluster.start(bin_dir)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: Any) -> str:
    """The URL of a fresh, empty database on the session's PostgreSQL cluster."""
    url: str = postgres_cluster.new_database()
    return url


@pytest.fixture(params=["staged_here", "staged_by_git"])
def staged_both_ways(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A checkpoint test run both ways: a small private index staged in this process
    (``storage/checkpoints/checkpoint_index.py``), and staged by Git as a big one is. Used by
    marking a module ``pytest.mark.usefixtures("staged_both_ways")``."""
    from storage.checkpoints import checkpoint_index

    if request.param == "staged_by_git":
        monkeypatch.setattr(checkpoint_index, "SMALL_INDEX", 0)
    return str(request.param)
