"""Start the real ``maka`` main process as a child (no renderer) and talk to it.

``MAKA_NO_RENDERER=1`` (test-only) makes the main process skip the renderer and print
``MAKA_MAIN_LISTENING socket=... token=... pid=...`` once it listens (the store may still be
opening) and the same fields after ``MAKA_MAIN_READY`` once the store is open; a test then plays
the renderer over a real ``QLocalSocket``. Every child is killed and reaped in ``stop()``.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

LISTENING_PREFIX = "MAKA_MAIN_LISTENING"
READY_PREFIX = "MAKA_MAIN_READY"


def maka_executable() -> list[str]:
    """The installed console script next to this interpreter, else ``python -m app.cli``."""
    script = Path(sys.executable).with_name("maka")
    if script.exists():
        return [str(script)]
    found = shutil.which("maka")
    return [found] if found else [sys.executable, "-m", "app.cli"]


def maka_env(data_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "MAKA_DATA_DIR": str(data_dir),
            "MAKA_NO_RENDERER": "1",
            "QT_QPA_PLATFORM": "offscreen",
            "PYTHONFAULTHANDLER": "1",
        }
    )
    env.pop("MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", None)
    env.pop("MAKA_FAILPOINT", None)
    env.update(extra or {})
    return env


@dataclass
class MainProcess:
    process: subprocess.Popen[str]
    stderr_path: Path
    data_dir: Path
    socket_name: str = ""
    token: str = ""
    stdout_lines: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout_s: float = 60.0) -> MainProcess:
        """Read stdout until the listening line (a window may connect from then on, while the
        store opens); fail with the child's stderr if it exits first."""
        assert self.process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not selector.select(timeout=0.2):
                if self.process.poll() is not None:
                    break
                continue
            line = self.process.stdout.readline()
            if not line:
                break
            self.stdout_lines.append(line)
            if line.startswith(LISTENING_PREFIX):
                fields = dict(part.split("=", 1) for part in line.split()[1:])
                self.socket_name, self.token = fields["socket"], fields["token"]
                return self
        self.stop()
        raise AssertionError(f"maka main did not become ready; stderr:\n{self.stderr()[-4000:]}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def terminate(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        self.process.send_signal(sig)
        return self.process.wait(timeout_s)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_main(
    data_dir: Path, extra_env: Mapping[str, str] | None = None, *args: str
) -> MainProcess:
    """Start ``maka [args]``; its stderr goes to a file next to the data directory (a pipe that
    nobody reads could fill up and block the child)."""
    stderr_path = data_dir.parent / f"maka-main-{time.monotonic_ns()}.stderr"
    with stderr_path.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            [*maka_executable(), *args],
            env=maka_env(data_dir, extra_env),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    return MainProcess(process, stderr_path, data_dir)


def run_maka(
    data_dir: Path, *args: str, extra_env: Mapping[str, str] | None = None, timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*maka_executable(), *args],
        env=maka_env(data_dir, extra_env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def main_log(data_dir: Path) -> str:
    path = data_dir / "logs" / "main.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""
