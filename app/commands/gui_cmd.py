"""``maka`` / ``maka gui``: start the desktop application (main process + renderer process).

The same command is both processes: without ``--role`` it is the main process (QtCore/QtNetwork
only, owns the store); the main process starts the renderer by running this program again with
``gui --role renderer`` (hidden options), so a frozen bundle never needs a Python interpreter.
Qt, the store and the runtime are imported inside ``run()`` only, so other subcommands never pay
for them.

Environment (docs/design/cli.md): ``MAKA_DATA_DIR``, ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1`` (Safe
resume and automatic resume at startup), provider variables. Test-only: ``MAKA_NO_RENDERER=1``
starts the main process without a renderer and prints ``MAKA_MAIN_LISTENING socket=...
token=... pid=...`` on stdout once it listens, then ``MAKA_MAIN_READY`` with the same fields once
the store is open (never on a refusal), so protocol tests can connect as the renderer would.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli_errors import EXIT_ERROR
from app.host.resume_switch import RESUME_FLAG

if TYPE_CHECKING:
    from app.host.host_services import HostServices

ENV_NO_RENDERER = "MAKA_NO_RENDERER"
ENV_REFUSAL_MESSAGE = "MAKA_REFUSAL_MESSAGE"  # main_process.refusal_screen sets it
# docs/design/cli.md: only the exact value "1" enables Safe resume and automatic resume at startup.
ENV_SAFE_RESUME = RESUME_FLAG
ROLE_MAIN = "main"
ROLE_RENDERER = "renderer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Internal: set by the main process when it starts the renderer (same executable).
    parser.add_argument(
        "--role", choices=[ROLE_MAIN, ROLE_RENDERER], default=ROLE_MAIN, help=argparse.SUPPRESS
    )
    # Internal: the renderer shows a refusal screen (store refused to open) instead of the app.
    parser.add_argument("--refusal", metavar="CODE", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.role == ROLE_RENDERER:
        return _run_renderer(args)
    return _run_main(args)


def resolve_data_dir(option: str | None) -> Path:
    """``--data-dir`` > ``MAKA_DATA_DIR`` > the per-user data directory."""
    from app.data_paths import resolve_data_dir as resolved

    return resolved(option)


def _run_main(args: argparse.Namespace, *, headless: bool = False) -> int:
    """The main process; ``headless``: ``maka host`` (no renderer at start; one on request)."""
    from PySide6.QtCore import QCoreApplication

    from app.bridge_contract import HostKind
    from app.gui_thread_gc import GuiThreadCollector
    from main_process.host_app import HostApp, HostConfig
    from storage.private_files import ensure_data_dir

    data_dir = resolve_data_dir(args.data_dir)
    no_renderer = os.environ.get(ENV_NO_RENDERER) == "1"
    missing = None if headless or no_renderer else display_missing()
    if missing is not None and _unowned(data_dir):
        print(
            f"maka: error [display_unavailable]: there is no display to open the window on here "
            f"({missing}); nothing was started. In a terminal, maka tui or maka run work with "
            "the same sessions; maka host serves them to terminals",
            file=sys.stderr,
        )
        return EXIT_ERROR
    try:
        ensure_data_dir(data_dir)
    except OSError as error:
        print(f"maka: error [data_dir_unavailable]: {data_dir}: {error}", file=sys.stderr)
        return EXIT_ERROR
    _configure_logging(data_dir)
    config = HostConfig(
        data_dir=data_dir,
        safe_resume_enabled=os.environ.get(ENV_SAFE_RESUME) == "1",
        launch_renderer=not (no_renderer or headless),
        announce_endpoint=no_renderer,
        host_kind=HostKind.HEADLESS if headless else HostKind.DESKTOP,
        no_window=display_missing() if headless else None,
    )
    app = QCoreApplication.instance() or QCoreApplication([sys.argv[0]])
    QCoreApplication.setApplicationName("maka")

    def serving() -> None:
        # Said once the store is open: a host whose database cannot be opened never said it
        # served the folder before it exited with the refusal.
        print(
            f"maka host: serving {data_dir} (pid {os.getpid()}); terminal commands attach "
            "to it; Ctrl+C or SIGTERM stops it",
            file=sys.stderr,
            flush=True,
        )

    host = HostApp(
        config, _open_services, on_closed=app.exit, on_ready=serving if headless else None
    )
    # The host runs Python on worker threads: Python's cycle collector runs on this thread only.
    collector = GuiThreadCollector()
    try:
        immediate = host.start()
        if immediate is not None:
            return immediate
        app.exec()
        host.close(host.exit_code)  # a no-op after an orderly close; a safety net otherwise
        return host.exit_code
    finally:
        collector.stop()


def display_missing() -> str | None:
    """Why there is nothing to show a window on (Linux, no Qt platform chosen such as
    ``offscreen`` or ``vnc``), or None: no X11 or Wayland display named, or the one named does
    not answer (a ``DISPLAY`` left over from an SSH session that ended). Qt would fail to load
    its platform plugin in the window's process, restart it twice and give up, with a hint to
    reinstall the application. A display named in a way this does not know is taken as there."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return None
    wayland, x11 = os.environ.get("WAYLAND_DISPLAY"), os.environ.get("DISPLAY")
    if not (wayland or x11):
        return "neither DISPLAY nor WAYLAND_DISPLAY is set: a terminal over SSH, or a server"
    if wayland and _wayland_answers(wayland):
        return None
    if x11 and _x11_answers(x11):
        return None
    named = f"DISPLAY={x11}" if x11 else f"WAYLAND_DISPLAY={wayland}"
    return f"{named} names a display that does not answer: it may be left from an ended session"


