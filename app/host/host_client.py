"""A terminal's connection to the running host of its data folder (docs/design/hosts.md section 1).

The host (the desktop's main process, or ``maka host`` without a window) owns the data folder
and serves it over its private endpoint (``ipc_endpoint``). A ``maka`` command first looks for
it: :func:`attach` returns a :class:`HostClient` when a host listens, else ``None`` and the
command opens the store itself, as it always did. Plain sockets, no Qt: the CLI never imports
the desktop.

Authentication is the renderer's: the first frame is ``hello`` with a token, answered by
``hello.ok`` or ``hello.rejected``. A terminal's token is the host's terminal token, which the
host writes to ``<data>/ipc/terminal-token`` (0600, inside the user-only data folder) while it
serves and removes when it closes; the hello says ``role: terminal``, and the host accepts from
a terminal only the requests its commands use (``TERMINAL_REQUEST_KINDS``).

Every frame in either direction is the contract's (``app.bridge_contract``): strict pydantic
models, bounded sizes. The contract is imported only once a host answers, so a command that
finds no host loads nothing more than before (``maka sessions`` stays small).

A host that stops while a command waits (SIGKILL, a crash, a close) ends the command with
``host_stopped`` (exit 1): the next command, or the next start of the desktop, runs startup
recovery as always.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from app.host.ipc_endpoint import find_endpoint, terminal_token_path
from runtime.ledger import codes  # ``codes.HostCode`` when an error is made: loaded only then
from runtime.ledger.coded_error import CodedError

if TYPE_CHECKING:
    import queue
    import socket

    from app.bridge_contract import HostKind, Message

CONNECT_TIMEOUT_S = 10.0
ANSWER_TIMEOUT_S = 600.0
"""The longest wait for one answer: a loaded machine and a long history take time, and a host that
stops is noticed at once (the connection closes), never by this wait."""
HELLO_TIMEOUT_S = 15.0
"""The hello is answered at once by a host that runs (its event loop, not its jobs): one that
says nothing for this long is stopped (SIGSTOP, a frozen machine) or wedged."""
_READ_CHUNK = 256 * 1024


class HostConnectionError(CodedError):
    """The host stopped (``host_stopped``) or refused this terminal (``host_unreachable``)."""


class HostSilent(HostConnectionError):
    """The host said nothing within the socket's timeout (``host_unreachable``)."""

    def __init__(self) -> None:
        super().__init__(
            codes.HostCode.HOST_UNREACHABLE,
            "the Maka serving this data folder did not answer in time (it is stopped or hung)",
        )


