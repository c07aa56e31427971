"""The single IPC contract between the main process and the renderer process.

Why one module: both processes import it, so a message cannot mean one thing on one side and
another on the other. It depends on the standard library and pydantic only (no Qt): the framing
helpers work on ``bytes`` so they are testable without a socket, and the renderer may import this
module without dragging in the runtime.

Wire format: every frame is a 4-byte big-endian unsigned length followed by that many bytes of
UTF-8 JSON: one object with a ``kind`` (a :class:`MessageKind` value) and camelCase fields. Every
message is a frozen pydantic model with ``extra="forbid"`` and bounded sizes, so a renderer can
never smuggle a fact the main process did not ask for (``sessions.resumeLatest`` carries a
``sessionId`` and nothing else: no workspace identity, no run id, no high-water).

Python code builds messages with snake_case names (``ResumeLatestRequest(session_id="s1")``);
the wire accepts only the camelCase spelling, and parsing is strict (no ``"1"`` -> ``1``).

Handshake: the first frame a renderer sends is ``hello {token, protocolVersion}``. The main
process answers ``hello.ok`` or ``hello.rejected`` (and closes). A malformed, oversized, unknown
or unauthenticated frame closes that connection. ``window.activate`` is what a second ``maka``
launch sends to bring the running window to front; it has no other effect.

Correlation: every message may carry ``correlationId``. A request that expects an answer sets
one; the push answering it (``sessions.listed``, ``session.opened``, ``resume.*``,
``settings.current``, ``timeline.opened``, ``timeline.page``, ``timeline.eventShown``,
``timeline.located``, ``error``) echoes it. Unsolicited pushes leave it ``null``.

The Timeline view reads the record through the main process only: ``timeline.open`` (a
session's runs, counted, and the plan Safe resume would make with its reasons pinned),
``timeline.rows`` (a page of one run's rows, at most ``MAX_TIMELINE_PAGE``) and
``timeline.event`` (one saved event's canonical JSON); filters are applied there too (a
filtered ``timeline.rows``) and ``timeline.locate`` finds a row's place, so the renderer holds
only the rows it shows and never opens SQLite.

Replacement rule for transcript items: every item has an ``itemId``; an item whose ``itemId`` is
already shown replaces the shown one (a tool card moving from ``running`` to ``succeeded``, an
assistant message growing while it streams).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

PROTOCOL_VERSION: Final = 1
MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
"""Largest accepted frame body. Big enough for a list of 20,000 sessions; anything larger is a
bug or an attack and closes the connection."""

FRAME_HEADER: Final = struct.Struct(">I")

MAX_ITEMS_PER_OPEN: Final = 2000
MAX_TIMELINE_RUNS: Final = 10_000
MAX_TIMELINE_PAGE: Final = 500
"""Rows of one run per ``timeline.page``: the renderer asks for more as the view scrolls."""
MAX_TIMELINE_ROW_EVENTS: Final = 64
MAX_EVENT_JSON_CHARS: Final = 200_000
MAX_SESSIONS_PER_LIST: Final = 20_000
MAX_TEXT_CHARS: Final = 200_000
MAX_SUMMARY_CHARS: Final = 4000
MAX_PATH_CHARS: Final = 4096
MAX_BRANCH_OPTIONS: Final = 10_000
"""Boundaries of one session per ``branch.optionsListed`` (the newest; older ones are counted)."""
DEFAULT_MAX_STEPS: Final = 200
MAX_STEPS_LIMIT: Final = 100_000
"""The step limit of a turn (``settings.*``): the runtime's ``DEFAULT_MAX_STEPS`` and
``MAX_STEPS_RANGE`` (a unit test keeps them equal; the renderer must not import the runtime)."""
StepLimit = Annotated[int, Field(ge=1, le=MAX_STEPS_LIMIT)]
DEFAULT_OPENAI_TIMEOUT_S: Final = 120.0
DEFAULT_OPENAI_DATA_TIMEOUT_S: Final = 600.0
"""The OpenAI-compatible provider's waits when none is set (``ProviderTuning``): the runtime's
``MAKA_OPENAI_TIMEOUT`` and ``MAKA_OPENAI_DATA_TIMEOUT`` defaults (a unit test keeps them equal)."""
MAX_TIMEOUT_S: Final = 86_400.0
MAX_CONTEXT_TOKENS: Final = 100_000_000
Seconds = Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)]


class MessageKind(StrEnum):
    """Every message kind on the wire. Append-only, like every other code."""

    # requests: renderer -> main
    HELLO = "hello"
    SESSIONS_LIST = "sessions.list"
    SESSIONS_CREATE = "sessions.create"
    SESSIONS_OPEN = "sessions.open"
    TURNS_SEND = "turns.send"
    TURNS_CANCEL = "turns.cancel"
    PERMISSIONS_ANSWER = "permissions.answer"
    SESSIONS_RESUME_LATEST = "sessions.resumeLatest"
    TOOLS_SETTLE = "tools.settle"
    SETTINGS_GET = "settings.get"
    SETTINGS_UPDATE = "settings.update"
    SETTINGS_TEST_DATABASE = "settings.testDatabase"
    WINDOW_ACTIVATE = "window.activate"
    SESSIONS_RELOCATE = "sessions.relocate"
    SESSIONS_RENAME = "sessions.rename"
    SESSIONS_REMOVE = "sessions.remove"
    SESSIONS_EXPORT = "sessions.export"
    PROCESSES_STOP = "processes.stop"
    TIMELINE_OPEN = "timeline.open"
    TIMELINE_ROWS = "timeline.rows"
    TIMELINE_EVENT = "timeline.event"
    SESSIONS_OVERVIEW = "sessions.overview"
    SESSIONS_PLAN = "sessions.plan"
    TIMELINE_LOCATE = "timeline.locate"
    TURNS_RUN = "turns.run"
    TURNS_RESUME = "turns.resume"
    BRANCH_OPTIONS = "branch.options"
    BRANCH_CREATE = "branch.create"
    # pushes: main -> renderer
    HELLO_OK = "hello.ok"
    HELLO_REJECTED = "hello.rejected"
    SESSIONS_LISTED = "sessions.listed"
    SESSION_UPDATED = "session.updated"
    SESSION_OPENED = "session.opened"
    TRANSCRIPT_ITEM = "transcript.item"
    RUN_STATUS = "run.status"
    PERMISSION_REQUESTED = "permission.requested"
    RESUME_STARTED = "resume.started"
    RESUME_PARKED = "resume.parked"
    RESUME_FAILED = "resume.failed"
    TOOL_SETTLED = "tool.settled"
    HOST_STATE = "host.state"
    SETTINGS_CURRENT = "settings.current"
    DATABASE_TESTED = "settings.databaseTested"
    ERROR = "error"
    WINDOW_SHOW = "window.show"
    SESSION_REMOVED = "session.removed"
    SESSION_EXPORTED = "session.exported"
    PROCESSES_STOPPED = "processes.stopped"
    TIMELINE_OPENED = "timeline.opened"
    TIMELINE_PAGE = "timeline.page"
    TIMELINE_EVENT_SHOWN = "timeline.eventShown"
    SESSIONS_OVERVIEWED = "sessions.overviewed"
    SESSION_PLANNED = "session.planned"
    TIMELINE_LOCATED = "timeline.located"
    TURN_STARTED = "turn.started"
    TURN_OUTPUT = "turn.output"
    TURN_ENDED = "turn.ended"
    RESUME_ENDED = "resume.ended"
    BRANCH_OPTIONS_LISTED = "branch.optionsListed"
    BRANCH_MADE = "branch.made"
    BRANCH_REFUSED = "branch.refused"
    SESSIONS_WATCH = "sessions.watch"
    TERMINAL_COMMAND = "terminal.command"
    SESSION_DRIVER = "session.driver"
    PERMISSION_CLOSED = "permission.closed"
    TERMINAL_TEXT = "terminal.text"


class BridgeErrorCode(StrEnum):
    """Why a frame or a connection was refused (logged by the receiver; sent in
    ``hello.rejected`` / ``error``)."""

    FRAME_TOO_LARGE = "frame_too_large"
    FRAME_MALFORMED = "frame_malformed"
    UNKNOWN_KIND = "unknown_kind"
    MESSAGE_INVALID = "message_invalid"
    KIND_NOT_ACCEPTED = "kind_not_accepted"
    HANDSHAKE_REQUIRED = "handshake_required"
    TOKEN_INVALID = "token_invalid"
    PROTOCOL_VERSION_UNSUPPORTED = "protocol_version_unsupported"


class BridgeProtocolError(Exception):
    """A frame that must close the connection. ``code`` is a :class:`BridgeErrorCode`; the
    message never echoes the offending bytes (they may hold a token or be huge). The one coded
    error outside ``runtime.ledger.coded_error.CodedError``: this module imports nothing of the
    project (the renderer reads it), and the error closes a connection, it is never mapped to a
    reply."""

    def __init__(self, code: BridgeErrorCode, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


class ClientRole(StrEnum):
    """Who says ``hello``: the desktop's window (one per launch, its token bound to its process)
    or a ``maka`` command in a terminal (any number, each with the host's terminal token)."""

    RENDERER = "renderer"
    TERMINAL = "terminal"


class TerminalCommand(StrEnum):
    """Which ``maka`` command a terminal client is (said in its ``hello``): a question it
    answers closes elsewhere naming it ("answered in the terminal (maka tui, pid N)")."""

    RUN = "run"
    RESUME = "resume"
    TUI = "tui"
    SETTLE = "settle"
    SESSIONS = "sessions"
    PLAN = "plan"
    GUI = "gui"
    BRANCH = "branch"


class HostKind(StrEnum):
    """Which process owns the data folder and serves it: the desktop's main process, or
    ``maka host`` without a window."""

    DESKTOP = "desktop"
    HEADLESS = "headless"


class HostState(StrEnum):
    OPENING = "opening"
    RECOVERING = "recovering"
    READY = "ready"
    CLOSING = "closing"
    CLOSED = "closed"


class RunStatusValue(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    WAITING_FOR_USER = "waiting_for_user"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ToolCardStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INDETERMINATE = "indeterminate"
    PARKED = "parked"
    NOT_DISPATCHED = "not_dispatched"
    COMPLETED_AFTER_RECOVERY = "completed_after_recovery"


class NoticeLevel(StrEnum):
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class PermissionDecision(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


class ProviderChoice(StrEnum):
    OFFLINE_DEMO = "offline_demo"
    OPENAI_COMPATIBLE = "openai_compatible"


Id = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Code = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=80)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]*$", max_length=80)]
Token = Annotated[str, StringConstraints(min_length=16, max_length=256)]
FsPath = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH_CHARS)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]
Summary = Annotated[str, StringConstraints(max_length=MAX_SUMMARY_CHARS)]
Explanation = Annotated[str, StringConstraints(max_length=MAX_SUMMARY_CHARS)]
Short = Annotated[str, StringConstraints(max_length=500)]
DatabaseChoice = Literal["sqlite", "postgresql"]
"""Where the ledger is kept: ``runtime.sqlite`` in the data folder, or a PostgreSQL server."""
DatabaseUrl = Annotated[str, StringConstraints(max_length=2048)]


