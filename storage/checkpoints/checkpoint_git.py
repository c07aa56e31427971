"""Running the user's ``git`` against a private checkpoint repository, isolated from everything
else the user has configured (docs/design/workspace.md section 1).

Every call runs with ``GIT_DIR`` = the private bare repository, ``GIT_WORK_TREE`` = the session
folder and ``GIT_INDEX_FILE`` = the private persistent index, so the folder's own ``.git`` (if
any) is never read or written: not its HEAD, index, config, hooks, refs or worktrees. The user's
configuration is kept out too: no system config (``GIT_CONFIG_NOSYSTEM``), an empty private
``HOME`` / ``XDG_CONFIG_HOME`` (so no global config, global excludes or credential helpers: the
user's excludes file is read by the store itself, into the private ``info/exclude``), no
``GIT_*`` variable of the caller's environment, hooks pointed at the null device, and settings
that make a snapshot byte-faithful and quiet (no automatic gc, no fsmonitor, no signing, no
line-ending conversion). Path arguments are literal (``GIT_LITERAL_PATHSPECS``).
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar, cast

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.codes import CheckpointFailureCode

MIN_GIT_VERSION = (2, 25)
GIT_TIMEOUT_S = 120.0
_FAILING_EXIT_S = 0.5
"""How long a streamed command whose output a reader found cut short may take to exit."""
_T = TypeVar("_T")

_ISOLATING_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.symlinks", "true"),
    ("core.quotePath", "false"),
    ("core.longpaths", "true"),
    ("core.untrackedCache", "false"),
    ("core.splitIndex", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("commit.gpgSign", "false"),
    ("index.threads", "true"),
    ("advice.detachedHead", "false"),
)
_VERSION = re.compile(r"git version (\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class GitCommand:
    """The ``git`` found on ``PATH`` and its version."""

    path: str
    version: tuple[int, int]
    version_text: str


def find_git(environ: Mapping[str, str] | None = None) -> GitCommand | None:
    """The user's ``git`` when it is on ``PATH`` and runs; None otherwise."""
    env = os.environ if environ is None else environ
    path = shutil.which("git", path=env.get("PATH"))
    if path is None:
        return None
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            timeout=30,
            check=False,
            env=_base_env(env, None),
            creationflags=_NO_WINDOW,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.decode("utf-8", "replace").strip()
    match = _VERSION.search(text)
    if done.returncode != 0 or match is None:
        return None
    return GitCommand(path, (int(match.group(1)), int(match.group(2))), text)


# Everything git writes in the data directory is the user's only (0700 folders, 0600 files),
# like every other file Maka keeps there.
_UMASK = 0o077 if sys.platform != "win32" else -1  # -1: Popen leaves it as it is
# No console window flashes up for each git call on Windows.
_NO_WINDOW: int = getattr(subprocess, "CREATE_NO_WINDOW", 0) if sys.platform == "win32" else 0


