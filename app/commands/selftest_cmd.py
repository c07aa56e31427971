"""``maka self-test [--json]``: can this installation run at all?

Used by the packaging tests, the release workflow and people reporting a problem. Every check uses
the same parts the app uses, on throw-away resources, and never touches the user's ledger:

- ``qt-platform``: a child process (this same program, so a frozen bundle checks its own plugins)
  starts a QApplication on the ``offscreen`` platform plugin and renders a widget. A child, because
  Qt aborts the whole process when a platform plugin cannot load; the parent survives to report it.
- ``display``: the same probe on the platform plugin the desktop itself would use here
  (``QT_QPA_PLATFORM`` or Qt's choice for the session: xcb, wayland...), so a missing system
  library or an unreachable display is named before the window fails to open. Skipped (and
  said so) on Linux without ``DISPLAY`` or ``WAYLAND_DISPLAY``, where no window can open anyway.
- ``sqlite-wal``: the bundled SQLite switches a new database to WAL and commits through it.
- ``store-open``: the product's store opens (creating its schema) in a temporary directory.
- ``ipc-listen``: a user-only ``QLocalServer`` listens on a short unique name and a
  ``QLocalSocket`` round-trips bytes through it, as the main process and the renderer do.
- ``git-checkpoints``: the ``git`` command workspace checkpoints drive
  (docs/design/workspace.md section 1):
  its version, and a capture, an observation and a comparison in a throw-away folder. Without a
  usable ``git`` the check still passes (the app runs, without checkpoints) and says so with the
  code sessions will carry: ``unavailable (checkpoint_git_missing)``.
- ``data-dir``: the data directory (``--data-dir`` > ``MAKA_DATA_DIR`` > per-user) can be created
  and written.

Exit 0 when every check passes, 1 otherwise (each failure is named, with its reason).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app import __version__
from app.cli_errors import EXIT_ERROR, EXIT_OK
from app.data_paths import ensure_data_dir, resolve_data_dir

PROBE_QT = "qt"
PROBE_DISPLAY = "display"
QT_PROBE_TIMEOUT_S = 60.0
IPC_TIMEOUT_MS = 5000
_QT_APP: list[object] = []


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    ok: bool
    detail: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    # Internal: the child side of the qt-platform check.
    parser.add_argument("--probe", choices=[PROBE_QT, PROBE_DISPLAY], help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.probe in (PROBE_QT, PROBE_DISPLAY):
        return _qt_probe_child(offscreen=args.probe == PROBE_QT)
    data_dir = Path(os.path.abspath(resolve_data_dir(args.data_dir)))
    checks: list[tuple[str, Callable[[], str]]] = [
        ("qt-platform", _check_qt_platform),
        ("display", _check_display),
        ("sqlite-wal", _check_sqlite_wal),
        ("store-open", _check_store_open),
        ("ipc-listen", _check_ipc_listen),
        ("git-checkpoints", _check_git_checkpoints),
        ("data-dir", lambda: _check_data_dir(data_dir)),
    ]
    results = [_run_check(name, check) for name, check in checks]
    failures = [result.name for result in results if not result.ok]
    if args.json:
        document = {
            "ok": not failures,
            "version": __version__,
            "frozen": _is_frozen(),
            "python": platform.python_version(),
            "platform": f"{sys.platform}-{platform.machine()}",
            "executable": sys.executable,
            "dataDir": str(data_dir),
            "checks": [{"name": r.name, "ok": r.ok, "detail": r.detail} for r in results],
            "failures": failures,
        }
        print(json.dumps(document, indent=2))
    else:
        mode = "bundle" if _is_frozen() else "source"
        print(
            f"maka self-test: maka {__version__} ({mode}), Python {platform.python_version()}, "
            f"{sys.platform}-{platform.machine()}"
        )
        width = max((len(result.name) for result in results), default=0)
        for result in results:
            print(f"  {'ok  ' if result.ok else 'FAIL'}  {result.name:<{width}} {result.detail}")
        if failures:
            print(
                f"self-test: {len(failures)} of {len(results)} checks failed: {', '.join(failures)}"
            )
        else:
            print(f"self-test: all {len(results)} checks passed")
    return EXIT_ERROR if failures else EXIT_OK


def _run_check(name: str, check: Callable[[], str]) -> CheckResult:
    """A check returns its detail line or raises; any exception is that check's failure."""
    started = time.perf_counter()
    try:
        detail = check()
    except RuntimeError as error:  # the checks' own failures: a sentence that says why
        return CheckResult(name, False, str(error))
    except Exception as error:  # a self-test reports every failure, whatever its kind
        return CheckResult(name, False, f"{type(error).__name__}: {error}")
    elapsed_ms = (time.perf_counter() - started) * 1000
    return CheckResult(name, True, f"{detail} ({elapsed_ms:.0f} ms)")