class WireModel(BaseModel):
    """Base of every wire object: frozen, no unknown fields, camelCase on the wire."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class _Message(WireModel):
    correlation_id: Id | None = None


# --------------------------------------------------------------------------- requests


class HelloRequest(_Message):
    kind: Literal[MessageKind.HELLO] = MessageKind.HELLO
    token: Token
    protocol_version: Annotated[int, Field(ge=0, le=1_000_000)]
    role: ClientRole = ClientRole.RENDERER
    """A terminal client says so and uses the terminal token (``<data>/ipc/terminal-token``);
    it may send only ``TERMINAL_REQUEST_KINDS``."""
    command: TerminalCommand | None = None
    """A terminal's command (``maka tui``...), named where its answers and turns are told."""
    data_dir_said: FsPath | None = None
    """The data folder a terminal's suggested commands name (it was given ``--data-dir``;
    absolute), or None (MAKA_DATA_DIR or the default): the host words the commands it suggests
    to that terminal so (``runtime.ledger.command_words.wording_for``)."""


class SessionsListRequest(_Message):
    kind: Literal[MessageKind.SESSIONS_LIST] = MessageKind.SESSIONS_LIST


class SessionsCreateRequest(_Message):
    kind: Literal[MessageKind.SESSIONS_CREATE] = MessageKind.SESSIONS_CREATE
    cwd: FsPath


class SessionsRelocateRequest(_Message):
    """Point a session at its folder's new place; the main process accepts it only when the
    folder's marker is the session's workspace (the renderer supplies a path, never a fact)."""

    kind: Literal[MessageKind.SESSIONS_RELOCATE] = MessageKind.SESSIONS_RELOCATE
    session_id: Id
    cwd: FsPath


class SessionsRenameRequest(_Message):
    kind: Literal[MessageKind.SESSIONS_RENAME] = MessageKind.SESSIONS_RENAME
    session_id: Id
    title: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class SessionsRemoveRequest(_Message):
    """Delete a session and its ledger (the window asked the user, offering export first)."""

    kind: Literal[MessageKind.SESSIONS_REMOVE] = MessageKind.SESSIONS_REMOVE
    session_id: Id


class ProcessesStopRequest(_Message):
    """**Stop it**: end the commands of this session that still run from before Maka stopped
    (docs/design/recovery.md section 9). Only a session id: the main process finds them itself."""

    kind: Literal[MessageKind.PROCESSES_STOP] = MessageKind.PROCESSES_STOP
    session_id: Id


class SessionsExportRequest(_Message):
    """Export a session's ledger to a new file (``maka export``'s format; never replaces)."""

    kind: Literal[MessageKind.SESSIONS_EXPORT] = MessageKind.SESSIONS_EXPORT
    session_id: Id
    path: FsPath


class SessionsOpenRequest(_Message):
    kind: Literal[MessageKind.SESSIONS_OPEN] = MessageKind.SESSIONS_OPEN
    session_id: Id


class TurnsSendRequest(_Message):
    kind: Literal[MessageKind.TURNS_SEND] = MessageKind.TURNS_SEND
    session_id: Id
    text: Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS)]


class TurnsCancelRequest(_Message):
    kind: Literal[MessageKind.TURNS_CANCEL] = MessageKind.TURNS_CANCEL
    session_id: Id


class PermissionsAnswerRequest(_Message):
    kind: Literal[MessageKind.PERMISSIONS_ANSWER] = MessageKind.PERMISSIONS_ANSWER
    session_id: Id
    request_id: Id
    decision: PermissionDecision


class ResumeLatestRequest(_Message):
    """Safe resume of a session's latest interrupted run. The renderer names the session and
    nothing else: the main process plans from committed facts and observes the workspace, tools
    and background work itself."""

    kind: Literal[MessageKind.SESSIONS_RESUME_LATEST] = MessageKind.SESSIONS_RESUME_LATEST
    session_id: Id
    workspace_decision: Literal["isolated_restore", "rebaseline"] | None = None
    """The user's way forward when the files changed since the stop (docs/design/workspace.md
    section 4): continue in a restored copy, or with the current files."""
    restore_to: FsPath | None = None
    """For ``isolated_restore``: a new or empty folder for the copy (None: a new sibling)."""
    files_shown: Annotated[tuple[ChangedFilesShown, ...], Field(max_length=8)] | None = None
    """For ``rebaseline``: the changed files the banner listed when the user chose (its
    ``workspace_drift`` / ``workspace_checkpoint_stale`` diagnostics' lists). When the plan's
    list differs now, the main process does not continue: it parks again with
    ``workspace_drift_changed`` and the new list, so the user decides on what is there. None (an
    older renderer): no such check."""


class ChangedFilesShown(WireModel):
    """One changed-files list a park showed (a diagnostic's ``code``, its first
    ``changed_paths`` and the count of the rest), as the renderer received it."""

    code: Code
    changed_paths: Annotated[tuple[ChangedPath, ...], Field(max_length=50)] = ()
    more_changed_paths: Annotated[int, Field(ge=0, le=10**9)] = 0


class AttestationChoice(StrEnum):
    RAN = "ran"
    NOT_RUN = "not_run"


MAX_NOTE_CHARS: Final = 500


class ToolsSettleRequest(_Message):
    """The user checked what a call with an unknown outcome did and says so (docs/design/recovery.md
    section 8). It names the session, the call and the answer; the main process decides whether
    the call may be settled (unknown outcome, an earlier start of Maka, no process left) and
    records it. Answered by ``tool.settled``."""

    kind: Literal[MessageKind.TOOLS_SETTLE] = MessageKind.TOOLS_SETTLE
    session_id: Id
    tool_call_id: Id
    outcome: AttestationChoice
    note: Annotated[str, StringConstraints(min_length=1, max_length=MAX_NOTE_CHARS)] | None = None
    folder_shown: SettleFolderNote | None = None
    """What the card said answering does to the folder when the user answered (its
    ``settle_folder``). When the folder now reads otherwise, nothing is recorded: ``tool.settled``
    refuses with ``settle_folder_changed`` and the card is re-sent with the note as it is now, so
    the user answers on what is there. None (an older renderer, a terminal): no such check."""