class HostClient:
    """One authenticated connection; requests are answered in order, one at a time."""

    def __init__(self, sock: socket.socket, host_kind: HostKind, host_pid: int | None) -> None:
        import threading  # with a host only, as ``queue`` (``maka sessions`` alone stays small)

        from app.bridge_contract import PUSH_KINDS, FrameReader

        self._sock = sock
        self._reader = FrameReader(accept=PUSH_KINDS)
        self._pending: list[Message] = []
        self._send_lock = threading.Lock()
        self.host_kind = host_kind
        self.host_pid = host_pid
        self.data_dir: str | None = None  # the folder the host serves (its hello says)
        self.no_window: str | None = None  # why it cannot open a window (its hello says)
        # Whether Safe resume is on in the host as it answered (its settings, or its variable).
        self.safe_resume: bool | None = None
        # Listening (``listen``): a reader thread receives every push and hands the ones it is
        # not given to take to ``_next`` through this queue (a closed connection: an error).
        self._inbox: queue.Queue[Message | HostConnectionError] | None = None
        self._timeout: float | None = ANSWER_TIMEOUT_S

    def __enter__(self) -> HostClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()

    def ask(self, message: Message) -> Message:
        """Send ``message`` with a fresh correlation id and return the push that answers it.

        An ``error`` push raises :class:`HostRefusal` (the host's code and sentence); a closed
        connection raises :class:`HostConnectionError` with ``host_stopped``."""
        import secrets

        from app.bridge_contract import ErrorPush, encode_frame

        correlation = secrets.token_hex(8)
        request = message.model_copy(update={"correlation_id": correlation})
        try:
            self._sock.sendall(encode_frame(request))
        except OSError:
            raise _stopped() from None
        while True:
            answer = self._next()
            if answer.correlation_id != correlation:
                continue  # a push about something else (a turn this terminal drives streams)
            if isinstance(answer, ErrorPush):
                raise HostRefusal(answer.code, answer.message)
            return answer

    def stream_without_timeout(self) -> None:
        """A turn may wait for its model, a tool or a question for as long as it takes: the
        connection's end (the host stopped) ends the wait, never a timeout."""
        self._timeout = None
        if self._inbox is None:
            self._sock.settimeout(None)

    def listen(
        self, take: Callable[[Message], bool], stopped: Callable[[HostConnectionError], None]
    ) -> None:
        """From now on a reader thread receives: ``take`` is offered every push first (a
        viewer's session being driven by another client, heard while this terminal waits for
        its user) and returns True when it took it; the others are answers, for ``ask`` and
        ``receive`` as before. ``stopped`` is told once when the host goes away."""
        import queue
        import threading

        inbox: queue.Queue[Message | HostConnectionError] = queue.Queue()
        self._sock.settimeout(None)
        pending, self._pending = self._pending, []
        for message in pending:
            inbox.put(message)
        self._inbox = inbox

        def read() -> None:
            while True:
                try:
                    message = self._read_one()
                except HostConnectionError as error:
                    inbox.put(error)
                    stopped(error)
                    return
                try:
                    taken = take(message)
                except Exception:  # a viewer's fault never loses the connection's answers
                    taken = False
                if not taken:
                    inbox.put(message)

        threading.Thread(target=read, name="maka-host-reader", daemon=True).start()

    def send(self, message: Message) -> None:
        """Send one request (any thread: a Ctrl+C's cancel beside a permission answer)."""
        from app.bridge_contract import encode_frame

        frame = encode_frame(message)
        with self._send_lock:
            try:
                self._sock.sendall(frame)
            except OSError:
                raise _stopped() from None

    def receive(self) -> Message:
        """The next push (one reader at a time); a closed connection raises ``host_stopped``."""
        return self._next()

    def _next(self) -> Message:
        inbox = self._inbox
        if inbox is None:
            return self._read_one()
        import queue

        try:
            item = inbox.get(timeout=self._timeout)
        except queue.Empty:
            raise _stopped() from None
        if isinstance(item, HostConnectionError):
            inbox.put(item)  # every later wait ends the same way
            raise item
        return item

    def _read_one(self) -> Message:
        from app.bridge_contract import BridgeProtocolError

        while not self._pending:
            try:
                data = self._sock.recv(_READ_CHUNK)
            except TimeoutError:
                raise HostSilent() from None
            except OSError:
                raise _stopped() from None
            if not data:
                raise _stopped()
            try:
                self._pending.extend(self._reader.feed(data))
            except BridgeProtocolError as error:
                raise HostConnectionError(
                    codes.HostCode.HOST_UNREACHABLE,
                    f"the running Maka sent something this version cannot read ({error.code})",
                ) from None
        return self._pending.pop(0)


class HostRefusal(CodedError):
    """The host answered a request with ``error``: its code (one of the project's code tables;
    an unknown one is reported as ``host_unreachable`` naming it) and its sentence."""

    def __init__(self, code: str, message: str) -> None:
        known = _known_code(code)
        if known is None:
            super().__init__(codes.HostCode.HOST_UNREACHABLE, f"the running Maka refused ({code})")
        else:
            super().__init__(known, message)


def _known_code(value: str) -> StrEnum | None:
    for table in codes.code_enums():
        with contextlib.suppress(ValueError):
            return table(value)
    return None


def _stopped() -> HostConnectionError:
    return HostConnectionError(
        codes.HostCode.HOST_STOPPED,
        "the Maka window or host serving this data folder stopped before answering; run the "
        "command again (the next start repairs what it left)",
    )


def attach(
    data_dir: Path, *, hello_timeout_s: float = HELLO_TIMEOUT_S, command: str | None = None
) -> HostClient | None:
    """The running host of ``data_dir``, authenticated as a terminal; ``None`` when no host
    serves it (nothing listens, a listener that left without removing its socket, or the host
    of another data folder: a copy of this one, made with its endpoint and token while that
    host ran). Raises ``HostConnectionError`` (``host_unreachable``) when the host does not
    answer its hello within ``hello_timeout_s``."""
    if sys.platform == "win32":
        return None
    endpoint = find_endpoint(data_dir)
    if endpoint is None or not _is_socket(endpoint):
        return None
    token = _read_token(data_dir)
    if token is None:
        return None
    import socket  # only once a host's socket is there: `maka sessions` stays small

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(endpoint)
    except OSError:
        # ConnectionRefused: the socket of a host that was killed; nobody serves the folder.
        sock.close()
        return None
    sock.settimeout(hello_timeout_s)
    try:
        client = _hello(sock, token, command)
    except HostSilent:
        sock.close()
        raise HostConnectionError(
            codes.HostCode.HOST_UNREACHABLE,
            f"the Maka serving {data_dir} did not answer within {hello_timeout_s:g} s (it is "
            "stopped or hung: ps shows it, the desktop app or maka host); nothing was done",
        ) from None
    except BaseException:
        sock.close()
        raise
    served = client.data_dir
    if served is not None and served != os.path.realpath(data_dir):
        client.close()  # the host of the folder this one was copied from: not this folder's
        return None
    sock.settimeout(ANSWER_TIMEOUT_S)
    return client


