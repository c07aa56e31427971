"""Benchmark: the SQLite store's T1+T2 cost, its independence of history size, import speed.

Prints three figures (goals from issue 3):

(a) **T1+T2 vs a raw baseline**, on a database holding 100,000 events: the store's
    ``commit_tool_prepared`` + ``commit_tool_outcome`` for one tool call, against a baseline
    that inserts the same rows (call, dispatch, operation and journal rows; response, journal row,
    operation update) in two plain transactions with the same pragmas on a copy of the same
    database. Both are interleaved in one process; the figure is the ratio of the medians
    (goal <= 1.3).
(b) **History independence, the realistic case** (issue 23): one long run of 2,000 tool calls
    in a fresh data directory and in one holding ~385,000 events (433 MB, far larger than
    SQLite's page cache), interleaved call by call; per call the median and p95 wall time, the
    CPU time, the read system calls (pages read from the database and the WAL) and SQLite's
    cache misses, and the growth large / fresh (goal <= 1.1 on CPU and median;
    ``bench/store_long_run.py``).
(c) **Import throughput**: ``import_session`` of an exported session of 100,000 events into a
    fresh data directory, with full validation, in events per second (goal >= 50,000). Printed
    beside it, measured in the same run: SQLite's floor, the very rows the import wrote inserted
    into another fresh directory in one transaction with no validation (the most any import of
    this schema can reach on the machine).

(a) is also printed with ``synchronous=OFF`` on both sides: with the fsyncs gone it shows the
CPU cost alone, which the durable figure hides behind the disk (``--long-sync OFF`` does the
same for (b)).

The histories are generated fast: one realistic 100-event run (user text with the T1 marker,
tool turns with T2 responses, pre-T1 synthetic results, parked and completed recovery bundles,
model text, a terminal event) is committed through the store once, then cloned with fresh ids
and bulk-inserted together with its projection rows; (a)'s and (b)'s histories are cached
under ``/tmp/maka-bench-store-cache`` between runs.

Usage::

    .venv/bin/python -m bench.bench_store [--large 385000] [--long-calls 2000] [--iterations 200]
        [--keep DIR] [--only-a | --only-b] [--long-sync FULL|OFF]
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import re
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import store_long_run as long_run
from runtime.ledger.canonical_codec import canonical_bytes, operation_id
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus, SessionRecord
from storage.ledger.ledger_schema import SCHEMA_VERSION
from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from storage.ledger.sqlite_connection import (
    BUSY_TIMEOUT_MS,
    DATABASE_NAME,
    Synchronous,
    bulk_cache,
    connect_reader,
    connect_writer,
)
from storage.ledger.tool_projection import (
    JOURNAL_COLUMNS,
    OPERATION_COLUMNS,
    ROW_JOURNAL_COLUMNS,
)
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    clean_ledger,
    dispatch_event,
    user_text,
)
from tests.helpers.store_workloads import commit_ledger

TAG = "TPLX"
TEMPLATE = RunIds(f"sess-{TAG}", f"inv-{TAG}", f"run-{TAG}", f"turn-{TAG}")
ENDINGS = ["response"] * 16 + ["synthetic"] * 4 + ["parked", "completed"] * 2
RUNS_PER_SESSION = 100


# ---- history generation -----------------------------------------------------------------------


@dataclass
class Template:
    events: list[tuple[str, str, int, bytes]]  # (event id, lane, terminal, payload)
    operations: list[tuple[Any, ...]]
    journal: list[tuple[Any, ...]]
    call_ids: list[str]


def _template(workdir: Path) -> Template:
    events = clean_ledger(ids=TEMPLATE, endings=ENDINGS)
    events = [
        {**event, "id": f"{event['id']}-{TAG}"} if event["id"].startswith("evt-") else event
        for event in events
    ]
    call_ids = sorted(
        {
            str(dict(e.get("content") or {}).get("id"))
            for e in events
            if dict(e.get("content") or {}).get("kind") == "function_call"
        }
    )
    with open_store(workdir / "template") as store:
        store.create_session(SessionRecord(TEMPLATE.session_id, "/work", "bench", 1))
        store.create_run(_header(TEMPLATE, RunStatus.CREATED))
        commit_ledger(store, events)
        path = store.path
    with closing(connect_reader(path)) as conn:
        rows = conn.execute(
            "SELECT event_id, lane, terminal, payload FROM runtime_events ORDER BY event_seq"
        ).fetchall()
        operations = conn.execute("SELECT * FROM tool_operations").fetchall()
        journal = conn.execute(
            "SELECT journal_event_id, operation_id, invocation_id, run_id, turn_id, state,"
            " runtime_event_id, canonical_args_hash, recovery_mode, metadata_json, committed_at"
            " FROM tool_journal_events ORDER BY journal_seq"
        ).fetchall()
    return Template([(r[0], r[1], r[2], bytes(r[3])) for r in rows], operations, journal, call_ids)


def _header(ids: RunIds, status: RunStatus) -> RunHeader:
    return RunHeader(
        run_id=ids.run_id,
        session_id=ids.session_id,
        invocation_id=ids.invocation_id,
        turn_id=ids.turn_id,
        status=status,
        cwd="/work",
        owner_epoch=1,
        created_at=1,
        updated_at=1,
    )


class Cloner:
    """Copies the template run under new ids (the tag and every operation id replaced)."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.op_ids = {
            operation_id(TEMPLATE.invocation_id, call): call for call in template.call_ids
        }
        self.pattern = re.compile("|".join([TAG, *self.op_ids]))
        self.pattern_bytes = re.compile("|".join([TAG, *self.op_ids]).encode())

    def mapping(self, tag: str) -> dict[str, str]:
        mapping = {TAG: tag}
        for old, call in self.op_ids.items():
            mapping[old] = operation_id(f"inv-{tag}", call)
        return mapping

    def text(self, value: Any, mapping: dict[str, str]) -> Any:
        if isinstance(value, str):
            return self.pattern.sub(lambda m: mapping[m.group(0)], value)
        if isinstance(value, bytes):
            raw = {k.encode(): v.encode() for k, v in mapping.items()}
            return self.pattern_bytes.sub(lambda m: raw[m.group(0)], value)
        return value