def _connects(family: int, address: str | tuple[str, int]) -> bool:
    import socket

    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.settimeout(2.0)
            probe.connect(address)
    except OSError:
        return False
    return True


def _wayland_answers(name: str) -> bool:
    import socket

    path = (
        name if name.startswith("/") else os.path.join(os.environ.get("XDG_RUNTIME_DIR", ""), name)
    )
    return _connects(socket.AF_UNIX, path)


def _x11_answers(display: str) -> bool:
    """``[host]:N[.S]``: a local display's socket (a file, or Linux's abstract one), or the TCP
    port 6000+N of a named host (SSH forwards ``localhost:10.0`` so)."""
    import re
    import socket

    found = re.fullmatch(r"(?:unix/|([^:]*))?:(\d+)(?:\.\d+)?", display)
    if found is None:
        return True  # (a form not known here: let Qt try it)
    host, number = found.group(1) or "", int(found.group(2))
    if host in ("", "unix"):
        path = f"/tmp/.X11-unix/X{number}"
        return _connects(socket.AF_UNIX, path) or _connects(socket.AF_UNIX, "\0" + path)
    return _connects(socket.AF_INET, (host, 6000 + number))


def _unowned(data_dir: Path) -> bool:
    """No Maka process has the data folder: this one would open the window itself (a running
    desktop or ``maka host`` opens it on its own display when asked)."""
    if not data_dir.is_dir():
        return True
    from app.host.session_rows import folder_free

    return folder_free(data_dir)


def _open_services(data_dir: Path, /, *, safe_resume_enabled: bool) -> HostServices:
    """Runs on the host's startup worker, after the renderer was launched: the runtime and the
    store are imported here, not before the window can appear."""
    from app.host.desktop_services import open_host_services

    return open_host_services(data_dir, safe_resume_enabled=safe_resume_enabled)


def _run_renderer(args: argparse.Namespace) -> int:
    if args.refusal:
        return _show_refusal(args.refusal, os.environ.get(ENV_REFUSAL_MESSAGE, ""))
    from renderer.renderer_app import main as renderer_main

    # The server name and the token arrive in the environment (see renderer_launcher).
    return renderer_main([sys.argv[0]])


def _refusal_advice(code: str) -> str:
    """What the user can do about a refusal; the code and the store's own message follow it
    (the commands worded as this process suggests them, ``maka_command``)."""
    from runtime.ledger.command_words import maka_command

    doctor = maka_command("doctor")
    advice = {
        **_REFUSAL_ADVICE,
        "store_corrupt": "The Maka database in this data folder is damaged. Nothing was changed. "
        f"Run {doctor} for details, then restore the folder from a backup or bring your "
        "sessions back with 'maka import' from an export; or start Maka with another --data-dir.",
        "startup_recovery_failed": "Maka could not check its interrupted work, so it did not "
        f"start. Run {doctor} for details.",
    }
    return advice.get(code, "Maka could not start. What stopped it is named below.")