def running_host(data_dir: Path, timeout_s: float = 3.0) -> tuple[HostKind, str | None] | None:
    """Which kind of host serves ``data_dir`` and why it cannot open a window (None: it can),
    as its ``hello.ok`` says; None when none answers; never raises. A second desktop launch
    asks it to tell "brought its window to front" from "a window attaches to ``maka host``"
    (or "that host has no display")."""
    try:
        client = attach(data_dir, hello_timeout_s=timeout_s)
    except (HostConnectionError, OSError):
        return None
    if client is None:
        return None
    with client:
        return client.host_kind, client.no_window


def running_host_kind(data_dir: Path, timeout_s: float = 3.0) -> HostKind | None:
    """Which kind of host serves ``data_dir`` (``running_host``), or None."""
    found = running_host(data_dir, timeout_s)
    return found[0] if found is not None else None


def held_elsewhere(data_dir: Path, pid: int | None) -> str:
    """What owns ``data_dir`` and what to do, for a command that does not go through it: the
    desktop or ``maka host`` serving it (asked, as a terminal would), or another command."""
    from app.bridge_contract import HostKind

    kind = running_host_kind(data_dir, timeout_s=2.0)
    who = f"pid {pid}" if pid is not None else "its pid unknown"
    if kind is HostKind.DESKTOP:
        return (
            f"the Maka desktop app ({who}) has {data_dir} open, and this command does not go "
            "through it: close the app first, or use another --data-dir"
        )
    if kind is HostKind.HEADLESS:
        return (
            f"'maka host' ({who}) serves {data_dir}, and this command does not go through it: "
            "stop the host first (Ctrl-C where it runs), or use another --data-dir"
        )
    return (
        f"another Maka process ({who}) owns {data_dir}; wait for it to end or close it, or use "
        "another --data-dir ('maka host' lets the desktop and terminal commands share a data "
        "folder)"
    )


def _hello(sock: socket.socket, token: str, command: str | None = None) -> HostClient:
    from app.bridge_contract import (
        PROTOCOL_VERSION,
        ClientRole,
        HelloOkPush,
        HelloRejectedPush,
        HelloRequest,
        TerminalCommand,
        encode_frame,
    )
    from runtime.ledger.command_words import suggested_data_dir

    hello = HelloRequest(
        token=token,
        protocol_version=PROTOCOL_VERSION,
        role=ClientRole.TERMINAL,
        command=TerminalCommand(command) if command is not None else None,
        data_dir_said=suggested_data_dir(),
        correlation_id="hello",
    )
    client = HostClient(sock, _desktop(), None)
    try:
        sock.sendall(encode_frame(hello))
    except OSError:
        raise _stopped() from None
    answer = client._read_one()
    if isinstance(answer, HelloRejectedPush):
        raise HostConnectionError(
            codes.HostCode.HOST_UNREACHABLE,
            f"the Maka serving this data folder refused this command ({answer.code}: "
            f"{answer.message})",
        )
    if not isinstance(answer, HelloOkPush):
        raise HostConnectionError(
            codes.HostCode.HOST_UNREACHABLE, "the Maka serving this data folder did not say hello"
        )
    client.host_kind = answer.host_kind
    client.host_pid = answer.host_pid
    client.data_dir = answer.data_dir
    client.no_window = answer.no_window
    client.safe_resume = answer.safe_resume_enabled
    return client


def _desktop() -> HostKind:
    from app.bridge_contract import HostKind

    return HostKind.DESKTOP


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def _read_token(data_dir: Path) -> str | None:
    """The host's terminal token, only from a private file of this user (never a link)."""
    path = terminal_token_path(data_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            return None
        text = os.read(fd, 4096).decode("utf-8", errors="replace").strip()
    finally:
        os.close(fd)
    return text if 16 <= len(text) <= 256 else None
