"""Entry script of the frozen ``maka`` executable (the PyInstaller spec's only script).

A frozen bundle has no Python interpreter to run, only this executable, so ``sys.executable`` *is*
``maka``. Everything the desktop starts as a child process must therefore come back through here:

- ``maka [options] [COMMAND ...]``: the normal command line, as the installed console script.
- ``maka -m MODULE [ARGS ...]``: runs MODULE as ``__main__``, the way ``python -m`` does. A process
  that spawns ``[sys.executable, "-m", "renderer...", ...]`` in development keeps working unchanged
  in the bundle (the spec collects every first-party module, so any of them can be run this way).
- ``maka -c CODE``: refused with exit 2; a bundle must not be an interpreter for arbitrary code.

On Linux the bundle's loader puts the bundle's own libraries first on ``LD_LIBRARY_PATH``. This
process has already been linked by then (the loader reads that variable once, at start), so the
variable is restored to the user's value for everything started later: a shell command run by an
agent tool must get the system's libssl, not the bundle's. A child that is this bundle again (the
renderer) gets the bundle's path anew from the bundle's loader: the launcher starts it with
``PYINSTALLER_RESET_ENVIRONMENT=1`` (``main_process/renderer_launcher.py``).

A Windows ``--windowed`` executable starts with ``sys.stdout``/``sys.stderr`` set to None; they are
pointed at the null device so that a stray ``print`` cannot crash the desktop app.
"""

from __future__ import annotations

import os
import runpy
import sys


def _ensure_streams() -> None:
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives for the process
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives for the process


def _restore_library_path() -> None:
    if not getattr(sys, "frozen", False) or not sys.platform.startswith("linux"):
        return
    original = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    if original is None:
        os.environ.pop("LD_LIBRARY_PATH", None)
    else:
        os.environ["LD_LIBRARY_PATH"] = original


def main(argv: list[str]) -> int:
    _ensure_streams()
    _restore_library_path()
    if len(argv) >= 1 and argv[0] == "-m":
        if len(argv) < 2:
            print("maka: error [usage]: -m needs a module name", file=sys.stderr)
            return 2
        module = argv[1]
        sys.argv = [sys.argv[0], *argv[2:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    if len(argv) >= 1 and argv[0] == "-c":
        print(
            "maka: error [usage]: the bundled maka does not run Python code (-c)", file=sys.stderr
        )
        return 2
    from app.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