# What the user can do about each refusal that names no command (``_refusal_advice``).
_REFUSAL_ADVICE = {
    "schema_newer_than_program": "This data folder was written by a newer version of Maka. "
    "Install that version (or newer) to open it. Nothing was changed.",
    "disk_full": "The disk is full, so Maka cannot save anything. Free some space, then start "
    "Maka again; everything saved before is kept.",
    "data_dir_read_only": "Maka's data folder (or a file in it) cannot be written. Give your "
    "user write access to it, or (on a read-only disk) start Maka with another --data-dir.",
    "ipc_unavailable": "Maka could not open the private connection between its window and "
    "its main process in this data folder. Fix what is named below, or start Maka with another "
    "--data-dir.",
    "data_dir_unavailable": "Maka could not use its data folder. Fix what is named below, or "
    "start Maka with another --data-dir.",
    "store_locked": "Another Maka process is using this data folder. Close it, or wait for it "
    "to finish, then start Maka again.",
    "display_unavailable": "Maka's window cannot be shown: what is named below has no display "
    "to show it on. In a terminal, maka tui and maka run work without one.",
}


def _show_refusal(code: str, message: str) -> int:
    """The refusal screen: the main process could not open the store and shows why."""
    from PySide6.QtWidgets import QApplication, QMessageBox

    app = QApplication.instance() or QApplication([sys.argv[0]])
    del app
    box = QMessageBox(
        QMessageBox.Icon.Critical,
        "Maka cannot start",
        _refusal_advice(code),
    )
    box.setInformativeText(f"[{code}] {refusal_detail(message)}")
    box.setStandardButtons(QMessageBox.StandardButton.Close)
    box.exec()
    return EXIT_ERROR


def refusal_detail(message: str) -> str:
    """The store's message without the advice the screen already gives above it (the
    terminal prints the message whole)."""
    from storage.ledger.store_creation import (
        DISK_FULL_ADVICE,
        READ_ONLY_ADVICE,
        READ_ONLY_FS_ADVICE,
    )
    from storage.ledger.store_verification import damaged_advice

    for advice in (damaged_advice(), DISK_FULL_ADVICE, READ_ONLY_ADVICE, READ_ONLY_FS_ADVICE):
        message = message.replace(advice, "")
    return message.strip()


class _BriefFormatter(logging.Formatter):
    """For the terminal: one line per record, never a traceback (those go to the log file)."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            return super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


def _configure_logging(data_dir: Path) -> None:
    """The main process logs to ``<data_dir>/logs/main.log`` (rotated) and warnings to stderr.

    Records hold ids and codes only (never prompts, arguments or tokens)."""
    logger = logging.getLogger("maka")
    if logger.handlers:
        return
    logger.setLevel(logging.INFO)
    logger.propagate = False
    from storage.private_files import ensure_private_dir
    from storage.private_log import PrivateRotatingFileHandler

    class _QuietFileHandler(_QuietErrors, PrivateRotatingFileHandler):
        pass

    formatter = logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    try:
        log_dir = ensure_private_dir(data_dir / "logs")
        file_handler = _QuietFileHandler(
            log_dir / "main.log", maxBytes=2_000_000, backupCount=3, encoding="utf-8"
        )
        file_handler.setFormatter(formatter)
        logger.addHandler(file_handler)
    except OSError as error:
        print(f"maka: cannot write the log in {data_dir}: {error}", file=sys.stderr)
    stderr_handler = logging.StreamHandler(sys.stderr)
    stderr_handler.setLevel(logging.WARNING)
    stderr_handler.setFormatter(_BriefFormatter("maka: %(levelname)s %(message)s"))
    logger.addHandler(stderr_handler)


class _QuietErrors(logging.Handler):
    """A log file that cannot be written (a full disk) is said once, in one line, instead of a
    traceback per record on the terminal."""

    _told = False

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging API)
        del record
        if not self._told:
            self._told = True
            print("maka: cannot write the log file", file=sys.stderr)


def _module_main(argv: list[str]) -> int:
    """``python -m app.commands.gui_cmd --role renderer``: how a source install starts the
    renderer (a frozen bundle runs itself with ``gui --role renderer`` instead)."""
    parser = argparse.ArgumentParser(prog="maka gui")
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    add_arguments(parser)
    args = parser.parse_args(argv)
    # The main process passes the data folder it was given (``renderer_command``): the window
    # words the commands it suggests with it, as ``maka`` does (``app.cli.main``).
    from runtime.ledger.command_words import suggest_data_dir

    suggest_data_dir(args.data_dir or None)
    return run(args)


if __name__ == "__main__":
    sys.exit(_module_main(sys.argv[1:]))
