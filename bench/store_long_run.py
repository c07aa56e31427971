"""Benchmark part: one long run of T1+T2 calls, on a fresh database and on a large one.

The realistic case of ``bench_store`` (b): a tool call is ``commit_tool_prepared`` +
``commit_tool_outcome`` through the store's writers, 2,000 of them in **one** run (a long agent
turn), in a fresh data directory and in one holding at least 385,000 events (433 MB, far larger
than SQLite's page cache), interleaved call by call so that load from other processes hits both
alike. Per call it records the wall time, the thread's CPU time, the read system calls of the
process (``/proc/self/io``: every page SQLite reads from the database or the WAL is one ``pread``)
and SQLite's own page-cache misses (``sqlite3_db_status``, when the running CPython's connection
layout can be read; see ``cache_misses``).

The large history is cached under ``/tmp`` (``history_cache``) keyed by its size, the template
and the schema version: generating it takes ~15 s, copying the cached one ~2 s.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import shutil
import sqlite3
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runtime.ledger.event_model import RuntimeEvent
from storage.ledger.ledger_schema import MIGRATIONS, SCHEMA_VERSION
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.store_internals import connection_to_measure

CACHE_ROOT = Path("/tmp/maka-bench-store-cache")
ToolCall = tuple[RuntimeEvent, RuntimeEvent, RuntimeEvent]


def history_cache(key_material: bytes, events: int, generate: Callable[[Path], None]) -> Path:
    """A generated history under ``CACHE_ROOT``, generated once per (template, size, schema).

    The schema part of the key is its version and the text of every migration, so a schema
    whose statements change without a new version number never reuses a stale history."""
    schema = repr(sorted(MIGRATIONS.items())).encode()
    digest = hashlib.sha256(
        key_material + f"|{events}|{SCHEMA_VERSION}|".encode() + schema
    ).hexdigest()
    folder = CACHE_ROOT / f"history-{events}-{digest[:12]}"
    if not (folder / "complete").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        generate(folder)
        (folder / "complete").write_text("ok\n")
    return folder


def read_syscalls() -> int:
    """Read system calls of this process so far (``syscr`` of ``/proc/self/io``)."""
    with open("/proc/self/io", "rb") as handle:
        for line in handle.read().splitlines():
            if line.startswith(b"syscr:"):
                return int(line.split()[1])
    return 0


class CacheMisses:
    """SQLite's page-cache misses of one connection (``SQLITE_DBSTATUS_CACHE_MISS``).

    Python's ``sqlite3`` does not expose ``sqlite3_db_status``; the handle is the first field
    after the object header of CPython's connection object. The pointer is checked by asking
    SQLite for the connection's file name before it is trusted; when anything does not match
    (another Python, another layout), ``read`` returns None and the bench prints only the read
    system calls."""

    _MISS = 8  # SQLITE_DBSTATUS_CACHE_MISS

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._db: int | None = None
        try:
            library = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
            status = library.sqlite3_db_status
            status.argtypes = [
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_int),
                ctypes.POINTER(ctypes.c_int),
                ctypes.c_int,
            ]
            filename = library.sqlite3_db_filename
            filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            filename.restype = ctypes.c_char_p
            handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
            if handle and filename(handle, b"main") == str(path.resolve()).encode():
                self._db, self._status = handle, status
        except (OSError, AttributeError, ValueError):
            self._db = None

    def read(self) -> int | None:
        if self._db is None:
            return None
        current, highest = ctypes.c_int(0), ctypes.c_int(0)
        self._status(self._db, self._MISS, ctypes.byref(current), ctypes.byref(highest), 0)
        return current.value


@dataclass
class Series:
    wall: list[float]
    cpu: list[float]
    reads: list[int]
    misses: list[int]

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.wall)
        result = {
            "median": statistics.median(self.wall),
            "p95": ordered[int(0.95 * (len(ordered) - 1))],
            "cpu_mean": statistics.fmean(self.cpu),
            "cpu_median": statistics.median(self.cpu),
            "reads": statistics.fmean(self.reads),
        }
        if self.misses:
            result["misses"] = statistics.fmean(self.misses)
        return result


def measure_long_run(
    stores: dict[str, SqliteLedgerStore],
    calls: Callable[[str, int], ToolCall],
    count: int,
    paths: dict[str, Path],
) -> dict[str, dict[str, float]]:
    """``count`` tool calls in one run of each store, interleaved (the order alternates), each
    call timed on its own. ``calls(name, index)`` builds the events of a store's call."""
    series = {name: Series([], [], [], []) for name in stores}
    misses = {
        name: CacheMisses(connection_to_measure(store), paths[name] / DATABASE_NAME)
        for name, store in stores.items()
    }
    names = list(stores)
    for index in range(count):
        order = names if index % 2 else names[::-1]
        for name in order:
            call, dispatch, response = calls(name, index)
            store, into, miss = stores[name], series[name], misses[name]
            before_miss = miss.read()
            before_reads = read_syscalls()
            started_cpu, started = time.thread_time(), time.perf_counter()
            store.commit_tool_prepared(call, dispatch)
            store.commit_tool_outcome(response)
            into.wall.append(time.perf_counter() - started)
            into.cpu.append(time.thread_time() - started_cpu)
            into.reads.append(read_syscalls() - before_reads - 1)  # minus reading /proc
            after_miss = miss.read()
            if before_miss is not None and after_miss is not None:
                into.misses.append(after_miss - before_miss)
    return {name: item.summary() for name, item in series.items()}


def open_both(fresh: Path, large: Path) -> tuple[SqliteLedgerStore, SqliteLedgerStore]:
    return open_store(fresh), open_store(large)


def report(results: dict[str, dict[str, float]], calls: int, events: int, mode: str) -> str:
    """(b)'s lines: each side, then the growth (large / fresh)."""
    lines = [f"(b) one run of {calls:,} T1+T2 calls, fresh vs ~{events:,} events ({mode}):"]
    for name, row in results.items():
        misses = f", {row['misses']:.1f} cache misses" if "misses" in row else ""
        lines.append(
            f"    {name:<5}: median {row['median'] * 1e3:.3f} ms, p95 {row['p95'] * 1e3:.3f} ms, "
            f"CPU {row['cpu_mean'] * 1e3:.3f} ms mean / {row['cpu_median'] * 1e3:.3f} ms median, "
            f"{row['reads']:.1f} read syscalls{misses} per call"
        )
    fresh, large = results["fresh"], results["large"]
    lines.append(
        f"    growth: median {large['median'] / fresh['median']:.2f}, CPU mean "
        f"{large['cpu_mean'] / fresh['cpu_mean']:.2f}, CPU median "
        f"{large['cpu_median'] / fresh['cpu_median']:.2f} (goal <= 1.1), p95 "
        f"{large['p95'] / fresh['p95']:.2f}"
    )
    return "\n".join(lines)
