"""Benchmark: ``maka`` start to window shown, and the window's event loop while a turn streams.

1. **Start to window** (the real two-process app on Xvfb, platform ``xcb``): a data directory with
   ``--sessions`` sessions (each with one completed run) and ``--interrupted`` runs left
   non-terminal by a "crashed" owner, so every start runs startup recovery on them. Each round
   copies the pristine directory, starts ``maka`` and polls the X server: *window* = the renderer's
   main window is mapped; *content* = its title names the first session (the session list arrived
   and the first session opened). *ready* is the main process's own "ready" log line (store open
   and recovery done). Goal: median start-to-window <= 1.5 s.

2. **Streaming** (offscreen, one real main process, the real renderer ``MainWindow`` and
   ``RendererBridge`` in this process over the real socket): a scripted turn of ``--steps`` model
   steps, each streaming ``--chunks`` text deltas and a ``read_file`` call, while a 10 ms heartbeat
   timer in the window's event loop records the gaps between ticks. The largest gap is the longest
   the window was blocked. Goal: max gap < 100 ms.

Usage::

    .venv/bin/python -m bench.bench_startup [--rounds 7] [--sessions 10000] [--interrupted 10]

Prints medians and ratios to the goals; never asserts (figures go to docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

GOAL_WINDOW_S = 1.5
GOAL_MAX_GAP_MS = 100.0
DISPLAY = ":97"


# ---------------------------------------------------------------------------- data directory


def seed(data_dir: Path, sessions: int, interrupted: int) -> None:
    """Sessions with a completed run each, then ``interrupted`` runs left running (their owner
    "crashed"): written through the store's own writers."""
    from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
    from storage.ledger.ledger_store import open_store
    from tests.helpers.ledger_builders import RunIds, model_text, terminal, user_text

    work = data_dir.parent / "projects"
    work.mkdir(exist_ok=True)
    store = open_store(data_dir)
    try:
        epoch = store.read_owner_epoch()
        base = 1_700_000_000_000
        for i in range(sessions):
            ids = RunIds(f"session-{i:05d}", f"inv-{i:05d}", f"run-{i:05d}", f"turn-{i:05d}")
            at = base + i * 1000
            store.create_session(
                SessionRecord(ids.session_id, str(work), f"Session {i}: tidy the build", at)
            )
            store.create_run(
                RunHeader(
                    ids.run_id,
                    ids.session_id,
                    ids.invocation_id,
                    ids.turn_id,
                    RunStatus.CREATED,
                    str(work),
                    epoch,
                    at,
                    at,
                )
            )
            store.mark_run_running(ids.run_id)
            store.append_event(
                user_text("tidy the build", ids=ids, event_id=f"u-{i}", ts=at, marker=True)
            )
            store.append_event(model_text("Done.", ids=ids, event_id=f"m-{i}", ts=at + 1))
            store.commit_run_ending(
                terminal(ids, event_id=f"t-{i}", ts=at + 2), RunStatus.COMPLETED, None
            )
        for j in range(interrupted):
            # The newest run of every (sessions // interrupted)-th session, left running.
            i = sessions - 1 - j * max(1, sessions // max(1, interrupted))
            ids = RunIds(f"session-{i:05d}", f"inv-x{j}", f"run-x{j}", f"turn-x{j}")
            at = base + sessions * 1000 + j
            store.create_run(
                RunHeader(
                    ids.run_id,
                    ids.session_id,
                    ids.invocation_id,
                    ids.turn_id,
                    RunStatus.CREATED,
                    str(work),
                    epoch,
                    at,
                    at,
                )
            )
            store.mark_run_running(ids.run_id)
            store.append_event(
                user_text("count again", ids=ids, event_id=f"ux-{j}", ts=at, marker=True)
            )
            store.append_event(model_text("Counting.", ids=ids, event_id=f"mx-{j}", ts=at + 1))
    finally:
        store.close()


def prepared(cache: Path, sessions: int, interrupted: int) -> Path:
    pristine = cache / f"seed-{sessions}-{interrupted}" / "data"
    if not (pristine / "runtime.sqlite").exists():
        shutil.rmtree(pristine.parent, ignore_errors=True)
        pristine.mkdir(parents=True)
        started = time.perf_counter()
        seed(pristine, sessions, interrupted)
        print(
            f"seeded {sessions} sessions + {interrupted} interrupted runs "
            f"in {time.perf_counter() - started:.1f} s"
        )
    return pristine


# ---------------------------------------------------------------------------- start to window


@contextmanager
def xvfb() -> Iterator[None]:
    server = subprocess.Popen(
        ["Xvfb", DISPLAY, "-screen", "0", "1400x900x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        yield
    finally:
        server.terminate()
        server.wait(10)


def _windows() -> list[tuple[str, int]]:
    """(title, area) of every top-level window."""
    out = subprocess.run(
        ["xwininfo", "-root", "-children"],
        env=dict(os.environ, DISPLAY=DISPLAY),
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = []
    for match in re.finditer(r'0x[0-9a-f]+ "([^"]*)": \([^)]*\)\s+(\d+)x(\d+)', out):
        found.append((match.group(1), int(match.group(2)) * int(match.group(3))))
    return found


def start_once(pristine: Path, root: Path) -> dict[str, float]:
    from tests.helpers.maka_process import maka_executable

    data = root / "data"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(pristine, data)
    env = dict(os.environ, MAKA_DATA_DIR=str(data), DISPLAY=DISPLAY, QT_QPA_PLATFORM="xcb")
    for key in ("MAKA_NO_RENDERER", "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME", "MAKA_FAILPOINT"):
        env.pop(key, None)
    wall0 = time.time()
    t0 = time.perf_counter()
    main = subprocess.Popen(maka_executable(), env=env)
    result: dict[str, float] = {}
    try:
        while time.perf_counter() - t0 < 60 and "content" not in result:
            for title, area in _windows():
                if area > 10_000 and title.endswith("Maka"):
                    result.setdefault("window", time.perf_counter() - t0)
                    if title.endswith("— Maka"):
                        result["content"] = time.perf_counter() - t0
            time.sleep(0.005)
        log = (data / "logs" / "main.log").read_text(encoding="utf-8")
        ready = re.search(r"^(\S+ \S+) \d+ maka.main INFO main process ready", log, re.M)
        if ready:
            stamp = datetime.strptime(ready.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            result["ready"] = stamp - wall0
        repaired = re.search(r"ready \((\d+) run\(s\) repaired", log)
        result["repaired"] = float(repaired.group(1)) if repaired else -1
    finally:
        main.send_signal(signal.SIGTERM)
        try:
            main.wait(30)
        except subprocess.TimeoutExpired:
            main.kill()
            main.wait(10)
    return result


# ---------------------------------------------------------------------------- streaming


@dataclass
class _StreamState:
    session: str = ""
    done: bool = False
    measuring: bool = False
    items: int = 0


def stream_once(root: Path, steps: int, chunks: int) -> dict[str, float]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QElapsedTimer, QTimer
    from PySide6.QtWidgets import QApplication

    from app.bridge_contract import RunStatusPush, SessionUpdatedPush
    from renderer.bridge_client import RendererBridge
    from renderer.main_window import MainWindow
    from tests.helpers.maka_process import start_main

    work = root / "stream-work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "notes.txt").write_text("line\n" * 50, encoding="utf-8")
    text = "Streaming a long answer, word by word. " * 40
    script = {
        "turns": [
            [
                *[
                    {
                        "delayMs": 80,
                        "text": f"Step {n}. {text}",
                        "chunks": chunks,
                        "toolCalls": [
                            {"id": f"r{n}", "name": "read_file", "args": {"path": "notes.txt"}}
                        ],
                    }
                    for n in range(steps)
                ],
                {"text": "All steps done.", "chunks": chunks},
            ]
        ]
    }
    script_path = root / "stream-script.json"
    script_path.write_text(json.dumps(script), encoding="utf-8")
    data = root / "stream-data"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    main = start_main(data, {"MAKA_PROVIDER": "scripted", "MAKA_SCRIPT_FILE": str(script_path)})
    main.wait_ready()
    app = QApplication.instance() or QApplication([])
    bridge = RendererBridge(main.socket_name, main.token)
    window = MainWindow(bridge)
    window.show()
    bridge.start()
    gaps: list[float] = []
    clock = QElapsedTimer()
    state = _StreamState()
    heartbeat = QTimer()
    heartbeat.setInterval(10)

    def tick() -> None:
        if state.measuring:
            gaps.append(clock.restart())

    def updated(push: SessionUpdatedPush) -> None:
        state.session = state.session or push.session.session_id

    def item(push: object) -> None:
        state.items += 1

    def status(push: RunStatusPush) -> None:
        state.done = state.done or push.status == "completed"

    heartbeat.timeout.connect(tick)
    bridge.session_updated.connect(updated)
    bridge.transcript_item.connect(item)
    bridge.run_status.connect(status)
    try:
        deadline = time.monotonic() + 30
        while bridge.connection_state.value != "connected" and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.005)
        bridge.create_session(str(work))
        while not state.session and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.005)
        heartbeat.start()
        clock.start()
        state.measuring = True
        started = time.perf_counter()
        bridge.send_turn(state.session, "stream a long answer")
        while not state.done and time.monotonic() < deadline + 120:
            app.processEvents()
            time.sleep(0.001)
        duration = time.perf_counter() - started
        state.measuring = False
        heartbeat.stop()
    finally:
        bridge.stop()
        window.close()
        main.terminate()
        main.stop()
    gaps.sort()
    return {
        "duration_s": duration,
        "pushes": float(state.items),
        "median_gap_ms": statistics.median(gaps) if gaps else 0.0,
        "p99_gap_ms": gaps[int(len(gaps) * 0.99)] if gaps else 0.0,
        "max_gap_ms": gaps[-1] if gaps else 0.0,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--interrupted", type=int, default=10)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "maka-bench")
    parser.add_argument("--skip-window", action="store_true")
    parser.add_argument("--skip-stream", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="maka-bench-") as temp:
        root = Path(temp)
        if not args.skip_window:
            for tool in ("Xvfb", "xwininfo"):
                if shutil.which(tool) is None:
                    print(f"{tool} is required for the start-to-window benchmark", file=sys.stderr)
                    return 1
            pristine = prepared(args.cache, args.sessions, args.interrupted)
            rounds = []
            with xvfb():
                start_once(pristine, root)  # warm the page cache once; not counted
                for n in range(args.rounds):
                    rounds.append(start_once(pristine, root))
                    print(
                        f"round {n + 1}: "
                        + ", ".join(f"{k} {v:.3f}" for k, v in sorted(rounds[-1].items()))
                    )
            for key in ("ready", "window", "content"):
                values = [r[key] for r in rounds if key in r]
                if values:
                    median = statistics.median(values)
                    print(
                        f"{key:>8}: median {median:.3f} s  min {min(values):.3f}  "
                        f"max {max(values):.3f}  (n={len(values)})"
                    )
            window = statistics.median(r["window"] for r in rounds if "window" in r)
            print(
                f"start-to-window median {window:.3f} s; goal {GOAL_WINDOW_S} s; "
                f"ratio {window / GOAL_WINDOW_S:.2f} (<= 1 meets the goal)"
            )
        if not args.skip_stream:
            figures = stream_once(root, args.steps, args.chunks)
            print("stream: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()))
            print(
                f"max event-loop gap {figures['max_gap_ms']:.1f} ms; goal {GOAL_MAX_GAP_MS} ms; "
                f"ratio {figures['max_gap_ms'] / GOAL_MAX_GAP_MS:.2f} (< 1 meets the goal)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
