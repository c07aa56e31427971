"""What the main process needs from the rest of the product: a narrow port. It lives in the
Qt-free host package, so the CLI and the tests share its value types without Qt.

Why a port: the host (lock, IPC server, workers, shutdown order) is about processes and threads;
sessions, runs, recovery and Safe resume belong to the runtime and the store. The composition root
(``app/commands/gui_cmd.py``) adapts the real session service to this Protocol; tests use a small
in-memory implementation. Everything here speaks the bridge contract's wire types, so the host
only routes and never interprets agent data.

Threading contract: every method may block and is called on a worker thread (never on the event
loop), except ``cancel_turn`` and ``answer_permission``, which must return quickly because the
event loop calls them to unblock a running turn. ``sink`` methods may be called from any thread.

Errors: a method that cannot do its job raises ``HostServiceError(code, message)``; the host
answers the renderer with an ``error`` / ``resume.failed`` push carrying that code. Opening the
store raises ``runtime.ledger.ledger_errors.LedgerError`` with a ``StoreCode``
(``schema_newer_than_program``, ``store_corrupt``, ``store_locked``): the refusal screens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from app.bridge_contract import (
    DEFAULT_MAX_STEPS,
    BranchMadePush,
    BranchOptionsListedPush,
    BranchOrigin,
    ChangedFilesShown,
    DatabaseChoice,
    PermissionDecision,
    ProviderChoice,
    ProviderTuning,
    ResumeDiagnostic,
    RunStatusValue,
    SessionRow,
    SessionSummary,
    SettleFolderNote,
    Settlement,
    TranscriptItem,
)
from runtime.ledger.coded_error import CodedError
from runtime.ledger.timeline_pins import SessionTimeline


class HostServiceError(CodedError):
    """A refusal with a stable code (``not_found``, ``session_busy``, ``invalid_cwd``...)."""

    def __init__(self, code: StrEnum, message: str) -> None:
        super().__init__(code, message, text=f"{code}: {message}")


class ShownCardStale(HostServiceError):
    """An answer refused because the card the user answered on no longer says what holds
    (``settle_folder_changed``): nothing was recorded, and ``card`` is the card as it reads
    now, re-sent so the user can answer again."""

    def __init__(
        self,
        code: StrEnum,
        message: str,
        card: TranscriptItem | None,
        parked: ResumeParked | None = None,
    ) -> None:
        super().__init__(code, message)
        self.card = card
        # The park as it stands now (the banner's list of changed files moved on too).
        self.parked = parked


@dataclass(frozen=True, slots=True)
class Transcript:
    """A session's transcript, newest items last; ``omitted_earlier`` items were left out."""

    session_id: str
    items: tuple[TranscriptItem, ...]
    omitted_earlier: int = 0
    branched_from: BranchOrigin | None = None


@dataclass(frozen=True, slots=True)
class ElsewhereChanges:
    """What other processes changed on a shared ledger since the window was told
    (``elsewhere_changes``): sessions to show again as they are now, and sessions gone."""

    updated: tuple[SessionSummary, ...] = ()
    removed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SettingsView:
    provider: ProviderChoice
    openai_base_url: str = ""
    openai_model: str = ""
    api_key_set: bool = False
    max_steps: int = DEFAULT_MAX_STEPS
    safe_resume: bool = False
    auto_resume: bool = True
    resume_from_environment: bool = False
    safe_resume_enabled: bool = False
    provider_from_environment: tuple[str, ...] = ()
    provider_tuning: ProviderTuning = field(default_factory=ProviderTuning)
    database: DatabaseChoice = "sqlite"
    """The Database setting: ``"sqlite"`` (the data folder's) or ``"postgresql"``."""
    database_url: str = ""
    """The stored PostgreSQL URL with its password masked (never the password itself)."""
    database_from_environment: str = ""
    """``MAKA_DATABASE_URL`` (masked) when set: it wins over the setting."""
    database_in_use: str = ""
    """The PostgreSQL URL (masked) the running store opened at start; "" = SQLite."""
    postgres_driver: bool = False
    """Whether the PostgreSQL driver (the ``postgres`` extra) is installed."""


