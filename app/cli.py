"""The ``maka`` command: desktop launcher and CLI.

Subcommands live in ``app/commands/<name>_cmd.py`` and are imported only when used, so that
``maka ledger plan`` never pays for Qt or SQLite start-up. Each command module exposes
``add_arguments(parser)`` and ``run(args) -> int``.

Exit codes (docs/design/cli.md): 0 success, 1 error, 2 usage or invalid input, 3 parked.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import NoReturn, Protocol

from app import __version__
from app.cli_errors import EXIT_ERROR, EXIT_USAGE, CliError


class CommandModule(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# name -> (module, one-line help). Add a command by adding one row.
COMMANDS: dict[str, tuple[str, str]] = {
    "gui": ("app.commands.gui_cmd", "start the desktop app (the default)"),
    "host": (
        "app.commands.host_cmd",
        "serve the data folder without a window: terminal commands attach to it",
    ),
    "ledger": ("app.commands.ledger_cmd", "inspect a RuntimeEvent JSONL ledger file"),
    "export": ("app.commands.export_cmd", "write a session's committed events to a JSONL file"),
    "import": ("app.commands.import_cmd", "validate and import an exported session"),
    "doctor": ("app.commands.doctor_cmd", "check the data directory's integrity"),
    "self-test": ("app.commands.selftest_cmd", "check that this installation works"),
    "run": ("app.commands.run_cmd", "run one agent turn in a session, streaming the transcript"),
    "sessions": (
        "app.commands.sessions_cmd",
        "list sessions; relocate, rename or remove one",
    ),
    "tui": ("app.commands.tui_cmd", "chat with the agent in the terminal"),
    "plan": ("app.commands.plan_cmd", "explain whether Safe resume can continue a session"),
    "timeline": (
        "app.commands.timeline_cmd",
        "show a session's record: runs, events and tool calls, park reasons pinned",
    ),
    "resume": ("app.commands.resume_cmd", "Safe resume: continue a session's interrupted run"),
    "branch": (
        "app.commands.branch_cmd",
        "continue from an earlier point of a session in a new session and folder",
    ),
    "checkpoints": ("app.commands.checkpoints_cmd", "list a session's workspace checkpoints"),
    "settle": (
        "app.commands.settle_cmd",
        "record whether an interrupted tool call ran, so Safe resume can continue",
    ),
}


class UsageParser(argparse.ArgumentParser):
    """argparse with the command's error form: a usage mistake prints the usage, then
    ``maka: error [usage_invalid]: ...``, and exits 2 (``EXIT_USAGE``). With ``json_errors``
    (the command line asked for ``--json``) the refusal is also the one JSON document on
    stdout."""

    json_errors = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse builds a formatter for every add_argument; its default width comes from
        # shutil.get_terminal_size, and importing shutil (lzma, bz2 and more) costs every
        # command's start. The same width, found without it.
        # (typeshed's formatter_class protocol names only ``prog``; every HelpFormatter takes
        # ``width``.)
        return self.formatter_class(prog=self.prog, width=terminal_columns() - 2)  # type: ignore[call-arg]

    def error(self, message: str) -> NoReturn:
        from runtime.ledger.codes import HostCode

        self.print_usage(sys.stderr)
        if self.json_errors:
            print_json_error(HostCode.USAGE_INVALID, message)
        self.exit(EXIT_USAGE, f"{self.prog}: error [{HostCode.USAGE_INVALID}]: {message}\n")


def _json_errors(parser: argparse.ArgumentParser, wanted: bool) -> None:
    """Set ``json_errors`` on ``parser`` and on the parsers of its subcommands (``maka sessions
    rename``, ``maka ledger scan``): argparse makes those as new instances, which kept the
    default and refused a ``--json`` command line with no JSON."""
    if isinstance(parser, UsageParser):
        parser.json_errors = wanted
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _json_errors(child, wanted)


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: ``COLUMNS`` when it is a positive number, else the
    width of the terminal on standard output, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def print_json_error(code: str, message: str) -> None:
    """A refused command's one JSON document on stdout (docs/design/cli.md: ``--json`` prints
    exactly one): ``{"error": {"code": ..., "message": ...}}``."""
    import json

    print(json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False))


def _top_parser() -> argparse.ArgumentParser:
    parser = UsageParser(
        prog="maka",
        description="Maka: a desktop agent workspace that keeps an immutable record of its agent.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
        + "\n".join(f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items())
        + "\n\nRun 'maka COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"maka {__version__}")
    parser.add_argument("--data-dir", help="data directory (default: MAKA_DATA_DIR or per-user)")
    return parser


def _load(name: str) -> CommandModule:
    module: CommandModule = importlib.import_module(COMMANDS[name][0])
    return module


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # The first non-option word picks the command; options before it belong to the top level.
    command = "gui"
    index = 0
    while index < len(args_list):
        word = args_list[index]
        if word == "--data-dir":
            index += 2
            continue
        if word.startswith("-"):
            if word in ("-h", "--help", "--version"):
                _top_parser().parse_args(args_list)
                return 0
            index += 1
            continue
        if word not in COMMANDS:
            _top_parser().error(f"unknown command '{word}'")
        command = word
        args_list.pop(index)
        break
    module = _load(command)
    parser = UsageParser(prog=f"maka {command}", description=COMMANDS[command][1])
    parser.add_argument(
        "--data-dir",
        help="data directory (default: MAKA_DATA_DIR or per-user)"
        if command != "ledger"
        else "not read: the ledger tools work on the file they are given",
    )
    module.add_arguments(parser)
    _json_errors(parser, "--json" in args_list)
    args = parser.parse_args(args_list)
    as_json = bool(getattr(args, "json", False))
    saved = sys.stdout, sys.stderr
    # Every command Maka suggests carries the data folder given here (docs/design/cli.md,
    # "Commands Maka suggests"); one from MAKA_DATA_DIR, which a pasted command inherits, or
    # the per-user default adds nothing.
    from runtime.ledger.command_words import suggest_data_dir

    given = args.data_dir
    if command in _SERVING and not (given and given.strip()):
        # A Maka that serves others (the desktop, ``maka host``) is not in the shell a pasted
        # command runs in: a terminal given ``--data-dir`` attaches to it, a window started
        # from a launcher has no shell at all. A folder from MAKA_DATA_DIR is named too.
        given = os.environ.get("MAKA_DATA_DIR")
    said_before = suggest_data_dir(_given_data_dir(given))
    if command != "gui":
        # Text from outside (file names, the record's messages, paths in errors) reaches the
        # terminal with its control characters shown by name, never acted on.
        from app.visible_text import VisibleStream

        if not as_json and sys.stdout is not None:  # (None: no console, pythonw on Windows)
            sys.stdout = VisibleStream(sys.stdout)
        if sys.stderr is not None:
            sys.stderr = VisibleStream(sys.stderr)
    try:
        _require_known_failpoint()
        _require_data_dir_given(
            args.data_dir,
            os.environ if command != "ledger" else {},
            # (self-test reports what is in the way as one of its checks)
            in_the_way=command != "self-test",
        )
        _require_utf8_data_dir(args.data_dir or os.environ.get("MAKA_DATA_DIR"))
        _require_text_arguments(args)
        return module.run(args)
    except KeyboardInterrupt:
        from runtime.ledger.codes import HostCode

        return _refused(HostCode.INTERRUPTED, "interrupted", EXIT_ERROR, as_json=as_json)
    except BrokenPipeError:  # the reader went away (`maka plan S | head`): stop quietly
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as error:
        # Every refusal (a command's own, and those of the ledger, the store and the services:
        # a damaged database met halfway through a command, say) carries a stable code: the
        # user gets that code and sentence, never a traceback. The desktop's request router
        # maps errors with the same ``coded_failure``. Anything else is a defect and keeps its
        # traceback.
        from runtime.ledger.coded_error import coded_failure

        failure = coded_failure(error)
        if failure is None:
            raise
        exit_code = error.exit_code if isinstance(error, CliError) else EXIT_ERROR
        return _refused(failure.code, failure.message, exit_code, as_json=as_json)
    finally:
        sys.stdout, sys.stderr = saved
        suggest_data_dir(said_before)


_SERVING = ("gui", "host")
"""The commands whose process serves others: their suggestions name a folder from
MAKA_DATA_DIR too (only the per-user default goes without)."""


def _given_data_dir(option: str | None) -> str | None:
    """The data folder given with ``--data-dir``, absolute (as ``resolve_data_dir`` makes it),
    or None: not given, or given empty (refused below) or not as UTF-8 text (refused too)."""
    if not option or not option.strip():
        return None
    from app.data_paths import resolve_data_dir

    return str(resolve_data_dir(option))


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a program the pipe ended


def _silence_stdout() -> None:
    from app.visible_text import silence

    silence(sys.stdout)


LONGEST_WORD_SAID = 4096
"""A word of a refusal longer than this (no path is: 4,096 bytes is the longest Linux takes)
is said by its beginning and its length: a session id of 100,000 characters was echoed
whole, a 100 KB line per refusal."""


def _shortened_words(message: str) -> str:
    import re

    def shorten(found: re.Match[str]) -> str:
        word = found.group(0)
        return f"{word[:100]}… ({len(word)} characters)"

    return re.sub(rf"\S{{{LONGEST_WORD_SAID + 1},}}", shorten, message)


def _refused(code: str, message: str, exit_code: int, *, as_json: bool) -> int:
    """Report a refused command: ``maka: error [code]: message`` on stderr and, with
    ``--json``, the same refusal as the one JSON document on stdout; same exit code."""
    message = _shortened_words(message)
    try:
        sys.stdout.flush()
        if as_json:
            print_json_error(code, message)
            sys.stdout.flush()
    except BrokenPipeError:  # nobody reads the document (`... --json | true`): stderr still says
        _silence_stdout()
    if code == "interrupted":  # HostCode.INTERRUPTED, without loading the codes
        print("maka: interrupted", file=sys.stderr)
    else:
        print(f"maka: error [{code}]: {message}", file=sys.stderr)
    return exit_code


def _require_known_failpoint() -> None:
    """A ``MAKA_FAILPOINT`` that names no crash point would never fire: refuse it before doing
    anything (a crash drill with a misspelt point would otherwise run to the end)."""
    value = os.environ.get("MAKA_FAILPOINT")
    if not value:
        return
    from runtime.ledger.crash_points import UnknownCrashPoint, crash_point_named

    try:
        crash_point_named(value)
    except UnknownCrashPoint as unknown:
        raise CliError(unknown.code, unknown.message, EXIT_USAGE) from None


_ARGUMENT_WORDS = {
    "session": "session id",
    "at": "event id (--at)",
    "to": "folder (--to)",
    "cwd": "folder (--cwd)",
    "restore_to": "folder (--restore-to)",
    "operation": "call id",
    "note": "note (--note)",
    "folder": "folder",
}


_NOT_EMPTY = frozenset({"session", "at", "operation", "folder"})
"""Arguments an empty string never means (an unset shell variable, ``maka plan "$S"``): an id
is refused as empty rather than looked up ("no session " naming nothing), and a folder rather
than taken as the current one."""


def _require_text_arguments(args: argparse.Namespace) -> None:
    """Every text argument is UTF-8 (a session id, an event id, a folder, a prompt, a note):
    bytes that are not (kept as surrogates by Python) are refused here, with a code, before a
    command prints or stores them; file arguments (``Path``) may hold any bytes. An id or a
    folder that is empty is refused too."""
    for name, value in vars(args).items():
        if name == "data_dir" or not isinstance(value, str):
            continue
        if name in _NOT_EMPTY and not value.strip():
            from runtime.ledger.codes import HostCode

            words = _ARGUMENT_WORDS.get(name, name.replace("_", " "))
            raise CliError(
                HostCode.INVALID_ARGUMENT, f"the {words} is empty; nothing was changed", EXIT_USAGE
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            from runtime.ledger.codes import HostCode

            words = _ARGUMENT_WORDS.get(name, name.replace("_", " "))
            raise CliError(
                HostCode.TEXT_NOT_UTF8,
                f"the {words} holds bytes that are not UTF-8 text; nothing was changed",
                EXIT_USAGE,
            ) from None


def _require_data_dir_given(
    option: str | None, environ: Mapping[str, str], *, in_the_way: bool = True
) -> None:
    """``--data-dir ""`` (an unset shell variable) is refused: taken as not given, the command
    would work on MAKA_DATA_DIR's or the per-user data folder, the user's real sessions. So is
    ``MAKA_DATA_DIR`` set to nothing when no ``--data-dir`` is given
    (``MAKA_DATA_DIR=$TYPO maka sessions remove S --yes``); the ledger tools, which open no
    data folder, do not look (``environ`` empty)."""
    words = None
    if option is not None:
        if not option.strip():
            words = "the data directory (--data-dir) is empty; nothing was changed"
    elif "MAKA_DATA_DIR" in environ and not environ["MAKA_DATA_DIR"].strip():
        words = (
            "MAKA_DATA_DIR is set but empty (an unset shell variable?); unset it to use your "
            "per-user data folder, or give a folder; nothing was changed"
        )
    given = option if option is not None else environ.get("MAKA_DATA_DIR")
    if words is None and given and in_the_way:
        # A file (or a link to one, or a link that leads nowhere) where the data folder or a
        # folder above it should be: said as such by every command (they said "Not a
        # directory", "File exists" or data_dir_unavailable).
        blocking = _not_a_folder(os.path.abspath(os.path.expanduser(given)))
        if blocking is not None:
            words = f"{blocking}; give a data folder; nothing was changed"
    if words is not None:
        from runtime.ledger.codes import HostCode

        raise CliError(HostCode.DATA_DIR_INVALID, words, EXIT_USAGE)


def _not_a_folder(path: str) -> str | None:
    """What stands where ``path`` (a data folder) or a folder above it should be, in words;
    None when nothing does (they are folders, or do not exist yet)."""
    here = path
    while True:
        if os.path.islink(here) and not os.path.exists(here):
            return f"{here} is a link that leads nowhere, not a folder"
        if os.path.exists(here):
            return None if os.path.isdir(here) else f"{here} is a file, not a folder"
        above = os.path.dirname(here)
        if above == here:
            return None
        here = above


def _require_utf8_data_dir(data_dir: str | None) -> None:
    if data_dir is None:
        return
    try:
        data_dir.encode("utf-8")
    except UnicodeEncodeError:
        from runtime.ledger.codes import HostCode

        raise CliError(
            HostCode.DATA_DIR_INVALID,
            "the data directory (--data-dir or MAKA_DATA_DIR) holds bytes that are not UTF-8 text",
            EXIT_USAGE,
        ) from None


def _closed_streams_are_empty() -> None:
    """A standard stream the caller closed (``>&-``, ``<&-``) is ``/dev/null`` for the command
    and every process it starts: with stdout closed every printing command failed with a
    traceback (``maka run`` leaving its run to be repaired), and with stdin closed a question
    waited for an answer for ever. Now nothing printed goes anywhere, and a closed stdin reads
    as the end of input (a question is denied, as with ``</dev/null``)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:  # (the lowest free descriptor: this one, when the lower are open)
                os.dup2(opened, fd)
                os.close(opened)
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115


def run_main() -> None:
    _closed_streams_are_empty()
    try:
        code = main()
    except KeyboardInterrupt:
        # Ctrl+C while the command was still loading (before it could handle it itself):
        # nothing was done yet, said as every other interrupted command says it.
        print("maka: interrupted", file=sys.stderr)
        code = EXIT_ERROR
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    sys.exit(code)


__all__ = ["EXIT_USAGE", "main"]


if __name__ == "__main__":
    run_main()
