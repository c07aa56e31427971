"""File operations that cannot leave the session folder, whatever happens to it meanwhile.

Preflight (``workspace_paths``) resolves a path once; a concurrent process can then swap a folder
on that path for a symbolic link to somewhere else. Following the path again would write there.
So every operation of the file tools starts from a descriptor of the workspace root and opens each
component of the (already symlink-free) relative path with ``O_NOFOLLOW | O_DIRECTORY``, relative
to the previous descriptor: a component that is now a link fails with ``ELOOP``/``ENOTDIR``
instead of being followed. The final file is opened with ``O_NOFOLLOW`` relative to its folder's
descriptor, and a write's temporary file is created and renamed relative to that same descriptor,
so the bytes, the temp file and the rename all stay in the folder that was walked.

Where the platform lacks ``dir_fd`` support (Windows), the fallback works on paths and re-verifies
the final path (its realpath must still be the expected one inside the root) after opening and
again just before the rename. That narrows the race window but cannot close it entirely.

Errors are ``OSError`` (callers turn them into refusals or failures) or ``FolderMoved``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

DIR_FD_SUPPORTED = (
    os.open in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and os.rename in os.supports_dir_fd  # os.replace takes the same dir_fd arguments
    and os.mkdir in os.supports_dir_fd
    and os.unlink in os.supports_dir_fd
    and hasattr(os, "O_NOFOLLOW")
    and hasattr(os, "O_DIRECTORY")
)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC


class FolderMoved(Exception):
    """The folder a write went into is no longer at its path (it was moved or replaced while
    the write ran): the bytes landed in the folder that was walked, not at the recorded path."""


def _parts(relative: str) -> list[str]:
    # ``relative`` is already normalised (``workspace_paths``); a plain split is enough, and the
    # hot path's cheapest.
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if ".." in parts or relative.startswith("/"):
        raise OSError(errno.EINVAL, "the path must be relative, without '..'", relative)
    return parts


def _open_root(root: Path) -> int:
    return os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)


def _walk(root: Path, parts: list[str], *, create: bool) -> int:
    """A descriptor of ``root/parts...`` opened component by component without following links
    (creating missing folders when ``create``). The caller closes it."""
    fd = _open_root(root)
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = _open_dir(part, fd)
            except NotADirectoryError:
                _raise_if_link(part, fd)
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_dir(part: str, fd: int) -> int:
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except NotADirectoryError:
        _raise_if_link(part, fd)
        raise


def _raise_if_link(part: str, fd: int) -> None:
    """``O_NOFOLLOW | O_DIRECTORY`` on a link fails with ``ENOTDIR``: say ``ELOOP`` instead, so
    the message names a link, not a file."""
    try:
        is_link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return
    if is_link:
        raise OSError(errno.ELOOP, "a folder on the path is a symbolic link", part)


class _Opened:
    """A walked descriptor, closed on leaving the ``with`` block (a plain class: cheaper than a
    generator-based context manager on the tools' hot path)."""

    __slots__ = ("fd", "name")

    def __init__(self, fd: int, name: str) -> None:
        self.fd = fd
        self.name = name

    def close(self) -> None:
        os.close(self.fd)


class _Folder(_Opened):
    __slots__ = ()

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Parent(_Opened):
    __slots__ = ()

    def __enter__(self) -> tuple[int, str]:
        return self.fd, self.name

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_folder(root: Path, relative: str, *, create: bool = False) -> _Folder:
    """``with open_folder(...) as fd``: a descriptor of the folder ``relative`` inside
    ``root``."""
    return _Folder(_walk(root, _parts(relative), create=create), "")


def open_parent(root: Path, relative: str, *, create: bool = False) -> _Parent:
    """``with open_parent(...) as (fd, name)``: the descriptor of the folder holding
    ``relative`` and the file's own name."""
    parts = _parts(relative)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the session folder itself is not a file", relative)
    return _Parent(_walk(root, parts[:-1], create=create), parts[-1])


def lstat_at(folder_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def read_at(folder_fd: int, name: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``name`` in ``folder_fd`` (not following a link; a FIFO or
    device is refused without blocking on it)."""
    fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=folder_fd)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder", name)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
        # Read what fstat says is there (one more byte shows a file that grew past ``limit``),
        # then on until end of file or ``limit``: a file may change size while it is read.
        want = info.st_size + 1 if limit is None else min(limit, info.st_size + 1)
        chunks = [os.read(fd, want)]
        got = len(chunks[0])
        while chunks[-1] and (limit is None or got < limit):
            chunk = os.read(fd, 1 << 16 if limit is None else min(1 << 16, limit - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def same_folder(root: Path, relative_folder: str, folder_fd: int) -> bool:
    """Whether ``relative_folder`` (walked again without following links) is still the folder
    ``folder_fd`` refers to."""
    try:
        with open_folder(root, relative_folder) as again:
            first, second = os.fstat(folder_fd), os.fstat(again)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def write_new_bytes_at(folder_fd: int, name: str, data: bytes, mode: int) -> str:
    """Write ``data`` to a fresh temporary file next to ``name`` (same folder descriptor),
    ``fsync`` it and return its name; the caller renames it (``rename_at``) or removes it."""
    temp = f".{name}.maka-{secrets.token_hex(6)}.tmp"
    fd = os.open(
        temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=folder_fd
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder_fd)
        raise
    return temp


def rename_at(folder_fd: int, temp: str, name: str) -> None:
    os.replace(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    os.fsync(folder_fd)


def unlink_quietly(folder_fd: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=folder_fd)


# ---- the fallback without dir_fd (Windows) ------------------------------------------------------


def verified_path(root: Path, relative: str) -> Path:
    """``root/relative`` after checking that its realpath is still exactly that path: no
    component was swapped for a link since preflight. Used where ``dir_fd`` is unavailable, after
    opening and again just before the rename; a link swapped in between these checks and the
    operation itself is not caught (the platform offers no way to)."""
    expected = os.path.normcase(os.path.join(os.path.realpath(root), *_parts(relative)))
    path = Path(expected)
    if os.path.normcase(os.path.realpath(path)) != expected:
        raise OSError(errno.ELOOP, "a folder on the path was replaced by a link", relative)
    return path
