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

import sys
from pathlib import Path

from app import bridge_contract as bc
from app.bridge_contract import ResumeDiagnostic
from renderer.main_window import MainWindow
from tests.helpers.renderer_demo import _settle
from tests.helpers.timeline_demo import ServingBridge, long_session, parked_session
from tests.helpers.timeline_screens import normal_session, screens_main, session_summary

S = bc.RunStatusValue


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
        session_summary(
            "s-normal",
            "Tidy the build scripts and the release notes",
            **{"last_run_status": S.COMPLETED},
        ),
        session_summary("s-parked", "Run the build", failure_class="app_restarted", **interrupted),
        session_summary("s-off", "Write the changelog entry for the release", **interrupted),
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
    return screens_main(argv, __doc__, "timeline-small-window", run_scenes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