class ProviderTuning(WireModel):
    """How the OpenAI-compatible provider talks to its server (docs/providers.md); ``None``
    leaves a value to the provider's default. ``timeout_s``: the longest wait for any answer
    (``MAKA_OPENAI_TIMEOUT``); ``data_timeout_s``: the longest wait between two data events of a
    stream (``MAKA_OPENAI_DATA_TIMEOUT``, never shorter than ``timeout_s``); ``context_tokens``:
    the model's context size (``MAKA_OPENAI_CONTEXT_TOKENS``); ``tool_choice``: send
    ``tool_choice: "auto"`` with the tools (``MAKA_OPENAI_TOOL_CHOICE``)."""

    timeout_s: Seconds | None = None
    data_timeout_s: Seconds | None = None
    context_tokens: Annotated[int, Field(ge=1, le=MAX_CONTEXT_TOKENS)] | None = None
    tool_choice: bool = True

    @model_validator(mode="after")
    def _data_wait_not_shorter(self) -> ProviderTuning:
        timeout = self.timeout_s or DEFAULT_OPENAI_TIMEOUT_S
        if self.data_timeout_s is not None and self.data_timeout_s < timeout:
            raise ValueError("the wait for data must not be shorter than the wait for an answer")
        return self


class TimelineOpenRequest(_Message):
    """Open a session's timeline: answered by ``timeline.opened`` (its runs, counted, and the
    plan Safe resume would make, its reasons pinned); rows follow per run on request."""

    kind: Literal[MessageKind.TIMELINE_OPEN] = MessageKind.TIMELINE_OPEN
    session_id: Id


class TimelineRowFilter(WireModel):
    """The Timeline view's filters, applied by the main process: rows of a kind (the row's or
    one of its facts'), a tool (part of its name), a status, a text (part of a summary or an
    event id), only problems (a problem status or a pinned reason). Empty: no filter."""

    kind: Annotated[str, StringConstraints(max_length=80)] = ""
    tool: Short = ""
    status: Annotated[str, StringConstraints(max_length=80)] = ""
    text: Short = ""
    only_problems: bool = False


class TimelineRowsRequest(_Message):
    """Rows ``start`` .. ``start + count`` of one run of an opened timeline (``timeline.page``),
    counted among the rows ``filters`` shows when given."""

    kind: Literal[MessageKind.TIMELINE_ROWS] = MessageKind.TIMELINE_ROWS
    session_id: Id
    run_id: Id
    start: Annotated[int, Field(ge=0, le=10**9)]
    count: Annotated[int, Field(ge=1, le=MAX_TIMELINE_PAGE)]
    filters: TimelineRowFilter | None = None


class TimelineLocateRequest(_Message):
    """Where the row of ``run_id`` starting at ``seq`` is among the rows ``filters`` shows
    (``timeline.located``): a pinned reason's row is then loaded by its page alone."""

    kind: Literal[MessageKind.TIMELINE_LOCATE] = MessageKind.TIMELINE_LOCATE
    session_id: Id
    run_id: Id
    seq: Annotated[int, Field(ge=0)]
    filters: TimelineRowFilter | None = None


class TimelineEventRequest(_Message):
    """One committed event's canonical JSON, for the detail pane (``timeline.eventShown``)."""

    kind: Literal[MessageKind.TIMELINE_EVENT] = MessageKind.TIMELINE_EVENT
    session_id: Id
    run_id: Id
    event_id: Id


class SettingsGetRequest(_Message):
    kind: Literal[MessageKind.SETTINGS_GET] = MessageKind.SETTINGS_GET


class SettingsUpdateRequest(_Message):
    """``openai_api_key`` is write-only: ``None`` keeps the stored key, ``""`` clears it. It is
    never sent back (``settings.current`` says only whether one is set)."""

    kind: Literal[MessageKind.SETTINGS_UPDATE] = MessageKind.SETTINGS_UPDATE
    provider: ProviderChoice
    openai_base_url: Annotated[str, StringConstraints(max_length=2048)] = ""
    openai_model: Annotated[str, StringConstraints(max_length=200)] = ""
    openai_api_key: Annotated[str, StringConstraints(max_length=1024)] | None = None
    max_steps: StepLimit | None = None
    """The step limit of every later turn; ``None`` keeps the stored one."""
    safe_resume: bool | None = None
    """Safe resume on or off (``None`` keeps it); the environment variable still wins."""
    auto_resume: bool | None = None
    """Resume interrupted sessions automatically at start (``None`` keeps it)."""
    provider_tuning: ProviderTuning | None = None
    """The OpenAI-compatible provider's waits, context size and tool choice (``None`` keeps
    them)."""
    database: DatabaseChoice | None = None
    """Where the ledger is kept from the next start on (``None`` keeps the setting)."""
    database_url: DatabaseUrl | None = None
    """The PostgreSQL URL; ``None``, or the masked URL ``settings.current`` showed, keeps the
    stored one (and its password)."""


class SettingsTestDatabaseRequest(_Message):
    """Try the PostgreSQL server of the Database page (answered by ``settings.databaseTested``,
    from a worker thread). ``database_url`` as typed; ``None``, or the masked URL
    ``settings.current`` showed, tries the stored one (with its password)."""

    kind: Literal[MessageKind.SETTINGS_TEST_DATABASE] = MessageKind.SETTINGS_TEST_DATABASE
    database_url: DatabaseUrl | None = None


class SessionsOverviewRequest(_Message):
    """A terminal's ``maka sessions``: every session as the command lists it (answered by
    ``sessions.overviewed``)."""

    kind: Literal[MessageKind.SESSIONS_OVERVIEW] = MessageKind.SESSIONS_OVERVIEW


class SessionsPlanRequest(_Message):
    """A terminal's ``maka plan SESSION``: whether Safe resume would continue the session's latest
    interrupted run, planned by the host from committed facts (answered by ``session.planned``)."""

    kind: Literal[MessageKind.SESSIONS_PLAN] = MessageKind.SESSIONS_PLAN
    session_id: Id
    safe_resume: bool | None = None
    """The command's own ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME`` when set: the plan is the one
    ``maka resume`` with the same variable would make (None: the host's setting)."""


class TurnsRunRequest(_Message):
    """A terminal's ``maka run``: one turn in ``session_id`` (or a new session in ``cwd``), run
    by the host. Answered by ``turn.started`` (the session, the provider), then the turn's
    pushes (``transcript.item``, ``run.status``, ``permission.requested``) and its terminal
    lines (``turn.output``), and ``turn.ended``; or ``error`` (``session_busy`` naming the
    client that drives the session, ``session_not_found``...). ``columns``: the terminal's width
    (a permission question is wrapped to it)."""

    kind: Literal[MessageKind.TURNS_RUN] = MessageKind.TURNS_RUN
    session_id: Id | None = None
    cwd: FsPath | None = None
    text: Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS)]
    permission_mode: Literal["ask", "auto", "deny"]
    max_steps: StepLimit | None = None
    columns: Annotated[int, Field(ge=20, le=10_000)] = 100

    @model_validator(mode="after")
    def _names_a_session_or_a_folder(self) -> TurnsRunRequest:
        if self.session_id is None and self.cwd is None:
            raise ValueError("a turn needs a session or a folder")
        return self


class TurnsResumeRequest(_Message):
    """A terminal's ``maka resume``: Safe resume of the session's latest interrupted run by the
    host's continuation service (the banner's). Answered by the terminal's lines
    (``turn.output``), the continuation's pushes, and ``resume.ended`` with the command's exit
    code; or ``error``."""

    kind: Literal[MessageKind.TURNS_RESUME] = MessageKind.TURNS_RESUME
    session_id: Id
    permission_mode: Literal["ask", "auto", "deny"]
    max_steps: StepLimit | None = None
    columns: Annotated[int, Field(ge=20, le=10_000)] = 100
    as_json: bool = False
    workspace_decision: Literal["isolated_restore", "rebaseline"] | None = None
    restore_to: FsPath | None = None
    before_running: Summary = ""
    """The command's own notes (about its permission mode), said on its stderr once the
    continuation is about to run, never for a park: the host sends them back at that moment."""
    safe_resume: bool | None = None
    """The command's own ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME`` when it is set (``1``: on, any
    other value: off), which decides Safe resume for this resume as it does for the command
    alone; None: the host's setting."""


