"""Renewing a host's session leases on a heartbeat (docs/postgres.md).

Every ``interval`` seconds (ttl/3 by default) the heartbeat renews every lease the store holds in
one statement (``SessionLeaseStore.renew_session_leases``) and hands the sessions whose lease was
lost to ``on_lost``: the host stops them at once. A renewal that fails (the server unreachable)
is retried soon (half a second, then twice as long after each failure, never longer than the
interval): a connection the server ended is made again at once, and the renewal lands well before
the runway runs out, so a restart of a moment never ends a command. ``runway_deadline`` is the
host's own conservative clock, the monotonic
time of the last successful renewal plus ttl minus the margin, past which it must stop dispatching
tools whatever the server says; ``on_expired`` is called (from a thread of its own, so a renewal
stuck on a silent network does not delay it) once that deadline passes, and the host ends its tool
processes there. On SQLite the store holds no lease and a beat does nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from runtime.ledger.store_ports import SessionLeaseStore, StoreRefusal

_log = logging.getLogger("maka.store")
_FIRST_RETRY_S = 0.5


class SessionLeaseHeartbeat:
    def __init__(
        self,
        store: SessionLeaseStore,
        *,
        ttl_s: float,
        margin_s: float,
        on_lost: Callable[[Sequence[str]], None],
        interval_s: float | None = None,
    ) -> None:
        self._store = store
        self._ttl = ttl_s
        self._margin = margin_s
        self._interval = interval_s if interval_s is not None else ttl_s / 3
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watcher: threading.Thread | None = None
        self._last_renewal = time.monotonic()
        self.failures = 0
        self._streak = 0
        # The causes logged in this outage: each once, not every beat (an outage can change
        # cause, say a connection ended, then a network gone silent; the log tells both).
        self._told: set[str] = set()
        self.on_expired: Callable[[], None] | None = None
        """Called once (on the heartbeat's thread) when ``runway_deadline`` passes without a
        renewal; again only after a renewal succeeded and the deadline passed once more."""
        self._expired_told = False

    @property
    def runway_deadline(self) -> float:
        """``time.monotonic()`` past which this host must stop dispatching tools."""
        return self._last_renewal + self._ttl - self._margin

    def beat(self) -> Sequence[str]:
        """One renewal (the thread's step; tests call it directly). Returns the lost sessions."""
        started = time.monotonic()
        try:
            lost = self._store.renew_session_leases()
        except StoreRefusal as refusal:
            self.failures += 1
            self._streak += 1
            if str(refusal) not in self._told:
                self._told.add(str(refusal))
                _log.warning("renewing the session leases failed: %s", refusal)  # names its code
            return ()
        except Exception:  # never end the thread: a host that stops renewing loses its sessions
            self.failures += 1
            self._streak += 1
            _log.exception("renewing the session leases failed")
            return ()
        # (a store that held no lease asked the server nothing: ``last_renewal_empty``)
        if self._streak and getattr(self._store, "last_renewal_empty", False):
            # Nothing was renewed, nor was the server asked: the leases whose renewal failed
            # were given up since (the turn ended). "Renewed again" was said while the server
            # was still down.
            _log.warning(
                "no session lease is held now, so none was renewed (the %d failed renewal(s) "
                "were of leases given up since)",
                self._streak,
            )
            self._streak = 0
            self._told.clear()
        elif self._streak:
            # The sessions whose leases ran out meanwhile are named: "renewed again" alone hid
            # that this host no longer holds them (another host may have taken them over).
            _log.warning(
                "session leases renewed again after %d failed renewal(s)%s",
                self._streak,
                f"; lost meanwhile (their leases ran out): {', '.join(sorted(lost)[:20])}"
                + (f" and {len(lost) - 20} more" if len(lost) > 20 else "")
                if lost
                else "",
            )
            self._streak = 0
            self._told.clear()
        self._last_renewal = started
        self._expired_told = False
        if lost:
            self._on_lost(lost)
        return lost

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="maka-session-lease-heartbeat", daemon=True
            )
            self._thread.start()
            self._watcher = threading.Thread(
                target=self._watch, name="maka-session-lease-deadline", daemon=True
            )
            self._watcher.start()

    def next_wait(self) -> float:
        """Seconds to the next beat: the interval after a renewal, sooner after a failure."""
        if not self._streak:
            return self._interval
        return float(min(self._interval, _FIRST_RETRY_S * 2.0 ** (self._streak - 1)))

    def _run(self) -> None:
        while not self._stop.wait(self.next_wait()):
            self.beat()

    def _watch(self) -> None:
        """Its own thread: a renewal stuck on a silent network must not hold the deadline up."""
        while not self._stop.wait(0.2):
            self._check_expired()

    def _check_expired(self) -> None:
        """Past the runway deadline with no renewal since: tell the host (once)."""
        if self._expired_told or time.monotonic() < self.runway_deadline:
            return
        self._expired_told = True
        callback = self.on_expired
        if callback is not None:
            callback()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=self._interval + 5)
            self._thread = None
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.join(timeout=5)
