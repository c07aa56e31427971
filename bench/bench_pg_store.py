"""Benchmark: one tool call's T1+T2 on the ledger's two engines, side by side in one run.

For each engine, a store with one session and one run; ``--calls`` tool calls, each a T1
(``commit_tool_prepared``: call + dispatch) and a T2 (``commit_tool_outcome``: the bound
response), the two engines interleaved call by call so that the machine's noise falls on both.
Printed per engine: median, p95 and mean wall time of T1+T2 per call, in milliseconds.

- SQLite: ``runtime.sqlite`` in a temporary data folder, WAL, ``synchronous=FULL`` (the
  product's settings).
- PostgreSQL: a throwaway cluster (``initdb``/``pg_ctl``, as the tests start it) on a loopback
  TCP port, ``fsync=on``, ``synchronous_commit=on``: every COMMIT waits for the server's WAL
  flush, as the product runs. The session's lease is checked in each transaction.

Usage::

    .venv/bin/python -m bench.bench_pg_store [--calls 500] [--warmup 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from storage.ledger.ledger_store import SqliteLedgerStore, open_store
from tests.helpers.ledger_builders import RunIds, bound_response, call_event, dispatch_event
from tests.helpers.postgres_cluster import PostgresCluster, find_bin_dir
from tests.helpers.store_workloads import add_run

IDS = RunIds()


def _one_call(store: SqliteLedgerStore, n: int) -> float:
    call = call_event(f"call-{n}", "Write", {"path": f"f{n}.txt", "content": "x" * 200}, ids=IDS)
    dispatch = dispatch_event(call)
    response = bound_response(call, {"ok": True})
    started = time.perf_counter()
    store.commit_tool_prepared(call, dispatch)
    store.commit_tool_outcome(response)
    return (time.perf_counter() - started) * 1000


def _row(name: str, times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    return (
        f"{name:<32} median {statistics.median(ordered):6.2f} ms   p95 {p95:6.2f} ms   "
        f"mean {statistics.fmean(ordered):6.2f} ms   ({len(ordered)} calls)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL's initdb and pg_ctl are not installed")
    from storage.ledger.postgres_store import open_postgres_store

    cluster = PostgresCluster.start(bin_dir)
    try:
        with tempfile.TemporaryDirectory() as root:
            sqlite = open_store(Path(root))
            postgres = open_postgres_store(cluster.new_database())
            stores: dict[str, SqliteLedgerStore] = {
                "SQLite (WAL, synchronous=FULL)": sqlite,
                "PostgreSQL 15 (loopback, sync on)": postgres,
            }
            settings = postgres.connection_settings()
            assert settings.synchronous.value == "FULL", settings  # synchronous_commit = on
            times: dict[str, list[float]] = {name: [] for name in stores}
            for store in stores.values():
                add_run(store, IDS)
            for n in range(args.warmup + args.calls):
                for name, store in stores.items():
                    elapsed = _one_call(store, n)
                    if n >= args.warmup:
                        times[name].append(elapsed)
            print(f"T1+T2 per tool call, {args.calls} calls after {args.warmup} warm-up calls")
            for name, measured in times.items():
                print(_row(name, measured))
            sqlite_times, postgres_times = times.values()
            ratio = statistics.median(postgres_times) / statistics.median(sqlite_times)
            print(f"PostgreSQL / SQLite (medians): {ratio:.2f}")
            for store in stores.values():
                store.close()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
