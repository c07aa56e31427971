"""Screenshots of View › Timeline in the real main window, for people to look at.

    xvfb-run -a -s "-screen 0 1400x900x24" .venv/bin/python -m tests.helpers.timeline_screens \\
        docs/screenshots [--dark]

The window's bridge answers ``timeline.*`` with the main process's own paging over timelines
built by the real model (``timeline_demo``): a normal session (a finished run and its
continuation), a parked one (every family of reason: pinned to rows, and outside the record) and
one of 100,000 events. Files: ``timeline-normal``, ``timeline-parked``, ``timeline-parked-detail``
(a pinned reason activated: its row selected, the saved event's JSON below), ``timeline-100k``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QAbstractItemView, QApplication

from app import bridge_contract as bc
from renderer import theme
from renderer.main_window import MainWindow
from runtime.ledger.timeline_model import RunSource, build_timeline
from runtime.ledger.timeline_pins import SessionTimeline
from tests.helpers.ledger_builders import RunIds, terminal, user_text
from tests.helpers.renderer_demo import _settle, dark_palette
from tests.helpers.timeline_demo import (
    DAY,
    ServingBridge,
    chat_events,
    long_session,
    parked_session,
)

S = bc.RunStatusValue


def normal_session(session_id: str) -> SessionTimeline:
    first = [user_text("tidy the build scripts", event_id="n-ask", marker=True, ts=DAY - 5_000)]
    first += chat_events(9)
    ending = {"failureClass": "app_restarted"}
    first.append(terminal(status="failed", state_delta=ending, ts=DAY + 70_000))
    second_ids = RunIds(session_id, "inv-2", "run-2", "turn-2")
    second = [
        user_text("(continued)", event_id="n-cont", ids=second_ids, ts=DAY + 400_000),
        terminal(second_ids, event_id="n-end", status="completed", ts=DAY + 460_000),
    ]
    runs = build_timeline(
        [
            RunSource("run-1", list(enumerate(first, 1)), "failed", failure_class="app_restarted"),
            RunSource(
                "run-2",
                list(enumerate(second, 1)),
                "completed",
                parent_run_id="run-1",
                source_high_water=len(first),
            ),
        ]
    )
    return SessionTimeline(session_id, runs, None)


def session_summary(session_id: str, title: str, **extra: object) -> bc.SessionSummary:
    return bc.SessionSummary(
        session_id=session_id, cwd=f"/home/ana/{session_id}", title=title, **extra
    )


def run_scenes(out: Path, suffix: str = "") -> list[Path]:
    timelines = {
        "s-normal": normal_session("s-normal"),
        "s-parked": parked_session(rows_before=6, session_id="s-parked"),
        "s-big": long_session(66_667, session_id="s-big"),
    }
    bridge = ServingBridge(timelines, immediate=True)
    window = MainWindow(bridge)
    window.resize(1240, 820)
    window.show()
    saved: list[Path] = []

    def shot(name: str) -> None:
        _settle()
        path = out / f"{name}{suffix}.png"
        window.grab().save(str(path))
        saved.append(path)

    sessions = (
        session_summary("s-normal", "Tidy the build scripts", last_run_status=S.COMPLETED),
        session_summary(
            "s-parked",
            "Run the build",
            last_run_status=S.FAILED,
            interrupted=True,
            failure_class="app_restarted",
        ),
        session_summary("s-big", "A long refactor (100,000 events)", last_run_status=S.COMPLETED),
    )
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=sessions))
    bridge.host_state_changed.emit(bc.HostStatePush(state=bc.HostState.READY))
    window.show_timeline(True)
    for session_id, name in (("s-normal", "timeline-normal"), ("s-parked", "timeline-parked")):
        window.sessions.select(session_id)
        bridge.session_opened.emit(bc.SessionOpenedPush(session_id=session_id, items=()))
        window.timeline.tree.expandAll()
        shot(name)
    panel = window.timeline
    panel.pinned.setCurrentRow(0)
    panel.pinned.itemActivated.emit(panel.pinned.item(0))
    shot("timeline-parked-detail")
    window.sessions.select("s-big")
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s-big", items=()))
    model = panel.model
    # every row is counted at once; scrolled far down, only the page shown is asked for
    target = model.index(model.rowCount() - 400, 0)
    panel.tree.scrollTo(target, QAbstractItemView.ScrollHint.PositionAtCenter)
    _settle()
    panel.tree.setCurrentIndex(target)
    shot("timeline-100k")
    window.close()
    return saved


def screens_main(
    argv: list[str], description: str | None, name: str, scenes: Callable[[Path, str], list[Path]]
) -> int:
    """A screenshot script's command line: ``OUT [--dark]``, the app set up as the desktop sets
    it up (its font; a dark palette with ``--dark``, files suffixed ``-dark``), each file
    ``scenes`` saved printed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dark", action="store_true", help="use a dark palette, suffix -dark")
    args = parser.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb" if os.environ.get("DISPLAY") else "offscreen")
    app = QApplication.instance() or QApplication([name])
    assert isinstance(app, QApplication)
    theme.apply_readable_font(app)
    suffix = ""
    if args.dark:
        app.setPalette(dark_palette())
        suffix = "-dark"
    args.out.mkdir(parents=True, exist_ok=True)
    for path in scenes(args.out, suffix):
        print(path)
    return 0


def main(argv: list[str]) -> int:
    return screens_main(argv, __doc__, "timeline-screens", run_scenes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
