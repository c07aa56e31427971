"""Torture: random SIGKILLs of real ``maka run`` processes with workspace checkpoints on, and the
share of them that land between a ``bash`` call's T2 and its snapshot's fact
(docs/design/workspace.md section 3: the one window in which Safe resume must park on a stale
snapshot, since a command's effects are unknown by nature).

Each trial is a real ``maka run`` (scripted provider: ``--calls`` model steps, each one ``bash``
call appending to a file, the model taking ``--think-ms`` per step) in one folder of ``--files``
generated files, killed with SIGKILL (the whole process group) after a uniformly random delay
within the length of an undisturbed run. Its committed ledger is then read and the kill is
classed by what it cut:

- ``T2 -> snapshot``: a ``bash`` call's outcome (T2) is committed and no snapshot fact (nor a
  failed capture) after it: resume parks with ``workspace_checkpoint_stale``;
- ``T1 -> T2``: a call dispatched without its outcome (the command may or may not have run):
  resume parks until the user says whether it ran (docs/design/recovery.md section 8);
- ``elsewhere``: anywhere else (a model step, before the first call, after a snapshot);
- ``starting``: before the run's session was created (the command was still starting);
- ``finished``: the run ended before the kill.

Usage::

    .venv/bin/python -m bench.torture_checkpoint_window [--files 5000] [--kills 30] [--calls 6]
        [--think-ms 40] [--seed 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.bench_checkpoints import generate
from runtime.ledger.event_model import RuntimeEvent
from storage.ledger.ledger_store import open_store

WINDOW = "T2 -> snapshot"
UNKNOWN = "T1 -> T2"
ELSEWHERE = "elsewhere"
STARTING = "starting"
FINISHED = "finished"


def _script(path: Path, calls: int, think_ms: int) -> None:
    steps: list[dict[str, object]] = [
        {
            "text": f"Step {index}.",
            "delayMs": think_ms,
            "toolCalls": [
                {"id": f"b{index}", "name": "bash", "args": {"command": f"echo {index} >> log.txt"}}
            ],
        }
        for index in range(calls)
    ]
    steps.append({"text": "Done.", "delayMs": think_ms})
    path.write_text(json.dumps({"turns": [steps]}), "utf-8")


def _env(data: Path, script: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKA_FAILPOINT", "MAKA_PROVIDER")}
    env.update(
        {
            "MAKA_DATA_DIR": str(data),
            "MAKA_PROVIDER": "scripted",
            "MAKA_SCRIPT_FILE": str(script),
            "MAKA_WORKSPACE_CHECKPOINTS": "on",
            "QT_QPA_PLATFORM": "offscreen",
        }
    )
    return env


def _start(work: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    script = Path(sys.executable).with_name("maka")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]
    return subprocess.Popen(
        [*command, "run", "--cwd", str(work), "--permission-mode", "auto", "go"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _sessions(data: Path) -> int:
    store = open_store(data, read_only=True)
    try:
        return len(store.list_sessions())
    finally:
        store.close()


def _latest_run_events(data: Path, before: int) -> list[RuntimeEvent] | None:
    """The events of the newest session's run; None when the trial created no session (it
    was killed while the command started)."""
    store = open_store(data, read_only=True)
    try:
        sessions = sorted(store.list_sessions(), key=lambda s: (s.created_at, s.session_id))
        if len(sessions) <= before:
            return None
        runs = store.list_session_runs(sessions[-1].session_id)
        latest = max(runs, key=lambda r: (r.created_at, r.run_id), default=None)
        if latest is None:
            return []
        return [row.event for row in store.read_run_events(latest.run_id)]
    finally:
        store.close()


def classify(events: list[RuntimeEvent]) -> str:
    """What the kill cut, from the run's committed events (in ledger order)."""
    dispatched: set[str] = set()
    answered: set[str] = set()
    last_bash_t2: int | None = None
    last_snapshot: int | None = None
    for index, event in enumerate(events):
        actions = event.get("actions") or {}
        content = event.get("content")
        if "endInvocation" in actions:
            return FINISHED
        if "toolDispatch" in actions:
            dispatched.add(str((event.get("refs") or {}).get("toolCallId", index)))
        if content is not None and content["kind"] == "function_response":
            answered.add(str(content.get("id", index)))
            if content.get("name") == "bash":
                last_bash_t2 = index
        if "workspaceCheckpoint" in actions or "workspaceCheckpointFailed" in actions:
            last_snapshot = index
    if dispatched - answered:
        return UNKNOWN
    if last_bash_t2 is not None and (last_snapshot is None or last_snapshot < last_bash_t2):
        return WINDOW
    return ELSEWHERE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--think-ms", type=int, default=40)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="maka-torture-window-") as scratch:
        root = Path(scratch)
        work, data, script = root / "work", root / "data", root / "script.json"
        work.mkdir()
        generate(work, args.files, args.files * 4096)
        _script(script, args.calls, args.think_ms)
        env = _env(data, script)
        # An undisturbed run first (its first snapshot of the folder is the slow one), then one
        # more to time a run as every trial finds the folder.
        for _ in range(2):
            started = time.perf_counter()
            _start(work, env).wait(timeout=600)
            length = time.perf_counter() - started
        print(
            f"torture: {args.kills} SIGKILLs of maka run, {args.files:,} files, {args.calls} bash "
            f"calls per run, {args.think_ms} ms per model step; an undisturbed run takes "
            f"{length:.2f} s"
        )
        found: Counter[str] = Counter()
        for _ in range(args.kills):
            before = _sessions(data)
            process = _start(work, env)
            time.sleep(rng.uniform(0.0, length))
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
            events = _latest_run_events(data, before)
            found[STARTING if events is None else classify(events)] += 1
    for kind in (WINDOW, UNKNOWN, ELSEWHERE, STARTING, FINISHED):
        share = found[kind] / args.kills
        print(f"  {kind:15} {found[kind]:4d} of {args.kills} ({share:6.1%})")
    killed = args.kills - found[FINISHED] - found[STARTING]
    if killed:
        share = found[WINDOW] / killed
        print(f"share of the kills that cut a running turn landing in the window: {share:.1%}")


if __name__ == "__main__":
    main()