@dataclass(frozen=True, slots=True)
class DatabaseTest:
    """What trying a PostgreSQL server found (the Database page's "Test connection"):
    ``schema_version`` 0 is a database without a Maka ledger yet."""

    ok: bool
    database_url: str
    server_version: str = ""
    schema_version: int | None = None
    program_schema_version: int = 0
    code: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class SettingsChange:
    """``openai_api_key``: None keeps the stored key, "" clears it."""

    provider: ProviderChoice
    openai_base_url: str = ""
    openai_model: str = ""
    openai_api_key: str | None = None
    max_steps: int | None = None
    """The step limit of later turns; ``None`` keeps the stored one."""
    safe_resume: bool | None = None
    auto_resume: bool | None = None
    provider_tuning: ProviderTuning | None = None
    """The provider's waits, context size and tool choice; ``None`` keeps the stored ones."""
    database: DatabaseChoice | None = None
    """The Database setting, applied at the next start; ``None`` keeps it."""
    database_url: str | None = None
    """The PostgreSQL URL; ``None`` (or the masked URL the view showed) keeps the stored one."""


@dataclass(frozen=True, slots=True)
class InterruptedRun:
    """A top-level run that startup recovery closed with ``app_restarted`` in *this* pass.

    ``automatic_continuation`` is True when the run was itself started by auto-resume: the
    crash-loop guard never auto-resumes such a run again (docs/design/recovery.md section 3)."""

    session_id: str
    run_id: str
    created_at: int
    automatic_continuation: bool = False


@dataclass(frozen=True, slots=True)
class ResumeParked:
    rejection_reasons: tuple[str, ...]
    diagnostics: tuple[ResumeDiagnostic, ...] = ()
    workspace_options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """``repaired_runs`` counts every run closed in this pass; ``interrupted`` lists only those
    still the latest run of their session (the auto-resume candidates)."""

    interrupted: tuple[InterruptedRun, ...] = ()
    quarantined_sessions: tuple[str, ...] = ()
    repaired_runs: int = 0
    # Parks that still stand from an earlier start (same boundary, same inputs): the banner
    # opens parked instead of offering Safe resume again.
    standing: tuple[tuple[str, ResumeParked], ...] = ()


@dataclass(frozen=True, slots=True)
class ResumeStarted:
    run_id: str
    turn_id: str
    status: str | None = None
    """How the continuation's turn ended (``completed``...), when it ran to its end."""


@dataclass(frozen=True, slots=True)
class ResumeFailed:
    code: str
    message: str


ResumeOutcome = ResumeStarted | ResumeParked | ResumeFailed


@dataclass(frozen=True, slots=True)
class PlanReport:
    """What ``maka plan`` prints: ``summary`` lines, and ``document``, its ``--json`` (text)."""

    session_id: str
    continues: bool
    summary: tuple[str, ...]
    document: str


@dataclass(frozen=True, slots=True)
class SettleResult:
    """The user's attestation was recorded (docs/design/recovery.md section 8): the call's card as
    it reads now, and what Safe resume would do now (``parked`` None: it would continue)."""

    card: TranscriptItem | None
    parked: ResumeParked | None
    settlement: Settlement | None = None
    resume_reasons: tuple[str, ...] = ()
    """The plan's reasons when Safe resume would still not continue (empty when it would)."""


@dataclass(frozen=True, slots=True)
class SurvivorsChecked:
    """Commands from before a restart (docs/design/recovery.md section 9): how many this request
    stopped, how many still run, and, once none runs, what Safe resume would do now (``parked`` None
    and ``checked`` True: it would continue)."""

    stopped: int
    still_running: int
    checked: bool = False
    parked: ResumeParked | None = None


@dataclass(frozen=True, slots=True)
class TerminalTurn:
    """A terminal's ``maka run`` (``turns.run``): the session (or a new one in ``cwd``), the
    message, the permission mode, its own step limit and the terminal's width."""

    text: str
    permission_mode: str
    session_id: str | None = None
    cwd: str | None = None
    max_steps: int | None = None
    columns: int = 100


@dataclass(frozen=True, slots=True)
class TerminalTurnEnd:
    """How a terminal's turn ended (``RunOutcome``'s fields)."""

    session_id: str
    run_id: str
    status: str
    failure_class: str | None = None
    stop_reason: str | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class TerminalResume:
    """A terminal's ``maka resume`` (``turns.resume``): its permission mode, step limit and
    width, ``--json``, and where its lines go (``write(text, stream)``, stream ``stdout`` or
    ``stderr``)."""

    permission_mode: str
    write: Callable[[str, str], None]
    max_steps: int | None = None
    columns: int = 100
    as_json: bool = False
    before_running: str = ""
    """The command's notes, said (on its stderr) once the continuation is about to run."""
    safe_resume: bool | None = None
    """The command's own Safe resume flag when it set one (it wins for this resume, as for the
    command alone); None: the host's."""


@dataclass(frozen=True, slots=True)
class TerminalSession:
    """The session a terminal's turn runs in (created for it when it named a folder), and what
    the command says before the turn: the provider, and the notes about earlier calls whose
    outcome is unknown."""

    session_id: str
    cwd: str
    provider_label: str
    notes: tuple[str, ...] = ()
    checkpoints_off: bool | None = None
    """``MAKA_WORKSPACE_CHECKPOINTS=off`` in the host: its turns take no snapshots (None: the
    host cannot say). The command says so when its own setting differs."""


