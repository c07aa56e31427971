"""The session service shared by the desktop and the CLI: sessions, turns, cancel, transcripts.

A session is a working folder plus its runs. ``send_turn`` runs one turn to its end on the
calling thread (the desktop calls it on a worker thread; the CLI on its main thread), at most one
turn per session at a time. The provider history of a new turn is each earlier run's committed
history (paired calls only, run by run, oldest first) followed by the new user message.

The service never opens a database: the composition root hands it a ``LedgerStore``, the owner
epoch of this process (after startup recovery) and a function that reads the workspace identity
of a folder.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import cast

from runtime.agent.event_builders import RunIdentity
from runtime.agent.outcome_notices import committed_context, committed_history
from runtime.agent.permission_policy import (
    Decision,
    PendingPermissions,
    PermissionAsker,
    PermissionPolicy,
    PermissionQuestion,
)
from runtime.agent.run_loop import RunLoop, RunObserver, RunOutcome, RunSettings
from runtime.agent.session_overview import (
    SessionOverview,
    list_session_overviews,
    ordered_runs,
)
from runtime.agent.transcript_projection import TranscriptEntry, transcript_of_run
from runtime.agent.workspace_checkpointer import WorkspaceCheckpointer
from runtime.base.cancel_token import CancelToken
from runtime.base.checkpoint_mode import decide_mode
from runtime.continuation.branch_prefix import BranchReader, BranchStore
from runtime.continuation.continuation_planner import folder_gone
from runtime.ledger.checkpoint_ports import CheckpointCarrier
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.command_words import maka_command
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.process_records import ToolProcessTable
from runtime.ledger.restore_point_words import call_subjects
from runtime.ledger.store_ports import (
    LedgerStore,
    RunHeader,
    RunStatus,
    SessionRecord,
)
from runtime.providers.provider_port import HistoryItem, Provider
from runtime.tools.process_identity import TableProcessRecorder
from runtime.tools.process_tree import BackgroundShellRegistry
from runtime.tools.tool_catalog import ToolCatalog, default_catalog
from runtime.tools.tool_contract import ProcessRecorder, ToolContext
from runtime.tools.workspace_paths import git_directory_around, kept_out


class SessionError(LedgerError):
    """``code``: ``session_not_found``, ``session_busy``, ``invalid_cwd``, ``text_not_utf8``."""


def require_utf8(text: str, what: str) -> None:
    """Refuse text the ledger cannot hold (``text_not_utf8``): a command-line argument or a
    terminal line with bytes that are not UTF-8 arrives as lone surrogates. Checked before
    anything is written, so a refused turn leaves no run behind."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise SessionError(
            HostCode.TEXT_NOT_UTF8,
            f"{what} holds bytes that are not UTF-8 text; nothing was written",
        ) from None


