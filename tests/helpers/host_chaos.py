"""Chaos rounds with real ``maka host`` processes on one PostgreSQL ledger (docs/postgres.md,
docs/design/hosts.md section 3), shared by the bounded CI test and ``bench/host_chaos.py``.

Every host has its own data folder, short leases (``MAKA_SESSION_LEASE_*``), automatic resume on,
workspace snapshots on as a user has them (each host keeps its own, so a host that takes a session
over compares the folder by its tree), and the offline scripted provider. A turn is started
through a host by ``maka run`` (a terminal client attached to it); each session works in its own
folder, where every bash call appends its own line to ``side.txt``: the real side effects,
counted afterwards.

- ``kill_round``: SIGKILL the session's host once the first call's outcome is committed, while
  the model streams the next step (a safe boundary); another host takes the session over after
  the lease and continues it once.
- ``cut_round``: the server ends the host's connections again and again mid-turn; the turn ends
  ``store_io_failed``, the host reconnects, repairs the run its turn left and continues it.
- ``restart_round``: PostgreSQL stopped (immediate) and started again mid-turn.
- ``stop_round``: SIGSTOP the session's host while its bash command runs, past the lease; another
  host takes over; SIGCONT: the command was already gone (its supervisor ended it at the runway
  deadline), and the stopped host's next write is refused with ``session_lease_lost``.
- ``silent_round``: the host's connections go through a loopback proxy (``start_host(...,
  proxied=True)``, ``tests/helpers/silent_proxy.py``) that stops forwarding mid-turn, sockets
  left open: the host's calls meet their deadline (``MAKA_DATABASE_CALL_TIMEOUT_MS``, bounded
  by the runway) instead of waiting forever, its lease runs out, another host takes the session
  over and continues it; then the proxy forwards again and the host, its session lost to the
  other, runs a new turn to completion (or, ``resume=False``, stays cut off and is replaced).

``check_invariants`` then reads the server: no duplicate side effect, no fact committed after a
run's recovered ending (a write under a stale epoch would land there), ``event_seq`` gap-free,
no provider request with an unpaired call, and every session's latest run completed or parked
with a documented code.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from runtime.ledger.codes import FailureClass, ParkReason, StoreCode
from tests.helpers.maka_process import MainProcess, maka_env, maka_executable, start_main
from tests.helpers.maka_run import write_script
from tests.helpers.postgres_cluster import PostgresCluster
from tests.helpers.processes import pid_running
from tests.helpers.silent_proxy import SilentProxy

TTL_MS = 3000
LEASES = {
    "MAKA_SESSION_LEASE_TTL_MS": str(TTL_MS),
    "MAKA_SESSION_LEASE_RUNWAY_MS": "1000",
    "MAKA_SESSION_TAKEOVER_GRACE_MS": "500",
}
# One script for every host (a continuation on another host plays the same one): a side effect
# (in the stop round's folders, which hold a file ``long``, a long command that must never reach
# its "late" line), then, after a pause in the model's stream (the kill round's SIGKILL lands
# there), a read-only call the unattended continuation may run, then the answer.
BASH = "echo one >> side.txt; if [ -f long ]; then sleep 30; echo late >> side.txt; fi"
TURN: list[dict[str, Any]] = [
    {"text": "One.", "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": BASH}}]},
    {
        "text": "Check.",
        "delayMs": 2500,
        "toolCalls": [{"id": "c2", "name": "read_file", "args": {"path": "side.txt"}}],
    },
    {"text": "Done."},
]


def _timeout_error(what: str) -> AssertionError:
    return AssertionError(f"timed out waiting for {what}")


@dataclass
class Rig:
    url: str
    root: Path
    hosts: list[MainProcess] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    clients: list[subprocess.Popen[str]] = field(default_factory=list)
    figures: dict[str, list[float]] = field(default_factory=dict)
    proxies: dict[str, SilentProxy] = field(default_factory=dict)

    def env(self, name: str) -> dict[str, str]:
        script = self.root / "script.json"
        if not script.exists():
            write_script(script, [TURN])
        return {
            "MAKA_PROVIDER": "scripted",
            "MAKA_SCRIPT_FILE": str(script),
            "MAKA_SCRIPT_RECORD": str(self.root / f"requests-{name}.jsonl"),
            "MAKA_DATABASE_URL": self.url_of(name),
            "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1",
            "PGAPPNAME": f"maka-host-{name}",  # names its connections on the server
            **LEASES,
        }

    def url_of(self, name: str) -> str:
        proxy = self.proxies.get(name)
        return proxy.proxied_url(self.url) if proxy is not None else self.url

    def start_host(self, name: str, *, proxied: bool = False) -> MainProcess:
        """A host with its own data folder; ``proxied``: its connections to the server go
        through a ``SilentProxy`` (``self.proxies[name]``)."""
        if proxied:
            self.proxies[name] = SilentProxy.for_url(self.url)
        data = self.root / f"host-{name}"
        data.mkdir(parents=True, exist_ok=True)
        host = start_main(data, self.env(name), "host").wait_ready()
        self.hosts.append(host)
        self.names.append(name)
        deadline = time.monotonic() + 60  # ready: the store open and startup recovery done
        log = data / "logs" / "main.log"
        while "main process ready" not in (log.read_text() if log.exists() else ""):
            if time.monotonic() > deadline or host.process.poll() is not None:
                raise AssertionError(f"host {name} did not become ready: {host.stderr()[-2000:]}")
            time.sleep(0.1)
        return host

    def start_turn(self, host: MainProcess, work: Path, prompt: str) -> subprocess.Popen[str]:
        work.mkdir(parents=True, exist_ok=True)
        env = maka_env(host.data_dir, {"MAKA_DATABASE_URL": self.url})
        log = (work.parent / f"{work.name}.client.log").open("w")
        client = subprocess.Popen(
            [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", prompt],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        log.close()
        self.clients.append(client)
        return client

    def stop_all(self) -> None:
        for client in self.clients:
            if client.poll() is None:
                client.kill()
            client.wait(10)
        for proxy in self.proxies.values():
            proxy.resume()  # a host on a silent network would wait for its calls' deadlines
        for host in self.hosts:
            if host.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(host.pid, signal.SIGCONT)
            host.stop()
        for proxy in self.proxies.values():
            proxy.close()

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url) as conn:
            return list(conn.execute(sql, params).fetchall())

    def wait_for(self, what: str, sql: str, params: tuple[Any, ...], timeout_s: float) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                rows = self.query(sql, params)
            except psycopg.errors.UndefinedTable:  # the hosts are still creating the schema
                rows = []
            if rows and rows[0][0]:
                return rows[0][0]
            time.sleep(0.05)
        raise _timeout_error(what)

    def session_of(self, work: Path, timeout_s: float = 30) -> str:
        return str(
            self.wait_for(
                f"a session in {work}",
                "SELECT session_id FROM sessions WHERE cwd = %s",
                (str(work),),
                timeout_s,
            )
        )

    def first_outcome(self, session: str, client: subprocess.Popen[str]) -> None:
        """Until the session's first call has its outcome committed, or the turn ended before
        (a T1 refused for want of runway right after a server restart, say)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = self.query(
                "SELECT count(*) FROM tool_operations WHERE session_id = %s"
                " AND current_state = 'outcome_committed'",
                (session,),
            )[0][0]
            if done or client.poll() is not None:
                return
            time.sleep(0.05)
        raise _timeout_error("the first call's outcome")

    def settled(self, session_id: str, timeout_s: float) -> float:
        """Seconds until the session's latest run is completed, or it was taken over, repaired
        and its automatic resume reported (parked or continued)."""
        started = time.monotonic()
        deadline = started + timeout_s
        while time.monotonic() < deadline:
            latest = self.query(
                "SELECT status, failure_class FROM runs WHERE session_id = %s"
                " ORDER BY created_at DESC, run_id DESC LIMIT 1",
                (session_id,),
            )
            if latest and latest[0][0] == "completed":
                return time.monotonic() - started
            if latest and latest[0][0] == "failed" and self._park_logged(session_id):
                return time.monotonic() - started
            if latest and latest[0][0] == "failed" and latest[0][1] != "app_restarted":
                return time.monotonic() - started  # the turn itself ended, with its code
            time.sleep(0.1)
        report = self._stuck_report(session_id)
        self._dump_threads()
        raise _timeout_error(f"session {session_id} to complete or park\n{report}")

    def _stuck_report(self, session_id: str) -> str:
        """What a timeout prints: the session's runs and lease, and every host's log lines
        since the session's first run (CI keeps no temporary folder to look at afterwards)."""
        runs = self.query(
            "SELECT run_id, status, failure_class, created_at FROM runs WHERE session_id = %s"
            " ORDER BY created_at, run_id",
            (session_id,),
        )
        lease = self.query("SELECT * FROM session_leases WHERE session_id = %s", (session_id,))
        lines = [f"runs: {row}" for row in runs] + [f"lease: {row}" for row in lease]
        for name, host in zip(self.names, self.hosts, strict=True):
            path = host.data_dir / "logs" / "main.log"
            text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
            lines.append(f"--- host {name} (running: {host.process.poll() is None}), log tail:")
            lines.extend(text.splitlines()[-60:])
        return "\n".join(line[:400] for line in lines)

    def _dump_threads(self) -> None:
        """Diagnostics for a hang: every live host prints its threads' stacks to its stderr
        file (``PYTHONFAULTHANDLER``: SIGABRT) and dies."""
        for host in self.hosts:
            if host.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(host.pid, signal.SIGCONT)
                    os.kill(host.pid, signal.SIGABRT)

    def _park_logged(self, session_id: str) -> bool:
        return any(session_id in line and "Parked" in line for line in self.log_lines())

    def log_lines(self) -> list[str]:
        lines: list[str] = []
        for host in self.hosts:
            path = host.data_dir / "logs" / "main.log"
            if path.exists():
                lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
        return lines

    # ---- rounds -----------------------------------------------------------------------------

    def kill_round(self, victim: MainProcess, work: Path) -> dict[str, float]:
        client = self.start_turn(victim, work, "one side effect, then a check")
        session = self.session_of(work)
        self.first_outcome(session, client)
        os.kill(victim.pid, signal.SIGKILL)  # the model is streaming the next step
        victim.process.wait(10)
        killed = time.monotonic()
        took = self.settled(session, TTL_MS / 1000 + 30)
        return {"takeover_s": time.monotonic() - killed, "settled_s": took}

    def cut_round(self, victim: MainProcess, work: Path) -> dict[str, float]:
        """The server ends the host's connections, again and again for 3 s, once the first
        call's outcome is committed: the turn ends with a coded failure (``store_io_failed``),
        nothing half-written; the host reconnects and repairs the run its turn left, and
        automatic resume continues it."""
        name = self.names[self.hosts.index(victim)]
        client = self.start_turn(victim, work, "one side effect, then a check")
        session = self.session_of(work)
        self.first_outcome(session, client)
        cut = time.monotonic()
        ended = 0
        while time.monotonic() < cut + 3:
            ended += self.query(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (f"maka-host-{name}",),
            )[0][0]
            time.sleep(0.1)
        assert ended > 0, "no connection of the host was ended"
        took = self.settled(session, TTL_MS / 1000 + 30)
        # As after a restart: the victim's first call after the last cut still meets the ended
        # connection (the next one reconnects); the next round must not start on that call.
        time.sleep(TTL_MS / 1000)  # every host renews again before the next round
        return {"connections_ended": float(ended), "settled_s": took}

    def restart_round(
        self, victim: MainProcess, work: Path, cluster: PostgresCluster
    ) -> dict[str, float]:
        """PostgreSQL stopped as a crash would (every connection cut) while the model streams
        the next step, started again a second later: every host reconnects; the session's turn
        ends ``store_io_failed`` or carries on, and either way the session settles."""
        client = self.start_turn(victim, work, "one side effect, then a check")
        session = self.session_of(work)
        self.first_outcome(session, client)
        cluster.stop_server()
        time.sleep(1)
        cluster.start_server()
        took = self.settled(session, TTL_MS / 1000 + 30)
        time.sleep(TTL_MS / 1000)  # every host renews again before the next round
        return {"settled_s": took}

    def silent_round(
        self, victim: MainProcess, work: Path, *, resume: bool = True
    ) -> dict[str, float]:
        """The victim's network stops forwarding (its proxy keeps every socket open) once the
        first call's outcome is committed, while the model streams the next step: its calls
        answer ``store_io_failed`` at their deadline, its lease runs out, and another host takes
        the session over and settles it. With ``resume`` the proxy then forwards again: the
        victim, alive all along, reconnects, finds the session lost to the other host, and runs
        a new turn to completion. Without, it stays cut off (the caller replaces it)."""
        name = self.names[self.hosts.index(victim)]
        proxy = self.proxies[name]
        client = self.start_turn(victim, work, "one side effect, then a check")
        session = self.session_of(work)
        self.first_outcome(session, client)
        epoch_before = self.query(
            "SELECT epoch FROM session_leases WHERE session_id = %s", (session,)
        )[0][0]
        proxy.silence()
        silenced = time.monotonic()
        self.wait_for(
            "the takeover of the silent host's session",
            "SELECT epoch > %s FROM session_leases WHERE session_id = %s",
            (epoch_before, session),
            TTL_MS / 1000 + 30,
        )
        taken = time.monotonic() - silenced
        self.settled(session, 30)
        settled = time.monotonic() - silenced
        figures = {"takeover_s": taken, "settled_s": settled}
        if not resume:
            return figures
        proxy.resume()
        client.wait(60)  # the turn ended on the silent network, with a coded failure
        assert victim.process.poll() is None, victim.stderr()[-2000:]
        again = work.parent / f"{work.name}-again"
        resumed = time.monotonic()
        self.start_turn(victim, again, "one side effect, then a check")
        later = self.session_of(again)
        self.settled(later, TTL_MS / 1000 + 30)
        latest = self.query(
            "SELECT status FROM runs WHERE session_id = %s ORDER BY created_at DESC LIMIT 1",
            (later,),
        )[0][0]
        assert latest == "completed", f"the victim's turn after the silence ended {latest}"
        if not (again / "side.txt").exists():  # the turn completed, but its command did not run
            told_again = (again.parent / f"{again.name}.client.log").read_text(errors="replace")
            raise AssertionError(
                f"no side effect in {again}:\n{told_again}\n{self._stuck_report(later)}"
            )
        figures["serving_again_s"] = time.monotonic() - resumed
        # Told by the host's log (a lease renewal that met it) or to the turn's client.
        told = (work.parent / f"{work.name}.client.log").read_text(errors="replace")
        figures["deadline_hits"] = float(
            sum("no answer within" in line for line in [*self.log_lines(), *told.splitlines()])
        )
        return figures

    def stop_round(self, victim: MainProcess, work: Path) -> dict[str, float]:
        work.mkdir(parents=True, exist_ok=True)
        (work / "long").write_text("")
        client = self.start_turn(victim, work, "a long command")
        session = self.session_of(work)
        pid = int(
            self.wait_for(
                "the command's process",
                "SELECT pid FROM tool_processes WHERE session_id = %s",
                (session,),
                30,
            )
        )
        os.kill(victim.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        epoch_before = self.query(
            "SELECT epoch FROM session_leases WHERE session_id = %s", (session,)
        )[0][0]
        self.wait_for(
            "the takeover",
            "SELECT epoch > %s FROM session_leases WHERE session_id = %s",
            (epoch_before, session),
            TTL_MS / 1000 + 30,
        )
        taken = time.monotonic() - stopped
        self.settled(session, 30)
        gone_before_cont = not pid_running(pid)
        os.kill(victim.pid, signal.SIGCONT)
        client.wait(60)
        output = (work.parent / f"{work.name}.client.log").read_text(errors="replace")
        assert gone_before_cont, "the stopped host's command outlived the lease"
        assert "session_lease_lost" in output + "\n".join(self.log_lines()), output
        assert victim.process.poll() is None, victim.stderr()[-2000:]
        return {"takeover_s": taken}


DOCUMENTED_PARKS = {reason.value for reason in ParkReason} | {code.value for code in StoreCode}
DOCUMENTED_FAILURES = {failure.value for failure in FailureClass}


def check_invariants(rig: Rig, works: Mapping[str, Path]) -> dict[str, int]:
    """The invariants after a round; returns counts for the report."""
    # No duplicate side effect: every line a bash call appends is its own, once.
    for work in works.values():
        lines = (work / "side.txt").read_text().splitlines() if (work / "side.txt").exists() else []
        assert len(lines) == len(set(lines)), f"{work}: a side effect twice: {lines}"
        assert "late" not in lines, f"{work}: a stopped host's command ran past its lease"
    # Gap-free sequences, and nothing after a run's ending (a stale epoch's write lands there).
    runs = rig.query("SELECT run_id, status, next_seq FROM runs")
    for run_id, status, next_seq in runs:
        seqs = [
            r[0]
            for r in rig.query(
                "SELECT event_seq FROM runtime_events WHERE run_id = %s ORDER BY event_seq",
                (run_id,),
            )
        ]
        assert seqs == list(range(1, next_seq)), f"{run_id}: {seqs}"
        if status in ("completed", "failed", "cancelled"):
            last = rig.query(
                "SELECT payload FROM runtime_events WHERE run_id = %s"
                " ORDER BY event_seq DESC LIMIT 1",
                (run_id,),
            )
            event = json.loads(bytes(last[0][0]))
            assert (
                event.get("status")
                or (event.get("actions") or {}).get("endInvocation")
                or (event.get("actions") or {}).get("attestation")
            ), f"{run_id}: a fact after its ending: {event}"
    # No provider request with an unpaired call.
    requests = 0
    for path in rig.root.glob("requests-*.jsonl"):
        for line in path.read_text().splitlines():
            requests += 1
            assert json.loads(line)["unpairedToolCalls"] == [], line
    # Every session: completed, its turn ended with a documented failure class (a T1 refused
    # for want of runway: tool_boundary_failed), or its takeover's resume parked with a
    # documented code.
    parks = failed = 0
    for (session_id,) in rig.query("SELECT session_id FROM sessions"):
        latest, failure = rig.query(
            "SELECT status, failure_class FROM runs WHERE session_id = %s"
            " ORDER BY created_at DESC, run_id DESC LIMIT 1",
            (session_id,),
        )[0]
        if latest == "completed":
            continue
        if latest == "failed" and failure != FailureClass.APP_RESTARTED:
            assert failure in DOCUMENTED_FAILURES, failure
            failed += 1
            continue
        reasons = [
            line.rsplit("ResumeParked", 1)[1].strip()
            for line in rig.log_lines()
            if "ResumeParked" in line and session_id in line
        ]
        assert reasons, f"session {session_id} ended {latest} without a park"
        for reason in ", ".join(reasons).split(", "):
            assert reason in DOCUMENTED_PARKS, reason
        parks += 1
    return {"runs": len(runs), "requests": requests, "parked": parks, "failed": failed}