MAX_PLAN_LINES: Final = 100_000
MAX_PLAN_DOCUMENT_CHARS: Final = 8 * 1024 * 1024


class BranchOptionsRequest(_Message):
    """Where the session can be branched from (``branch.optionsListed``): each user message, tool
    result and run ending, with whether a snapshot of the folder is kept for it."""

    kind: Literal[MessageKind.BRANCH_OPTIONS] = MessageKind.BRANCH_OPTIONS
    session_id: Id


class BranchCreateRequest(_Message):
    """Continue from ``event_id`` of the session in a new session whose folder is a restored
    copy (``to``, or a new sibling ``<folder>-branch-<n>`` when None); ``current_files``: copy
    the folder as it is now (no snapshot is kept there; the model is told). Answered by
    ``branch.made`` or ``branch.refused``."""

    kind: Literal[MessageKind.BRANCH_CREATE] = MessageKind.BRANCH_CREATE
    session_id: Id
    event_id: Id
    to: FsPath | None = None
    current_files: bool = False


class SessionsWatchRequest(_Message):
    """A terminal views a session (``maka tui``): from now on it hears that session's turns
    driven by anyone else as the windows hear them (items, run status, permission questions
    and where they were answered), and who drives it (``session.driver``, the answer).
    ``session_id`` None: it views nothing any more."""

    kind: Literal[MessageKind.SESSIONS_WATCH] = MessageKind.SESSIONS_WATCH
    session_id: Id | None = None


class TerminalCommandRequest(_Message):
    """``maka tui``'s ``/transcript`` and ``/branch [ARGS]`` beside a host: the host reads (or
    branches) and answers with the lines the TUI prints when it opens the store itself
    (``terminal.text``, several pushes for a long transcript, the last with ``done``)."""

    kind: Literal[MessageKind.TERMINAL_COMMAND] = MessageKind.TERMINAL_COMMAND
    session_id: Id
    command: Literal["transcript", "branch"]
    arguments: Annotated[str, StringConstraints(max_length=MAX_PATH_CHARS + 400)] = ""


class WindowActivateRequest(_Message):
    kind: Literal[MessageKind.WINDOW_ACTIVATE] = MessageKind.WINDOW_ACTIVATE


# --------------------------------------------------------------------------- pushes


class HelloOkPush(_Message):
    kind: Literal[MessageKind.HELLO_OK] = MessageKind.HELLO_OK
    host_state: HostState
    safe_resume_enabled: bool
    host_kind: HostKind = HostKind.DESKTOP
    host_pid: Annotated[int, Field(ge=1, le=2**31)] | None = None
    # The data folder the host serves (its real path): a terminal given a copy of the folder
    # (copied with its endpoint pointer and token while the host ran) must not attach to it.
    data_dir: FsPath | None = None
    # Why the host cannot open a window (``maka host`` started with no display); None: it can.
    # ``maka gui`` beside it says so instead of claiming a window opens.
    no_window: Short | None = None


class HelloRejectedPush(_Message):
    kind: Literal[MessageKind.HELLO_REJECTED] = MessageKind.HELLO_REJECTED
    code: Code
    message: Explanation = ""
    # A window's token was refused by a ``maka host`` that has no window of its own open or
    # coming: the window of an earlier start is told to open a new one, not to "use" one.
    windowless_owner: bool = False


class SessionSummary(WireModel):
    session_id: Id
    cwd: FsPath
    title: Short
    last_run_status: RunStatusValue | None = None
    interrupted: bool = False
    """True when the latest run failed with ``app_restarted``: the list says "Interrupted" and
    the banner offers Safe resume (docs/design/desktop.md)."""
    failure_class: Code | None = None
    folder_missing: bool = False
    """The session's folder does not exist now (moved or deleted): Locate folder… helps."""
    interrupted_automatic: bool = False
    """``interrupted``, during an automatic Safe resume: automatic resume never takes it up
    again (the crash-loop guard); the banner says so."""
    running_elsewhere: bool = False
    """A shared ledger: the latest run is unfinished and this host does not hold the session's
    lease. Another process runs it (or ran it and is gone, until its lease runs out and this
    host takes the session over); this window can neither stop it nor send in it."""
    held_elsewhere: Short | None = None
    """A shared ledger: another Maka process holds the session's lease now (a ``maka host``
    that served it and still runs, say), named as ``machine, pid N``. Until that process stops
    and its lease runs out, this window cannot send in the session."""


class BranchedFrom(WireModel):
    """Where a branched session's history comes from (its ``branchStart`` fact, issue #36)."""

    source_session_id: Id
    source_run_id: Id
    boundary_event_id: Id
    high_water: Annotated[int, Field(ge=1)]
    prefix_digest: Short
    current_files: bool
    workspace_path: FsPath
    created_at: Annotated[int, Field(ge=0)]
    checkpoint_ref: Short | None = None


class BranchMade(WireModel):
    """A session branched from this one, and the event it was branched at."""

    session_id: Id
    boundary_event_id: Id


class SessionRow(WireModel):
    """One line of ``maka sessions`` (its ``--json`` row, field for field)."""

    session_id: Id
    cwd: FsPath
    title: Text
    created_at: Annotated[int, Field(ge=0)]
    interrupted: bool
    run_count: Annotated[int, Field(ge=0)]
    folder_missing: bool
    resumable: bool
    last_run_status: RunStatusValue | None = None
    failure_class: Code | None = None
    awaiting_repair: bool | None = None
    branched_from: BranchedFrom | None = None
    branches: Annotated[tuple[BranchMade, ...], Field(max_length=MAX_SESSIONS_PER_LIST)] | None = (
        None
    )


class SessionsOverviewedPush(_Message):
    """The answer to ``sessions.overview``, oldest session first."""

    kind: Literal[MessageKind.SESSIONS_OVERVIEWED] = MessageKind.SESSIONS_OVERVIEWED
    rows: Annotated[tuple[SessionRow, ...], Field(max_length=MAX_SESSIONS_PER_LIST)]
    # The host's Safe resume setting (what ``maka resume`` through it uses when the command
    # sets no MAKA_RUNTIME_SAFE_BOUNDARY_RESUME of its own); None: not said.
    safe_resume: bool | None = None


class SessionPlannedPush(_Message):
    """The answer to ``sessions.plan``: ``continues``, the summary ``maka plan`` prints, and its
    ``--json`` document as JSON text (the plan's own format, docs/design/cli.md)."""

    kind: Literal[MessageKind.SESSION_PLANNED] = MessageKind.SESSION_PLANNED
    session_id: Id
    continues: bool
    summary: Annotated[tuple[Text, ...], Field(max_length=MAX_PLAN_LINES)]
    document: Annotated[str, StringConstraints(min_length=2, max_length=MAX_PLAN_DOCUMENT_CHARS)]


class SessionsListedPush(_Message):
    kind: Literal[MessageKind.SESSIONS_LISTED] = MessageKind.SESSIONS_LISTED
    sessions: Annotated[tuple[SessionSummary, ...], Field(max_length=MAX_SESSIONS_PER_LIST)]


class SessionUpdatedPush(_Message):
    """One session's summary changed (status, title, interruption); also a new session."""

    kind: Literal[MessageKind.SESSION_UPDATED] = MessageKind.SESSION_UPDATED
    session: SessionSummary


class SessionRemovedPush(_Message):
    kind: Literal[MessageKind.SESSION_REMOVED] = MessageKind.SESSION_REMOVED
    session_id: Id
    elsewhere: bool = False
    """Another Maka process removed it (a shared ledger's sweep saw it gone), not this window."""


class SessionExportedPush(_Message):
    kind: Literal[MessageKind.SESSION_EXPORTED] = MessageKind.SESSION_EXPORTED
    session_id: Id
    path: FsPath
    events: Annotated[int, Field(ge=0)]


class UserMessageItem(WireModel):
    type: Literal["user_message"] = "user_message"
    item_id: Id
    run_id: Id | None = None
    text: Text


class AssistantMessageItem(WireModel):
    type: Literal["assistant_message"] = "assistant_message"
    item_id: Id
    run_id: Id | None = None
    text: Text


