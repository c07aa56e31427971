"""Every park state of the interrupted banner in the real main window, for people to look at.

    xvfb-run -a -s "-screen 0 1400x900x24" .venv/bin/python -m tests.helpers.park_states_demo \
        docs/screenshots [--dark]

The window is populated through the fake bridge exactly as the main process would (the same
pushes, reasons and diagnostics the runtime produces for each case): a deleted folder, a swapped
workspace marker, a command whose outcome is unknown (and Try again checking once more), a write
that did not happen, a damaged record of the tool history, Safe resume turned off, and automatic
resume that parked one session and continued another.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QApplication

from app import bridge_contract as bc
from renderer import theme
from renderer.main_window import MainWindow
from tests.helpers.fake_bridge import FakeBridge
from tests.helpers.renderer_demo import _settle, dark_palette

S = bc.RunStatusValue


def _session(session_id: str, cwd: str, title: str, **extra: object) -> bc.SessionSummary:
    fields: dict[str, object] = {
        "session_id": session_id,
        "cwd": cwd,
        "title": title,
        "last_run_status": S.FAILED,
        "interrupted": True,
        "failure_class": "app_restarted",
    }
    fields.update(extra)
    return bc.SessionSummary.model_validate(fields)


SESSIONS = (
    _session("s-site", "/home/ann/projects/site", "Publish the site"),
    _session("s-notes", "/home/ann/projects/release-notes", "Draft the release notes"),
    _session("s-count", "/home/ann/projects/counter", "run echo once >> count.txt"),
    _session("s-hello", "/home/ann/projects/hello", "Write hello.txt saying hi"),
    _session("s-both", "/home/ann/projects/report", "Summarise the logs into report.md"),
    _session("s-damaged", "/home/ann/projects/notes", "Read a.txt"),
    _session(
        "s-auto",
        "/home/ann/projects/maka-demo",
        "Run the test suite",
        last_run_status=S.RUNNING,
        interrupted=False,
        failure_class=None,
    ),
)


def _card(
    item_id: str, name: str, args: str, status: bc.ToolCardStatus, **extra: object
) -> bc.ToolCardItem:
    fields: dict[str, object] = {
        "item_id": item_id,
        "run_id": "run-1",
        "tool_call_id": f"call_{item_id}",
        "tool_name": name,
        "args_summary": args,
        "status": status,
    }
    fields.update(extra)
    return bc.ToolCardItem.model_validate(fields)


ITEMS: dict[str, tuple[bc.TranscriptItem, ...]] = {
    "s-site": (
        bc.UserMessageItem(item_id="a1", text="Build the site and copy it to public/."),
        _card("a2", "bash", "make build", bc.ToolCardStatus.SUCCEEDED, result_summary="exit 0"),
    ),
    "s-notes": (
        bc.UserMessageItem(item_id="b1", text="Collect the changes since 0.3 into NOTES.md."),
        _card("b2", "read_file", "CHANGELOG.md", bc.ToolCardStatus.SUCCEEDED),
    ),
    "s-count": (
        bc.UserMessageItem(item_id="c1", text="run echo once >> count.txt"),
        _card(
            "c2",
            "bash",
            "echo once >> count.txt",
            bc.ToolCardStatus.INDETERMINATE,
            park_reason="dispatch_without_response",
            settleable=True,
        ),
    ),
    "s-hello": (
        bc.UserMessageItem(item_id="d1", text="Write hello.txt saying hi"),
        _card(
            "d2",
            "write_file",
            "hello.txt",
            bc.ToolCardStatus.PARKED,
            park_reason="reconcile_matches_prior_state",
        ),
    ),
    "s-both": (
        bc.UserMessageItem(item_id="f1", text="Summarise the logs into report.md"),
        _card(
            "f2",
            "read_file",
            "logs/today.log",
            bc.ToolCardStatus.INDETERMINATE,
            park_reason="dispatch_without_response",
            settleable=True,
        ),
    ),
    "s-damaged": (
        bc.UserMessageItem(item_id="g1", text="Read a.txt"),
        _card("g2", "read_file", "a.txt", bc.ToolCardStatus.SUCCEEDED),
    ),
    "s-auto": (
        bc.UserMessageItem(item_id="e1", text="Run the test suite"),
        _card("e2", "bash", "pytest -q", bc.ToolCardStatus.SUCCEEDED, result_summary="exit 0"),
        bc.ContinuationMarkerItem(item_id="e3", run_id="run-2", source_run_id="run-1"),
    ),
}

PARKS: dict[str, tuple[tuple[str, ...], tuple[bc.ResumeDiagnostic, ...]]] = {
    "s-site": (
        ("workspace_folder_missing",),
        (
            bc.ResumeDiagnostic(
                code="workspace_folder_missing",
                message="the session folder /home/ann/projects/site no longer exists",
            ),
        ),
    ),
    "s-notes": (
        ("workspace_identity_mismatch",),
        (
            bc.ResumeDiagnostic(
                code="workspace_identity_mismatch",
                message="the folder is workspace:v1:7c1e…, the run used workspace:v1:2f9a…",
            ),
        ),
    ),
    "s-count": (
        ("dangling_tool_state",),
        (
            bc.ResumeDiagnostic(
                code="pending_tool_result",
                message="generation 1: tool call bash (call_c2) is indeterminate "
                "(dispatch_without_response)",
                tool_call_id="call_c2",
                tool_name="bash",
            ),
        ),
    ),
    "s-hello": (
        ("dangling_tool_state",),
        (
            bc.ResumeDiagnostic(
                code="tool_recovery_parked",
                message="tool call write_file (call_d2) is parked (reconcile_matches_prior_state)",
                tool_call_id="call_d2",
                tool_name="write_file",
            ),
            bc.ResumeDiagnostic(
                code="reconcile_matches_prior_state",
                message="recovery checked hello.txt: it is as it was, the write did not happen",
                tool_call_id="call_d2",
                tool_name="write_file",
            ),
        ),
    ),
    # An unknown outcome and changed files at once: both are listed, neither waits for the other.
    "s-both": (
        ("dangling_tool_state", "workspace_drift"),
        (
            bc.ResumeDiagnostic(
                code="pending_tool_result",
                message="generation 1: tool call read_file (call_f2) is indeterminate "
                "(dispatch_without_response)",
                tool_call_id="call_f2",
                tool_name="read_file",
            ),
            bc.ResumeDiagnostic(
                code="workspace_drift",
                message="2 files changed since the snapshot taken at the stop",
                changed_paths=(
                    bc.ChangedPath(path="logs/today.log", change="modified"),
                    bc.ChangedPath(path="notes.txt", change="added"),
                ),
            ),
        ),
    ),
    # The saved tool result was damaged on disk: it answers a call id no call has.
    "s-damaged": (
        ("dangling_tool_state",),
        (
            bc.ResumeDiagnostic(
                code="tool_recovery_corruption",
                message="generation 1: tool call c9 has corrupt ledger facts (orphan_response)",
                tool_call_id="c9",
                tool_name="read_file",
            ),
            bc.ResumeDiagnostic(
                code="tool_ledger_corruption",
                message="generation 1: ledger issue orphan_response",
                event_id="toolop_2d51f5c09b499235c969d97411f6bdff_response",
            ),
        ),
    ),
}


def run_scenes(out: Path, suffix: str = "") -> list[Path]:
    bridge = FakeBridge(safe_resume_enabled=True)
    window = MainWindow(bridge)
    window.resize(1240, 760)
    window.show()
    saved: list[Path] = []

    def shot(name: str) -> None:
        _settle()
        path = out / f"{name}{suffix}.png"
        window.grab().save(str(path))
        saved.append(path)

    def open_session(session_id: str) -> None:
        window.sessions.select(session_id)
        bridge.session_opened.emit(
            bc.SessionOpenedPush(session_id=session_id, items=ITEMS[session_id])
        )

    def park(session_id: str, *, automatic: bool = False) -> None:
        reasons, diagnostics = PARKS[session_id]
        bridge.resume_parked.emit(
            bc.ResumeParkedPush(
                session_id=session_id,
                rejection_reasons=reasons,
                diagnostics=diagnostics,
                automatic=automatic,
            )
        )

    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=SESSIONS))
    bridge.host_state_changed.emit(bc.HostStatePush(state=bc.HostState.READY))

    # Automatic resume at start: one session parked, one continued by itself.
    park("s-count", automatic=True)
    bridge.resume_started.emit(
        bc.ResumeStartedPush(session_id="s-auto", run_id="run-2", turn_id="t-2", automatic=True)
    )
    window._select_quietly("s-count")  # opened at start, not by the user: still announced
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s-count", items=ITEMS["s-count"]))
    shot("park-auto-resume")

    for session_id, name in (
        ("s-site", "park-folder-missing"),
        ("s-notes", "park-marker-swapped"),
        ("s-count", "park-unknown-bash"),
        ("s-hello", "park-write-not-done"),
        ("s-both", "park-unknown-and-changed-files"),
        ("s-damaged", "park-damaged-record"),
    ):
        open_session(session_id)
        window.banner.request_resume()
        park(session_id)
        window.banner.set_details_shown(session_id != "s-site")
        shot(name)

    open_session("s-notes")
    window.banner.request_resume()  # Try again: the marker is still not the session's
    park("s-notes")
    window.banner.set_details_shown(False)
    shot("park-checked-again")

    bridge.set_safe_resume_enabled(False)
    open_session("s-site")
    shot("park-flag-off")
    window.close()
    return saved


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dark", action="store_true", help="use a dark palette, suffix -dark")
    args = parser.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb" if os.environ.get("DISPLAY") else "offscreen")
    app = QApplication.instance() or QApplication(["park-states-demo"])
    assert isinstance(app, QApplication)
    theme.apply_readable_font(app)
    suffix = ""
    if args.dark:
        app.setPalette(dark_palette())
        suffix = "-dark"
    args.out.mkdir(parents=True, exist_ok=True)
    for path in run_scenes(args.out, suffix):
        print(path)
    QCoreApplication.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
