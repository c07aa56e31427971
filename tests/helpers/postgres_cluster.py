"""A throwaway PostgreSQL cluster for the tests: ``initdb`` in a temporary folder, ``pg_ctl`` on a
free loopback port, one database per test (``PostgresCluster.new_database``).

The binaries are looked for in ``PATH`` and ``/usr/lib/postgresql/*/bin``. ``initdb`` refuses to
run as root, so when the tests run as root (CI does) the cluster runs as the ``postgres`` user (or
``nobody``) through ``setpriv``; its folder is handed to that user first.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

_BINARIES = ("initdb", "pg_ctl")


def find_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (the newest installed version), or None."""
    on_path = shutil.which("initdb")
    if on_path is not None and shutil.which("pg_ctl") is not None:
        return Path(on_path).resolve().parent
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    for folder in reversed(candidates):
        if all((folder / name).exists() for name in _BINARIES):
            return folder
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run_as() -> list[str]:
    """The command prefix that drops root (empty when not root)."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return [
            "setpriv",
            f"--reuid={entry.pw_uid}",
            f"--regid={entry.pw_gid}",
            "--clear-groups",
            "--",
        ]
    raise RuntimeError("running as root and no 'postgres' or 'nobody' user to run PostgreSQL")


def _hand_over(path: Path) -> None:
    if os.geteuid() != 0:
        return
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        os.chown(path, entry.pw_uid, entry.pw_gid)
        return


@dataclass
class PostgresCluster:
    bin_dir: Path
    root: Path
    port: int
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://maka@127.0.0.1:{self.port}/{database}"

    @classmethod
    def start(cls, bin_dir: Path) -> PostgresCluster:
        root = Path(tempfile.mkdtemp(prefix="maka-pg-"))
        root.chmod(0o755)
        _hand_over(root)
        cluster = cls(bin_dir, root, _free_port())
        prefix = _run_as()
        subprocess.run(
            [
                *prefix,
                str(bin_dir / "initdb"),
                "-D",
                str(cluster.data),
                "-U",
                "maka",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        cluster.start_server()
        return cluster

    def start_server(self) -> None:
        """Start (or start again, after ``stop_server``) the cluster's server and wait for it."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port}"
            f" -c unix_socket_directories={self.root} -c fsync=on -c synchronous_commit=on"
            " -c max_connections=60"
        )
        subprocess.run(
            [
                *_run_as(),
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.root / "server.log"),
                "-o",
                options,
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
        )

    def stop_server(self) -> None:
        """Stop the server as a crash would (``immediate``: every connection cut, no shutdown
        checkpoint); its data stays, and ``start_server`` brings it back."""
        subprocess.run(
            [
                *_run_as(),
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
            check=True,
            capture_output=True,
        )

    def new_database(self) -> str:
        """The URL of a fresh, empty ledger: a schema of its own in the cluster's one database,
        named in the URL's ``search_path`` option (a schema costs a few catalog rows; a database
        per test would copy the template's files each time and leave gigabytes to remove)."""
        import psycopg

        name = f"maka_test_{os.getpid()}_{next(self._counter)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.url()}?options=-csearch_path%3D{name}"

    def stop(self) -> None:
        """Stop at once (no shutdown checkpoint: the cluster is thrown away) and remove it."""
        subprocess.run(
            [
                *_run_as(),
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "immediate",
                "stop",
            ],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(self.root, ignore_errors=True)
