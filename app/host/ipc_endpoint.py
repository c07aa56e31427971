"""Where the main process's local socket lives: a directory only this user can enter.

Why not a name in ``/tmp``: any local user can create a predictable name there first (a socket, a
file, a directory) and so stop Maka from starting, or make it listen where they choose. The
endpoint is therefore a full path (``QLocalServer`` takes a name with a ``/`` as a path) inside a
private directory, tried in this order:

1. ``$XDG_RUNTIME_DIR/maka-<hash>``, when that directory is ours and not group- or world-accessible
   (the session's runtime directory on Linux desktops);
2. ``<data_dir>/ipc/maka-<hash>``: a 0700 directory inside the (private) data directory;
3. when both paths are too long for a socket address (``sun_path`` holds 108 bytes on Linux and
   104 on macOS, including the terminating NUL, so 100 is the limit used here), a directory with
   a random name under the system temp folder (``mkdtemp``: 0700, unguessable).

The chosen path is also written to ``<data_dir>/ipc/endpoint`` (0600), so a second launch finds
the running instance even where it would not have chosen the same place itself.

While the host serves, ``<data_dir>/ipc/terminal-token`` (0600) holds the token a terminal
client (``maka sessions`` and the other commands, ``host_client``) says hello with; the host
writes a new one at each start and removes it when it closes.

The hash derives from the user id and the data directory, so two data directories (tests,
portable mode) never meet. Windows keeps a plain pipe name (named pipes are not files).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

MAX_SOCKET_PATH_BYTES = 100
IPC_DIR_NAME = "ipc"
POINTER_NAME = "endpoint"
TERMINAL_TOKEN_NAME = "terminal-token"
_TEMP_PREFIX = "maka-ipc-"


class EndpointError(RuntimeError):
    """The endpoint's directory cannot be made private; the message says why."""


def socket_name_for(data_dir: Path) -> str:
    """Short, per-user, per-data-directory socket file name (deterministic)."""
    resolved = os.path.realpath(os.fspath(data_dir))
    uid = getattr(os, "getuid", lambda: 0)()
    digest = _sha256_hex(f"{uid}\0{resolved}".encode())[:12]
    return f"maka-{digest}"


def _sha256_hex(data: bytes) -> str:
    """``hashlib.sha256(data).hexdigest()``, from the interpreter's built-in SHA-256 when it has
    one (the same digest): ``hashlib`` starts OpenSSL, ~5 ms of every command that looks for a
    running host (``maka sessions``)."""
    for name in ("_sha2", "_sha256"):  # Python 3.12 and later; 3.11
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return str(module.sha256(data).hexdigest())
    import hashlib

    return hashlib.sha256(data).hexdigest()


def fits(path: str) -> bool:
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH_BYTES