class ThinkingItem(WireModel):
    type: Literal["thinking"] = "thinking"
    item_id: Id
    run_id: Id | None = None
    text: Text


class SettleFolderNote(WireModel):
    """What answering a writing call's card also does (docs/design/workspace.md section 3): the
    folder as it is now becomes the new starting point. ``compared``: there is a snapshot to
    compare it with; ``changed_paths``: the first paths changed since it, ``more_changed`` the
    rest; ``unreadable``: the folder cannot be read now (the answer is recorded all the same);
    ``not_its_workspace``: with ``unreadable``, the folder is readable but not shown to be the
    session's (its marker missing, as after ``git clean -fdx``, or naming another workspace)."""

    compared: bool = True
    changed_paths: Annotated[list[Short], Field(max_length=10)] = []
    more_changed: Annotated[int, Field(ge=0)] = 0
    unreadable: bool = False
    not_its_workspace: bool = False


class ToolCardItem(WireModel):
    type: Literal["tool_card"] = "tool_card"
    item_id: Id
    run_id: Id | None = None
    tool_call_id: Id
    tool_name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    args_summary: Summary = ""
    status: ToolCardStatus
    result_summary: Summary = ""
    park_reason: Code | None = None
    args_full: Summary = ""
    """The arguments in full (a command as typed), for a card that asks the user about it."""
    settleable: bool = False
    """Outcome unknown, and the user may say whether it ran (``tools.settle``)."""
    attestation: AttestationChoice | None = None
    attested_at: Annotated[int, Field(ge=0)] | None = None
    attestation_note: Short | None = None
    settle_folder: SettleFolderNote | None = None
    """For a settleable writing call in a session with snapshots: what answering does to the
    folder's starting point, said before the user answers."""


class NoticeItem(WireModel):
    type: Literal["notice"] = "notice"
    item_id: Id
    run_id: Id | None = None
    level: NoticeLevel = NoticeLevel.INFO
    text: Summary
    code: Code | None = None


class ContinuationMarkerItem(WireModel):
    """Everything after this marker belongs to a continuation run of ``source_run_id``."""

    type: Literal["continuation_marker"] = "continuation_marker"
    item_id: Id
    run_id: Id
    source_run_id: Id | None = None
    after: Literal["restart", "stop", "failure"] = "restart"
    """What the continuation followed (``runtime.continuation.resume_candidate.continued_after``):
    Maka stopping while the turn ran, the user's stop, or a failure."""
    automatic: bool = False
    """Automatic resume started it, not the user (its continuation claim says so)."""


class BranchMarkerItem(WireModel):
    """Placed after the item at which ``branch_session_id`` was branched from this session."""

    type: Literal["branch_marker"] = "branch_marker"
    item_id: Id
    run_id: Id | None = None
    branch_session_id: Id
    branch_title: Short = ""
    boundary_event_id: Id


TranscriptItem = Annotated[
    UserMessageItem
    | AssistantMessageItem
    | ThinkingItem
    | ToolCardItem
    | NoticeItem
    | ContinuationMarkerItem
    | BranchMarkerItem,
    Field(discriminator="type"),
]


class BranchOrigin(WireModel):
    """Where an opened session was branched from: its source (title as it is now, or empty
    when that session is gone) and the boundary, in words."""

    source_session_id: Id
    source_title: Short = ""
    boundary_event_id: Id
    boundary_label: Short = ""
    boundary_kind: Code | None = None
    current_files: bool = False


class SessionOpenedPush(_Message):
    """A session's transcript, newest ``MAX_ITEMS_PER_OPEN`` items at most;
    ``omitted_earlier`` counts the items left out before them."""

    kind: Literal[MessageKind.SESSION_OPENED] = MessageKind.SESSION_OPENED
    session_id: Id
    items: Annotated[tuple[TranscriptItem, ...], Field(max_length=MAX_ITEMS_PER_OPEN)]
    omitted_earlier: Annotated[int, Field(ge=0)] = 0
    branched_from: BranchOrigin | None = None
    """The session was branched from another (its header says from where)."""


class TranscriptItemPush(_Message):
    kind: Literal[MessageKind.TRANSCRIPT_ITEM] = MessageKind.TRANSCRIPT_ITEM
    session_id: Id
    item: TranscriptItem


class RunStatusPush(_Message):
    kind: Literal[MessageKind.RUN_STATUS] = MessageKind.RUN_STATUS
    session_id: Id
    run_id: Id
    status: RunStatusValue
    failure_class: Code | None = None


class PermissionRequestedPush(_Message):
    kind: Literal[MessageKind.PERMISSION_REQUESTED] = MessageKind.PERMISSION_REQUESTED
    session_id: Id
    request_id: Id
    tool_name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    summary: Text
    """What is asked, whole: a command of any real length (the runtime shortens one beyond
    100,000 characters, saying so); the prompt scrolls."""


class ResumeStartedPush(_Message):
    kind: Literal[MessageKind.RESUME_STARTED] = MessageKind.RESUME_STARTED
    session_id: Id
    run_id: Id
    turn_id: Id
    automatic: bool = False
    """Automatic resume at start continued it (the window announces it until seen)."""


class ChangedPath(WireModel):
    """One file that differs from the boundary checkpoint (``workspace_drift``)."""

    path: Annotated[str, StringConstraints(min_length=1, max_length=4096)]
    change: Literal["added", "modified", "deleted"]


class ResumeDiagnostic(WireModel):
    """One detail behind a park: a Phase 0 diagnostic or a detailed planner code, with the
    affected operation when there is one. ``message`` is a redacted English explanation for the
    "Copy diagnostics" text; the banner's own sentence comes from the code. A
    ``workspace_drift`` carries the changed files (the first 50) and how many more there are."""

    code: Code
    message: Explanation = ""
    tool_call_id: Id | None = None
    tool_name: Annotated[str, StringConstraints(max_length=200)] | None = None
    changed_paths: Annotated[tuple[ChangedPath, ...], Field(max_length=50)] = ()
    more_changed_paths: Annotated[int, Field(ge=0, le=10**9)] = 0
    event_id: Id | None = None
    """The saved event a damaged record or an unreplayable history entry is at."""
    sub_code: Code | None = None
    """The code the diagnostic stands for beside its own, as a field (never read out of
    ``message``): the ledger check a damaged record failed, or the resolver's reason for the
    call (``reconcile_diverged``...)."""
    path: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None
    """The file or folder a diagnostic names in its ``path`` field, when it has one: where an
    offered restored copy would be made (``workspace_restore_place``), a copy a resume left
    (``workspace_restore_abandoned``)."""
    clone: bool | None = None
    """Whether the restored copy a ``workspace_restore_place`` note offers would be a clone of
    the folder's Git repository (its ``clone`` field; None from an older park)."""
    subject: Annotated[str, StringConstraints(min_length=1, max_length=4400)] | None = None
    """The call a diagnostic is about as people know it (``the command "make"``), from its
    ``subject`` field: the call after which the snapshot went stale
    (``workspace_checkpoint_stale``)."""


CHANGED_FILES_CODES: Final = frozenset({"workspace_drift", "workspace_checkpoint_stale"})
"""The park diagnostics whose changed files the banner lists above its ways forward."""


def changed_files_shown(diagnostics: Iterable[ResumeDiagnostic]) -> tuple[ChangedFilesShown, ...]:
    """The changed-files lists of a park's diagnostics (``CHANGED_FILES_CODES``), as the banner
    shows them and ``sessions.resumeLatest``'s ``files_shown`` carries them: the renderer and
    the main process derive them alike, so equal lists mean the same files were listed."""
    return tuple(
        ChangedFilesShown(
            code=d.code, changed_paths=d.changed_paths, more_changed_paths=d.more_changed_paths
        )
        for d in diagnostics
        if d.code in CHANGED_FILES_CODES
    )[:8]


class ResumeParkedPush(_Message):
    kind: Literal[MessageKind.RESUME_PARKED] = MessageKind.RESUME_PARKED
    session_id: Id
    rejection_reasons: Annotated[tuple[Code, ...], Field(min_length=1, max_length=64)]
    diagnostics: Annotated[tuple[ResumeDiagnostic, ...], Field(max_length=500)] = ()
    automatic: bool = False
    """Automatic resume at start parked it (the window announces it until seen)."""
    workspace_options: Annotated[tuple[Code, ...], Field(max_length=4)] = ()
    """The user's ways forward when only the files stand in the way: ``isolated_restore``,
    ``rebaseline``."""


