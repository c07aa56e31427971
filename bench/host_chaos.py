"""The long chaos run on PostgreSQL (docs/design/hosts.md section 3; the bounded version is
``tests/crash/test_postgres_host_chaos.py``): three real ``maka host`` processes on one throwaway
server, ``--rounds`` rounds alternating a SIGKILL mid-turn and a SIGSTOP past the lease, each on
the next host in turn; a killed host is replaced by a new one (its own data folder) so three are
always serving. After every round the invariants are checked (tests/helpers/host_chaos.py): no
side effect twice, nothing committed after a run's recovered ending, gap-free sequences, no
unpaired call, every session completed or parked with a documented code.

Printed: rounds, sessions completed and parked, and the takeover time after the kill/stop
(seconds from the signal until the session was taken over and settled) as min/median/max.

Usage::

    .venv/bin/python -m bench.host_chaos [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from tests.helpers.host_chaos import LEASES, Rig, check_invariants
from tests.helpers.postgres_cluster import PostgresCluster, find_bin_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL's initdb and pg_ctl were not found")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="maka-chaos-") as folder:
        root = Path(folder)
        cluster = PostgresCluster.start(bin_dir)
        rig = Rig(cluster.new_database(), root)
        kills: list[float] = []
        stops: list[float] = []
        try:
            serving = [rig.start_host(f"h{n}") for n in range(3)]
            works: dict[str, Path] = {}
            counts: dict[str, int] = {}
            for n in range(args.rounds):
                victim = serving[n % 3]
                work = root / f"work-{n}"
                works[str(n)] = work
                if n % 2 == 0:
                    kills.append(rig.kill_round(victim, work)["takeover_s"])
                    serving[n % 3] = rig.start_host(f"h{n + 3}")  # a new host in its place
                else:
                    stops.append(rig.stop_round(victim, work)["takeover_s"])
                counts = check_invariants(rig, works)
                print(f"round {n + 1}: {'kill' if n % 2 == 0 else 'stop'} ok {counts}", flush=True)
        finally:
            rig.stop_all()
            cluster.stop()
    leases = ", ".join(f"{k}={v}" for k, v in LEASES.items())
    print(f"\n{args.rounds} rounds in {time.monotonic() - started:.0f} s ({leases})")
    print(f"sessions: {args.rounds}, parked with documented codes: {counts['parked']}")
    print(f"runs: {counts['runs']}, provider requests checked: {counts['requests']}")
    for name, times in (("SIGKILL -> settled", kills), ("SIGSTOP -> taken over", stops)):
        if times:
            print(
                f"{name:24} n={len(times):3}  min {min(times):5.2f} s  "
                f"median {statistics.median(times):5.2f} s  max {max(times):5.2f} s"
            )


if __name__ == "__main__":
    main()
