"""The desktop's main process runs Python's cycle collector on its Qt thread only."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QCoreApplication, QObject
from pytestqt.qtbot import QtBot

from app.gui_thread_gc import GuiThreadCollector, collect_due


@pytest.fixture
def collector_off() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    if was_enabled:
        gc.enable()


class _Holder(QObject):
    """A Qt object in a reference cycle: only the cycle collector frees it."""

    def __init__(self, freed_on: list[str]) -> None:
        super().__init__()
        self.me = self
        weakref.finalize(self, lambda: freed_on.append(threading.current_thread().name))


def test_garbage_made_on_a_worker_is_freed_on_the_qt_thread(
    qtbot: QtBot, collector_off: None
) -> None:
    assert QCoreApplication.instance() is not None
    gc.enable()
    collector = GuiThreadCollector(interval_ms=20)
    assert not gc.isenabled()
    freed_on: list[str] = []
    _Holder(freed_on)

    kept: list[list[object]] = []

    def churn() -> None:  # far more live objects than the youngest generation's threshold
        kept.extend([] for _ in range(20 * gc.get_threshold()[0]))

    worker = threading.Thread(target=churn, name="worker")
    worker.start()
    worker.join()
    assert freed_on == [], "the worker's allocations started no collection"
    qtbot.waitUntil(lambda: freed_on != [], timeout=5000)
    assert kept
    assert freed_on == [threading.main_thread().name]
    collector.stop()
    assert gc.isenabled()


def test_a_collection_is_due_only_past_the_first_threshold(collector_off: None) -> None:
    gc.disable()
    gc.collect()
    assert collect_due() == 0  # nothing allocated since: no collection, nothing found
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    threshold0 = gc.get_threshold()[0]
    # past the first generation's threshold
    keep: list[list[object]] = [[] for _ in range(threshold0 + 1)]
    assert collect_due() >= 1
    assert keep
