"""Benchmark: the renderer window with a large data set, and its event loop while a turn streams.

Measured in one process, offscreen, with the real ``MainWindow`` fed through the fake bridge (the
socket hop is measured by the IPC benchmarks, not here):

1. ``sessions.listed`` with 10,000 sessions: time until the list is shown;
2. ``session.opened`` with 2,000 transcript items: time until the transcript is shown;
3. streaming into that session: an assistant message grows by one delta every 5 ms (plus a tool
   card that changes status) for 3 s, while a 10 ms heartbeat timer records the gaps between its
   ticks. The largest gap is the longest the event loop was blocked. Goal: under 100 ms.

Usage::

    .venv/bin/python -m bench.bench_renderer [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app import bridge_contract as bc
from renderer import theme
from renderer.main_window import MainWindow
from tests.helpers.fake_bridge import FakeBridge

GOAL_MAX_GAP_MS = 100.0
HEARTBEAT_MS = 10
DELTA_MS = 5


def _sessions(count: int) -> tuple[bc.SessionSummary, ...]:
    return tuple(
        bc.SessionSummary(
            session_id=f"s{i}",
            cwd=f"/home/user/projects/p{i}",
            title=f"Session {i}: tidy the build scripts",
            last_run_status=bc.RunStatusValue.COMPLETED,
            interrupted=i % 1000 == 0,
        )
        for i in range(count)
    )


def _items(count: int) -> tuple[bc.TranscriptItem, ...]:
    items: list[bc.TranscriptItem] = []
    for i in range(count // 4):
        items += [
            bc.UserMessageItem(item_id=f"u{i}", text=f"write notes_{i}.txt with a summary"),
            bc.ThinkingItem(item_id=f"t{i}", text="One write, then a read to check."),
            bc.ToolCardItem(
                item_id=f"c{i}",
                tool_call_id=f"call_{i}",
                tool_name="write_file",
                args_summary=f'path="notes_{i}.txt"',
                status=bc.ToolCardStatus.SUCCEEDED,
                result_summary="wrote 512 bytes",
            ),
            bc.AssistantMessageItem(item_id=f"a{i}", text="Done. " * 30),
        ]
    return tuple(items)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(["bench-renderer"])
    assert isinstance(app, QApplication)
    theme.apply_readable_font(app)
    bridge = FakeBridge()
    window = MainWindow(bridge)
    window.resize(1200, 800)
    window.show()
    app.processEvents()

    started = time.perf_counter()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=_sessions(10_000)))
    app.processEvents()
    list_ms = (time.perf_counter() - started) * 1000
    session_id = window.session_id or "s0"

    items = _items(bc.MAX_ITEMS_PER_OPEN)
    started = time.perf_counter()
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id=session_id, items=items))
    window.transcript.flush()
    app.processEvents()
    open_ms = (time.perf_counter() - started) * 1000

    gaps: list[float] = []
    last = time.perf_counter()
    deltas = 0

    def heartbeat() -> None:
        nonlocal last
        now = time.perf_counter()
        gaps.append((now - last) * 1000)
        last = now

    def stream() -> None:
        nonlocal deltas
        deltas += 1
        bridge.transcript_item.emit(
            bc.TranscriptItemPush(
                session_id=session_id,
                item=bc.AssistantMessageItem(item_id="live", text="token " * deltas),
            )
        )
        if deltas % 40 == 0:
            status = bc.ToolCardStatus.RUNNING if deltas % 80 else bc.ToolCardStatus.SUCCEEDED
            bridge.transcript_item.emit(
                bc.TranscriptItemPush(
                    session_id=session_id,
                    item=bc.ToolCardItem(
                        item_id=f"live-card-{deltas // 80}",
                        tool_call_id=f"live_{deltas // 80}",
                        tool_name="shell",
                        args_summary='command="ls"',
                        status=status,
                    ),
                )
            )

    beat = QTimer()
    beat.timeout.connect(heartbeat)
    beat.start(HEARTBEAT_MS)
    feeder = QTimer()
    feeder.timeout.connect(stream)
    feeder.start(DELTA_MS)
    QTimer.singleShot(int(args.seconds * 1000), app.quit)
    last = time.perf_counter()
    app.exec()
    beat.stop()
    feeder.stop()

    gaps.sort()
    p99 = gaps[int(len(gaps) * 0.99) - 1] if gaps else 0.0
    worst = gaps[-1] if gaps else 0.0
    print(f"10,000 sessions listed:           {list_ms:8.1f} ms")
    print(f"{len(items):,} items opened:              {open_ms:8.1f} ms")
    print(f"streamed deltas:                  {deltas:8d} in {args.seconds:.1f} s")
    print(
        f"event-loop gap (heartbeat {HEARTBEAT_MS} ms): median "
        f"{statistics.median(gaps):.1f} ms, p99 {p99:.1f} ms, max {worst:.1f} ms "
        f"(goal max < {GOAL_MAX_GAP_MS:.0f} ms): {'ok' if worst < GOAL_MAX_GAP_MS else 'MISSED'}"
    )
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
