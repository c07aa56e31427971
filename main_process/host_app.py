"""The main process, composed: startup order, shutdown order, renderer supervision.

Startup (docs/design/desktop.md, docs/design/recovery.md section 3):

1. data directory -> single-instance lock (a second launch asks the running instance to show its
   window and exits 0);
2. the IPC server listens and the renderer starts with a one-time token, so the window appears
   while the store opens; a renderer may complete its handshake (``hello.ok`` says
   ``recovering``), but every request it sends waits in a queue;
3. on a worker thread: open the store (refusals below), then startup recovery;
4. ready: queued requests are served, ``host.state ready`` is pushed, and with the flag on the
   interrupted sessions are auto-resumed one after another (progress in ``host.state``). A
   session whose auto-resume parked or failed is reported to every renderer, including one that
   connects afterwards (``RequestRouter.send_standing_outcomes``).

So no request can touch a session before recovery repaired it, and the window never waits for a
store with thousands of sessions.

Shutdown (window closed, SIGTERM, SIGINT, SIGHUP, failed start): stop admitting work -> cancel
and drain running turns (a cancelled turn commits its ``cancelled`` terminal event; a startup
recovery in progress is waited for, never torn) -> stop background shells -> tell renderers the
host is closed, close the IPC server and stop the renderer -> close the store -> release the
lock. ``close()`` runs that sequence once; later calls do nothing.

Refusals (``schema_newer_than_program``, ``store_corrupt``, ``store_locked``, a failed recovery):
nothing has been modified; the renderer is closed and ``refusal_screen`` prints the code and shows
a dialog when a display is available; the process exits 1.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from app.bridge_contract import (
    HelloOkPush,
    HostKind,
    HostStatePush,
    SessionRemovedPush,
    SessionUpdatedPush,
    WindowShowPush,
)
from app.bridge_contract import HostState as WireHostState
from app.host.auto_resume import select_auto_resume
from app.host.host_client import held_elsewhere, running_host, running_host_kind
from app.host.host_services import (
    ElsewhereChanges,
    HostServices,
    HostServicesFactory,
    InterruptedRun,
    RecoveryReport,
    ResumeFailed,
    ResumeOutcome,
    ResumeParked,
    ResumeStarted,
)
from app.host.ipc_endpoint import (
    EndpointError,
    find_endpoint,
    prepare_endpoint,
    publish_terminal_token,
    release_endpoint,
)
from main_process.host_lifecycle import HostLifecycle, HostState
from main_process.instance_activation import request_activation
from main_process.ipc_server import IpcListenError, IpcServer
from main_process.refusal_screen import show_refusal
from main_process.renderer_launcher import (
    ENV_RESTART_ARGV,
    RendererLauncher,
    window_restart_argv,
)
from main_process.request_router import RequestRouter
from main_process.signal_bridge import SignalBridge
from main_process.turn_workers import JobResult, TurnWorkers
from runtime.base.cancel_token import HOST_STOPPED
from runtime.ledger.coded_error import CodedError
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.command_words import maka_command
from runtime.ledger.ledger_errors import LedgerError
from storage.instance_lock import InstanceLock, LockOutcome
from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.sqlite_connection import DATABASE_NAME
from storage.ledger.store_creation import os_refusal
from storage.ledger.store_open import file_version
from storage.ledger.store_verification import observing_whole_file_checks
from storage.private_files import ensure_data_dir

_log = logging.getLogger("maka.main")

EXIT_OK = 0
EXIT_ERROR = 1

STARTUP_JOB = "startup-recovery"
TAKEOVER_JOB = "session-takeover"
_TAKEOVER_RESUME_TRIES = 3
"""A taken-over session's automatic resume that failed (not parked) is tried again on the next
sweeps, this many times."""

LISTENING_LINE = "MAKA_MAIN_LISTENING"
"""Test-only (``announce_endpoint``): printed once the window's connection listens (the store
may still be opening); ``READY_LINE`` follows once the store is open and recovered, never when
the host refuses to start."""
READY_LINE = "MAKA_MAIN_READY"
# Requests a renderer may send before recovery finished; more is a misbehaving peer.
_MAX_EARLY_REQUESTS = 256
# A renderer that crashes this often within the window is not restarted again.
_RESPAWN_LIMIT = 3
_RESPAWN_WINDOW_S = 60.0
# After a renderer crash, wait before respawning: a SIGTERM or logout that killed the renderer
# first will have reached the main process by then.
_RESPAWN_DELAY_MS = 300
_STARTUP_WAIT_S = 600.0


@dataclass(frozen=True, slots=True)
class HostConfig:
    data_dir: Path
    safe_resume_enabled: bool
    launch_renderer: bool = True
    announce_endpoint: bool = False
    """Test-only (with ``MAKA_NO_RENDERER=1``): print the socket name and token on stdout so a
    protocol test can play the renderer."""
    drain_timeout_s: float = 15.0
    auto_resume_limit: int = 3
    host_kind: HostKind = HostKind.DESKTOP
    """``headless``: ``maka host``, a host without a window of its own (none is started with it,
    a data folder owned by another process is refused with ``store_locked``); a second launch
    (``maka gui``) makes it start one, and closing that window leaves the host running."""
    no_window: str | None = None
    """Why this host cannot open a window (``maka host`` with no display), said in its hello;
    None: it can."""


class StartupRefused(CodedError):
    """Startup stopped before the host became ready; nothing was modified."""

    def __init__(self, code: StrEnum, message: str) -> None:
        super().__init__(code, message, text=f"{code}: {message}")


class HostApp(QObject):
    """Owns every main-process part. ``start()``, then the Qt event loop; ``close()`` ends it."""

    _check_progressed = Signal(float)
    """The whole-file check of the database (a copy, a restored backup), from the start-up
    worker: the share of the file read (queued to the event loop)."""

    def __init__(
        self,
        config: HostConfig,
        services_factory: HostServicesFactory,
        on_closed: Callable[[int], None],
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        """``on_closed(exit_code)`` runs once, as the last step of shutdown (the composition
        root passes ``QCoreApplication.exit``); ``on_ready()`` once the store is open and
        requests are served (``maka host`` says then that it serves the folder)."""
        super().__init__()
        self._data_dir = config.data_dir
        self._config = config
        self._factory = services_factory
        self._on_closed = on_closed
        self._on_ready = on_ready
        self.lifecycle = HostLifecycle()
        self._lock = InstanceLock(self._data_dir)
        self._signals = SignalBridge(self)
        self._signals.termination_requested.connect(self._on_signal)
        self._workers = TurnWorkers(self)
        self._launcher = RendererLauncher(self)
        self._launcher.exited.connect(self._on_renderer_exited)
        self._services_lock = threading.Lock()
        self._services: HostServices | None = None
        self._startup_started = False
        self._startup_done = threading.Event()
        self._server: IpcServer | None = None
        self._router: RequestRouter | None = None
        self._early: list[tuple[int, object]] = []
        self._opening_detail = ""
        self._check_progressed.connect(self._on_check_progress)
        self._token = ""
        self._crashes: list[float] = []
        self._exit_code = EXIT_OK
        self._recovery = RecoveryReport()
        self._auto_queue: list[str] = []
        self._auto_total = 0
        self._auto_current: str | None = None
        self._takeover_timer: QTimer | None = None
        self._sweeping = False
        self._resume_again: list[str] = []
        self._resume_tries: dict[str, int] = {}

    @property
    def exit_code(self) -> int:
        return self._exit_code

    @property
    def recovery(self) -> RecoveryReport:
        return self._recovery

    # --------------------------------------------------------------------------- startup

    def start(self) -> int | None:
        """Steps 1-2 of the startup order, then step 3 on a worker. Returns an exit code when the
        process should end at once (second instance, unusable data directory), else None: run
        the event loop."""
        try:
            ensure_data_dir(self._data_dir)
        except OSError as error:
            refusal = os_refusal(error, f"creating the data folder {self._data_dir}")
            return self._refuse_early(refusal.code, refusal.message)
        lock = self._lock.acquire()
        if (
            lock.outcome is LockOutcome.HELD_ELSEWHERE
            and self._config.host_kind is HostKind.HEADLESS
        ):
            return self._refuse_early(
                "store_locked", held_elsewhere(self._data_dir, lock.holder_pid)
            )
        if lock.outcome is LockOutcome.HELD_ELSEWHERE:
            return self._activate_running_instance(lock.holder_pid)
        if lock.outcome is LockOutcome.UNAVAILABLE:
            if lock.error is not None:  # a full disk, a read-only lock file or folder
                refusal = os_refusal(lock.error, f"opening the lock file {self._lock.path}")
                return self._refuse_early(refusal.code, refusal.message)
            return self._refuse_early("data_dir_unavailable", lock.detail)
        self._signals.install()
        self._token = secrets.token_urlsafe(32)
        try:
            endpoint = prepare_endpoint(self._data_dir)
            # Terminal commands attach with their own token (docs/design/hosts.md section 1).
            terminal_token = secrets.token_urlsafe(32)
            publish_terminal_token(self._data_dir, terminal_token)
            server = IpcServer(
                endpoint,
                self._token,
                self._hello,
                self,
                terminal_token=terminal_token,
                windowless=lambda: self._headless and not self._launcher.running,
            )
            server.listen()
        except (EndpointError, IpcListenError) as error:
            self._signals.uninstall()
            self._lock.release()
            # A full disk or a read-only data folder is said as such, like everywhere else.
            cause = error.__context__
            named = (
                os_refusal(cause, f"preparing the window's connection in {self._data_dir}")
                if isinstance(cause, OSError)
                else None
            )
            if named is not None and named.code is not StoreCode.STORE_IO_FAILED:
                return self._refuse_early(str(named.code), named.message)
            return self._refuse_early("ipc_unavailable", str(error))
        self._server = server
        server.request_received.connect(self._on_request)
        server.renderer_connected.connect(self._on_renderer_connected)
        server.activate_requested.connect(self._on_activate)
        self._announce(LISTENING_LINE)
        self._opening_detail = upgrade_note(self._data_dir)
        if self._config.launch_renderer:
            self._launch_renderer()
        self._startup_started = self._workers.run_turn(
            STARTUP_JOB, self._open_and_recover, lambda reason: None, self._opened
        )
        return None

    def _open_and_recover(self) -> RecoveryReport:
        """Worker thread: open the store and run startup recovery (step 3)."""
        try:
            try:
                with observing_whole_file_checks(self._check_progressed.emit):
                    services = self._factory(
                        self._data_dir, safe_resume_enabled=self._config.safe_resume_enabled
                    )
            except LedgerError as error:
                raise StartupRefused(error.code, error.message) from None
            with self._services_lock:
                self._services = services
            try:
                return services.recover_at_startup()
            except LedgerError as error:
                raise StartupRefused(error.code, error.message) from None
            except Exception as error:
                _log.exception("startup recovery failed")
                raise StartupRefused(HostCode.STARTUP_RECOVERY_FAILED, str(error)[:500]) from None
        finally:
            self._startup_done.set()

    def _on_check_progress(self, share: float) -> None:
        """Event loop: the window says how far the whole-file check is (the store opens on
        the start-up worker meanwhile; nothing is written before it passes)."""
        if self.lifecycle.state is not HostState.OPENING:
            return
        if share >= 1.0:  # passed: back to what opening says otherwise
            _log.info("whole-file check of the database passed")
            self._opening_detail = upgrade_note(self._data_dir)
        else:
            if share == 0.0:
                _log.info("whole-file check of the database started (its stamp does not match)")
            self._opening_detail = check_note(share)
        self._broadcast_state(self._opening_detail)

    def _opened(self, result: JobResult) -> None:
        """Event loop: step 4, or the refusal."""
        if self.lifecycle.state is not HostState.OPENING:
            return  # shutdown began meanwhile; close() waited for the worker and cleaned up
        if result.error is not None:
            refusal = result.error
            if not isinstance(refusal, StartupRefused):
                refusal = StartupRefused(HostCode.STARTUP_RECOVERY_FAILED, str(refusal)[:500])
            _log.info("startup refused [%s]: %s", refusal.code, refusal.message)
            self._fail_startup(refusal)
            return
        assert isinstance(result.value, RecoveryReport)
        self._recovery = result.value
        services = self._services
        assert services is not None and self._server is not None
        self._router = RequestRouter(
            self._server,
            services,
            self._workers,
            self.lifecycle,
            # The desktop's window stands for its questions (a late or restarted one shows
            # them); ``maka host`` has one only while ``maka gui`` asked it for one.
            window_coming=lambda: not self._headless or self._launcher.running,
        )
        self._router.restore_standing(self._recovery.standing)
        self.lifecycle.mark_ready()
        self._announce(READY_LINE)  # never before the store is open: a refusal is never "ready"
        if self._on_ready is not None:
            self._on_ready()
        self._broadcast_state("")
        _log.info(
            "main process ready (%d run(s) repaired, %d interrupted session(s), %d quarantined)",
            self._recovery.repaired_runs,
            len(self._recovery.interrupted),
            len(self._recovery.quarantined_sessions),
        )
        if self._recovery.repaired_runs or self._recovery.quarantined_sessions:
            self._tell(
                f"startup recovery ended {self._recovery.repaired_runs} interrupted run(s)"
                + (
                    f"; {len(self._recovery.quarantined_sessions)} session(s) quarantined "
                    f"({maka_command('doctor')} says why)"
                    if self._recovery.quarantined_sessions
                    else ""
                )
            )
        early, self._early = self._early, []
        for peer_id, message in early:
            self._router.handle(peer_id, message)
        self._begin_auto_resume()
        services.start_checkpoint_retention()
        self._start_takeover_sweeps(services)

    def _announce(self, prefix: str) -> None:
        """Test-only (``announce_endpoint``): say where to connect, once listening and again
        once ready."""
        if self._config.announce_endpoint and self._server is not None:
            print(
                f"{prefix} socket={self._server.socket_name} token={self._token} pid={os.getpid()}",
                flush=True,
            )

    def _hello(self) -> HelloOkPush:
        state = self.lifecycle.state
        wire = WireHostState.RECOVERING if state is HostState.OPENING else WireHostState(state)
        return HelloOkPush(
            host_state=wire,
            safe_resume_enabled=self._resume_flags()[0],
            host_kind=self._config.host_kind,
            host_pid=os.getpid(),
            data_dir=os.path.realpath(self._data_dir),
            no_window=self._config.no_window[:500] if self._config.no_window else None,
        )

    def _resume_flags(self) -> tuple[bool, bool]:
        """Safe resume and automatic resume now (the settings can change them while running;
        the environment variable wins), else what the host was started with."""
        flags = self._services.resume_flags() if self._services is not None else None
        if flags is None:
            return self._config.safe_resume_enabled, self._config.safe_resume_enabled
        return flags

    def _on_request(self, peer_id: int, message: object) -> None:
        if self._router is not None:
            self._router.handle(peer_id, message)
        elif self.lifecycle.state is HostState.OPENING and len(self._early) < _MAX_EARLY_REQUESTS:
            self._early.append((peer_id, message))
        else:
            _log.warning("dropping a request that arrived before the host was ready")

    def _on_renderer_connected(self, peer_id: int) -> None:
        # A renderer that starts after auto-resume parked a session (or one restarted after a
        # crash) missed that push; it is told every outcome that still stands. Before the host
        # is ready nothing has been resumed, so there is nothing to tell.
        if self._router is not None:
            self._router.send_standing_outcomes(peer_id)
        elif self._opening_detail and self._server is not None:
            # Opening takes long only when an older database is upgraded first: say so.
            self._server.send(
                peer_id, HostStatePush(state=WireHostState.RECOVERING, detail=self._opening_detail)
            )

    def _launch_renderer(self) -> None:
        assert self._server is not None
        # One token per launch: a renderer from an earlier launch can never reconnect as this one.
        self._token = secrets.token_urlsafe(32)
        self._server.set_token(self._token)
        extra: dict[str, str] = {}
        if self._headless:
            # The window's **Restart Maka** (after this host is gone) starts the desktop, not
            # another host without a window.
            extra[ENV_RESTART_ARGV] = json.dumps(window_restart_argv())
        self._launcher.launch(self._server.socket_name, self._token, extra_environment=extra)

    @property
    def _headless(self) -> bool:
        return self._config.host_kind is HostKind.HEADLESS

    def _activate_running_instance(self, holder_pid: int | None) -> int:
        # The running instance listens within milliseconds of taking the lock (before its store
        # opens), so a short retry covers its start; a CLI command holding the lock never
        # listens, and the answer is then store_locked.
        found = running_host(self._data_dir)
        running, no_window = found if found is not None else (None, None)
        if running is HostKind.HEADLESS and no_window is not None:
            return self._refuse_early(
                "display_unavailable",
                f"the running maka host (pid {holder_pid or 'unknown'}) serving "
                f"{self._data_dir} has no display to open a window on ({no_window}); it goes "
                "on serving terminals: maka tui or maka run work with the same sessions",
            )
        if request_activation(lambda: find_endpoint(self._data_dir), timeout_s=3.0):
            if running is None:
                running = running_host_kind(self._data_dir)  # it was starting: asked again
            if running is None:
                # Its socket took the request, but it answers nothing (stopped with SIGSTOP,
                # hung): no window was brought to front.
                return self._refuse_early(
                    "host_unreachable",
                    f"another maka (pid {holder_pid or 'unknown'}) owns {self._data_dir} but "
                    "does not answer (it is stopped or hung); no window was opened",
                )
            if running is HostKind.HEADLESS:
                # docs/design/hosts.md section 1: the host opens a window of its own, served as
                # the desktop serves its window; closing it leaves the host running.
                print(
                    f"maka: the running maka host (pid {holder_pid or 'unknown'}) opens a window "
                    "on this data folder; closing it leaves the host running",
                    file=sys.stderr,
                )
            else:
                print("maka: already running; brought its window to front", file=sys.stderr)
            return EXIT_OK
        return self._refuse_early(
            "store_locked",
            f"another maka (pid {holder_pid or 'unknown'}) owns {self._data_dir} "
            "and did not answer",
        )

    # --------------------------------------------------------------------------- auto-resume

    def _begin_auto_resume(self) -> None:
        selection = select_auto_resume(
            self._recovery.interrupted,
            enabled=all(self._resume_flags()),
            limit=self._config.auto_resume_limit,
        )
        for run in selection.skipped_crash_loop:
            _log.warning(
                "not auto-resuming session %s: run %s is an automatic continuation that was "
                "interrupted (crash-loop guard)",
                run.session_id,
                run.run_id,
            )
        self._auto_queue = [run.session_id for run in selection.resume]
        self._auto_total = len(self._auto_queue)
        self._next_auto_resume(None)

    def _tell(self, line: str) -> None:
        """``maka host`` has no window: what it did on its own is said on its terminal too (the
        log has it all); the desktop shows it in its window instead."""
        if self._headless:
            print(f"maka host: {line}", file=sys.stderr, flush=True)

    def _tell_outcome(self, session_id: str | None, outcome: ResumeOutcome) -> None:
        session = f"session {session_id}" if session_id else "a session"
        if isinstance(outcome, ResumeStarted):
            ended = f", ended {outcome.status}" if outcome.status else ""
            self._tell(f"{session}: resumed automatically (run {outcome.run_id}{ended})")
        elif isinstance(outcome, ResumeParked):
            reasons = ", ".join(outcome.rejection_reasons)
            plan = maka_command(f"plan {session_id or 'SESSION'}")
            self._tell(
                f"{session}: not resumed, Safe resume is parked ({reasons}); {plan} says why "
                "and what to do"
            )
        else:
            self._tell(f"{session}: not resumed ({outcome.code}: {outcome.message})")

    def _next_auto_resume(self, outcome: ResumeOutcome | None) -> None:
        if outcome is not None:
            reasons = (
                ", ".join(outcome.rejection_reasons) if isinstance(outcome, ResumeParked) else ""
            )
            _log.info("auto-resume outcome: %s %s", type(outcome).__name__, reasons)
            self._tell_outcome(self._auto_current, outcome)
        if not self._auto_queue or not self.lifecycle.admits_work or self._router is None:
            if self._auto_total:
                self._broadcast_state("")
                self._auto_total = 0
            return
        session_id = self._auto_queue.pop(0)
        self._auto_current = session_id
        done = self._auto_total - len(self._auto_queue)
        self._broadcast_state(f"Resuming interrupted session {done} of {self._auto_total}")
        self._router.start_resume(session_id, automatic=True, on_done=self._next_auto_resume)

    # --------------------------------------------------------------------------- takeover

    def _start_takeover_sweeps(self, services: HostServices) -> None:
        """PostgreSQL (docs/design/hosts.md section 2): every ttl/3, claim the sessions whose
        host stopped renewing their leases, recover them, and resume the interrupted ones when
        automatic resume is on, as startup does."""
        interval = services.takeover_interval_s()
        if interval is None:
            return
        timer = QTimer(self)
        timer.setInterval(max(int(interval * 1000), 100))
        timer.timeout.connect(self._sweep)
        timer.start()
        self._takeover_timer = timer

    def _sweep(self) -> None:
        services = self._services
        if self._sweeping or services is None or not self.lifecycle.admits_work:
            return

        def sweep() -> tuple[tuple[InterruptedRun, ...], ElsewhereChanges]:
            interrupted = services.take_over_expired()
            try:
                changed = services.elsewhere_changes()
            except Exception as error:  # the sessions taken over must still reach their resume
                _log.warning("reading the sessions other hosts run failed: %s", error)
                changed = ElsewhereChanges()
            return interrupted, changed

        self._sweeping = self._workers.run_query(TAKEOVER_JOB, sweep, self._swept)

    def _swept(self, result: JobResult) -> None:
        self._sweeping = False
        if result.error is not None:
            _log.warning("takeover sweep failed: %s", result.error)
            return
        interrupted, changed = result.value or ((), ElsewhereChanges())
        if self._router is None or not self.lifecycle.admits_work:
            return
        if self._server is not None:
            # What other processes changed, as it is now: the window shows what became of the
            # sessions they ran (the turn ended, or this host took the session over), and the
            # sessions they created, renamed, moved or removed.
            for summary in changed.updated:
                self._server.broadcast(SessionUpdatedPush(session=summary))
            for session_id in changed.removed:
                self._server.broadcast(SessionRemovedPush(session_id=session_id, elsewhere=True))
        retry, self._resume_again = self._resume_again, []
        for session_id in retry:  # failed on the store last time (a lost connection, say)
            self._auto_resume_taken(session_id)
        if not interrupted:
            return
        selection = select_auto_resume(
            interrupted, enabled=all(self._resume_flags()), limit=len(interrupted)
        )
        for run in selection.skipped_crash_loop:
            _log.warning(
                "not auto-resuming taken-over session %s: run %s is an automatic continuation "
                "that was interrupted (crash-loop guard)",
                run.session_id,
                run.run_id,
            )
        for run in selection.resume:
            self._resume_tries[run.session_id] = 0
            self._auto_resume_taken(run.session_id)

    def _auto_resume_taken(self, session_id: str) -> None:
        assert self._router is not None
        _log.info("auto-resuming taken-over session %s", session_id)
        self._router.start_resume(
            session_id, automatic=True, on_done=functools.partial(self._resumed, session_id)
        )

    def _resumed(self, session_id: str, outcome: ResumeOutcome | None) -> None:
        tries = self._resume_tries.get(session_id, 0)
        if isinstance(outcome, ResumeFailed) and tries < _TAKEOVER_RESUME_TRIES:
            # A store failure (a lost connection) is not the session's answer: the next sweep
            # tries again, a few times.
            self._resume_tries[session_id] = tries + 1
            self._resume_again.append(session_id)
        else:
            self._resume_tries.pop(session_id, None)
        reasons = ", ".join(outcome.rejection_reasons) if isinstance(outcome, ResumeParked) else ""
        if isinstance(outcome, ResumeFailed):
            reasons = f"{outcome.code}: {outcome.message}"
        _log.info(
            "taken-over session %s auto-resume outcome: %s %s",
            session_id,
            type(outcome).__name__,
            reasons,
        )
        if outcome is not None:
            self._tell_outcome(session_id, outcome)

    # --------------------------------------------------------------------------- events

    def _on_activate(self) -> None:
        shown = self._server is not None and self._server.broadcast(WindowShowPush()) > 0
        # ``maka host`` has no window of its own; a second launch (``maka gui``) asks it for one.
        windows = self._config.launch_renderer or self._headless
        if self._config.no_window is not None and not shown:
            _log.info(
                "a second launch asked for a window; none can open: %s", self._config.no_window
            )
            return
        if (
            not shown
            and windows
            and not self._launcher.running
            and self.lifecycle.state in (HostState.OPENING, HostState.READY)
        ):
            if self._headless:
                _log.info("a second launch asked for a window; starting one")
            self._launch_renderer()

    def _on_signal(self, signum: int) -> None:
        if self.lifecycle.state in (HostState.OPENING, HostState.READY):
            _log.info("signal %d: shutting down", signum)
        self.close(EXIT_OK)

    def _on_renderer_exited(self, exit_code: int, crashed: bool) -> None:
        if self.lifecycle.state in (HostState.CLOSING, HostState.CLOSED):
            return
        if self._headless:
            # The window was the host's guest: the host goes on serving (no respawn either; the
            # next ``maka gui`` asks for a window again).
            _log.info(
                "the window closed (code %s, crashed %s); the host goes on", exit_code, crashed
            )
            if self._router is not None:
                # Its connection closed first, while it still counted as coming.
                self._router.last_window_left()
            return
        if not crashed and exit_code == 0:
            _log.info("the window was closed; shutting down")
            self.close(EXIT_OK)
            return
        if self._config.launch_renderer:
            QTimer.singleShot(_RESPAWN_DELAY_MS, self._respawn_after_crash)

    def _respawn_after_crash(self) -> None:
        if self.lifecycle.state in (HostState.CLOSING, HostState.CLOSED):
            return
        now = time.monotonic()
        self._crashes = [t for t in self._crashes if now - t < _RESPAWN_WINDOW_S] + [now]
        if len(self._crashes) > _RESPAWN_LIMIT:
            _log.error("the renderer keeps crashing; shutting down")
            self.close(EXIT_ERROR)
            return
        _log.warning("the renderer crashed; starting it again")
        self._launch_renderer()

    # --------------------------------------------------------------------------- shutdown

    def close(self, exit_code: int = EXIT_OK) -> None:
        """The shutdown order of docs/design/desktop.md. Idempotent; ends with
        ``on_closed(exit_code)``."""
        if not self.lifecycle.begin_closing():
            return
        self._exit_code = exit_code
        self._early.clear()
        if self._takeover_timer is not None:
            self._takeover_timer.stop()
        self._broadcast_state("")
        self._workers.stop_admitting()
        cancelled = self._workers.cancel_all(HOST_STOPPED)  # Maka stopped them, not the user
        drained = self._workers.drain(self._config.drain_timeout_s)
        _log.info("cancelled %d turn(s); drained: %s", cancelled, drained)
        self._finish_close()

    def _refuse_early(self, code: str, message: str) -> int:
        """Before the event loop runs (nothing opened yet): stderr, and the refusal screen
        when a window could be seen (a desktop started from a menu has no terminal)."""
        show_refusal(code, message, windows_enabled=self._config.launch_renderer)
        return EXIT_ERROR

    def _fail_startup(self, refusal: StartupRefused) -> None:
        if not self.lifecycle.begin_closing():
            return
        self._exit_code = EXIT_ERROR
        self._early.clear()
        self._workers.stop_admitting()
        self._finish_close(refusal)

    def _finish_close(self, refusal: StartupRefused | None = None) -> None:
        if self._startup_started and not self._startup_done.is_set():
            # Recovery is never torn mid-way: its repairs are transactions, but closing the
            # store under it would turn a clean repair into a failed one.
            self._startup_done.wait(_STARTUP_WAIT_S)
        with self._services_lock:
            services, self._services = self._services, None
        if services is not None:
            _attempt("stop background work", services.stop_background_work)
        if self._server is not None:
            self._server.broadcast(HostStatePush(state=WireHostState.CLOSED))
            self._server.close()
            release_endpoint(self._data_dir, self._server.socket_name)
        self._launcher.stop()
        if services is not None:
            _attempt("close the store", services.close)
        self._lock.release()
        self.lifecycle.mark_closed()
        self._signals.uninstall()
        if refusal is not None:
            show_refusal(
                refusal.code, refusal.message, windows_enabled=self._config.launch_renderer
            )
        _log.info("main process closed (exit %d)", self._exit_code)
        self._on_closed(self._exit_code)

    def _broadcast_state(self, detail: str) -> None:
        if self._server is None:
            return
        state = self.lifecycle.state
        wire = WireHostState.RECOVERING if state is HostState.OPENING else WireHostState(state)
        self._server.broadcast(HostStatePush(state=wire, detail=detail[:500]))


def upgrade_note(data_dir: Path) -> str:
    """What the window says while the store opens when the database is an older version's: the
    upgrade (once) rebuilds its largest tables, seconds for a long history. Empty otherwise
    (and when the file cannot be read: opening it will say why)."""
    try:
        version = file_version(Path(data_dir) / DATABASE_NAME)
    except (LedgerError, OSError):
        return ""
    if version is None or version == 0 or version >= SCHEMA_VERSION:
        return ""
    return "Upgrading saved data from an earlier Maka (once), then checking interrupted runs…"


def check_note(share: float) -> str:
    """What the window says while the whole database file is checked before its first write
    (its verification stamp does not match: a copied or restored database, or one changed
    outside Maka)."""
    percent = int(share * 100)
    return f"Checking the whole database (copied, restored or changed outside Maka): {percent}%…"


def _attempt(what: str, step: Callable[[], None]) -> None:
    """Shutdown keeps going when one step fails: the lock must be released regardless."""
    try:
        step()
    except Exception:
        _log.exception("failed to %s during shutdown", what)
