"""Spawns and watches the renderer process (``QProcess``).

Why the same executable: a frozen bundle (PyInstaller, Nuitka) has no usable ``python -m``, and
Nuitka's ``sys.executable`` points at a file that does not exist, so a frozen app re-runs itself
(``QCoreApplication.applicationFilePath()``) with ``gui --role renderer``; a source install
runs ``sys.executable -m app.commands.gui_cmd --role renderer``. Either way the renderer is
exactly this program's code, never some other ``maka`` on the PATH.

Why the token travels in the environment: argv is world-readable (``ps``, ``/proc/<pid>/cmdline``),
a process's environment is readable only by its user. The token is one-time per launch; the socket
is user-only as well, so another local user can neither find nor use the token.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QObject, QProcess, QProcessEnvironment, Signal

from runtime.ledger.command_words import suggested_data_dir

_log = logging.getLogger("maka.main.renderer")

# The renderer's entry point (renderer/renderer_app.py) reads these two variables; it removes the
# token from its environment once read.
ENV_SOCKET = "MAKA_RENDERER_SERVER"
ENV_TOKEN = "MAKA_RENDERER_TOKEN"

_VOLUNTARY_EXIT_MS = 1500
_STOP_GRACE_MS = 3000
_KILL_WAIT_MS = 2000


ENV_MAIN_PID = "MAKA_MAIN_PID"
ENV_RESTART_ARGV = "MAKA_RESTART_ARGV"


def restart_argv() -> list[str]:
    """How this main process was started, to start it again: the bundle is its own program; a
    source install runs its ``maka`` script (or ``-m`` module) with this interpreter."""
    if is_frozen():
        return [QCoreApplication.applicationFilePath(), *sys.argv[1:]]
    main_module = sys.modules.get("__main__")
    spec = getattr(main_module, "__spec__", None)
    if spec is not None and spec.name:
        return [*module_command(spec.name.removesuffix(".__main__")), *sys.argv[1:]]
    return [sys.executable, *sys.argv]


_RUN_OWN_MODULE = (
    "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


def module_command(module: str) -> list[str]:
    """This interpreter running ``module`` of this program (a source install), with its own
    packages first on the import path. ``python -m module`` puts the current folder first, and
    the user's folder (a window starts in it) may hold an ``app.py`` or ``app/`` of its own,
    which then hid Maka's ``app`` package: no window ever opened there. So: ``-P`` (no current
    folder) and the folder holding this program's packages put first by a two-line start, the
    environment left as it is (its variables reach the tools the agent runs)."""
    # (the folder holding ``main_process``, and beside it ``app``: one distribution)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [sys.executable, "-P", "-c", _RUN_OWN_MODULE, root, module]


def window_restart_argv() -> list[str]:
    """``restart_argv`` for a window that ``maka host`` started: the same command with ``gui``
    in place of ``host``, so **Restart Maka** brings back a desktop with its window."""
    argv = restart_argv()
    offset = len(argv) - (len(sys.argv) - 1)  # where this process's own arguments begin
    previous = ""
    for index in range(max(offset, 0), len(argv)):
        if argv[index] == "host" and previous != "--data-dir":
            argv[index] = "gui"
            break
        previous = argv[index]
    return argv


RESET_FROZEN_ENVIRONMENT = "PYINSTALLER_RESET_ENVIRONMENT"
"""Tells a PyInstaller (>= 6.10) executable to start as a new top-level instance."""


@dataclass(frozen=True, slots=True)
class RendererCommand:
    program: str
    arguments: tuple[str, ...]


def is_frozen() -> bool:
    """True inside a PyInstaller or Nuitka bundle."""
    main_module = sys.modules.get("__main__")
    return bool(getattr(sys, "frozen", False)) or hasattr(main_module, "__compiled__")


def renderer_command(extra_arguments: tuple[str, ...] = ()) -> RendererCommand:
    """The command line that starts this program's renderer role (no secrets in it). A data
    folder this process was given on its command line goes with it: the window words the
    ``maka`` commands it suggests with it (``runtime.ledger.command_words``)."""
    given = suggested_data_dir()
    folder = ("--data-dir", given) if given is not None else ()
    role = ("--role", "renderer", *extra_arguments, *folder)
    if is_frozen():
        return RendererCommand(QCoreApplication.applicationFilePath(), ("gui", *role))
    program, *arguments = module_command("app.commands.gui_cmd")
    return RendererCommand(program, (*arguments, *role))


class RendererLauncher(QObject):
    """One renderer child at a time. ``exited(exit_code, crashed)`` fires when it ends, whether it
    closed normally (the user closed the window) or died; the host decides what that means."""

    started = Signal(int)
    exited = Signal(int, bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._process: QProcess | None = None
        self._stopping = False

    @property
    def running(self) -> bool:
        return (
            self._process is not None and self._process.state() != QProcess.ProcessState.NotRunning
        )

    @property
    def pid(self) -> int | None:
        if self._process is None or not self.running:
            return None
        return int(self._process.processId())

    def launch(
        self,
        socket_name: str,
        token: str,
        extra_arguments: tuple[str, ...] = (),
        extra_environment: Mapping[str, str] | None = None,
    ) -> None:
        if self.running:
            return
        command = renderer_command(extra_arguments)
        environment = QProcessEnvironment.systemEnvironment()
        environment.insert(ENV_SOCKET, socket_name)
        environment.insert(ENV_TOKEN, token)
        # What the window needs if this process dies: whose death to watch for, and the command
        # that starts Maka again (its **Restart Maka**; renderer/host_lost_panel.py).
        environment.insert(ENV_MAIN_PID, str(os.getpid()))
        environment.insert(ENV_RESTART_ARGV, json.dumps(restart_argv()))
        if is_frozen():
            # The renderer is this bundle again, but a new instance of it: its loader must put
            # the bundle's libraries first again (this process gave its tools the user's
            # LD_LIBRARY_PATH back). Without this, PyInstaller's loader takes the inherited
            # environment for one of its own workers and skips that, and the window would load
            # the system's copies of libraries the bundle ships, or fail without them.
            environment.insert(RESET_FROZEN_ENVIRONMENT, "1")
        for key, value in (extra_environment or {}).items():
            environment.insert(key, value)
        process = QProcess(self)
        process.setProcessEnvironment(environment)
        # The renderer's stdout/stderr land in ours: one terminal, one log for a user report.
        process.setProcessChannelMode(QProcess.ProcessChannelMode.ForwardedChannels)
        if sys.platform != "win32":
            # Own session: a Ctrl+C in the terminal reaches only the main process, which then
            # shuts down in order and stops the renderer itself (no respawn race).
            flags = QProcess.UnixProcessFlag
            process.setUnixProcessParameters(
                flags.CreateNewSession | flags.ResetSignalHandlers | flags.CloseFileDescriptors
            )
        process.finished.connect(self._on_finished)
        process.errorOccurred.connect(self._on_error)
        self._process = process
        self._stopping = False
        process.start(command.program, list(command.arguments))
        if process.waitForStarted(10_000):
            _log.info("renderer started (pid %s)", process.processId())
            self.started.emit(int(process.processId()))

    def stop(self) -> None:
        """Wait briefly for the renderer to quit by itself (the host already pushed ``closed``),
        then SIGTERM it, then kill it if it still runs after a grace period.

        Blocking by design: it is called only during shutdown."""
        process = self._process
        if process is None or process.state() == QProcess.ProcessState.NotRunning:
            return
        self._stopping = True
        if process.waitForFinished(_VOLUNTARY_EXIT_MS):
            return
        process.terminate()
        if not process.waitForFinished(_STOP_GRACE_MS):
            _log.warning("renderer did not exit within %d ms; killing it", _STOP_GRACE_MS)
            process.kill()
            process.waitForFinished(_KILL_WAIT_MS)

    def _on_finished(self, exit_code: int, status: QProcess.ExitStatus) -> None:
        crashed = status == QProcess.ExitStatus.CrashExit
        _log.info("renderer exited (code %s, crashed %s)", exit_code, crashed)
        if not self._stopping:
            self.exited.emit(int(exit_code), crashed)

    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            _log.error("renderer failed to start: %s", error)
            if not self._stopping:
                self.exited.emit(-1, True)
