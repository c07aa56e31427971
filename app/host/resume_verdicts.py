"""The last Safe resume verdict per interrupted boundary, kept across restarts.

Why: a plan is a pure function of the committed history at the boundary and of what the safety
inspector observes (the folder, its marker, the tools, background work). When a session's last
plan parked and none of those inputs changed, planning again gives the same park, so after a
restart the banner opens parked with the same reasons instead of offering Safe resume, a button
that can only fail. Anything that changes an input (a located folder, a marker put back, a tool
installed, background work ended, a new turn) makes the stored verdict stale, and Safe resume is
offered again.

Stored in ``<data dir>/resume-verdicts.json`` (0600, replaced atomically); a damaged or missing
file only means no verdict stands. Never a safety fact: the plan is always made again on click.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bridge_contract import ResumeDiagnostic

VERDICTS_FILE = "resume-verdicts.json"
_MAX_VERDICTS = 1000

# Reasons that describe a moment, not the boundary: never kept.
TRANSIENT_REASONS = frozenset({"session_busy", "resume_feature_disabled"})


@dataclass(frozen=True, slots=True)
class StoredVerdict:
    session_id: str
    boundary: str
    inputs: str
    reasons: tuple[str, ...]
    diagnostics: tuple[ResumeDiagnostic, ...]
    at: int
    # The user's ways forward the park offered (continue in a restored copy, with the current
    # files): the banner's buttons after a restart depend on them.
    workspace_options: tuple[str, ...] = ()


class ResumeVerdicts:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / VERDICTS_FILE
        self._lock = threading.Lock()
        self._verdicts: dict[str, StoredVerdict] = self._load()

    @property
    def path(self) -> Path:
        return self._path

    def get(self, session_id: str) -> StoredVerdict | None:
        with self._lock:
            return self._verdicts.get(session_id)

    def all(self) -> list[StoredVerdict]:
        with self._lock:
            return list(self._verdicts.values())

    def record(self, verdict: StoredVerdict) -> None:
        if set(verdict.reasons) & TRANSIENT_REASONS or not verdict.reasons:
            return
        with self._lock:
            self._verdicts[verdict.session_id] = verdict
            while len(self._verdicts) > _MAX_VERDICTS:
                del self._verdicts[next(iter(self._verdicts))]
            self._save()

    def clear(self, session_id: str) -> None:
        with self._lock:
            if self._verdicts.pop(session_id, None) is not None:
                self._save()

    def _load(self) -> dict[str, StoredVerdict]:
        try:
            body = json.loads(self._path.read_text(encoding="utf-8"))
            rows = body["verdicts"]
            loaded = {}
            for row in rows:
                verdict = StoredVerdict(
                    session_id=str(row["sessionId"]),
                    boundary=str(row["boundary"]),
                    inputs=str(row["inputs"]),
                    reasons=tuple(str(r) for r in row["reasons"]),
                    diagnostics=tuple(
                        ResumeDiagnostic.model_validate(d) for d in row.get("diagnostics", ())
                    ),
                    at=int(row["at"]),
                    workspace_options=tuple(str(o) for o in row.get("workspaceOptions", ())),
                )
                loaded[verdict.session_id] = verdict
            return loaded
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def _save(self) -> None:
        rows: list[dict[str, Any]] = [
            {
                "sessionId": v.session_id,
                "boundary": v.boundary,
                "inputs": v.inputs,
                "reasons": list(v.reasons),
                "diagnostics": [d.model_dump(mode="json", by_alias=True) for d in v.diagnostics],
                "at": v.at,
                "workspaceOptions": list(v.workspace_options),
            }
            for v in self._verdicts.values()
        ]
        data = json.dumps({"version": 1, "verdicts": rows}, ensure_ascii=False).encode()
        temp = self._path.with_name(f".{VERDICTS_FILE}.{os.getpid()}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temp, self._path)
        except OSError:
            with contextlib.suppress(OSError):
                temp.unlink()
