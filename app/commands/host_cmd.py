"""``maka host [--data-dir D]``: the runtime host without a window (docs/design/hosts.md section 1).

It is the desktop's main process without its renderer: it takes the data folder's instance lock
(another Maka owning it: ``store_locked``, exit 1), opens the store, runs startup recovery and,
with ``MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1``, automatic resume, then serves terminal commands
over its private endpoint (``maka sessions``, ``plan``, ``settle``, ``run``, ``resume`` attach to
it). SIGTERM, SIGINT (Ctrl+C) or SIGHUP stop it in the desktop's shutdown order: running turns
are cancelled as a user's stop would (each ends ``cancelled``), tool processes are ended, the
store is closed and the lock released. Exit 0 after an orderly stop, 1 when it could not start.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # --data-dir is every command's


def run(args: argparse.Namespace) -> int:
    from app.commands.gui_cmd import _run_main

    return _run_main(args, headless=True)