class ResumeFailedPush(_Message):
    """Resume could not be attempted (host draining, session missing, transport trouble); not a
    park. The user may retry."""

    kind: Literal[MessageKind.RESUME_FAILED] = MessageKind.RESUME_FAILED
    session_id: Id
    code: Code
    message: Explanation = ""
    automatic: bool = False


MAX_SETTLED_PATHS: Final = 5_000


class SettledFolder(WireModel):
    """What the answer did to the folder's starting point (``maka settle --json``'s
    ``workspace``): a baseline recorded or not, the paths changed since the last snapshot (the
    first ``MAX_SETTLED_PATHS``; ``changed_count`` counts them all; None: no snapshot to compare
    with), or why the folder could not be captured."""

    baseline_recorded: bool
    changed_paths: Annotated[tuple[FsPath, ...], Field(max_length=MAX_SETTLED_PATHS)] | None = None
    changed_count: Annotated[int, Field(ge=0)] | None = None
    problem: Explanation | None = None


class Settlement(WireModel):
    """What was recorded for ``tools.settle``, as ``maka settle --json`` prints it."""

    operation_id: Id
    tool_call_id: Id
    tool_name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    run_id: Id
    attestation: AttestationChoice
    attested_at: Annotated[int, Field(ge=0)]
    created: bool
    """False: the same answer was already recorded."""
    note: Annotated[str, StringConstraints(max_length=MAX_NOTE_CHARS)] | None = None
    workspace: SettledFolder | None = None


class ToolSettledPush(_Message):
    """The answer to ``tools.settle``: ``recorded`` (the card is re-sent as a transcript item)
    or refused with ``code``; ``resume_available``: Safe resume would now continue (nothing else
    parks), so the banner offers it again. ``settlement`` and ``resume_reasons`` (why Safe resume
    would still not continue) say the rest a terminal prints."""

    kind: Literal[MessageKind.TOOL_SETTLED] = MessageKind.TOOL_SETTLED
    session_id: Id
    tool_call_id: Id
    recorded: bool
    code: Code | None = None
    message: Explanation = ""
    resume_available: bool = False
    settlement: Settlement | None = None
    resume_reasons: Annotated[tuple[Code, ...], Field(max_length=64)] = ()


class ProcessesStoppedPush(_Message):
    """Commands from before a restart ended (stopped by the user, or by themselves):
    ``still_running`` counts those that could not be stopped; ``resume_available``: Safe resume
    would now continue (a park that still holds arrives as ``resume.parked``)."""

    kind: Literal[MessageKind.PROCESSES_STOPPED] = MessageKind.PROCESSES_STOPPED
    session_id: Id
    stopped: Annotated[int, Field(ge=0, le=10_000)] = 0
    still_running: Annotated[int, Field(ge=0, le=10_000)] = 0
    resume_available: bool = False


class TimelineRunHead(WireModel):
    """One run of a timeline, in lineage order (``depth`` 0 for a first run, +1 for each
    continuation); its rows arrive on request."""

    run_id: Id
    depth: Annotated[int, Field(ge=0, le=10_000)]
    status: Code
    failure_class: Code | None = None
    parent_run_id: Id | None = None
    source_high_water: Annotated[int, Field(ge=0)] | None = None
    row_count: Annotated[int, Field(ge=0)]
    event_count: Annotated[int, Field(ge=0)]


class TimelinePin(WireModel):
    """A planner reason: pinned to the row of ``run_id`` that starts at ``seq``, or (both
    None) in the lane of reasons from outside the record."""

    code: Code
    message: Explanation = ""
    event_id: Id | None = None
    tool_call_id: Id | None = None
    tool_name: Short | None = None
    run_id: Id | None = None
    seq: Annotated[int, Field(ge=0)] | None = None


class TimelinePlan(WireModel):
    disposition: Code
    rejection_reasons: Annotated[tuple[Code, ...], Field(max_length=64)] = ()
    pins: Annotated[tuple[TimelinePin, ...], Field(max_length=500)] = ()
    boundary_run_id: Id | None = None
    boundary_high_water: Annotated[int, Field(ge=0)] | None = None


class TimelineOpenedPush(_Message):
    kind: Literal[MessageKind.TIMELINE_OPENED] = MessageKind.TIMELINE_OPENED
    session_id: Id
    runs: Annotated[tuple[TimelineRunHead, ...], Field(max_length=MAX_TIMELINE_RUNS)]
    plan: TimelinePlan | None = None
    """None: the latest run was not interrupted, there is nothing to resume."""


class TimelineEntryItem(WireModel):
    """One committed event inside a row: its place on the ``event_seq`` axis and its lane."""

    seq: Annotated[int, Field(ge=0)]
    event_id: Id
    kind: Code
    lane: Code
    status: Code
    ts: Annotated[int, Field(ge=0)]
    summary: Short
    replayed: bool = False


class TimelineRowItem(WireModel):
    """A row: one event, or a tool operation's facts (``kind`` ``tool``)."""

    seq: Annotated[int, Field(ge=0)]
    kind: Code
    status: Code
    summary: Short
    tool_name: Short | None = None
    tool_call_id: Id | None = None
    entries: Annotated[
        tuple[TimelineEntryItem, ...], Field(min_length=1, max_length=MAX_TIMELINE_ROW_EVENTS)
    ]
    more_entries: Annotated[int, Field(ge=0)] = 0


class TimelinePagePush(_Message):
    """Rows of one run; ``start`` and ``total`` count the rows ``filters`` shows when given."""

    kind: Literal[MessageKind.TIMELINE_PAGE] = MessageKind.TIMELINE_PAGE
    session_id: Id
    run_id: Id
    start: Annotated[int, Field(ge=0)]
    total: Annotated[int, Field(ge=0)]
    rows: Annotated[tuple[TimelineRowItem, ...], Field(max_length=MAX_TIMELINE_PAGE)]
    filters: TimelineRowFilter | None = None


class TimelineLocatedPush(_Message):
    """The row's place among the rows ``filters`` shows; ``position`` None: it shows none."""

    kind: Literal[MessageKind.TIMELINE_LOCATED] = MessageKind.TIMELINE_LOCATED
    session_id: Id
    run_id: Id
    seq: Annotated[int, Field(ge=0)]
    position: Annotated[int, Field(ge=0)] | None = None
    filters: TimelineRowFilter | None = None


class TimelineEventShownPush(_Message):
    kind: Literal[MessageKind.TIMELINE_EVENT_SHOWN] = MessageKind.TIMELINE_EVENT_SHOWN
    session_id: Id
    run_id: Id
    event_id: Id
    canonical_json: Annotated[str, StringConstraints(max_length=MAX_EVENT_JSON_CHARS)]
    truncated: bool = False


class BranchOptionItem(WireModel):
    """One point a session can be branched from (``BranchOption``): ``kind`` is
    ``user_message``, ``tool_result`` or ``run_ending``; ``tool_call_id`` names a tool result's
    call (its transcript card); ``branchable`` False: a call before it has no settled outcome."""

    event_id: Id
    run_id: Id
    seq: Annotated[int, Field(ge=0)]
    kind: Code
    ts: Annotated[int, Field(ge=0)]
    label: Short
    snapshot_bound: bool
    snapshot_kept: bool
    branchable: bool = True
    settled_at: Id | None = None
    """Not branchable: the later result that gives the open calls an outcome (an answer, a
    recovered result), where a branch can start instead."""
    trimmed: bool = False
    """The kept snapshot was removed by retention and waits for the next prune (``maka
    checkpoints`` says "removed by retention"); a branch made from it keeps it."""
    damaged_aside: bool = False
    """The bound snapshot is not kept whole: a check moved its damaged objects aside (a capture
    of a folder still holding those bytes writes them again)."""
    tool_call_id: Id | None = None
    checkpoint_ref: Short | None = None
    """The bound snapshot's ref (``maka branch --json``'s ``checkpointRef``)."""
    tool_args: Short | None = None
    """A tool result's call in short, as its transcript card shows it (the path written, the
    command run), so one of many calls of the same tool can be told apart."""


