"""Entry script of the frozen ``maka`` executable (the PyInstaller spec's only script).

A frozen bundle has no Python interpreter to run, only this executable, so ``sys.executable`` *is*
``maka``. Everything the desktop starts as a child process must therefore come back through here:

- ``maka [options] [COMMAND ...]``: the normal command line, as the installed console script.
- ``maka -m MODULE [ARGS ...]``: runs MODULE as ``__main__``, the way ``python -m`` does. A process
  that spawns ``[sys.executable, "-m", "renderer...", ...]`` in development keeps working unchanged
  in the bundle (the spec collects every first-party module, so any of them can be run this way).
- ``maka -c CODE``: refused with exit 2; a bundle must not be an interpreter for arbitrary code.

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


def main(argv: list[str]) -> int:
    _ensure_streams()
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
