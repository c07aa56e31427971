"""The long chaos run on PostgreSQL (docs/design/hosts.md section 3; the bounded version is
``tests/crash/test_postgres_host_chaos.py``): three real ``maka host`` processes on one throwaway
server, ``--rounds`` rounds cycling through a SIGKILL mid-turn, a SIGSTOP past the lease, the
server ending one host's connections again and again mid-turn, a PostgreSQL restart mid-turn
(immediate stop, start a second later), and one host's network going silent mid-turn (every
host reaches the server through its own loopback proxy, which stops forwarding with the sockets
left open; every other silent round forwards again and the host must serve a new turn, the others
leave it cut off and it is replaced), each on the next host in turn; a killed host is replaced
by a new one (its own data folder) so three are always serving. After every round the
invariants are checked (tests/helpers/host_chaos.py): no side effect twice, nothing committed
after a run's recovered ending, gap-free sequences, no unpaired call, every session completed or
parked with a documented code.

Printed: rounds, sessions completed and parked, and per kind of round the seconds until the
session was taken over (stop, silent) or settled (kill, cut, restart) as min/median/max, and
for the silent rounds that forwarded again the seconds until the host's new turn completed.

Usage::

    .venv/bin/python -m bench.host_chaos [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tests.helpers.host_chaos import LEASES, Rig, check_invariants
from tests.helpers.postgres_cluster import PostgresCluster, find_bin_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--only", choices=("kill", "stop", "cut", "restart", "silent"))
    args = parser.parse_args()
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL's initdb and pg_ctl were not found")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="maka-chaos-"))
    cluster = PostgresCluster.start(bin_dir)
    rig = Rig(cluster.new_database(), root)
    kills: list[float] = []
    stops: list[float] = []
    cuts: list[float] = []
    restarts: list[float] = []
    silences: list[float] = []
    serving_again: list[float] = []
    silent_rounds = 0
    kinds = (args.only,) if args.only else ("kill", "stop", "cut", "restart", "silent")
    try:
        serving = [rig.start_host(f"h{n}", proxied=True) for n in range(3)]
        works: dict[str, Path] = {}
        counts: dict[str, int] = {}
        for n in range(args.rounds):
            victim = serving[n % 3]
            work = root / f"work-{n}"
            works[str(n)] = work
            kind = kinds[n % len(kinds)]
            if kind == "kill":
                kills.append(rig.kill_round(victim, work)["takeover_s"])
                serving[n % 3] = rig.start_host(f"h{n + 3}", proxied=True)  # a new one
            elif kind == "stop":
                stops.append(rig.stop_round(victim, work)["takeover_s"])
            elif kind == "cut":
                cuts.append(rig.cut_round(victim, work)["settled_s"])
            elif kind == "restart":
                restarts.append(rig.restart_round(victim, work, cluster)["settled_s"])
            else:
                resume = silent_rounds % 2 == 0
                silent_rounds += 1
                figures = rig.silent_round(victim, work, resume=resume)
                silences.append(figures["takeover_s"])
                if resume:
                    works[f"{n}-again"] = work.parent / f"{work.name}-again"
                    serving_again.append(figures["serving_again_s"])
                else:  # still cut off: replaced, as a dead host would be
                    victim.process.kill()
                    victim.process.wait(10)
                    serving[n % 3] = rig.start_host(f"h{n + 3}", proxied=True)
            counts = check_invariants(rig, works)
            print(f"round {n + 1}: {kind} ok {counts}", flush=True)
    except BaseException:
        print(f"kept for a look: {root}", flush=True)
        raise
    else:
        shutil.rmtree(root, ignore_errors=True)
    finally:
        rig.stop_all()
        cluster.stop()
    leases = ", ".join(f"{k}={v}" for k, v in LEASES.items())
    print(f"\n{args.rounds} rounds in {time.monotonic() - started:.0f} s ({leases})")
    print(
        f"sessions: {len(works)}, parked with documented codes: {counts['parked']}, turn ended"
        f" failed with a documented failure class: {counts['failed']}, the others completed"
    )
    print(f"runs: {counts['runs']}, provider requests checked: {counts['requests']}")
    for name, times in (
        ("SIGKILL -> settled", kills),
        ("SIGSTOP -> taken over", stops),
        ("connections cut -> settled", cuts),
        ("server restart -> settled", restarts),
        ("network silent -> taken over", silences),
        ("forwarding again -> new turn", serving_again),
    ):
        if times:
            print(
                f"{name:28} n={len(times):3}  min {min(times):5.2f} s  "
                f"median {statistics.median(times):5.2f} s  max {max(times):5.2f} s"
            )


if __name__ == "__main__":
    main()