def _base_env(environ: Mapping[str, str], home: Path | None) -> dict[str, str]:
    env = {key: value for key, value in environ.items() if not key.upper().startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_LITERAL_PATHSPECS"] = "1"
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "Maka"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "checkpoints@maka.invalid"
    env["LC_ALL"] = "C"
    env.pop("XDG_CONFIG_HOME", None)
    if home is not None:
        env["HOME"] = env["USERPROFILE"] = env["XDG_CONFIG_HOME"] = str(home)
    return env


class GitRunner:
    """Runs ``git`` for one private repository (``git_dir``) and one work tree."""

    def __init__(self, git: GitCommand, home: Path, environ: Mapping[str, str] | None = None):
        self.git = git
        self._env = _base_env(os.environ if environ is None else environ, home)
        self._prefix = [git.path]
        for key, value in _ISOLATING_CONFIG:
            self._prefix += ["-c", f"{key}={value}"]

    def with_alternate(self, objects: Path) -> GitRunner:
        """A runner that also reads objects from another private repository's ``objects``
        folder (``GIT_ALTERNATE_OBJECT_DIRECTORIES``, for its commands only: no repository's
        configuration changes)."""
        other = copy.copy(self)
        other._env = {**self._env, "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects)}
        return other

    def with_objects(self, objects: Path) -> GitRunner:
        """A runner whose commands read and write objects in ``objects`` only (no alternate):
        what a command would write, seen without writing it anywhere else."""
        other = copy.copy(self)
        other._env = {**self._env, "GIT_OBJECT_DIRECTORY": str(objects)}
        other._env.pop("GIT_ALTERNATE_OBJECT_DIRECTORIES", None)
        return other

    def run(
        self,
        args: Sequence[str],
        *,
        git_dir: Path,
        work_tree: Path | None = None,
        index: Path | None = None,
        stdin: bytes | None = None,
        ok_codes: tuple[int, ...] = (0,),
        umask: int | None = None,
    ) -> bytes:
        """``git args`` with the private repository; its standard output. Raises
        ``CheckpointError`` (``checkpoint_git_failed`` / ``checkpoint_git_timeout``)."""
        env = self._repository_env(git_dir, work_tree, index)
        returncode, out, err = _run_watched(
            [*self._prefix, *args],
            name=args[0],
            stdin=stdin,
            env=env,
            cwd=str(work_tree if work_tree is not None else git_dir),
            umask=_UMASK if umask is None or sys.platform == "win32" else umask,
        )
        if returncode not in ok_codes:
            raise _failed(args[0], err, returncode)
        _refuse_unread(args[0], err)
        return out

    def _repository_env(
        self, git_dir: Path, work_tree: Path | None, index: Path | None
    ) -> dict[str, str]:
        env = dict(self._env)
        env["GIT_DIR"] = str(git_dir)
        if work_tree is not None:
            env["GIT_WORK_TREE"] = str(work_tree)
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        return env

    def stream(
        self,
        args: Sequence[str],
        *,
        git_dir: Path,
        stdin: bytes,
        consume: Callable[[IO[bytes]], _T],
    ) -> _T:
        """``git args`` with the private repository, its standard output read as it comes by
        ``consume`` (what it returns is returned): a command whose output is as large as the
        objects it prints (``cat-file --batch``) never has it held whole in memory. Its input
        is written beside the reading (a long query would otherwise fill the pipe both ways).
        Raises ``CheckpointError`` as ``run`` does; what ``consume`` raises is raised after
        the command is stopped, unless the command failed or timed out first (that is then
        raised instead: its output was cut short)."""
        try:
            process = _start(
                [*self._prefix, *args],
                stdin=True,
                env=self._repository_env(git_dir, None, None),
                cwd=str(git_dir),
                umask=_UMASK,
            )
        except OSError as error:
            raise CheckpointError(
                CheckpointFailureCode.CHECKPOINT_GIT_FAILED, f"git could not start: {error}"
            ) from None
        errors: list[bytes] = []
        watch = _WATCHDOG.watch(process, GIT_TIMEOUT_S)
        helpers = [
            threading.Thread(target=_feed, args=(process, stdin), daemon=True),
            threading.Thread(target=_drain, args=(process, errors), daemon=True),
        ]
        failure: BaseException | None = None
        stopped = False
        result: _T | None = None
        try:
            with process:
                for helper in helpers:
                    helper.start()
                out = process.stdout
                assert out is not None
                try:
                    result = consume(out)
                    while out.read(1 << 16):
                        pass  # what was left unread: the command ends, the input is written
                except BaseException as error:
                    failure = error
                    if isinstance(error, Exception) and process.poll() is None:
                        # What was read ended early most often because Git stopped with an
                        # error (an object it cannot read): a moment for it to exit, so that
                        # its own error is told, not the reader's "ended inside".
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            process.wait(timeout=_FAILING_EXIT_S)
                    if process.poll() is None:
                        stopped = True
                        _stop(process)
                for helper in helpers:
                    helper.join()
        finally:
            expired = _WATCHDOG.release(watch)
        if expired:
            raise CheckpointError(
                CheckpointFailureCode.CHECKPOINT_GIT_TIMEOUT,
                f"git {args[0]} did not finish within {GIT_TIMEOUT_S:.0f} s",
            )
        if process.returncode != 0 and not stopped:
            raise _failed(args[0], b"".join(errors), process.returncode)
        if failure is not None:
            raise failure
        return cast(_T, result)  # set whenever nothing was raised

    def run_together(
        self,
        commands: Sequence[Sequence[str]],
        *,
        git_dir: Path,
        work_tree: Path | None = None,
        index: Path | None = None,
        beside: Callable[[], None] | None = None,
    ) -> list[bytes]:
        """Several read-only ``git`` commands with the same repository, started at once and
        running side by side (none may write: they share the index); their standard outputs
        in order. ``beside`` is called once they have started, before waiting for them (work
        that should not delay their start). Raises ``CheckpointError`` as ``run`` does."""
        env = self._repository_env(git_dir, work_tree, index)
        started: list[tuple[Sequence[str], subprocess.Popen[bytes]]] = []
        try:
            for args in commands:
                started.append(
                    (
                        args,
                        _start(
                            [*self._prefix, *args],
                            stdin=False,
                            env=env,
                            cwd=str(work_tree if work_tree is not None else git_dir),
                            umask=_UMASK,
                        ),
                    )
                )
            if beside is not None:
                beside()
            outputs: list[bytes] = []
            deadline = time.monotonic() + GIT_TIMEOUT_S
            for args, process in started:
                out, err = _finish(process, None, deadline - time.monotonic(), args[0])
                if process.returncode != 0:
                    raise _failed(args[0], err, process.returncode)
                _refuse_unread(args[0], err)
                outputs.append(out)
            return outputs
        except OSError as error:
            raise CheckpointError(
                CheckpointFailureCode.CHECKPOINT_GIT_FAILED, f"git could not start: {error}"
            ) from None
        finally:
            # A command left running (another one failed or timed out) is stopped, and every
            # pipe closed.
            for _, process in started:
                if process.poll() is None:
                    _stop(process)
                    process.wait()
                for pipe in (process.stdout, process.stderr):
                    if pipe is not None:
                        pipe.close()

    def start_ahead(
        self,
        args: Sequence[str],
        *,
        git_dir: Path,
        work_tree: Path | None = None,
        index: Path | None = None,
    ) -> Started | None:
        """Start ``git args`` now, its standard input given later (``Started.finish``): a
        command whose input is still being worked out starts beside that work, so its start
        and its reading of the repository cost nothing after it. None when it cannot start
        (the caller runs the command as usual)."""
        try:
            process = _start(
                [*self._prefix, *args],
                stdin=True,
                env=self._repository_env(git_dir, work_tree, index),
                cwd=str(work_tree if work_tree is not None else git_dir),
                umask=_UMASK,
            )
        except OSError:
            return None
        return Started(process, args[0])

    def remove_from_index(
        self, names: Sequence[bytes], *, git_dir: Path, work_tree: Path, index: Path
    ) -> None:
        """Drop the entries ``names`` (paths as the index holds them) from ``index``, whatever
        is in the work tree at those paths. Nothing to drop runs no command."""
        if names:
            self.run(
                ["update-index", "-z", "--force-remove", "--stdin"],
                git_dir=git_dir,
                work_tree=work_tree,
                index=index,
                stdin=b"\0".join(names) + b"\0",
            )

    def run_outside(self, args: Sequence[str], *, cwd: Path) -> bytes:
        """``git args`` with no private repository named (``clone``, or a command in a
        repository of its own such as a restored copy's), isolated from the user's
        configuration as every call is. Raises ``CheckpointError``."""
        returncode, out, err = _run_watched(
            [*self._prefix, *args],
            name=args[0],
            stdin=None,
            env=dict(self._env),
            cwd=str(cwd),
            umask=0o022 if sys.platform != "win32" else -1,
        )
        if returncode != 0:
            raise _failed(args[0], err, returncode)
        return out

    def init_bare(self, git_dir: Path) -> None:
        """Create the private bare repository (no template: no sample hooks)."""
        returncode, _, err = _run_watched(
            [*self._prefix, "init", "--bare", "--quiet", "--template=", str(git_dir)],
            name="init",
            stdin=None,
            env=dict(self._env),
            cwd=str(git_dir.parent),
            umask=_UMASK,
        )
        if returncode != 0:
            text = err.decode("utf-8", "replace").strip()
            raise CheckpointError(
                CheckpointFailureCode.CHECKPOINT_GIT_FAILED, f"git init failed: {text}"
            )


class Started:
    """A Git command started ahead of its input (``GitRunner.start_ahead``). Ended exactly
    once: ``finish`` with its input, or ``cancel``, which gives it none (a command that reads
    paths from its input then has nothing to do and writes nothing; a crash of this process
    closes the input the same way)."""

    def __init__(self, process: subprocess.Popen[bytes], name: str) -> None:
        self._process = process
        self._name = name
        self._ended = False

    def finish(self, stdin: bytes | None, *, ok_codes: tuple[int, ...] = (0,)) -> bytes:
        """Give the command its input (None: none) and wait for it, within ``GIT_TIMEOUT_S``
        from now; its standard output. Raises ``CheckpointError`` as ``GitRunner.run``."""
        if self._ended:
            raise RuntimeError(f"git {self._name} was already ended")
        self._ended = True
        with self._process as process:
            out, err = _finish(process, stdin or None, GIT_TIMEOUT_S, self._name)
        if process.returncode not in ok_codes:
            raise _failed(self._name, err, process.returncode)
        return out

    def give(self, stdin: bytes) -> None:
        """Give the command its whole input now and let it run; ``finish(None)`` (or
        ``cancel``) waits for it later. A command that ended already is reported by that
        wait."""
        pipe, self._process.stdin = self._process.stdin, None
        if pipe is None:
            return
        with contextlib.suppress(OSError):  # a broken pipe: it ended, the wait says how
            try:
                pipe.write(stdin)
            finally:
                pipe.close()

    def cancel(self) -> None:
        """End the command with no input and wait for it; what it reports is not read. It is
        not killed (unless it outlives its deadline): a Git command killed while it holds a
        lock leaves the lock behind. Nothing when it has ended already."""
        if self._ended:
            return
        self._ended = True
        with contextlib.suppress(CheckpointError, OSError), self._process as process:
            _finish(process, None, GIT_TIMEOUT_S, self._name)


def _feed(process: subprocess.Popen[bytes], data: bytes) -> None:
    """Write a streamed command's whole input, then close it (a broken pipe: it ended)."""
    pipe = process.stdin
    if pipe is None:
        return
    with contextlib.suppress(OSError, ValueError):
        try:
            pipe.write(data)
        finally:
            pipe.close()


def _drain(process: subprocess.Popen[bytes], into: list[bytes]) -> None:
    """Read a streamed command's standard error to its end."""
    if process.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            into.append(process.stderr.read())


# Each command runs in a process group of its own (POSIX), so that a command stopped at its
# deadline is stopped with everything it started (``gc`` runs ``pack-objects``, which would
# otherwise keep the pipes open and the caller waiting).
_OWN_GROUP = sys.platform != "win32"


def _run_watched(
    command: list[str],
    *,
    name: str,
    stdin: bytes | None,
    env: dict[str, str],
    cwd: str,
    umask: int,
) -> tuple[int, bytes, bytes]:
    """Run ``command`` to its end within ``GIT_TIMEOUT_S``: its exit code, standard output and
    standard error. Raises ``CheckpointError`` when it cannot start or does not finish."""
    try:
        process = _start(command, stdin=bool(stdin), env=env, cwd=cwd, umask=umask)
    except OSError as error:
        raise CheckpointError(
            CheckpointFailureCode.CHECKPOINT_GIT_FAILED, f"git could not start: {error}"
        ) from None
    with process:
        out, err = _finish(process, stdin or None, GIT_TIMEOUT_S, name)
    return process.returncode, out, err


def _start(
    command: list[str], *, stdin: bool, env: dict[str, str], cwd: str, umask: int
) -> subprocess.Popen[bytes]:
    """Start a Git command with its outputs piped (and its input, with ``stdin``), in a
    process group of its own."""
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        creationflags=_NO_WINDOW,
        umask=umask,
        start_new_session=_OWN_GROUP,
    )


_UNOPENED = re.compile(rb'^error: open\("(.*)"\): (.*)$', re.MULTILINE)


def _failed(name: str, err: bytes, returncode: int) -> CheckpointError:
    """``checkpoint_git_failed`` with the last line Git wrote to standard error (or the exit
    code when it wrote none); ``checkpoint_folder_unreadable`` naming the file when Git could
    not open one of the folder's files (its permissions forbid reading it): the cause is the
    file, not Git."""
    unopened = _UNOPENED.search(err)
    if unopened is not None:
        path = os.fsdecode(unopened.group(1))
        reason = unopened.group(2).decode("utf-8", "replace")
        return CheckpointError(
            CheckpointFailureCode.CHECKPOINT_FOLDER_UNREADABLE,
            f"the file {path!r} cannot be read ({reason}); a snapshot would leave it out",
        )
    message = err.decode("utf-8", "replace").strip().splitlines()
    return CheckpointError(
        CheckpointFailureCode.CHECKPOINT_GIT_FAILED,
        f"git {name} failed: {message[-1] if message else returncode}",
    )


_UNREAD = re.compile(rb"^warning: could not open directory '(.*)': (.*)$", re.MULTILINE)


def _refuse_unread(name: str, err: bytes) -> None:
    """A listing of the folder (``ls-files``) that met a folder it could not open: Git warns
    and lists the rest, so a snapshot taken from it would leave that folder out and still be
    called whole. Refused instead (``checkpoint_folder_unreadable``), naming the folder."""
    if name != "ls-files":
        return
    found = _UNREAD.search(err)
    if found is not None:
        folder = os.fsdecode(found.group(1)).rstrip("/") or "."
        reason = found.group(2).decode("utf-8", "replace")
        raise CheckpointError(
            CheckpointFailureCode.CHECKPOINT_FOLDER_UNREADABLE,
            f"the folder {folder!r} cannot be read ({reason}); a snapshot would leave out "
            "what it holds",
        )


def _finish(
    process: subprocess.Popen[bytes], stdin: bytes | None, timeout: float, name: str
) -> tuple[bytes, bytes]:
    """``process.communicate(stdin)`` within ``timeout`` seconds. The shared watchdog stops
    the command (and its group) at the deadline instead of ``communicate(timeout=...)``, which
    waits for the exit by polling with growing sleeps (a millisecond or more on every call,
    several times per snapshot), and without a thread started per call."""
    watch = _WATCHDOG.watch(process, max(timeout, 0.0))
    try:
        out, err = process.communicate(stdin)
    finally:
        expired = _WATCHDOG.release(watch)
    if expired:
        raise CheckpointError(
            CheckpointFailureCode.CHECKPOINT_GIT_TIMEOUT,
            f"git {name} did not finish within {GIT_TIMEOUT_S:.0f} s",
        )
    return out, err


@dataclass
class _Watch:
    deadline: float
    process: subprocess.Popen[bytes]
    expired: bool = False
    released: bool = False


class _Watchdog:
    """One daemon thread, started on first use, that stops every command still running at its
    deadline. A command's watch is released when it has ended; a watch released before its
    deadline never stops anything, and neither does one whose command was reaped (its process
    id may be reused): the decision and the release share one lock."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._watches: list[_Watch] = []
        self._thread: threading.Thread | None = None

    def watch(self, process: subprocess.Popen[bytes], timeout: float) -> _Watch:
        entry = _Watch(time.monotonic() + timeout, process)
        with self._lock:
            sooner = all(entry.deadline < w.deadline for w in self._watches)
            self._watches.append(entry)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="maka-git-watchdog", daemon=True
                )
                self._thread.start()
            elif sooner:
                self._lock.notify()  # the thread waits for a later deadline
        return entry

    def release(self, entry: _Watch) -> bool:
        """Whether the command was stopped at its deadline."""
        with self._lock:
            entry.released = True
            with contextlib.suppress(ValueError):
                self._watches.remove(entry)
            return entry.expired

    def _run(self) -> None:
        with self._lock:
            while True:
                now = time.monotonic()
                for entry in [w for w in self._watches if w.deadline <= now]:
                    self._watches.remove(entry)
                    if not entry.released and entry.process.returncode is None:
                        entry.expired = True
                        _stop(entry.process)
                if self._watches:
                    self._lock.wait(min(w.deadline for w in self._watches) - now)
                else:
                    self._lock.wait()


_WATCHDOG = _Watchdog()


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a command and, on POSIX, every process it started (its group)."""
    with contextlib.suppress(OSError):
        if _OWN_GROUP:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