@dataclass(frozen=True, slots=True)
class TerminalText:
    """A TUI's ``/transcript`` or ``/branch`` served by the host: its lines as the TUI prints
    them alone, and the new session when a branch was made (the chat goes on in it)."""

    text: str
    branched_to: str | None = None
    branched_cwd: str | None = None


class TurnSink(Protocol):
    """Where a running turn (or continuation) reports progress; thread-safe."""

    def transcript_item(self, item: TranscriptItem) -> None: ...

    def run_status(
        self, run_id: str, status: RunStatusValue, failure_class: str | None = None
    ) -> None: ...

    def permission_requested(self, request_id: str, tool_name: str, summary: str) -> None: ...

    def resume_started(self, run_id: str, turn_id: str) -> None:
        """A continuation was admitted and its run started (before the provider streams)."""
        ...


class HostServices(Protocol):
    def recover_at_startup(self) -> RecoveryReport:
        """Startup recovery (docs/design/recovery.md section 3), before any request is served."""
        ...

    def takeover_interval_s(self) -> float | None:
        """How often to sweep for sessions other hosts stopped renewing (PostgreSQL); None:
        never."""
        ...

    def take_over_expired(self) -> tuple[InterruptedRun, ...]:
        """One takeover sweep: the interrupted runs of the sessions it took over (a worker
        thread; docs/design/hosts.md section 2)."""
        ...

    def elsewhere_changes(self) -> ElsewhereChanges:
        """On a shared ledger, what other processes changed since the window was told: the
        sessions last shown running in another process whose summary has changed (that process
        ended the turn, or this host took the session over), the sessions other hosts created,
        renamed or moved to another folder, and those they removed. A worker thread, on every
        takeover sweep; nothing on a ledger only this host writes."""
        ...

    def list_sessions(self) -> Sequence[SessionSummary]: ...

    def session_rows(self) -> Sequence[SessionRow]:
        """Every session as ``maka sessions`` lists it, oldest first (a terminal attached)."""
        ...

    def plan_report(self, session_id: str, safe_resume: bool | None = None) -> PlanReport:
        """``maka plan SESSION`` for a terminal: the plan from committed facts, in words and as
        its JSON document (``HostServiceError`` with ``session_not_found`` for no session)."""
        ...

    def session_summary(self, session_id: str) -> SessionSummary: ...

    def terminal_text(self, session_id: str, command: str, arguments: str) -> TerminalText:
        """A TUI's ``/transcript`` or ``/branch ARGUMENTS`` beside the host, with the lines the
        TUI prints when it opens the store itself (``session_not_found`` for no session)."""
        ...

    def open_session(self, session_id: str) -> Transcript: ...

    def session_timeline(self, session_id: str) -> SessionTimeline:
        """The session's runs and events as a timeline, with the reasons of the plan Safe
        resume would make pinned to them (read only; runs on a worker thread)."""
        ...

    def create_session(self, cwd: Path) -> SessionSummary: ...

    def branch_options(self, session_id: str) -> BranchOptionsListedPush:
        """Where the session can be branched from (reads only; issue #36)."""
        ...

    def make_branch(
        self, session_id: str, event_id: str, *, to: Path | None, current_files: bool
    ) -> BranchMadePush:
        """Branch the session at ``event_id`` into a new session in a restored copy of its
        folder (may take seconds: it copies). Raises ``HostServiceError`` with the refusal's
        code, nothing recorded."""
        ...

    def relocate_session(self, session_id: str, cwd: Path) -> SessionSummary:
        """Point the session at ``cwd`` when its marker is the session's workspace (else
        ``HostServiceError`` with ``workspace_identity_differs`` and nothing changes)."""
        ...

    def replanned_park(self, session_id: str) -> ResumeParked | None:
        """After the session's folder was located: the park Safe resume makes now, when it is
        on and the banner would offer it (planned again, read-only), else None."""
        ...

    def rename_session(self, session_id: str, title: str) -> SessionSummary: ...

    def remove_session(self, session_id: str) -> None:
        """Delete the session and its ledger (``session_busy`` while it runs)."""
        ...

    def export_session(self, session_id: str, path: Path) -> int:
        """Write the session's ledger to a new file ``path``; returns the number of events."""
        ...

    def send_turn(self, session_id: str, text: str, sink: TurnSink) -> None:
        """Run one turn to its end (completed, failed or cancelled), streaming into ``sink``."""
        ...

    def terminal_session(self, turn: TerminalTurn) -> TerminalSession:
        """A terminal's ``maka run``, first step: its session (``session_not_found``,
        ``session_cwd_mismatch``), or a new one in its folder. Runs on a worker thread."""
        ...

    def terminal_turn(
        self, session_id: str, turn: TerminalTurn, sink: TurnSink, write: Callable[[str], None]
    ) -> TerminalTurnEnd:
        """Then its turn, to its end, with the terminal's permission mode: every window hears it
        through ``sink``, the terminal's lines (as ``maka run`` prints them) go to ``write``."""
        ...

    def cancel_turn(self, session_id: str, reason: str | None = None) -> None:
        """Ask the session's running turn or continuation to stop (``reason``: why, when not
        the user: ``CancelToken.reason``); returns at once."""
        ...

    def answer_permission(
        self, session_id: str, request_id: str, decision: PermissionDecision
    ) -> None: ...

    def resume_latest(
        self,
        session_id: str,
        sink: TurnSink,
        *,
        automatic: bool,
        decision: str | None = None,
        restore_to: str | None = None,
        terminal: TerminalResume | None = None,
        files_shown: tuple[ChangedFilesShown, ...] | None = None,
    ) -> ResumeOutcome:
        """``terminal``: a terminal's ``maka resume`` drives it (its mode, its lines).
        ``files_shown``: for a ``rebaseline``, the changed files the banner listed; when the
        plan's list differs now it parks again (``workspace_drift_changed``) instead of
        continuing.

        Plan the session's latest interrupted run; when the plan says continue, execute it and
        stream the continuation into ``sink`` until it ends. ``automatic`` marks an auto-resume
        at startup (recorded on the continuation, read by the crash-loop guard); ``decision``
        (``isolated_restore`` / ``rebaseline``) and ``restore_to``: the user's way forward when
        the files changed since the stop."""
        ...

    def settle_call(
        self,
        session_id: str,
        tool_call_id: str,
        ran: bool,
        note: str | None,
        folder_shown: SettleFolderNote | None = None,
    ) -> SettleResult:
        """Record what the user checked about a call whose outcome is unknown; a refusal raises
        ``HostServiceError`` with its code. ``folder_shown``: what the card said answering does
        to the folder; when that no longer holds nothing is recorded (``ShownCardStale``, with
        the card as it reads now). Runs on a worker thread."""
        ...

    def refresh_folder_notes(self, session_id: str) -> tuple[TranscriptItem, ...]:
        """The session's settleable cards whose note on the folder changed since they were
        last sent (the folder was edited, located...), each as it reads now; run when the
        session's park is checked again. Runs on a worker thread."""
        ...

    def check_survivors(self, session_id: str, *, stop: bool) -> SurvivorsChecked:
        """The session's commands still running from an earlier start: stop them (**Stop it**:
        terminate each group, kill after 3 s) or only look; once none runs, plan again.
        Runs on a worker thread."""
        ...

    def get_settings(self) -> SettingsView: ...

    def resume_flags(self) -> tuple[bool, bool] | None:
        """(Safe resume on, automatic resume on) now: the environment variable when set, else
        the settings; ``None`` = what the host was started with."""
        ...

    def update_settings(self, change: SettingsChange) -> SettingsView: ...

    def test_database(self, database_url: str | None) -> DatabaseTest:
        """Try a PostgreSQL server (``None`` or the masked URL shown: the stored one); runs on a
        worker thread, never raises for a coded failure."""
        ...

    def start_checkpoint_retention(self) -> None:
        """Trim workspace checkpoints in the background (docs/design/workspace.md section 5);
        returns at once. Called once the host is ready and the window shows."""
        ...

    def stop_background_work(self) -> None:
        """Terminate, then kill, the process trees of background shells started by tools."""
        ...

    def close(self) -> None:
        """Close the store. Called once, after every turn drained."""
        ...


# The factory the composition root passes to the host: opens the store in ``data_dir`` and builds
# the services, or raises ``LedgerError`` with a ``StoreCode`` (refusal screens).
class HostServicesFactory(Protocol):
    def __call__(self, data_dir: Path, /, *, safe_resume_enabled: bool) -> HostServices: ...


__all__ = [
    "HostServiceError",
    "HostServices",
    "HostServicesFactory",
    "InterruptedRun",
    "RecoveryReport",
    "ResumeFailed",
    "ResumeOutcome",
    "ResumeParked",
    "ResumeStarted",
    "SettingsChange",
    "SettingsView",
    "SurvivorsChecked",
    "TerminalResume",
    "TerminalSession",
    "TerminalTurn",
    "TerminalTurnEnd",
    "Transcript",
    "TurnSink",
]
