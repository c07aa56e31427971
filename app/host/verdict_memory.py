"""The last Safe resume verdict per boundary, kept across starts (docs/design/desktop.md: "A session
whose last plan parked is not offered Safe resume again after a restart until something it depends
on changed").

A park is remembered with the boundary it was planned for (the run Safe resume takes up and its
high-water mark) and a digest of what the safety inspector would observe (folder, marker, tools,
background work). With Safe resume on, every session the banner would offer is planned again at
start by the same planner as ``maka plan`` (one truth: a park decided in the CLI, or one whose
files changed while Maka was closed, is what the banner shows). With it off, a verdict whose
boundary and inputs are unchanged stands (the banner opens parked); any other goes. A
continuation that started clears the verdict.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from app.host.host_services import ResumeOutcome, ResumeParked, ResumeStarted
from app.host.resume_verdicts import ResumeVerdicts, StoredVerdict
from app.host.resume_wire import parked_outcome, parked_write_diagnostics
from runtime.continuation.resume_candidate import restart_interrupted, resume_candidate
from runtime.continuation.resume_service import ResumeService
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.process_records import ToolProcessTable
from runtime.ledger.store_ports import LedgerReader
from runtime.tools.process_identity import live_tool_processes
from runtime.tools.process_tree import BackgroundShellRegistry
from storage.sessions.workspace_identity import read_workspace_identity


class VerdictStore(LedgerReader, ToolProcessTable, Protocol):
    """What remembering a resume verdict needs of the store (the narrow port it declares): the
    sessions and runs, the tool processes still alive, and a run's high-water mark."""

    def run_high_water(self, run_id: str) -> int: ...


_log = logging.getLogger("maka.main")


class VerdictMemory:
    def __init__(
        self,
        store: VerdictStore,
        shells: BackgroundShellRegistry,
        verdicts: ResumeVerdicts,
        clock: Callable[[], int],
        *,
        tool_names: Callable[[], Sequence[str]],
        planner: Callable[[], ResumeService],
        safe_resume_on: Callable[[], bool],
    ) -> None:
        """``tool_names``: the current catalog; ``planner``: a read-only resume seam;
        ``safe_resume_on``: whether Safe resume is on now (a park on files is re-checked only
        then)."""
        self._store = store
        self._shells = shells
        self._verdicts = verdicts
        self._clock = clock
        self._tool_names = tool_names
        self._planner = planner
        self._safe_resume_on = safe_resume_on

    def clear(self, session_id: str) -> None:
        self._verdicts.clear(session_id)

    def standing(self, skip: frozenset[str] = frozenset()) -> tuple[tuple[str, ResumeParked], ...]:
        """The parks that stand at start, for the sessions the banner would offer Safe resume
        for (the latest run failed by a restart). With Safe resume on, each is planned again
        (read-only) by the same planner ``maka plan`` and ``maka resume`` use, so the banner
        never offers Safe resume for a session whose resume would park (a park decided in the
        CLI included), and a session that would continue now is offered as usual. With it off,
        parks of an earlier start whose boundary and inputs are unchanged stand (others go).
        ``skip``: sessions automatic resume takes up now (its outcome is theirs)."""
        if self._safe_resume_on():
            return self._planned(skip)
        standing: list[tuple[str, ResumeParked]] = []
        for verdict in self._verdicts.all():
            current = self.plan_inputs(verdict.session_id)
            if current != (verdict.boundary, verdict.inputs):
                self._verdicts.clear(verdict.session_id)
                continue
            standing.append(
                (
                    verdict.session_id,
                    ResumeParked(verdict.reasons, verdict.diagnostics, verdict.workspace_options),
                )
            )
        return tuple(standing)

    def _planned(self, skip: frozenset[str]) -> tuple[tuple[str, ResumeParked], ...]:
        remembered = {verdict.session_id for verdict in self._verdicts.all()}
        standing: list[tuple[str, ResumeParked]] = []
        try:
            sessions = [session.session_id for session in self._store.list_sessions()]
        except LedgerError as error:
            _log.warning("listing sessions to plan at start failed: %s", error)
            return ()
        for session_id in sessions:
            if session_id in skip:
                continue
            if self.plan_inputs(session_id) is None:
                if session_id in remembered:
                    self._verdicts.clear(session_id)
                continue
            parked = self._plan_now(session_id)
            if parked is not None:
                standing.append((session_id, parked))
        return tuple(standing)

    def recheck(self, session_id: str) -> ResumeParked | None:
        """Once the session's folder is located: the park as it stands now, planned again as at
        start, for a session the banner would offer Safe resume for with Safe resume on (a
        located folder can still park for another reason: a write recovery parked for good); None
        when it would continue, or the banner offers nothing."""
        if not self._safe_resume_on() or self.plan_inputs(session_id) is None:
            return None
        return self._plan_now(session_id)

    def _plan_now(self, session_id: str) -> ResumeParked | None:
        """Plan the session (read-only): None when it would continue now, else the park as it
        stands now (recorded as the verdict)."""
        try:
            plan = self._planner().plan_latest(session_id)
        except LedgerError as error:
            _log.warning("planning session %s failed: %s", session_id, error)
            return None
        if plan.continues:
            self._verdicts.clear(session_id)
            return None
        session = self._store.get_session(session_id)
        cwd = session.cwd if session is not None else ""
        parked = parked_outcome(plan, parked_write_diagnostics(self._store, plan, cwd))
        self.remember(session_id, parked)
        return parked

    def plan_inputs(self, session_id: str) -> tuple[str, str] | None:
        """The interrupted boundary of the session (its latest run, when a restart failed it:
        the banner's run, docs/design/desktop.md; and that run's high-water mark) and a digest of
        what the safety inspector would observe; None when the session has no such run. Read-only:
        no marker is created."""
        try:
            session = self._store.get_session(session_id)
            latest = resume_candidate(self._store.list_session_runs(session_id))
            if session is None or latest is None or not restart_interrupted(latest):
                return None
            boundary = f"{latest.run_id}@{self._store.run_high_water(latest.run_id)}"
            background = [f"shell:{s.pid}" for s in self._shells.live_shells(session_id)]
            background += [
                f"tool:{r.pid}" for r in live_tool_processes(self._store, session_id=session_id)
            ]
        except LedgerError:
            return None
        folder = Path(session.cwd)
        marker = "folder_missing"
        if folder.is_dir():
            try:
                found = read_workspace_identity(folder)
                marker = found.identity if found is not None else "no_marker"
            except LedgerError as error:
                marker = error.code
        tools = list(self._tool_names())
        body = {"cwd": session.cwd, "marker": marker, "tools": tools, "background": background}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        return boundary, digest

    def remember(self, session_id: str, outcome: ResumeOutcome) -> None:
        if isinstance(outcome, ResumeStarted):
            self._verdicts.clear(session_id)
            return
        if not isinstance(outcome, ResumeParked):
            return
        inputs = self.plan_inputs(session_id)
        if inputs is None:
            return
        self._verdicts.record(
            StoredVerdict(
                session_id,
                inputs[0],
                inputs[1],
                outcome.rejection_reasons,
                outcome.diagnostics,
                self._clock(),
                outcome.workspace_options,
            )
        )