class BranchOptionsListedPush(_Message):
    """The answer to ``branch.options``, oldest first; ``default_folder``: where the copy goes
    unless the user picks a folder; ``snapshots_on`` False: no copy can be made at all."""

    kind: Literal[MessageKind.BRANCH_OPTIONS_LISTED] = MessageKind.BRANCH_OPTIONS_LISTED
    session_id: Id
    title: Short = ""
    cwd: FsPath
    default_folder: FsPath
    snapshots_on: bool = True
    options: Annotated[tuple[BranchOptionItem, ...], Field(max_length=MAX_BRANCH_OPTIONS)]
    omitted_earlier: Annotated[int, Field(ge=0)] = 0
    # The session's runs not ended (running): their points are listed once they end.
    runs_running: Annotated[tuple[Id, ...], Field(max_length=64)] = ()
    # The session's folder is not there (deleted, moved): a copy is the point's files alone,
    # never a clone of a repository that is gone.
    folder_gone: bool = False


class BranchMadePush(_Message):
    """``branch.create`` made the new session ``new_session_id`` in ``cwd`` (its summary was
    broadcast as ``session.updated`` first)."""

    kind: Literal[MessageKind.BRANCH_MADE] = MessageKind.BRANCH_MADE
    session_id: Id
    event_id: Id
    new_session_id: Id
    cwd: FsPath
    title: Short = ""
    current_files: bool = False
    source_cwd: FsPath | None = None
    record: Annotated[str, StringConstraints(max_length=MAX_PLAN_DOCUMENT_CHARS)] = ""
    """The branch's record as ``maka branch --json`` prints it (``branchedFrom``), JSON text."""


class BranchRefusedPush(_Message):
    """``branch.create`` (or ``branch.options``) made nothing: ``code`` is a stable code
    (``app/code_text.py`` has its sentence), ``message`` the detail."""

    kind: Literal[MessageKind.BRANCH_REFUSED] = MessageKind.BRANCH_REFUSED
    session_id: Id
    event_id: Id | None = None
    code: Code
    message: Explanation = ""


class HostStatePush(_Message):
    kind: Literal[MessageKind.HOST_STATE] = MessageKind.HOST_STATE
    state: HostState
    detail: Short = ""
    """Progress of work after the window shows (e.g. "Checking 3 of 10 interrupted runs")."""


class SettingsCurrentPush(_Message):
    kind: Literal[MessageKind.SETTINGS_CURRENT] = MessageKind.SETTINGS_CURRENT
    provider: ProviderChoice
    openai_base_url: Annotated[str, StringConstraints(max_length=2048)] = ""
    openai_model: Annotated[str, StringConstraints(max_length=200)] = ""
    api_key_set: bool = False
    max_steps: StepLimit = DEFAULT_MAX_STEPS
    safe_resume: bool = False
    auto_resume: bool = True
    resume_from_environment: bool = False
    """``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME`` is set: it decides, whatever the two settings say."""
    safe_resume_enabled: bool | None = None
    """Whether Safe resume is on now (environment or setting); ``None`` = not said."""
    provider_from_environment: tuple[EnvName, ...] = ()
    """The provider variables set in the environment Maka was started from (``MAKA_PROVIDER``,
    ...): they decide the provider, whatever ``provider`` and the endpoint fields say."""
    provider_tuning: ProviderTuning = ProviderTuning()
    database: DatabaseChoice = "sqlite"
    """The Database setting (``"sqlite"``: the data folder's; ``"postgresql"``: a server)."""
    database_url: DatabaseUrl = ""
    """The stored PostgreSQL URL, its password masked (``****``); the password is never sent."""
    database_from_environment: DatabaseUrl = ""
    """``MAKA_DATABASE_URL`` (masked) when set: it decides, whatever the setting says."""
    database_in_use: DatabaseUrl = ""
    """The PostgreSQL URL (masked) the main process opened at its start; "" = SQLite."""
    postgres_driver: bool = False
    """Whether the PostgreSQL driver (``pip install 'maka[postgres]'``) is installed."""


class DatabaseTestedPush(_Message):
    """What trying the server found: ``ok`` with the server's version and the ledger's schema
    version there (``None``: no Maka ledger yet, created at the first start), or the coded
    failure (``database_url_invalid``, ``postgres_driver_missing``, ``store_io_failed`` for a
    server that cannot be reached or refuses the login, ``schema_newer_than_program``)."""

    kind: Literal[MessageKind.DATABASE_TESTED] = MessageKind.DATABASE_TESTED
    ok: bool
    database_url: DatabaseUrl = ""
    """The URL tried, its password masked."""
    server_version: Short = ""
    schema_version: int | None = None
    program_schema_version: int = 0
    code: Code | None = None
    message: Explanation = ""


class ErrorPush(_Message):
    kind: Literal[MessageKind.ERROR] = MessageKind.ERROR
    code: Code
    message: Explanation = ""


class TurnStartedPush(_Message):
    """The host took a terminal's ``turns.run``: the session it runs in, what it told the
    command to say first (``notes``: earlier calls whose outcome is unknown, as the model is
    told)."""

    kind: Literal[MessageKind.TURN_STARTED] = MessageKind.TURN_STARTED
    session_id: Id
    cwd: FsPath
    provider_label: Short
    notes: Annotated[tuple[Summary, ...], Field(max_length=1000)] = ()
    checkpoints_off: bool | None = None
    """The host runs its turns with workspace checkpoints turned off
    (``MAKA_WORKSPACE_CHECKPOINTS=off`` where it started); None: not said. The command notes a
    setting of its own that differs, which this turn does not follow."""


class TurnOutputPush(_Message):
    """The driving terminal's lines of its turn, as ``maka run`` prints them without a host
    (rendered by the host from committed events with the same code)."""

    kind: Literal[MessageKind.TURN_OUTPUT] = MessageKind.TURN_OUTPUT
    session_id: Id
    text: Text
    stream: Literal["stdout", "stderr"] = "stdout"


class TurnEndedPush(_Message):
    """A terminal's turn ended: its status and, for a completed one, why it stopped."""

    kind: Literal[MessageKind.TURN_ENDED] = MessageKind.TURN_ENDED
    session_id: Id
    run_id: Id
    status: RunStatusValue
    failure_class: Code | None = None
    stop_reason: Code | None = None
    message: Text | None = None


class ResumeEndedPush(_Message):
    """A terminal's ``maka resume`` ended: the exit code the command exits with (0 the
    continuation completed, 1 it ran and did not, 3 parked or refused)."""

    kind: Literal[MessageKind.RESUME_ENDED] = MessageKind.RESUME_ENDED
    session_id: Id
    exit_code: Annotated[int, Field(ge=0, le=3)]


class SessionDriverPush(_Message):
    """Who drives ``session_id``'s running work now (``driver``, in words such as "a terminal
    (maka run, pid 12)" or "the desktop window"; None: nothing runs). The answer to
    ``sessions.watch``, and told to a viewing terminal whenever a turn of the session starts."""

    kind: Literal[MessageKind.SESSION_DRIVER] = MessageKind.SESSION_DRIVER
    session_id: Id
    driver: Short | None = None


class PermissionClosedPush(_Message):
    """A permission question was answered by one client: every other client's prompt of it
    closes, saying where it was answered (``answered_in``: "the desktop window", "the terminal
    (maka tui, pid 12)"). The decision itself is the ledger's ``permissionDecision``."""

    kind: Literal[MessageKind.PERMISSION_CLOSED] = MessageKind.PERMISSION_CLOSED
    session_id: Id
    request_id: Id
    decision: PermissionDecision
    answered_in: Short


class TerminalTextPush(_Message):
    """Lines for a terminal's ``terminal.command`` (as the TUI prints them alone); ``done`` on
    the last. A branch made names the new session (``branched_to``) and its folder."""

    kind: Literal[MessageKind.TERMINAL_TEXT] = MessageKind.TERMINAL_TEXT
    session_id: Id
    text: Text = ""
    done: bool = True
    branched_to: Id | None = None
    branched_cwd: FsPath | None = None


class WindowShowPush(_Message):
    """Bring the renderer's window to front (a second ``maka`` launch sent ``window.activate``)."""

    kind: Literal[MessageKind.WINDOW_SHOW] = MessageKind.WINDOW_SHOW


