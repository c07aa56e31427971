"""Agent turns and slow queries on worker threads; results back on the Qt event loop.

Why: a provider call or a tool can take minutes, and even a store query over thousands of sessions
takes long enough to stall the IPC server. The event loop only routes messages; every call into
the host services runs on a Python thread, and its result (or the push messages it streams) comes
back through a Qt signal. A signal emitted on a worker thread and received by an object living on
the main thread is delivered as a queued event, so the callbacks below always run on the event loop
thread and never race the IPC server.

Turns are keyed by session: at most one turn (or resume) per session at a time, because a session's
ledger has one writer. Shutdown is three calls: ``stop_admitting()``, ``cancel_all()`` (each
turn's own cancel function: the turn then commits its ``cancelled`` terminal event), and
``drain(deadline)``.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal

from main_process.log_limits import RateLimitedLog, escape
from runtime.ledger.coded_error import coded_failure

_log = logging.getLogger("maka.main.workers")
_limited = RateLimitedLog(_log)

_QUERY_THREADS = 2


@dataclass(frozen=True, slots=True)
class JobResult:
    """What a job produced: ``value`` on success, ``error`` when it raised."""

    key: str
    value: Any = None
    error: BaseException | None = None


DoneCallback = Callable[[JobResult], None]


@dataclass(slots=True)
class _Turn:
    thread: threading.Thread
    cancel: Callable[[str | None], None]  # given why, when not the user's cancel


class MainThreadRelay(QObject):
    """Runs callables on the thread this object lives on (the event loop thread).

    ``post`` may be called from any thread; the callable runs later, in order, on the event loop.
    """

    _posted = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._posted.connect(self._run)

    def post(self, fn: Callable[[], None]) -> None:
        self._posted.emit(fn)

    def _run(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            _log.exception("callback on the event loop failed")


class TurnWorkers(QObject):
    """Keyed turn threads plus a small pool for read-only queries."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._relay = MainThreadRelay(self)
        self._turns: dict[str, _Turn] = {}
        self._lock = threading.Lock()
        self._admitting = True
        self._queries = ThreadPoolExecutor(_QUERY_THREADS, thread_name_prefix="maka-query")

    @property
    def relay(self) -> MainThreadRelay:
        return self._relay

    @property
    def admitting(self) -> bool:
        return self._admitting

    def busy(self, key: str) -> bool:
        with self._lock:
            return key in self._turns

    def running_keys(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._turns)

    def run_turn(
        self,
        key: str,
        job: Callable[[], Any],
        cancel: Callable[[str | None], None],
        on_done: DoneCallback,
    ) -> bool:
        """Start ``job`` on its own thread unless shutdown began or ``key`` already runs.

        ``cancel`` must make ``job`` return soon (it is called from the event loop thread); it
        is given why when the user did not ask (``cancel_all``: the host is shutting down).
        ``on_done`` runs on the event loop thread after the job returned or raised.
        """
        with self._lock:
            if not self._admitting or key in self._turns:
                return False
            # The job runs in a copy of the caller's context: what its request set there (the
            # wording of suggested commands for a terminal, ``command_words.wording_for``).
            context = contextvars.copy_context()
            thread = threading.Thread(
                target=context.run,
                args=(self._run_turn, key, job, on_done),
                name=f"maka-turn-{key[:24]}",
            )
            # Daemon: a turn stuck past the shutdown deadline must not keep the process alive;
            # the next start repairs its run like any interrupted one.
            thread.daemon = True
            self._turns[key] = _Turn(thread, cancel)
        thread.start()
        return True

    def run_query(self, key: str, job: Callable[[], Any], on_done: DoneCallback) -> bool:
        if not self._admitting:
            return False
        context = contextvars.copy_context()  # (as ``run_turn``'s)
        self._queries.submit(context.run, self._run_query, key, job, on_done)
        return True

    def stop_admitting(self) -> None:
        with self._lock:
            self._admitting = False

    def cancel(self, key: str) -> bool:
        with self._lock:
            turn = self._turns.get(key)
        if turn is None:
            return False
        _call_cancel(key, turn.cancel, None)
        return True

    def cancel_all(self, reason: str | None = None) -> int:
        """Cancel every running turn, saying ``reason`` (``HOST_STOPPED`` at shutdown)."""
        with self._lock:
            turns = list(self._turns.items())
        for key, turn in turns:
            _call_cancel(key, turn.cancel, reason)
        return len(turns)

    def drain(self, timeout_s: float) -> bool:
        """Wait (blocking) until every turn thread ended, at most ``timeout_s`` seconds.

        Called only during shutdown, after ``cancel_all``; True when nothing is left running."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                threads = [turn.thread for turn in self._turns.values()]
            alive = [thread for thread in threads if thread.is_alive()]
            if not alive:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _log.warning("%d turn(s) still running at the drain deadline", len(alive))
                return False
            alive[0].join(min(remaining, 0.05))
        self._queries.shutdown(wait=True, cancel_futures=True)
        return True

    def _run_turn(self, key: str, job: Callable[[], Any], on_done: DoneCallback) -> None:
        result = _execute(key, job)
        with self._lock:
            self._turns.pop(key, None)
        self._post_done(on_done, result)

    def _run_query(self, key: str, job: Callable[[], Any], on_done: DoneCallback) -> None:
        self._post_done(on_done, _execute(key, job))

    def _post_done(self, on_done: DoneCallback, result: JobResult) -> None:
        """``on_done`` on the event loop, in a copy of the job's context (the request's): what
        it says, and the work it starts in turn (a terminal's turn once its session was
        looked up), is worded as the request was (``command_words.wording_for``)."""
        context = contextvars.copy_context()
        self._relay.post(lambda: context.run(on_done, result))


def _execute(key: str, job: Callable[[], Any]) -> JobResult:
    try:
        return JobResult(key, value=job())
    except Exception as error:
        # A refusal with a code (unknown session, busy, bad folder) is expected: one line by
        # code. Anything else keeps its traceback. Keys may hold peer-chosen ids: escaped, and
        # repeats are rate-limited so a flood cannot rotate the log's history away.
        failure = coded_failure(error)
        if failure is not None:
            _limited.log(
                logging.INFO,
                f"refused:{escape(failure.code, 40)}",
                "job %s refused [%s]",
                escape(key),
                escape(failure.code, 40),
            )
        else:
            _limited.log(
                logging.WARNING,
                f"failed:{type(error).__name__}",
                "job %s failed with %s",
                escape(key),
                type(error).__name__,
                exc_info=error,
            )
        return JobResult(key, error=error)


def _call_cancel(key: str, cancel: Callable[[str | None], None], reason: str | None) -> None:
    try:
        cancel(reason)
    except Exception:
        _log.exception("cancelling %s failed", key)
