"""The main process, composed: startup order, shutdown order, renderer supervision.

Startup (DESKTOP.md): data directory -> single-instance lock (a second launch asks the running
instance to show its window and exits 0) -> open the store (refusals below) -> startup recovery ->
IPC server -> renderer with a one-time token -> ready -> auto-resume (flag on only), which runs on
worker threads after the window shows, with progress in ``host.state`` pushes.

Shutdown (window closed, SIGTERM, SIGINT, SIGHUP, a failed start): stop admitting work -> cancel
and drain running turns (a cancelled turn commits its ``cancelled`` terminal event) -> stop
background shells -> close the IPC server (and stop the renderer) -> close the store -> release the
lock. ``close()`` runs that sequence once; later calls do nothing.

Refusal screens: when the store refuses to open (``schema_newer_than_program``, ``store_corrupt``,
``store_locked``) or startup recovery fails, nothing has been modified and the main process cannot
show widgets itself (QtCore only). It prints ``maka: error [code]: message`` on stderr and, when a
display is available and renderers are enabled, launches the renderer in refusal mode
(``--refusal CODE``, the message in ``MAKA_REFUSAL_MESSAGE``) and waits for the user to close it;
then it exits 1. Without a display (CI, ssh, offscreen) the stderr line is the whole answer.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QEventLoop, QObject, QTimer

from app.bridge_contract import HelloOkPush, HostStatePush, WindowShowPush
from app.bridge_contract import HostState as WireHostState
from main_process.auto_resume import select_auto_resume
from main_process.host_lifecycle import HostLifecycle, HostState
from main_process.host_services import (
    HostServices,
    HostServicesFactory,
    RecoveryReport,
    ResumeOutcome,
)
from main_process.instance_activation import request_activation
from main_process.instance_lock import InstanceLock, LockOutcome
from main_process.ipc_server import IpcListenError, IpcServer, socket_name_for
from main_process.renderer_launcher import RendererLauncher
from main_process.request_router import RequestRouter
from main_process.signal_bridge import SignalBridge
from main_process.turn_workers import TurnWorkers
from runtime.ledger.ledger_errors import LedgerError

_log = logging.getLogger("maka.main")

EXIT_OK = 0
EXIT_ERROR = 1

ENV_REFUSAL_MESSAGE = "MAKA_REFUSAL_MESSAGE"
ENV_SAFE_RESUME = "MAKA_SAFE_RESUME_ENABLED"

# A renderer that crashes this often within the window is not restarted again.
_RESPAWN_LIMIT = 3
_RESPAWN_WINDOW_S = 60.0
# After a renderer crash, wait this long before respawning: a SIGTERM or logout that killed the
# renderer first will have reached the main process by then.
_RESPAWN_DELAY_MS = 300


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


class StartupRefused(Exception):
    """Startup stopped before the host became ready; nothing was modified."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class HostApp(QObject):
    """Owns every main-process part. ``start()`` then the Qt event loop; ``close()`` ends it."""

    def __init__(
        self,
        config: HostConfig,
        services_factory: HostServicesFactory,
        on_closed: Callable[[int], None],
    ) -> None:
        """``on_closed(exit_code)`` runs once, as the last step of shutdown (the composition
        root passes ``QCoreApplication.exit``)."""
        super().__init__()
        self._on_closed = on_closed
        self._config = config
        self._factory = services_factory
        self.lifecycle = HostLifecycle()
        self._lock = InstanceLock(config.data_dir)
        self._signals = SignalBridge(self)
        self._signals.termination_requested.connect(self._on_signal)
        self._workers = TurnWorkers(self)
        self._launcher = RendererLauncher(self)
        self._launcher.exited.connect(self._on_renderer_exited)
        self._services: HostServices | None = None
        self._server: IpcServer | None = None
        self._router: RequestRouter | None = None
        self._token = ""
        self._crashes: list[float] = []
        self._exit_code = EXIT_OK
        self._recovery = RecoveryReport()
        self._auto_queue: list[str] = []
        self._auto_total = 0

    @property
    def server(self) -> IpcServer | None:
        return self._server

    @property
    def router(self) -> RequestRouter | None:
        return self._router

    @property
    def exit_code(self) -> int:
        return self._exit_code

    # --------------------------------------------------------------------------- startup

    def start(self) -> int | None:
        """Run the startup order. Returns an exit code when the process should end now (second
        instance, refusal), or None when the event loop should run."""
        self._signals.install()
        self._config.data_dir.mkdir(parents=True, exist_ok=True)
        lock = self._lock.acquire()
        if lock.outcome is LockOutcome.HELD_ELSEWHERE:
            self._signals.uninstall()
            return self._activate_running_instance(lock.holder_pid)
        if lock.outcome is LockOutcome.UNAVAILABLE:
            self._signals.uninstall()
            _print_error("data_dir_unavailable", lock.detail)
            return EXIT_ERROR
        try:
            self._open()
        except StartupRefused as refusal:
            _log.error("startup refused [%s]: %s", refusal.code, refusal.message)
            self._exit_code = EXIT_ERROR
            self._teardown_after_refusal()
            _print_error(refusal.code, refusal.message)
            return self._show_refusal(refusal)
        if self.lifecycle.state is not HostState.OPENING:
            return None  # a signal arrived during startup; close() already ran
        self.lifecycle.mark_ready()
        self._broadcast_state("")
        _log.info("main process ready")
        QTimer.singleShot(0, self._begin_auto_resume)
        return None

    def _open(self) -> None:
        try:
            services = self._factory(
                self._config.data_dir, safe_resume_enabled=self._config.safe_resume_enabled
            )
        except LedgerError as error:
            raise StartupRefused(str(error.code), error.message) from None
        self._services = services
        try:
            report = services.recover_at_startup()
        except LedgerError as error:
            raise StartupRefused(str(error.code), error.message) from None
        except Exception as error:
            _log.exception("startup recovery failed")
            raise StartupRefused("startup_recovery_failed", str(error)[:500]) from None
        self._recovery = report
        self._token = secrets.token_urlsafe(32)
        server = IpcServer(socket_name_for(self._config.data_dir), self._token, self._hello, self)
        try:
            server.listen()
        except IpcListenError as error:
            raise StartupRefused("ipc_unavailable", str(error)) from None
        self._server = server
        self._router = RequestRouter(server, services, self._workers, self.lifecycle)
        server.request_received.connect(self._router.handle)
        server.activate_requested.connect(self._on_activate)
        if self._config.announce_endpoint:
            print(
                f"MAKA_MAIN_READY socket={server.socket_name} token={self._token} "
                f"pid={os.getpid()}",
                flush=True,
            )
        if self._config.launch_renderer:
            self._launch_renderer()

    def _hello(self) -> HelloOkPush:
        return HelloOkPush(
            host_state=_wire_state(self.lifecycle.state),
            safe_resume_enabled=self._config.safe_resume_enabled,
        )

    def _launch_renderer(self) -> None:
        assert self._server is not None
        # One token per launch: a renderer from an earlier launch can never reconnect as this one.
        self._token = secrets.token_urlsafe(32)
        self._server.set_token(self._token)
        self._launcher.launch(
            self._server.socket_name,
            self._token,
            extra_environment={ENV_SAFE_RESUME: "1" if self._config.safe_resume_enabled else "0"},
        )

    def _activate_running_instance(self, holder_pid: int | None) -> int:
        name = socket_name_for(self._config.data_dir)
        if request_activation(name):
            print("maka: already running; brought its window to front", file=sys.stderr)
            return EXIT_OK
        _print_error(
            "store_locked",
            f"another maka (pid {holder_pid or 'unknown'}) owns {self._config.data_dir} "
            "and did not answer",
        )
        return EXIT_ERROR

    # --------------------------------------------------------------------------- auto-resume

    def _begin_auto_resume(self) -> None:
        selection = select_auto_resume(
            self._recovery.interrupted,
            enabled=self._config.safe_resume_enabled,
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

    def _next_auto_resume(self, outcome: ResumeOutcome | None) -> None:
        if outcome is not None:
            _log.info("auto-resume outcome: %s", type(outcome).__name__)
        if not self._auto_queue or not self.lifecycle.admits_work or self._router is None:
            if self._auto_total:
                self._broadcast_state(f"Automatic resume checked {self._auto_total} session(s)")
                self._auto_total = 0
            return
        session_id = self._auto_queue.pop(0)
        done = self._auto_total - len(self._auto_queue)
        self._broadcast_state(f"Resuming interrupted session {done} of {self._auto_total}")
        self._router.start_resume(session_id, automatic=True, on_done=self._next_auto_resume)

    # --------------------------------------------------------------------------- events

    def _on_activate(self) -> None:
        shown = self._server is not None and self._server.broadcast(WindowShowPush()) > 0
        if not shown and self._config.launch_renderer and not self._launcher.running:
            self._launch_renderer()

    def _on_signal(self, signum: int) -> None:
        _log.info("signal %d: shutting down", signum)
        self.close(EXIT_OK)

    def _on_renderer_exited(self, exit_code: int, crashed: bool) -> None:
        if self.lifecycle.state in (HostState.CLOSING, HostState.CLOSED):
            return
        if not crashed and exit_code == 0:
            _log.info("the window was closed; shutting down")
            self.close(EXIT_OK)
            return
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
        """The shutdown order of DESKTOP.md. Idempotent; ends the event loop with ``exit_code``."""
        if not self.lifecycle.begin_closing():
            return
        self._exit_code = exit_code
        self._broadcast_state("")
        self._workers.stop_admitting()
        cancelled = self._workers.cancel_all()
        drained = self._workers.drain(self._config.drain_timeout_s)
        _log.info("cancelled %d turn(s); drained: %s", cancelled, drained)
        if self._services is not None:
            _attempt("stop background work", self._services.stop_background_work)
        if self._server is not None:
            self._server.close()
        self._launcher.stop()
        if self._services is not None:
            _attempt("close the store", self._services.close)
            self._services = None
        self._lock.release()
        self.lifecycle.mark_closed()
        self._signals.uninstall()
        _log.info("main process closed (exit %d)", exit_code)
        self._on_closed(exit_code)

    def _teardown_after_refusal(self) -> None:
        self.lifecycle.begin_closing()
        if self._server is not None:
            self._server.close()
        if self._services is not None:
            _attempt("close the store", self._services.close)
            self._services = None
        self._lock.release()
        self.lifecycle.mark_closed()
        self._signals.uninstall()

    def _show_refusal(self, refusal: StartupRefused) -> int:
        if not (self._config.launch_renderer and display_available()):
            return EXIT_ERROR
        self._launcher.exited.disconnect(self._on_renderer_exited)
        loop = QEventLoop()
        self._launcher.exited.connect(lambda *_: loop.quit())
        self._launcher.launch(
            "",
            secrets.token_urlsafe(32),
            extra_arguments=("--refusal", refusal.code),
            extra_environment={ENV_REFUSAL_MESSAGE: refusal.message},
        )
        if self._launcher.running:
            loop.exec()
        return EXIT_ERROR

    def _broadcast_state(self, detail: str) -> None:
        if self._server is not None:
            self._server.broadcast(
                HostStatePush(state=_wire_state(self.lifecycle.state), detail=detail[:500])
            )


def display_available() -> bool:
    """Whether a window could be seen: not offscreen/minimal, and on X11/Wayland a display."""
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if platform.startswith(("offscreen", "minimal", "vnc")):
        return False
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def _wire_state(state: HostState) -> WireHostState:
    return WireHostState(state.value)


def _attempt(what: str, step: Callable[[], None]) -> None:
    """Shutdown keeps going when one step fails: the lock must be released regardless."""
    try:
        step()
    except Exception:
        _log.exception("failed to %s during shutdown", what)


def _print_error(code: str, message: str) -> None:
    print(f"maka: error [{code}]: {message}", file=sys.stderr)
