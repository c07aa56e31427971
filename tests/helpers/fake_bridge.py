"""A stand-in for ``RendererBridge``: same signals and request methods, no socket.

Requests are recorded in ``calls`` as ``(method, args)``; tests (and the screenshot demo) emit
pushes with the helpers below, exactly as the real bridge would after decoding a frame.
"""

from __future__ import annotations

from typing import Any, Literal

from PySide6.QtCore import QObject

from app import bridge_contract as bc
from renderer.bridge_port import BridgePort, ConnectionState


class FakeBridge(BridgePort):
    def __init__(self, *, safe_resume_enabled: bool = True, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.files_shown: list[tuple[bc.ChangedFilesShown, ...] | None] = []
        """Each ``resume_latest``'s changed files the banner said it showed."""
        self.folders_shown: list[bc.SettleFolderNote | None] = []
        """Each ``settle_call``'s folder note the card said it showed."""
        self.connect_now(safe_resume_enabled=safe_resume_enabled)

    # state changes, as the real bridge would report them

    def connect_now(self, *, safe_resume_enabled: bool = True) -> None:
        self._set_safe_resume_enabled(safe_resume_enabled)
        self._set_connection_state(ConnectionState.CONNECTED)

    def disconnect_now(self) -> None:
        self._set_connection_state(ConnectionState.DISCONNECTED)

    def set_safe_resume_enabled(self, enabled: bool) -> None:
        self._set_safe_resume_enabled(enabled)

    def calls_to(self, method: str) -> list[tuple[Any, ...]]:
        return [args for name, args in self.calls if name == method]

    # pushes

    def push_started(self, session_id: str, run_id: str = "run-2", turn_id: str = "turn-2") -> None:
        self.resume_started.emit(
            bc.ResumeStartedPush(session_id=session_id, run_id=run_id, turn_id=turn_id)
        )

    def push_parked(
        self,
        session_id: str,
        reasons: tuple[str, ...],
        diagnostics: tuple[bc.ResumeDiagnostic, ...] = (),
        workspace_options: tuple[str, ...] = (),
    ) -> None:
        self.resume_parked.emit(
            bc.ResumeParkedPush(
                session_id=session_id,
                rejection_reasons=reasons,
                diagnostics=diagnostics,
                workspace_options=workspace_options,
            )
        )

    def answer_change(
        self,
        session_id: str,
        what: str,
        push: bc.SessionUpdatedPush | bc.SessionRemovedPush | bc.SessionExportedPush,
    ) -> None:
        """The answer to this window's own relocate / rename / remove / export: the push every
        window hears, then ``session_change_done`` (the real bridge matches correlation ids)."""
        if isinstance(push, bc.SessionUpdatedPush):
            self.session_updated.emit(push)
        elif isinstance(push, bc.SessionRemovedPush):
            self.session_removed.emit(push)
        else:
            self.session_exported.emit(push)
        self.session_change_done.emit(session_id, what, push)

    def push_failed(self, session_id: str, code: str, message: str = "") -> None:
        self.resume_failed.emit(
            bc.ResumeFailedPush(session_id=session_id, code=code, message=message)
        )

    def push_settled(
        self,
        session_id: str,
        tool_call_id: str,
        *,
        recorded: bool = True,
        code: str | None = None,
        message: str = "",
        resume_available: bool = False,
    ) -> None:
        self.tool_settled.emit(
            bc.ToolSettledPush(
                session_id=session_id,
                tool_call_id=tool_call_id,
                recorded=recorded,
                code=code,
                message=message,
                resume_available=resume_available,
            )
        )

    # requests

    def _record(self, method: str, *args: Any) -> bool:
        self.calls.append((method, args))
        return self.connection_state is ConnectionState.CONNECTED

    def list_sessions(self) -> bool:
        return self._record("list_sessions")

    def overview_sessions(self) -> bool:
        return self._record("overview_sessions")

    def answer_overview(self, rows: tuple[bc.SessionRow, ...] | None) -> None:
        """The answer to ``overview_sessions`` (None: the main process refused it)."""
        self.sessions_overviewed.emit(
            None if rows is None else bc.SessionsOverviewedPush(rows=rows)
        )

    def create_session(self, cwd: str) -> bool:
        return self._record("create_session", cwd)

    def open_session(self, session_id: str) -> bool:
        return self._record("open_session", session_id)

    def send_turn(self, session_id: str, text: str) -> bool:
        return self._record("send_turn", session_id, text)

    def cancel_turn(self, session_id: str) -> bool:
        return self._record("cancel_turn", session_id)

    def answer_permission(self, session_id: str, request_id: str, allow: bool) -> bool:
        return self._record("answer_permission", session_id, request_id, allow)

    def resume_latest(
        self,
        session_id: str,
        decision: Literal["isolated_restore", "rebaseline"] | None = None,
        restore_to: str | None = None,
        files_shown: tuple[bc.ChangedFilesShown, ...] | None = None,
    ) -> bool:
        self.files_shown.append(files_shown)
        if decision is None:
            return self._record("resume_latest", session_id)
        return self._record("resume_latest", session_id, decision, restore_to)

    def relocate_session(self, session_id: str, cwd: str) -> bool:
        return self._record("relocate_session", session_id, cwd)

    def rename_session(self, session_id: str, title: str) -> bool:
        return self._record("rename_session", session_id, title)

    def remove_session(self, session_id: str) -> bool:
        return self._record("remove_session", session_id)

    def export_session(self, session_id: str, path: str) -> bool:
        return self._record("export_session", session_id, path)

    def stop_processes(self, session_id: str) -> bool:
        return self._record("stop_processes", session_id)

    def settle_call(
        self,
        session_id: str,
        tool_call_id: str,
        ran: bool,
        note: str | None,
        folder_shown: bc.SettleFolderNote | None = None,
    ) -> bool:
        self.folders_shown.append(folder_shown)
        return self._record("settle_call", session_id, tool_call_id, ran, note)

    def open_timeline(self, session_id: str) -> bool:
        return self._record("open_timeline", session_id)

    def timeline_rows(
        self,
        session_id: str,
        run_id: str,
        start: int,
        count: int,
        filters: bc.TimelineRowFilter | None = None,
    ) -> bool:
        if filters is None:
            return self._record("timeline_rows", session_id, run_id, start, count)
        return self._record("timeline_rows", session_id, run_id, start, count, filters)

    def timeline_locate(
        self, session_id: str, run_id: str, seq: int, filters: bc.TimelineRowFilter | None = None
    ) -> bool:
        return self._record("timeline_locate", session_id, run_id, seq, filters)

    def timeline_event(self, session_id: str, run_id: str, event_id: str) -> bool:
        return self._record("timeline_event", session_id, run_id, event_id)

    def branch_options(self, session_id: str) -> bool:
        return self._record("branch_options", session_id)

    def create_branch(
        self, session_id: str, event_id: str, to: str | None, current_files: bool
    ) -> bool:
        return self._record("create_branch", session_id, event_id, to, current_files)

    def get_settings(self) -> bool:
        return self._record("get_settings")

    def test_database(self, database_url: str | None) -> bool:
        return self._record("test_database", database_url)

    def update_settings(
        self,
        provider: bc.ProviderChoice,
        openai_base_url: str,
        openai_model: str,
        openai_api_key: str | None,
        max_steps: int | None = None,
        *,
        safe_resume: bool | None = None,
        auto_resume: bool | None = None,
        provider_tuning: bc.ProviderTuning | None = None,
        database: bc.DatabaseChoice | None = None,
        database_url: str | None = None,
    ) -> bool:
        # The Database setting is recorded (as one ("database", choice, url) item) only when
        # the dialog sends it, so the calls of the other settings read as before.
        database_item = (
            ()
            if database is None and database_url is None
            else (("database", database, database_url),)
        )
        resume = () if safe_resume is None and auto_resume is None else (safe_resume, auto_resume)
        return self._record(
            "update_settings",
            provider,
            openai_base_url,
            openai_model,
            openai_api_key,
            max_steps,
            *resume,
            *(() if provider_tuning is None else (provider_tuning,)),
            *database_item,
        )
