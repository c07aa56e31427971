"""``maka`` / ``maka gui``: start the desktop application."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser


def run(args: argparse.Namespace) -> int:
    del args
    print(
        "maka: the desktop application is not built yet; try 'maka --help' for the commands "
        "that exist.",
        file=sys.stderr,
    )
    return 1