def _is_frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def _self_command() -> list[str]:
    """How to run this very program again: the bundle's own executable, or this interpreter."""
    if _is_frozen():
        return [sys.executable]
    # (``maka_start``: Maka's own packages ahead of a folder of the user's that would hide them)
    return [sys.executable, "-c", "import maka_start; maka_start.main()"]


# --- qt-platform ------------------------------------------------------------------------------


def _check_qt_platform() -> str:
    report = _run_qt_probe(PROBE_QT, dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    if report.get("platform") != "offscreen":
        raise RuntimeError(f"Qt started the {report.get('platform')!r} platform, not offscreen")
    return (
        f"offscreen platform plugin loaded (Qt {report['qt']}), widget rendered "
        f"{report['width']}x{report['height']}, {report['fonts']} font families"
    )


def _check_display() -> str:
    chosen = os.environ.get("QT_QPA_PLATFORM", "")
    if (
        not chosen
        and sys.platform.startswith("linux")
        and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    ):
        return "skipped: no DISPLAY or WAYLAND_DISPLAY here, so no window can open"
    from app.commands.gui_cmd import display_missing

    missing = display_missing()
    if missing is not None:  # named, but nobody serves it: the desktop would fail to open
        raise RuntimeError(f"no window can open: {missing}")
    report = _run_qt_probe(PROBE_DISPLAY, dict(os.environ))
    return f"the desktop's platform plugin {report.get('platform')!r} loaded and rendered a widget"


def _run_qt_probe(probe: str, env: dict[str, str]) -> dict[str, object]:
    try:
        completed = subprocess.run(
            [*_self_command(), "self-test", "--probe", probe],
            env=env,
            capture_output=True,
            text=True,
            timeout=QT_PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise RuntimeError(
            f"the Qt probe did not finish within {QT_PROBE_TIMEOUT_S:.0f} s"
        ) from error
    if completed.returncode != 0:
        lines = [line.strip() for line in completed.stderr.splitlines() if line.strip()]
        tail = " | ".join(lines[-4:]) or "no output"
        raise RuntimeError(f"the Qt probe exited with {completed.returncode}: {tail}")
    report: dict[str, object] = json.loads(completed.stdout.strip().splitlines()[-1])
    return report


def _qt_probe_child(*, offscreen: bool) -> int:
    """Child side: start Qt (offscreen, or on the platform the desktop would use), render one
    widget, print one JSON line."""
    if offscreen:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6 import __version__ as pyside_version
    from PySide6.QtGui import QFontDatabase, QGuiApplication
    from PySide6.QtWidgets import QApplication, QLabel

    app = QApplication([sys.argv[0] if sys.argv else "maka"])
    label = QLabel("Maka self-test")
    label.resize(240, 40)
    image = label.grab().toImage()
    report = {
        "platform": QGuiApplication.platformName(),
        "qt": pyside_version,
        "width": image.width(),
        "height": image.height(),
        "fonts": len(QFontDatabase.families()),
    }
    label.deleteLater()
    del app
    print(json.dumps(report))
    return EXIT_OK if image.width() > 0 else EXIT_ERROR


# --- sqlite-wal / store-open ------------------------------------------------------------------


def _check_sqlite_wal() -> str:
    with tempfile.TemporaryDirectory(prefix="maka-selftest-") as folder:
        path = Path(folder) / "wal-check.sqlite"
        connection = sqlite3.connect(path, isolation_level=None)
        try:
            mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise RuntimeError(f"SQLite refused WAL (journal_mode is {mode!r})")
            connection.execute("CREATE TABLE t (x INTEGER)")
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO t VALUES (1)")
            connection.execute("COMMIT")
            if not Path(f"{path}-wal").exists():
                raise RuntimeError("no -wal file after a commit in WAL mode")
            count = connection.execute("SELECT count(*) FROM t").fetchone()[0]
            if count != 1:
                raise RuntimeError(f"read back {count} rows, expected 1")
        finally:
            connection.close()
    return f"WAL journal works (SQLite {sqlite3.sqlite_version})"


def _check_store_open() -> str:
    from storage.ledger.ledger_store import open_store

    with tempfile.TemporaryDirectory(prefix="maka-selftest-") as folder:
        store = open_store(Path(folder))
        try:
            schema = store.schema_version()
            mode = store.journal_mode()
        finally:
            store.close()
    if mode.lower() != "wal":
        raise RuntimeError(f"the store opened in journal mode {mode!r}, not WAL")
    return f"store (schema v{schema}, WAL) opened in a temporary directory"


# --- ipc-listen -------------------------------------------------------------------------------


def _check_ipc_listen() -> str:
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtNetwork import QLocalServer, QLocalSocket

    if QCoreApplication.instance() is None:
        # Sockets need an event dispatcher; keep the instance alive for the rest of the process.
        _QT_APP.append(QCoreApplication([sys.argv[0] if sys.argv else "maka"]))
    name = f"maka-st-{uuid.uuid4().hex[:8]}"
    server = QLocalServer()
    server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
    client = QLocalSocket()
    try:
        if not server.listen(name):
            raise RuntimeError(f"cannot listen on {name}: {server.errorString()}")
        client.connectToServer(name)
        if not server.waitForNewConnection(IPC_TIMEOUT_MS)[0]:
            raise RuntimeError(f"no connection arrived: {server.errorString()}")
        if not client.waitForConnected(IPC_TIMEOUT_MS):
            raise RuntimeError(f"client did not connect: {client.errorString()}")
        peer = server.nextPendingConnection()
        payload = b"maka-self-test"
        client.write(payload)
        client.flush()
        received = b""
        deadline = time.monotonic() + IPC_TIMEOUT_MS / 1000
        while len(received) < len(payload) and time.monotonic() < deadline:
            if peer.waitForReadyRead(100):
                received += peer.readAll().data()
        if received != payload:
            raise RuntimeError(f"round trip returned {received!r}")
        full_name = server.fullServerName()
        peer.close()
        client.disconnectFromServer()
    finally:
        client.abort()
        server.close()
    return f"local server listened and round-tripped bytes ({full_name})"


# --- data-dir ---------------------------------------------------------------------------------


def _check_git_checkpoints() -> str:
    from runtime.ledger.checkpoint_ports import CheckpointMode
    from storage.checkpoints.checkpoint_store import GitCheckpointStore

    with tempfile.TemporaryDirectory(prefix="maka-selftest-") as scratch:
        folder = Path(scratch) / "folder"
        folder.mkdir()
        (folder / "a.txt").write_text("one\n", "utf-8")
        store = GitCheckpointStore.from_environment(Path(scratch) / "data")
        identity = "workspace:v1:self-test"
        decision = store.decide_mode(folder, identity)
        if decision.mode is CheckpointMode.UNAVAILABLE:
            reason = decision.reason.value if decision.reason else "unavailable"
            return (
                f"unavailable ({reason}): {decision.detail}; sessions run without workspace "
                "checkpoints"
            )
        first = store.capture(folder, identity, "refs/maka/self-test/run/1", "self-test")
        (folder / "a.txt").write_text("two\n", "utf-8")
        seen = store.observe(folder, identity)
        changes = store.changes(identity, first.tree_id, seen.tree_id)
        if [change.path for change in changes] != ["a.txt"]:
            raise RuntimeError(f"a changed file was not seen as changed: {changes}")
        git = store.git
        version = git.version_text if git is not None else "git"
        return f"{version}: capture, observation and comparison work (mode git_v1)"


def _check_data_dir(data_dir: Path) -> str:
    """The data folder can be created and written; the folders the check created (none was
    there) are removed again when they are still empty, so a check leaves nothing behind."""
    created = [p for p in (data_dir, *data_dir.parents) if not os.path.lexists(p)]
    try:
        return _write_in(data_dir) + (" (created for the check, then removed)" if created else "")
    finally:
        for folder in created:  # the deepest first; one not empty stops the rest
            try:
                folder.rmdir()
            except OSError:
                break


def _write_in(data_dir: Path) -> str:
    try:
        ensure_data_dir(data_dir)  # created exactly as the app creates it
    except OSError as error:
        reason = error.strerror or str(error)
        blocker = next((p for p in (data_dir, *data_dir.parents) if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            reason = f"{blocker} is a file, not a folder"
        raise DataDirError(f"cannot create the data directory {data_dir}: {reason}") from None
    probe = data_dir / f".maka-selftest-{uuid.uuid4().hex[:8]}"
    payload = b"maka self-test\n"
    try:
        with open(probe, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if probe.read_bytes() != payload:
            raise DataDirError(f"{data_dir}: a file written there read back different bytes")
    except OSError as error:
        raise DataDirError(f"cannot write in {data_dir}: {error.strerror or error}") from None
    finally:
        with contextlib.suppress(OSError):  # (the folder may refuse even the look: said above)
            probe.unlink(missing_ok=True)
    from runtime.ledger.store_ports import StoreRefusal
    from storage.ledger.database_choice import stored_database

    try:  # every command would refuse the folder for a settings file it cannot read
        stored_database(data_dir)
    except StoreRefusal as refusal:
        raise DataDirError(f"[{refusal.code}] {refusal.message}") from None
    return f"writable: {data_dir}"


class DataDirError(RuntimeError):
    """The data directory cannot be created or written (the sentence says why)."""