def _title(text: str) -> str:
    """A session title from a message: its first non-blank line, at most 80 characters (a
    longer line is cut at 79 and ends with "…", so a shortened title says so), each control
    character a space (a title a rename could not give: ``session_title``)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    from runtime.ledger.session_title import is_control

    first = "".join(" " if is_control(char) else char for char in lines[0])
    first = first.strip()
    if not first:
        return ""
    return first if len(first) <= 80 else first[:79].rstrip() + "…"


def distinct_title(title: str, folder: str, taken: set[str]) -> str:
    """``title`` unless another session already has it: then with the folder's name, then a
    number, so two sessions started with the same message can be told apart in the list."""
    if title not in taken:
        return title
    with_folder = f"{title} — {folder}" if folder else title
    if with_folder not in taken:
        return with_folder
    number = 2
    while f"{with_folder} ({number})" in taken:
        number += 1
    return f"{with_folder} ({number})"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SessionService:
    def __init__(
        self,
        *,
        store: LedgerStore,
        provider_factory: Callable[[], Provider],
        owner_epoch: int,
        workspace_identity: Callable[[Path], str | None] | None = None,
        catalog: ToolCatalog | None = None,
        shell_registry: BackgroundShellRegistry | None = None,
        process_table: ToolProcessTable | None = None,
        clock: Callable[[], int] = _now_ms,
        settings: RunSettings | Callable[[], RunSettings] | None = None,
        checkpoints: CheckpointCarrier | None = None,
    ) -> None:
        """``settings``: the run settings of every turn, or a function read at the start of
        each turn (the desktop's Settings may change the step limit between turns).
        ``checkpoints``: the workspace checkpoint carrier (docs/design/workspace.md); without one,
        runs declare no checkpoint mode and capture nothing."""
        self.checkpoints = checkpoints
        self._store = store
        self._provider_factory = provider_factory
        self._owner_epoch = owner_epoch
        self._workspace_identity = workspace_identity
        self._catalog = catalog or default_catalog()
        self._shells = shell_registry
        self.process_recorder: ProcessRecorder | None = (
            TableProcessRecorder(process_table, owner_epoch) if process_table is not None else None
        )
        self._clock = clock
        self._settings: Callable[[], RunSettings] = (
            settings if callable(settings) else _constant(settings or RunSettings())
        )
        self._lock = threading.Lock()
        self._active: dict[str, CancelToken] = {}
        self.permissions = PendingPermissions()

    @property
    def catalog(self) -> ToolCatalog:
        return self._catalog

    # ---- sessions -----------------------------------------------------------------------------

    def _distinct_title(self, session_id: str, title: str) -> str:
        session = self._store.get_session(session_id)
        folder = Path(session.cwd).name if session is not None else ""
        taken = {s.title for s in self._store.list_sessions() if s.session_id != session_id}
        return distinct_title(title, folder, taken)

    def create_session(self, cwd: Path, title: str = "") -> SessionRecord:
        folder = Path(os.path.realpath(cwd))
        require_utf8(str(folder), "the folder name")
        require_utf8(title, "the title")
        if not folder.is_dir():
            raise SessionError(HostCode.INVALID_CWD, f"{cwd} is not a folder")
        data_dir = kept_out(str(folder))
        if data_dir is not None:
            # Its tools could not touch a file there, and one that could would be writing the
            # database that records it.
            raise SessionError(
                HostCode.INVALID_CWD,
                f"{cwd} is Maka's data folder {data_dir}, or inside it: a session works in a "
                "folder of your own; choose another",
            )
        git_dir = git_directory_around(folder)
        if git_dir is not None:
            # The user's Git directory is never written: not Maka's marker, not the agent's files.
            raise SessionError(
                HostCode.INVALID_CWD,
                f"{cwd} is a Git directory ({git_dir}: a repository's .git or a bare repository), "
                "or inside one: a session works in the repository's files; choose the folder "
                "that holds .git",
            )
        if self._workspace_identity is not None:
            # The folder's workspace marker first (its first turn needs it): a folder where it
            # cannot be made (/proc, a folder this user cannot write) is refused with its
            # marker's code before anything is recorded, so no empty session is left behind.
            self._workspace_identity(folder)
        record = SessionRecord(
            session_id=_new_id("session"),
            cwd=str(folder),
            title=_title(title) or folder.name,
            created_at=self._clock(),
        )
        self._store.create_session(record)
        return record

    def get_session(self, session_id: str) -> SessionRecord:
        record = self._store.get_session(session_id)
        if record is None:
            raise SessionError(StoreCode.SESSION_NOT_FOUND, f"no session {session_id}")
        return record

    def list_sessions(self) -> list[SessionOverview]:
        return list_session_overviews(self._store)

    def transcript(self, session_id: str) -> list[TranscriptEntry]:
        return [entry for _, entry in self.transcript_by_run(session_id) if entry is not None]

    @property
    def store(self) -> LedgerStore:
        return self._store

    def transcript_by_run(self, session_id: str) -> list[tuple[str | None, TranscriptEntry | None]]:
        """The transcript with run boundaries: ``(after, None)`` opens a continuation run (a
        run Safe resume started; ``after``: what it followed, ``continued_after``), then
        ``(None, entry)`` per entry."""
        from runtime.continuation.resume_candidate import continued_after

        self.get_session(session_id)
        out: list[tuple[str | None, TranscriptEntry | None]] = []
        subjects: dict[str, str] = {}  # the calls so far, named by what they did
        by_id: dict[str, RunHeader] = {}
        for header in ordered_runs(self._store.list_session_runs(session_id)):
            by_id[header.run_id] = header
            source = header.continuation_source
            if source is not None:
                source_run = source.get("sourceRunId") or source.get("runId")
                out.append((continued_after(by_id.get(str(source_run))), None))
            events = [row.event for row in self._store.read_run_events(header.run_id)]
            out.extend((None, entry) for entry in transcript_of_run(events, subjects))
            subjects.update(call_subjects(events))
        return out

    def prior_history(self, session_id: str) -> tuple[HistoryItem, ...]:
        """Each earlier run's committed, paired history, oldest run first, followed by a
        host notice for every tool call whose outcome is unknown or parked
        (docs/design/recovery.md 7)."""
        return committed_history(
            self._store, ordered_runs(self._store.list_session_runs(session_id))
        )

    # ---- turns --------------------------------------------------------------------------------

    def is_busy(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._active

    def cancel(self, session_id: str, reason: str | None = None) -> bool:
        """Ask the running turn of ``session_id`` to stop (``reason``: why, when not the
        user); False when none is running."""
        with self._lock:
            token = self._active.get(session_id)
        if token is None:
            return False
        token.cancel(reason)
        return True

    def answer_permission(self, request_id: str, decision: Decision) -> bool:
        return self.permissions.answer(request_id, decision)

    def send_turn(
        self,
        session_id: str,
        text: str,
        observer: RunObserver,
        policy: PermissionPolicy,
        *,
        asker: PermissionAsker | None = None,
        on_question: Callable[[PermissionQuestion], None] | None = None,
        cancel: CancelToken | None = None,
        settings: RunSettings | None = None,
    ) -> RunOutcome:
        """Run one turn to its end. Permission questions go to ``asker`` when given; otherwise
        ``on_question`` is told and the answer arrives through ``answer_permission``.
        ``settings``: this turn's own (a terminal's ``--max-steps``), else the service's."""
        require_utf8(text, "the message")
        session = self.get_session(session_id)
        first_title = _title(text)
        if first_title and self._store.name_new_session(
            session_id, self._distinct_title(session_id, first_title), Path(session.cwd).name
        ):
            session = self.get_session(session_id)
        token = cancel or CancelToken()
        with self._lock:
            if session_id in self._active:
                raise SessionError(HostCode.SESSION_BUSY, f"session {session_id} is running a turn")
            self._active[session_id] = token
        try:
            return self._run_turn(
                session,
                text,
                observer,
                policy,
                asker=asker,
                on_question=on_question,
                token=token,
                settings=settings,
            )
        finally:
            with self._lock:
                self._active.pop(session_id, None)

    def _run_turn(
        self,
        session: SessionRecord,
        text: str,
        observer: RunObserver,
        policy: PermissionPolicy,
        *,
        asker: PermissionAsker | None,
        on_question: Callable[[PermissionQuestion], None] | None,
        token: CancelToken,
        settings: RunSettings | None = None,
    ) -> RunOutcome:
        cwd = Path(session.cwd)
        if not cwd.is_dir():
            raise SessionError(
                HostCode.INVALID_CWD,
                f"the session folder {cwd} {folder_gone(str(cwd))}; if it moved, point the "
                "session at its new place "
                f"({maka_command(f'sessions relocate {session.session_id} NEW_FOLDER')}, or "
                "Session › Locate folder… in the desktop)",
            )
        identity = self._workspace_identity(cwd) if self._workspace_identity else None
        now = self._clock()
        run_id = _new_id("run")
        header = RunHeader(
            run_id=run_id,
            session_id=session.session_id,
            invocation_id=_new_id("inv"),
            turn_id=_new_id("turn"),
            status=RunStatus.CREATED,
            cwd=session.cwd,
            owner_epoch=self._owner_epoch,
            created_at=now,
            updated_at=now,
            workspace_identity=identity,
        )
        history, unanswered = committed_context(
            self._store, ordered_runs(self._store.list_session_runs(session.session_id))
        )
        history = (*self._branch_prefix(session.session_id), *history)

        def wait_for_answer(question: PermissionQuestion, cancel: CancelToken) -> Decision | None:
            return self.permissions.wait(question, cancel, on_question)

        folder = Path(os.path.realpath(cwd))
        checkpointer = self.checkpointer_for(header, folder)
        loop = RunLoop(
            store=self._store,
            provider=self._provider_factory(),
            catalog=self._catalog,
            policy=policy,
            asker=asker or wait_for_answer,
            observer=observer,
            clock=self._clock,
            settings=settings or self._settings(),
            checkpointer=checkpointer,
        )
        context = ToolContext(
            cwd=folder,
            cancel=token,
            workspace_identity=identity,
            session_id=session.session_id,
            run_id=run_id,
            shell_registry=self._shells,
            process_recorder=self.process_recorder,
        )
        return loop.start_turn(header, text, history, context, unanswered=unanswered)

    def _branch_prefix(self, session_id: str) -> tuple[HistoryItem, ...]:
        """A branched session's source prefix (issue #36); raises ``SessionError`` when the
        source no longer matches what it was branched from (nothing is written)."""
        store = self._store
        if not isinstance(store, BranchReader) or store.read_branch(session_id) is None:
            return ()
        from runtime.agent.branch_history import branch_prefix_history

        try:
            return branch_prefix_history(cast(BranchStore, store), session_id)
        except LedgerError as error:
            raise SessionError(error.code, error.message) from None

    def checkpointer_for(self, header: RunHeader, folder: Path) -> WorkspaceCheckpointer | None:
        """The run's workspace checkpointer, its mode decided now (before its first event)."""
        carrier, identity = self.checkpoints, header.workspace_identity
        if carrier is None or identity is None:
            return None
        return WorkspaceCheckpointer(
            carrier=carrier,
            store=self._store,
            identity=RunIdentity(
                header.session_id, header.invocation_id, header.run_id, header.turn_id
            ),
            folder=folder,
            workspace_identity=identity,
            mode=decide_mode(carrier, folder, identity),
            clock=self._clock,
        )


def _constant(settings: RunSettings) -> Callable[[], RunSettings]:
    return lambda: settings