def _is_private_dir(path: str) -> bool:
    """An existing real directory (not a link) owned by this user, closed to everyone else."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and stat.S_IMODE(info.st_mode) & 0o077 == 0
    )


def _ipc_dir(data_dir: Path) -> str:
    return os.path.join(os.path.realpath(os.fspath(data_dir)), IPC_DIR_NAME)


def fixed_endpoint(data_dir: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """The endpoint path when one of the fixed places fits, else None (the random fallback)."""
    if sys.platform == "win32":
        return socket_name_for(data_dir)
    env = os.environ if environ is None else environ
    name = socket_name_for(data_dir)
    runtime_dir = env.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime_dir) and _is_private_dir(runtime_dir):
        candidate = os.path.join(runtime_dir, name)
        if fits(candidate):
            return candidate
    candidate = os.path.join(_ipc_dir(data_dir), name)
    return candidate if fits(candidate) else None


def _pointed(data_dir: Path) -> str | None:
    try:
        pointed = (Path(_ipc_dir(data_dir)) / POINTER_NAME).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return pointed if os.path.isabs(pointed) and fits(pointed) else None


def find_endpoint(data_dir: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """For a second launch: where the running instance listens (None when it has not said).

    A socket that exists in any of the places wins, so a launch whose environment differs (no
    ``XDG_RUNTIME_DIR``, say) still finds the running instance; else the place this launch
    would choose itself."""
    if sys.platform == "win32":
        return socket_name_for(data_dir)
    fixed = fixed_endpoint(data_dir, environ)
    data_dir_socket = os.path.join(_ipc_dir(data_dir), socket_name_for(data_dir))
    for candidate in (fixed, data_dir_socket, _pointed(data_dir)):
        if candidate is not None and fits(candidate) and _is_socket(candidate):
            return candidate
    return fixed if fixed is not None else _pointed(data_dir)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def prepare_endpoint(data_dir: Path, environ: Mapping[str, str] | None = None) -> str:
    """For the instance-lock holder: make the endpoint's directory private and return the path.

    Raises ``EndpointError`` naming the reason when no private directory can be had."""
    fixed = fixed_endpoint(data_dir, environ)
    if sys.platform == "win32":
        assert fixed is not None
        return fixed
    ipc_dir = _ipc_dir(data_dir)
    _make_private_dir(ipc_dir)
    pointer = os.path.join(ipc_dir, POINTER_NAME)
    if fixed is not None:
        # Said where, too: a second launch from another environment (no XDG_RUNTIME_DIR)
        # would not guess this place.
        _write_private(pointer, fixed)
        return fixed
    name = socket_name_for(data_dir)
    previous = _pointed(data_dir)
    if (
        previous is not None
        and os.path.basename(os.path.dirname(previous)).startswith(_TEMP_PREFIX)
        and _is_private_dir(os.path.dirname(previous))
    ):
        # A directory from an earlier launch that was killed: reuse it rather than leak another.
        return previous
    import tempfile  # the host's start only: commands that look for a host stay small

    directory = tempfile.mkdtemp(prefix=_TEMP_PREFIX)
    endpoint = os.path.join(directory, name)
    if not fits(endpoint):
        os.rmdir(directory)
        raise EndpointError(
            f"no private place for the window's socket fits in {MAX_SOCKET_PATH_BYTES} bytes "
            f"(the temp folder {tempfile.gettempdir()} has a long path); set TMPDIR to a "
            "shorter folder"
        )
    _write_private(pointer, endpoint)
    return endpoint


def terminal_token_path(data_dir: Path) -> str:
    return os.path.join(_ipc_dir(data_dir), TERMINAL_TOKEN_NAME)


def publish_terminal_token(data_dir: Path, token: str) -> None:
    """For the host, after ``prepare_endpoint``: where terminal clients find their token (0600,
    in the private ``ipc`` folder). Raises ``EndpointError`` when it cannot be written."""
    _write_private(terminal_token_path(data_dir), token)


def release_endpoint(data_dir: Path, endpoint: str) -> None:
    """After the server closed: remove the pointer, the terminal token and a random fallback
    directory."""
    for name in (POINTER_NAME, TERMINAL_TOKEN_NAME):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(_ipc_dir(data_dir), name))
    directory = os.path.dirname(endpoint)
    if os.path.basename(directory).startswith(_TEMP_PREFIX):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


def _make_private_dir(path: str) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise EndpointError(f"cannot create {path}: {error.strerror or error}") from None
    try:
        info = os.lstat(path)
    except OSError as error:
        raise EndpointError(f"cannot inspect {path}: {error.strerror or error}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise EndpointError(f"{path} is not a folder (a link or a file is in its place)")
    if info.st_uid != os.getuid():
        raise EndpointError(f"{path} belongs to another user (uid {info.st_uid})")
    if stat.S_IMODE(info.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as error:
            raise EndpointError(f"cannot make {path} private: {error.strerror or error}") from None


def _write_private(path: str, text: str) -> None:
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        os.replace(temp, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise EndpointError(f"cannot write {path}: {error.strerror or error}") from None
