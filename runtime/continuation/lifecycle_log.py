"""Continuation lifecycle records: ``plan_approved``, ``plan_parked``, ``execution_started``,
``execution_completed``, ``execution_failed`` as JSON lines in the data directory's log.

Records hold ids, codes and error classes only: never prompts, arguments, results or secrets.
Writing a record never changes behaviour: a failing log write is swallowed.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.continuation.continuation_planner import ContinuationPlan


LIFECYCLE_LOG = Path("logs") / "lifecycle.jsonl"
"""Where the records go, relative to the data directory (desktop and CLI share it)."""


class LifecycleLog:
    @classmethod
    def in_data_dir(cls, data_dir: Path, now_ms: Callable[[], int]) -> LifecycleLog:
        return cls(data_dir / LIFECYCLE_LOG, now_ms)

    def __init__(self, path: Path, now_ms: Callable[[], int]) -> None:
        self._path = path
        self._now_ms = now_ms
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def _write(self, record: dict[str, Any]) -> None:
        record = {"ts": self._now_ms(), **record}
        line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
        try:
            with self._lock:
                # The data directory is private (storage/private_files.py): 0700 folder,
                # 0600 file from its first byte.
                self._path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with open(fd, "a", encoding="utf-8") as handle:
                    handle.write(line)
        except OSError:
            return

    @staticmethod
    def _ids(plan: ContinuationPlan) -> dict[str, Any]:
        body: dict[str, Any] = {"sessionId": plan.session_id}
        if plan.source_run_id is not None:
            body["sourceRunId"] = plan.source_run_id
        if plan.continuation is not None:
            body["targetRunId"] = plan.continuation.ids.run_id
            body["claimId"] = plan.continuation.ids.claim_id
            body["sourceRuntimeEventHighWater"] = plan.continuation.source_high_water
        return body

    def session_relocated(self, session_id: str, old_cwd: str, new_cwd: str, identity: str) -> None:
        """The user pointed a session at its folder's new place (proven by its marker)."""
        self._write(
            {
                "kind": "session.relocated",
                "sessionId": session_id,
                "from": old_cwd,
                "to": new_cwd,
                "workspaceIdentity": identity,
            }
        )

    def workspace_marker_given_back(
        self, session_id: str, cwd: str, identity: str, replaced: str | None
    ) -> None:
        """The user gave the session's own folder its workspace marker back (deleted, or
        replaced by one that names a workspace nothing recorded)."""
        self._write(
            {
                "kind": "workspace.marker_given_back",
                "sessionId": session_id,
                "cwd": cwd,
                "workspaceIdentity": identity,
                "replaced": replaced,
            }
        )

    def session_branched(self, body: dict[str, Any]) -> None:
        """A session was branched from a boundary of another (its ``branchStart`` committed)."""
        self._write({"kind": "session.branched", **body})

    def session_removed(self, session_id: str, cwd: str) -> None:
        self._write({"kind": "session.removed", "sessionId": session_id, "cwd": cwd})

    def plan(self, plan: ContinuationPlan, *, automatic: bool) -> None:
        if plan.continues:
            self._write({"event": "plan_approved", "automatic": automatic, **self._ids(plan)})
        else:
            self._write(
                {
                    "event": "plan_parked",
                    "automatic": automatic,
                    "rejectionReasons": [reason.value for reason in plan.rejection_reasons],
                    "diagnosticCodes": [d.code for d in plan.diagnostics],
                    **self._ids(plan),
                }
            )

    def execution_started(self, plan: ContinuationPlan, *, automatic: bool) -> None:
        self._write({"event": "execution_started", "automatic": automatic, **self._ids(plan)})

    def execution_completed(self, plan: ContinuationPlan, status: str) -> None:
        self._write({"event": "execution_completed", "runStatus": status, **self._ids(plan)})

    def execution_failed(self, plan: ContinuationPlan, error_class: str) -> None:
        self._write({"event": "execution_failed", "errorClass": error_class, **self._ids(plan)})
