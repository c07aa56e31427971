"""Entry point of the renderer process: ``python -m renderer.renderer_app --server NAME``.

The main process launches this with the server name on the command line and the per-launch
token in the environment (``MAKA_RENDERER_TOKEN`` unless ``--token-env`` names another
variable). The token never goes on the command line, where other users could read it from the
process list, and it is removed from the environment once read so nothing this process starts
inherits it. ``host.state closed`` from the main process ends this process (exit 0); closing
the window ends it too, which the main process sees as the renderer exiting. The window
follows the OS palette (Qt applies light/dark changes itself; the widgets recompute their tints
on every palette change) and never uses a font under 10 pt.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Sequence

from PySide6.QtWidgets import QApplication

from app.bridge_contract import HostState, HostStatePush
from renderer import theme
from renderer.bridge_client import RendererBridge
from renderer.host_lost_panel import restart_argv_from_env
from renderer.main_window import MainWindow

TOKEN_ENV = "MAKA_RENDERER_TOKEN"
SERVER_ENV = "MAKA_RENDERER_SERVER"
MAIN_PID_ENV = "MAKA_MAIN_PID"
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="maka-renderer", description="The Maka window (started by the main process)."
    )
    parser.add_argument(
        "--server",
        default=os.environ.get(SERVER_ENV, ""),
        help=f"local server name of the main process (default: ${SERVER_ENV})",
    )
    parser.add_argument(
        "--token-env",
        default=TOKEN_ENV,
        metavar="VAR",
        help=f"environment variable holding the handshake token (default: {TOKEN_ENV})",
    )
    return parser


def _main_pid() -> int:
    """The main process that started this window (it says so; else our parent)."""
    try:
        return int(os.environ.get(MAIN_PID_ENV, ""))
    except ValueError:
        return os.getppid()


def freeze_long_lived() -> int:
    """Collect, then move every object alive into the cyclic collector's permanent generation,
    which its passes never walk again; the number frozen. Called once the window is built:
    what was imported and the window live as long as the process, and a full pass over them
    (one runs whenever enough new objects outlived the young passes) costs more than a frame,
    in the middle of a scroll, and can free nothing of them. Refcounting still frees a frozen
    object; only a frozen one later left in a reference cycle is not (``gc.freeze``)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def main(argv: Sequence[str]) -> int:
    """Run the renderer; ``argv[0]`` is the program name, as in ``sys.argv``."""
    args, qt_args = _parser().parse_known_args(list(argv[1:]))
    token = os.environ.pop(args.token_env, "")
    if not args.server:
        print("maka-renderer: error [renderer_server_missing]: no --server given", file=sys.stderr)
        return EXIT_USAGE
    if not token:
        print(
            f"maka-renderer: error [renderer_token_missing]: ${args.token_env} is not set",
            file=sys.stderr,
        )
        return EXIT_USAGE
    logging.basicConfig(level=logging.WARNING, format="maka-renderer: %(levelname)s %(message)s")
    app = QApplication([argv[0] if argv else "maka-renderer", *qt_args])
    app.setApplicationName("Maka")
    app.setApplicationDisplayName("Maka")
    app.setDesktopFileName("maka")
    theme.apply_readable_font(app)
    bridge = RendererBridge(args.server, token, main_pid=_main_pid())
    # The user's close asks first while turns run; the main process closing the app does not.
    window = MainWindow(bridge, confirm_quit=True, restart_argv=restart_argv_from_env())

    def on_host_state(push: HostStatePush) -> None:
        if push.state is HostState.CLOSED:
            window.confirm_quit = False
            app.quit()

    bridge.host_state_changed.connect(on_host_state)
    window.show()
    freeze_long_lived()
    bridge.start()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
