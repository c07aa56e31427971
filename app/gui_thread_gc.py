"""Python's cycle collector, run only on the Qt thread of a process that also runs Python threads.

Why: the collector runs on whichever thread happens to allocate when a generation's threshold is
crossed. When that is a worker thread (a turn, the startup worker) and the garbage it finds holds
a Qt object, the object's C++ destructor runs on that worker while the Qt thread may be using the
same structures: a crash later, somewhere unrelated. With this collector the automatic collection
is off and a timer on the Qt thread does the same generational work there, so every Qt object that
Python frees is freed on the thread that owns it.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

CHECK_INTERVAL_MS = 500
"""How often the Qt thread looks at the collector's counts (a look costs a few microseconds)."""


def collect_due() -> int:
    """Collect the generations whose thresholds are crossed, as the automatic collector would;
    the number of unreachable objects found."""
    found = 0
    count0, count1, count2 = gc.get_count()
    threshold0, threshold1, threshold2 = gc.get_threshold()
    if count0 > threshold0:
        found += gc.collect(0)
        if count1 > threshold1:
            found += gc.collect(1)
            if count2 > threshold2:
                found += gc.collect(2)
    return found


class GuiThreadCollector(QObject):
    """Turns the automatic collector off and runs it from a timer on the creating (Qt) thread;
    ``stop()`` turns the automatic collector back on as it was."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = CHECK_INTERVAL_MS) -> None:
        super().__init__(parent)
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(collect_due)
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        gc.collect()
        if self._was_enabled:
            gc.enable()
