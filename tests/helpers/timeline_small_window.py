"""View › Timeline in small and large windows, for people to look at (layout checks).

    xvfb-run -a -s "-screen 0 2600x1500x24" \\
        .venv/bin/python -m tests.helpers.timeline_small_window /tmp/shots [--dark]

The real main window with the fake bridge serving timelines built by the real model
(``timeline_demo``): at the minimum size (720x480) a normal session, a parked one with the
interrupted banner (several reasons) and one with Safe resume turned off (a long banner body);
then the default size (1180x760) and a wide one (2560x1440). Files: ``small-normal``,
``small-parked``, ``small-parked-row`` (a row selected), ``small-disabled``, ``default-normal``,
``wide-normal``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

from app import bridge_contract as bc
from app.bridge_contract import ResumeDiagnostic
from renderer import theme
from renderer.main_window import MainWindow
from tests.helpers.renderer_demo import _settle, dark_palette
from tests.helpers.timeline_demo import ServingBridge, long_session, parked_session
from tests.helpers.timeline_screens import normal_session

S = bc.RunStatusValue


def _summary(session_id: str, title: str, **extra: object) -> bc.SessionSummary:
    return bc.SessionSummary(
        session_id=session_id, cwd=f"/home/ana/{session_id}", title=title, **extra
    )


def run_scenes(out: Path, suffix: str = "") -> list[Path]:
    timelines = {
        "s-normal": normal_session("s-normal"),
        "s-parked": parked_session(rows_before=6, session_id="s-parked"),
        "s-off": long_session(12, session_id="s-off"),
    }
    bridge = ServingBridge(timelines, immediate=True)
    window = MainWindow(bridge)
    window.resize(720, 480)
    window.show()
    saved: list[Path] = []

    def shot(name: str) -> None:
        _settle()
        path = out / f"{name}{suffix}.png"
        window.grab().save(str(path))
        saved.append(path)

    interrupted = {"last_run_status": S.FAILED, "interrupted": True}
    sessions = (
        _summary(
            "s-normal",
            "Tidy the build scripts and the release notes",
            **{"last_run_status": S.COMPLETED},
        ),
        _summary("s-parked", "Run the build", failure_class="app_restarted", **interrupted),
        _summary("s-off", "Write the changelog entry for the release", **interrupted),
    )
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=sessions))
    bridge.host_state_changed.emit(bc.HostStatePush(state=bc.HostState.READY))
    unknown = ResumeDiagnostic(
        code="pending_tool_result", tool_call_id="call-bash", tool_name="bash"
    )
    bridge.push_parked("s-parked", ("dangling_tool_state", "workspace_drift"), (unknown,))
    window.show_timeline(True)

    def show(session_id: str) -> None:
        window.sessions.select(session_id)
        bridge.session_opened.emit(bc.SessionOpenedPush(session_id=session_id, items=()))

    show("s-normal")
    window.timeline.tree.expandAll()
    shot("small-normal")
    show("s-parked")
    shot("small-parked")
    panel = window.timeline
    panel.tree.setCurrentIndex(panel.model.index(2, 0))
    shot("small-parked-row")
    bridge.connect_now(safe_resume_enabled=False)
    show("s-off")
    shot("small-disabled")
    bridge.connect_now(safe_resume_enabled=True)
    window.resize(1180, 760)
    show("s-normal")
    window.timeline.tree.expandAll()
    shot("default-normal")
    show("s-parked")
    shot("default-parked")
    window.resize(2560, 1440)
    show("s-normal")
    shot("wide-normal")
    window.close()
    return saved


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dark", action="store_true", help="use a dark palette, suffix -dark")
    args = parser.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb" if os.environ.get("DISPLAY") else "offscreen")
    app = QApplication.instance() or QApplication(["timeline-small-window"])
    assert isinstance(app, QApplication)
    theme.apply_readable_font(app)
    suffix = ""
    if args.dark:
        app.setPalette(dark_palette())
        suffix = "-dark"
    args.out.mkdir(parents=True, exist_ok=True)
    for path in run_scenes(args.out, suffix):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