Request = (
    HelloRequest
    | SessionsListRequest
    | SessionsCreateRequest
    | SessionsOpenRequest
    | TurnsSendRequest
    | TurnsCancelRequest
    | PermissionsAnswerRequest
    | ResumeLatestRequest
    | ToolsSettleRequest
    | SettingsGetRequest
    | SettingsUpdateRequest
    | SettingsTestDatabaseRequest
    | WindowActivateRequest
    | SessionsRelocateRequest
    | SessionsRenameRequest
    | SessionsRemoveRequest
    | SessionsExportRequest
    | ProcessesStopRequest
    | TimelineOpenRequest
    | TimelineRowsRequest
    | TimelineEventRequest
    | SessionsOverviewRequest
    | SessionsPlanRequest
    | TimelineLocateRequest
    | TurnsRunRequest
    | TurnsResumeRequest
    | BranchOptionsRequest
    | BranchCreateRequest
    | SessionsWatchRequest
    | TerminalCommandRequest
)
Push = (
    HelloOkPush
    | HelloRejectedPush
    | SessionsListedPush
    | SessionUpdatedPush
    | SessionOpenedPush
    | TranscriptItemPush
    | RunStatusPush
    | PermissionRequestedPush
    | ResumeStartedPush
    | ResumeParkedPush
    | ResumeFailedPush
    | ToolSettledPush
    | HostStatePush
    | SettingsCurrentPush
    | DatabaseTestedPush
    | ErrorPush
    | WindowShowPush
    | SessionRemovedPush
    | SessionExportedPush
    | ProcessesStoppedPush
    | TimelineOpenedPush
    | TimelinePagePush
    | TimelineEventShownPush
    | SessionsOverviewedPush
    | SessionPlannedPush
    | TimelineLocatedPush
    | TurnStartedPush
    | TurnOutputPush
    | TurnEndedPush
    | ResumeEndedPush
    | BranchOptionsListedPush
    | BranchMadePush
    | BranchRefusedPush
    | SessionDriverPush
    | PermissionClosedPush
    | TerminalTextPush
)
Message = Request | Push

REQUEST_KINDS: Final = frozenset(
    {
        MessageKind.HELLO,
        MessageKind.SESSIONS_LIST,
        MessageKind.SESSIONS_CREATE,
        MessageKind.SESSIONS_OPEN,
        MessageKind.TURNS_SEND,
        MessageKind.TURNS_CANCEL,
        MessageKind.PERMISSIONS_ANSWER,
        MessageKind.SESSIONS_RESUME_LATEST,
        MessageKind.TOOLS_SETTLE,
        MessageKind.SETTINGS_GET,
        MessageKind.SETTINGS_UPDATE,
        MessageKind.SETTINGS_TEST_DATABASE,
        MessageKind.WINDOW_ACTIVATE,
        MessageKind.SESSIONS_RELOCATE,
        MessageKind.SESSIONS_RENAME,
        MessageKind.SESSIONS_REMOVE,
        MessageKind.SESSIONS_EXPORT,
        MessageKind.PROCESSES_STOP,
        MessageKind.TIMELINE_OPEN,
        MessageKind.TIMELINE_ROWS,
        MessageKind.TIMELINE_EVENT,
        MessageKind.SESSIONS_OVERVIEW,
        MessageKind.SESSIONS_PLAN,
        MessageKind.TIMELINE_LOCATE,
        MessageKind.TURNS_RUN,
        MessageKind.TURNS_RESUME,
        MessageKind.BRANCH_OPTIONS,
        MessageKind.BRANCH_CREATE,
        MessageKind.SESSIONS_WATCH,
        MessageKind.TERMINAL_COMMAND,
    }
)
TERMINAL_REQUEST_KINDS: Final = frozenset(
    {
        MessageKind.HELLO,
        MessageKind.SESSIONS_OVERVIEW,
        MessageKind.SESSIONS_PLAN,
        # ``maka sessions relocate / rename / remove`` beside a host (the same checks as alone)
        MessageKind.SESSIONS_RELOCATE,
        MessageKind.SESSIONS_RENAME,
        MessageKind.SESSIONS_REMOVE,
        MessageKind.SETTINGS_GET,
        MessageKind.TOOLS_SETTLE,
        MessageKind.TURNS_RUN,
        MessageKind.TURNS_RESUME,
        MessageKind.TURNS_CANCEL,
        MessageKind.PERMISSIONS_ANSWER,
        MessageKind.SESSIONS_WATCH,
        MessageKind.TERMINAL_COMMAND,
        # ``maka branch`` beside a host: the window's own requests, with the same checks
        MessageKind.BRANCH_OPTIONS,
        MessageKind.BRANCH_CREATE,
    }
)
"""What a terminal client may ask; any other request closes its connection (a terminal is never
trusted more than the window, and is given only what its commands use)."""
TERMINAL_ONLY_KINDS: Final = frozenset(
    {
        MessageKind.TURNS_RUN,
        MessageKind.TURNS_RESUME,
        MessageKind.SESSIONS_WATCH,
        MessageKind.TERMINAL_COMMAND,
    }
)
"""A terminal's own turns (its permission mode, its lines): a window sends ``turns.send`` and
``sessions.resumeLatest`` instead, and one that sends these is closed."""
PUSH_KINDS: Final = frozenset(set(MessageKind) - REQUEST_KINDS)

_MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(
    Annotated[Message, Field(discriminator="kind")]
)


def parse_frame_payload(payload: bytes, *, accept: frozenset[MessageKind] | None = None) -> Message:
    """Decode one frame body into its message, strictly (camelCase only, no type coercion).

    ``accept`` limits the kinds this receiver takes (the main process passes ``REQUEST_KINDS``,
    the renderer ``PUSH_KINDS``); anything else raises ``kind_not_accepted``. Every failure
    raises :class:`BridgeProtocolError`; the caller closes the connection.
    """
    if len(payload) > MAX_FRAME_BYTES:
        raise BridgeProtocolError(
            BridgeErrorCode.FRAME_TOO_LARGE, f"frame of {len(payload)} bytes is too large"
        )
    try:
        message = _MESSAGE_ADAPTER.validate_json(payload, strict=True, by_name=False)
    except ValidationError as exc:
        raise _classify(exc) from None
    if accept is not None and message.kind not in accept:
        raise BridgeProtocolError(
            BridgeErrorCode.KIND_NOT_ACCEPTED, f"{message.kind!s} is not accepted here"
        )
    return message


def _classify(exc: ValidationError) -> BridgeProtocolError:
    types = {error["type"] for error in exc.errors()}
    if "json_invalid" in types or "dict_type" in types or "model_type" in types:
        return BridgeProtocolError(
            BridgeErrorCode.FRAME_MALFORMED, "frame is not a UTF-8 JSON object"
        )
    if types & {"union_tag_invalid", "union_tag_not_found"}:
        return BridgeProtocolError(BridgeErrorCode.UNKNOWN_KIND, "missing or unknown kind")
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"][1:]) or "message"
    return BridgeProtocolError(
        BridgeErrorCode.MESSAGE_INVALID, f"{first['loc'][0]}: {where}: {first['type']}"
    )


def encode_frame(message: Message) -> bytes:
    """One frame: 4-byte big-endian length, then the message's camelCase UTF-8 JSON.

    Raises ``frame_too_large`` rather than sending what the peer would refuse.
    """
    body = message.model_dump_json(by_alias=True).encode("utf-8")
    if len(body) > MAX_FRAME_BYTES:
        raise BridgeProtocolError(
            BridgeErrorCode.FRAME_TOO_LARGE, f"frame of {len(body)} bytes is too large"
        )
    return FRAME_HEADER.pack(len(body)) + body


class FrameReader:
    """Incremental decoder for one connection's byte stream.

    Copes with frames split across reads and several frames in one read. A declared length over
    ``MAX_FRAME_BYTES`` raises as soon as the header arrives (nothing is buffered for it), and
    after any error the reader refuses further input: the stream has lost its framing and the
    connection must close. Messages decoded earlier in the same ``feed`` call are dropped with
    the error, so nothing from a poisoned read reaches the receiver.
    """

    def __init__(self, *, accept: frozenset[MessageKind] | None = None) -> None:
        self._buffer = bytearray()
        self._accept = accept
        self._failed: BridgeProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Message]:
        if self._failed is not None:
            raise self._failed
        self._buffer += data
        messages: list[Message] = []
        try:
            while len(self._buffer) >= FRAME_HEADER.size:
                (length,) = FRAME_HEADER.unpack_from(self._buffer, 0)
                if length > MAX_FRAME_BYTES:
                    raise BridgeProtocolError(
                        BridgeErrorCode.FRAME_TOO_LARGE,
                        f"declared frame of {length} bytes is too large",
                    )
                end = FRAME_HEADER.size + length
                if len(self._buffer) < end:
                    break
                payload = bytes(self._buffer[FRAME_HEADER.size : end])
                del self._buffer[:end]
                messages.append(parse_frame_payload(payload, accept=self._accept))
        except BridgeProtocolError as exc:
            self._failed = exc
            self._buffer.clear()
            raise
        return messages