def generate_history(
    path: Path, template: Template, events: int, runs_per_session: int = RUNS_PER_SESSION
) -> None:
    """A database at ``path`` holding about ``events`` committed events (whole template runs,
    ``runs_per_session`` runs per session)."""
    runs = max(1, events // len(template.events))
    open_store(path).close()
    conn = sqlite3.connect(path / DATABASE_NAME, isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    cloner = Cloner(template)
    for run in range(runs):
        tag = f"R{run:07d}"
        mapping = cloner.mapping(tag)
        session = f"sess-{tag}" if run % runs_per_session == 0 else None
        if session is not None:
            conn.execute("INSERT INTO sessions VALUES (?, '/work', 'bench', 1)", (session,))
        owner = f"sess-R{run - run % runs_per_session:07d}"
        conn.execute(
            "INSERT INTO runs (run_id, session_id, invocation_id, turn_id, status, cwd,"
            " owner_epoch, created_at, updated_at, completed_at)"
            " VALUES (?, ?, ?, ?, 'completed', '/work', 1, 1, 1, 1)",
            (f"run-{tag}", owner, f"inv-{tag}", f"turn-{tag}"),
        )

        def rows(
            mapping: dict[str, str] = mapping, owner: str = owner
        ) -> Iterator[tuple[Any, ...]]:
            payload_map = dict(mapping)
            for seq, (event_id, lane, terminal, payload) in enumerate(template.events, start=1):
                body = cloner.text(payload, payload_map)
                body = body.replace(f"sess-{mapping[TAG]}".encode(), owner.encode())
                yield (
                    cloner.text(event_id, mapping), owner, f"inv-{mapping[TAG]}",
                    f"run-{mapping[TAG]}", f"turn-{mapping[TAG]}", seq, lane, terminal, body, 1,
                )  # fmt: skip

        conn.executemany("INSERT INTO runtime_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows())
        conn.executemany(
            f"INSERT INTO tool_operations VALUES ({', '.join('?' * len(template.operations[0]))})",
            (
                tuple(owner if i == 1 else cloner.text(v, mapping) for i, v in enumerate(row))
                for row in template.operations
            ),
        )
        conn.executemany(
            "INSERT INTO tool_journal_events (journal_event_id, operation_id, invocation_id,"
            " run_id, turn_id, state, runtime_event_id, canonical_args_hash, recovery_mode,"
            " metadata_json, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (tuple(cloner.text(v, mapping) for v in row) for row in template.journal),
        )
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()


# ---- measurements -----------------------------------------------------------------------------


def _tool_call(ids: RunIds, index: int) -> tuple[RuntimeEvent, RuntimeEvent, RuntimeEvent]:
    call = call_event(
        f"bench-{index}", "Write", {"path": f"f{index}.txt", "content": "x" * 64}, ids=ids, ts=index
    )
    return call, dispatch_event(call), bound_response(call, {"bytes": 64})


def _fresh_run(store: SqliteLedgerStore, name: str) -> RunIds:
    ids = RunIds(f"sess-{name}", f"inv-{name}", f"run-{name}", f"turn-{name}")
    store.create_session(SessionRecord(ids.session_id, "/work", "bench", 1))
    store.create_run(_header(ids, RunStatus.CREATED))
    store.append_event(user_text(ids=ids, marker=True, event_id=f"u-{name}"))
    return ids


class RawBaseline:
    """The same rows in two plain transactions, same pragmas, no validation (schema 6: the
    journal's prepared and outcome rows on the operation row)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path / DATABASE_NAME, isolation_level=None)
        self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.seq = 0

    def start(self, ids: RunIds) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO sessions VALUES (?, '/work', 'bench', 1)", (ids.session_id,))
        conn.execute(
            "INSERT INTO runs (run_id, session_id, invocation_id, turn_id, status, cwd,"
            " owner_epoch, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 'created', '/work', 1, 1, 1)",
            (ids.run_id, ids.session_id, ids.invocation_id, ids.turn_id),
        )
        conn.execute("COMMIT")
        self.seq = 1

    def _event(self, event: RuntimeEvent, lane: str) -> None:
        self.seq += 1
        self.conn.execute(
            "INSERT INTO runtime_events VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, 1)",
            (event["id"], event["sessionId"], event["invocationId"], event["runId"],
             event["turnId"], self.seq, lane, canonical_bytes(event)),
        )  # fmt: skip

    def t1_t2(self, call: RuntimeEvent, dispatch: RuntimeEvent, response: RuntimeEvent) -> None:
        conn = self.conn
        fact: dict[str, Any] = dict(dispatch["actions"]["toolDispatch"])
        op = fact["operationId"]
        conn.execute("BEGIN IMMEDIATE")
        self._event(call, "function_call")
        self._event(dispatch, "tool_dispatch")
        conn.execute(
            "INSERT INTO tool_operations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'prepared', ?, ?,"
            " NULL, 1, 1, 1, NULL, NULL, NULL, NULL)",
            (op, dispatch["sessionId"], dispatch["invocationId"], dispatch["runId"],
             dispatch["turnId"], fact["providerToolCallId"], fact["toolName"],
             fact["canonicalArgsHash"], fact["recoveryMode"], call["id"], dispatch["id"]),
        )  # fmt: skip
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        self._event(response, "function_response")
        conn.execute(
            "UPDATE tool_operations SET current_state = 'outcome_committed', result_event_id = ?,"
            " version = version + 1, outcome_committed_at = 1, outcome_after = 0"
            " WHERE invocation_id = ? AND operation_id = ?",
            (response["id"], response["invocationId"], op),
        )
        conn.execute("COMMIT")


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _synchronous(stores: list[SqliteLedgerStore], raw: list[sqlite3.Connection], mode: str) -> None:
    for store in stores:
        store.set_synchronous(Synchronous(mode))
    for conn in raw:
        conn.execute(f"PRAGMA synchronous = {mode}")


def _store_call(
    store: SqliteLedgerStore, calls: tuple[RuntimeEvent, RuntimeEvent, RuntimeEvent]
) -> Callable[[], object]:
    def action() -> None:
        store.commit_tool_prepared(calls[0], calls[1])
        store.commit_tool_outcome(calls[2])

    return action


def _raw_call(
    raw: RawBaseline, calls: tuple[RuntimeEvent, RuntimeEvent, RuntimeEvent]
) -> Callable[[], object]:
    return lambda: raw.t1_t2(*calls)


def measure_baseline_ratio(root: Path, history: Path, iterations: int) -> dict[str, float]:
    store_dir, raw_dir = root / "a-store", root / "a-raw"
    for folder in (store_dir, raw_dir):
        shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(history, store_dir)
    shutil.copytree(history, raw_dir)
    results: dict[str, float] = {}
    with open_store(store_dir) as store:
        raw = RawBaseline(raw_dir)
        for mode in ("FULL", "OFF"):
            _synchronous([store], [raw.conn], mode)
            ids = _fresh_run(store, f"a{mode}")
            raw.start(ids)
            times: dict[str, list[float]] = {"store": [], "raw": []}
            for index in range(iterations):
                calls = _tool_call(ids, index)
                pair = [("store", _store_call(store, calls)), ("raw", _raw_call(raw, calls))]
                # alternate who goes first, so neither always runs right after the other
                for name, action in pair if index % 2 else reversed(pair):
                    times[name].append(_timed(action))
            results[f"store_{mode}"] = statistics.median(times["store"])
            results[f"raw_{mode}"] = statistics.median(times["raw"])
            results[f"ratio_{mode}"] = results[f"store_{mode}"] / results[f"raw_{mode}"]
        raw.conn.close()
    return results


def measure_long_run(root: Path, large: Path, calls: int, mode: str) -> dict[str, Any]:
    """(b): one long run of ``calls`` tool calls in a fresh data directory and in a copy of the
    large history, interleaved call by call (``store_long_run``)."""
    fresh, copy = root / "b-fresh", root / "b-large"
    for folder in (fresh, copy):
        shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(large, copy, ignore=shutil.ignore_patterns("complete"))
    paths = {"fresh": fresh, "large": copy}
    with open_store(fresh) as new, open_store(copy) as old:
        stores = {"fresh": new, "large": old}
        _synchronous([new, old], [], mode)
        runs = {name: _fresh_run(store, f"b{mode}") for name, store in stores.items()}
        return long_run.measure_long_run(
            stores, lambda name, index: _tool_call(runs[name], index), calls, paths
        )


def measure_import(root: Path, template: Template, events: int) -> dict[str, float]:
    """Export one session of ``events`` events, import it into a fresh directory."""
    source = root / "c-source"
    for folder in (source, root / "c-target"):
        shutil.rmtree(folder, ignore_errors=True)
    generate_history(source, template, events, runs_per_session=events)
    buffer = io.BytesIO()
    with open_store(source) as store:
        (session,) = store.list_sessions()
        store.export_session(session.session_id, buffer)
    data = buffer.getvalue()
    results: dict[str, float] = {"bytes": len(data)}
    target = root / "c-target"
    with open_store(target) as store:
        gc.collect()
        started_cpu, started_wall = time.process_time(), time.perf_counter()
        report = store.import_session(data)
        results["wall"] = time.perf_counter() - started_wall
        results["cpu"] = time.process_time() - started_cpu
        assert report.events_created == report.events_read, report
        assert store.diagnose().ok
    results["events"] = report.events_read
    results["rate_wall"] = report.events_read / results["wall"]
    results["rate_cpu"] = report.events_read / results["cpu"]
    results["floor_wall"] = measure_sqlite_floor(root, target)
    results["rate_floor"] = report.events_read / results["floor_wall"]
    return results


_FLOOR_TABLES = (
    ("sessions", "session_id, cwd, title, created_at", "rowid"),
    (
        "runs",
        "run_id, session_id, invocation_id, turn_id, status, failure_class, cwd,"
        " workspace_identity, owner_epoch, parent_run_id, continuation_source, created_at,"
        " updated_at, completed_at",
        "rowid",
    ),
    (
        "runtime_events",
        "event_id, session_id, invocation_id, run_id, turn_id, event_seq, lane, terminal,"
        " payload, committed_at",
        "rowid",
    ),
    (
        "tool_operations",
        f"{OPERATION_COLUMNS}, operation_id_derived, {ROW_JOURNAL_COLUMNS}",
        "invocation_id, operation_id",
    ),
    ("tool_journal_events", JOURNAL_COLUMNS, "journal_seq"),
)


def measure_sqlite_floor(root: Path, imported: Path) -> float:
    """SQLite's share of (c) alone: the rows the import wrote, read back in the order it wrote
    them, inserted into a fresh data directory by a connection opened as the store opens its own
    (same schema, pragmas and bulk page cache) in one transaction, with no validation at all. No
    import can be faster than this on the same machine; returns its wall time in seconds."""
    rows: dict[str, list[tuple[Any, ...]]] = {}
    with closing(connect_reader(imported / DATABASE_NAME)) as conn:
        for table, columns, order in _FLOOR_TABLES:
            rows[table] = conn.execute(f"SELECT {columns} FROM {table} ORDER BY {order}").fetchall()
    floor = root / "c-floor"
    shutil.rmtree(floor, ignore_errors=True)
    open_store(floor).close()  # the schema, migrated like any data folder
    with closing(connect_writer(floor / DATABASE_NAME)) as conn, bulk_cache(conn):
        gc.collect()
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        for table, columns, _ in _FLOOR_TABLES:
            marks = ", ".join("?" for _ in columns.split(","))
            conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows[table])
        conn.execute("COMMIT")
        return time.perf_counter() - started


def _cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", type=int, default=385_000)
    parser.add_argument("--medium", type=int, default=100_000)
    parser.add_argument("--import-events", type=int, default=100_000)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--long-calls", type=int, default=2_000, help="tool calls of (b)'s run")
    parser.add_argument(
        "--long-sync", default="FULL", choices=("FULL", "OFF"), help="(b)'s synchronous mode"
    )
    parser.add_argument("--keep", type=Path, help="keep the generated databases here")
    parser.add_argument("--only-a", action="store_true", help="measure (a) only (faster iteration)")
    parser.add_argument("--only-b", action="store_true", help="measure (b) only (faster iteration)")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="maka-bench-store-"))
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    template = _template(root)
    print(f"template run: {len(template.events)} events, {len(template.operations)} operations")
    key = b"".join(payload for _, _, _, payload in template.events)
    key += f"schema {SCHEMA_VERSION}".encode()  # another schema is another history
    if not args.only_b:
        t = time.perf_counter()
        medium = long_run.history_cache(
            key, args.medium, lambda path: generate_history(path, template, args.medium)
        )
        print(f"history medium: ~{args.medium:,} events ready in {time.perf_counter() - t:.1f} s")
        a = measure_baseline_ratio(root, medium, args.iterations)
        print(
            f"(a) T1+T2 on {args.medium:,} events: store {a['store_FULL'] * 1e3:.2f} ms, raw "
            f"{a['raw_FULL'] * 1e3:.2f} ms, ratio {a['ratio_FULL']:.2f} (goal <= 1.3); "
            f"synchronous=OFF: {a['store_OFF'] * 1e3:.3f} vs {a['raw_OFF'] * 1e3:.3f} ms, "
            f"ratio {a['ratio_OFF']:.2f}"
        )
    if not args.only_a:
        t = time.perf_counter()
        large = long_run.history_cache(
            key, args.large, lambda path: generate_history(path, template, args.large)
        )
        size = (large / DATABASE_NAME).stat().st_size
        print(
            f"history large: ~{args.large:,} events, {size / 1e6:.0f} MB, ready in "
            f"{time.perf_counter() - t:.1f} s (cached under {long_run.CACHE_ROOT})"
        )
        b = measure_long_run(root, large, args.long_calls, args.long_sync)
        print(long_run.report(b, args.long_calls, args.large, args.long_sync))
    if not args.only_a and not args.only_b:
        c = measure_import(root, template, args.import_events)
        cores = _cores()
        print(
            f"(c) import of {int(c['events']):,} events ({c['bytes'] / 1e6:.1f} MB): "
            f"{c['rate_wall']:,.0f} events/s wall-clock, {c['rate_cpu']:,.0f} per CPU second "
            f"(goal >= 50,000); SQLite alone, the same rows in one transaction without "
            f"validation: {c['rate_floor']:,.0f} events/s (import takes "
            f"{c['wall'] / c['floor_wall']:.2f}x the floor's time); the import's CPU spread "
            f"perfectly over this machine's {cores} cores: at most "
            f"{c['rate_cpu'] * cores:,.0f} events/s"
        )
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
