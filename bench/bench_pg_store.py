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

Then, unless ``--single-only``:

- **three hosts x 20 sessions**: three processes (hosts), each with its own store (PostgreSQL: one
  database, three owners; SQLite: three data folders, as three machines would have) and 20
  sessions, make ``--host-calls`` calls each round-robin over their sessions, all at once; per
  engine: T1+T2 per call (median, p95) and calls per second over the three;
- **lease renewal**: one ``renew_session_leases`` of a host holding 20 leases (the heartbeat's
  statement every ttl/3), median and p95;
- **takeover after a SIGKILL**: a host process holding 20 sessions, each with a run left after a
  T1, is killed with SIGKILL; another store sweeps every ttl/3 (``take_over_expired``: claim
  ``FOR UPDATE SKIP LOCKED``, then startup recovery's repair for those sessions) until all 20 are
  repaired. Printed: seconds from the kill until the last was repaired, against the goal
  ttl + 5 s (``--ttl-ms``, 3000 by default; grace 500 ms).

Usage::

    .venv/bin/python -m bench.bench_pg_store [--calls 500] [--warmup 50] [--host-calls 100]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
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


def _session_ids(host: int, n: int) -> RunIds:
    return RunIds(f"sess-{host}-{n}", f"inv-{host}-{n}", f"run-{host}-{n}", f"turn-{host}-{n}")


def _host_worker(  # noqa: PLR0917 (a multiprocessing target: positional arguments)
    url: str | None, folder: str, host: int, sessions: int, calls: int, start: object, out: object
) -> None:
    """One host of the three: its own store and sessions; waits for the common start."""
    from storage.ledger.postgres_store import open_postgres_store

    store = open_postgres_store(url) if url else open_store(Path(folder))
    ids = [_session_ids(host, n) for n in range(sessions)]
    for session in ids:
        add_run(store, session)
    start.wait()  # type: ignore[attr-defined]
    times: list[float] = []
    began = time.perf_counter()
    for n in range(calls):
        session = ids[n % sessions]
        call = call_event(f"c-{host}-{n}", "Write", {"path": f"f{n}.txt"}, ids=session)
        started = time.perf_counter()
        store.commit_tool_prepared(call, dispatch_event(call))
        store.commit_tool_outcome(bound_response(call, {"ok": True}))
        times.append((time.perf_counter() - started) * 1000)
    out.put((times, time.perf_counter() - began))  # type: ignore[attr-defined]
    store.close()


def _three_hosts(url: str | None, root: Path, calls: int) -> tuple[list[float], float]:
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    workers = [
        context.Process(
            target=_host_worker,
            args=(url, str(root / f"host-{host}"), host, 20, calls, start, out),
        )
        for host in range(3)
    ]
    for worker in workers:
        worker.start()
    time.sleep(3)  # every host opened its store and made its sessions
    start.set()
    results = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join(60)
    times = [t for result in results for t in result[0]]
    wall = max(result[1] for result in results)
    return times, len(times) / wall


def _renewal(url: str) -> list[float]:
    from storage.ledger.postgres_store import open_postgres_store

    store = open_postgres_store(url, heartbeat=False)
    for n in range(20):
        add_run(store, _session_ids(9, n))
    times = []
    for _ in range(200):
        started = time.perf_counter()
        lost = store.renew_session_leases()
        times.append((time.perf_counter() - started) * 1000)
        assert not lost
    store.close()
    return times


def _dying_host(url: str, ttl_ms: int, ready: object) -> None:
    from storage.ledger.postgres_store import LeaseSettings, open_postgres_store

    store = open_postgres_store(url, lease_settings=LeaseSettings(ttl_ms, 1000, 500))
    for n in range(20):
        session = _session_ids(7, n)
        add_run(store, session)
        call = call_event(f"k-{n}", "Write", {"path": "x.txt"}, ids=session)
        store.commit_tool_prepared(call, dispatch_event(call))
    ready.set()  # type: ignore[attr-defined]
    time.sleep(600)


def _takeover(url: str, ttl_ms: int) -> float:
    from app.host.host_bootstrap import take_over_expired
    from storage.ledger.postgres_store import LeaseSettings, open_postgres_store

    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    victim = context.Process(target=_dying_host, args=(url, ttl_ms, ready))
    victim.start()
    assert ready.wait(120)
    sweeper = open_postgres_store(url, lease_settings=LeaseSettings(ttl_ms, 1000, 500))
    epoch = sweeper.bump_owner_epoch()
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    killed = time.monotonic()
    victim.join(10)
    repaired = 0
    while repaired < 20:
        time.sleep(sweeper.takeover_interval_s())
        repaired += len(take_over_expired(sweeper, epoch).repaired)
    took = time.monotonic() - killed
    sweeper.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--host-calls", type=int, default=100)
    parser.add_argument("--ttl-ms", type=int, default=3000)
    parser.add_argument("--single-only", action="store_true")
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
            if not args.single_only:
                _many_hosts(cluster, Path(root), args.host_calls, args.ttl_ms)
    finally:
        cluster.stop()


def _many_hosts(cluster: PostgresCluster, root: Path, calls: int, ttl_ms: int) -> None:
    print(f"\nthree hosts x 20 sessions, {calls} calls per host, all at once")
    for name, url in (
        ("SQLite (three data folders)", None),
        ("PostgreSQL (one database)", cluster.new_database()),
    ):
        times, rate = _three_hosts(url, root / name.split()[0], calls)
        print(_row(name, times) + f"   {rate:6.1f} calls/s in all")
    renewal = sorted(_renewal(cluster.new_database()))
    print(
        f"\nlease renewal, 20 leases in one statement: median {statistics.median(renewal):.2f} ms"
        f"   p95 {renewal[int(len(renewal) * 0.95) - 1]:.2f} ms   (200 renewals)"
    )
    took = _takeover(cluster.new_database(), ttl_ms)
    goal = ttl_ms / 1000 + 5
    print(
        f"takeover after SIGKILL, 20 sessions: all repaired {took:.2f} s after the kill"
        f"   (ttl {ttl_ms / 1000:.1f} s + grace 0.5 s; goal ttl + 5 s = {goal:.1f} s:"
        f" {'met' if took <= goal else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
