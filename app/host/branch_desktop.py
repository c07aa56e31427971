"""Branching as the desktop shows it (issue #36): the wire answers of ``branch.options`` and
``branch.create``, the header of a branched session (``BranchOrigin``) and the markers in a
source session's transcript where it was branched (``BranchMarkerItem``).

Everything here reads the store the main process owns through ``app.host.branch_session`` (the
same calls ``maka branch`` and ``/branch`` make) and runs on a worker thread: a branch copies a
folder, which can take seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from app.bridge_contract import (
    MAX_BRANCH_OPTIONS,
    MAX_ITEMS_PER_OPEN,
    BranchMadePush,
    BranchMarkerItem,
    BranchOptionItem,
    BranchOptionsListedPush,
    BranchOrigin,
    NoticeItem,
    NoticeLevel,
    TranscriptItem,
)
from app.host.branch_session import (
    BranchLister,
    branch_of,
    branch_options,
    branch_session,
    branches_from,
)
from app.host.host_services import Transcript
from runtime.agent.transcript_projection import summarize_args
from runtime.continuation.branch_prefix import (
    RUN_ENDING,
    TOOL_RESULT,
    USER_MESSAGE,
    boundary_kind,
)
from runtime.continuation.branch_service import default_branch_path
from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.ledger.checkpoint_ports import CheckpointCarrier
from runtime.ledger.coded_error import CodedError

_SHORT = 500
_ID = 200
_LABEL_CHARS = 80
_ARGS_CHARS = 80


class BranchDesktopStore(BranchLister, Protocol):
    """What the desktop reads and writes for branching (``SqliteLedgerStore`` is one)."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call_id(store: BranchDesktopStore, event_id: str) -> str | None:
    """The call a tool result answers (its transcript card's ``tool_call_id``)."""
    stored = store.read_event(event_id)
    content: Mapping[str, Any] = (stored.event.get("content") or {}) if stored else {}
    call = content.get("id")
    return _clip(str(call), _ID) if call else None


def _call_args(store: BranchDesktopStore, run_ids: set[str]) -> dict[tuple[str, str], str]:
    """Each call of these runs in short, as its transcript card shows it (``summarize_args``),
    by (run id, call id): one read of each run that has a tool result among the options."""
    found: dict[tuple[str, str], str] = {}
    for run_id in sorted(run_ids):
        for row in store.read_run_events(run_id):
            content = row.event.get("content")
            if isinstance(content, Mapping) and content.get("kind") == "function_call":
                name = str(content.get("name") or "tool")
                words = " ".join(summarize_args(name, content.get("args")).split())
                found[(run_id, str(content.get("id")))] = _clip(words, _ARGS_CHARS)
    return found


def options_push(
    store: BranchDesktopStore, checkpoints: CheckpointCarrier | None, session_id: str
) -> BranchOptionsListedPush:
    """The answer to ``branch.options``. Raises ``BranchRefused`` (``session_not_found``)."""
    options = branch_options(store, checkpoints, session_id)
    source = store.get_session(session_id)
    assert source is not None, "branch_options refuses a missing session"
    omitted = max(0, len(options) - MAX_BRANCH_OPTIONS)
    results = {o.boundary.run_id for o in options[omitted:] if o.boundary.kind == TOOL_RESULT}
    args = _call_args(store, results) if results else {}
    items = []
    for option in options[omitted:]:
        boundary = option.boundary
        call_id = _call_id(store, boundary.event_id) if boundary.kind == TOOL_RESULT else None
        items.append(
            BranchOptionItem(
                event_id=boundary.event_id,
                run_id=boundary.run_id,
                seq=boundary.shown_seq,  # (the timeline's row number)
                kind=boundary.kind,
                ts=max(0, boundary.ts),
                label=_clip(boundary.label, _SHORT),
                snapshot_bound=boundary.snapshot is not None,
                snapshot_kept=option.snapshot_kept,
                trimmed=option.trimmed,
                damaged_aside=option.damaged_aside,
                branchable=not boundary.unsettled,
                settled_at=boundary.settled_at if boundary.unsettled else None,
                tool_call_id=call_id,
                tool_args=args.get((boundary.run_id, call_id)) if call_id else None,
                checkpoint_ref=_clip(str(boundary.snapshot.get("checkpointRef", "")), _SHORT)
                if boundary.snapshot is not None
                else None,
            )
        )
    return BranchOptionsListedPush(
        session_id=session_id,
        title=_clip(source.title, _SHORT),
        cwd=source.cwd,
        default_folder=str(default_branch_path(source.cwd)),
        snapshots_on=checkpoints is not None,
        folder_gone=not os.path.isdir(source.cwd),
        options=tuple(items),
        omitted_earlier=omitted,
        runs_running=tuple(
            header.run_id
            for header in store.list_session_runs(session_id)
            if str(header.status) in ("created", "running")
        )[:64],
    )


def make_branch(
    store: BranchDesktopStore,
    checkpoints: CheckpointCarrier | None,
    session_id: str,
    event_id: str,
    *,
    to: Path | None,
    current_files: bool,
    now_ms: Callable[[], int],
    lifecycle: LifecycleLog | None,
) -> BranchMadePush:
    """Make the branch; raises ``BranchRefused`` (nothing recorded)."""
    source = store.get_session(session_id)
    result = branch_session(
        store,
        checkpoints,
        session_id,
        event_id,
        now_ms=now_ms,
        to=str(to) if to is not None else None,
        current_files=current_files,
        lifecycle=lifecycle,
    )
    return BranchMadePush(
        session_id=session_id,
        event_id=event_id,
        new_session_id=result.session.session_id,
        cwd=result.session.cwd,
        title=_clip(result.session.title, _SHORT),
        current_files=current_files,
        source_cwd=source.cwd if source is not None else None,
        record=json.dumps(result.record.to_json(), ensure_ascii=False),
    )


def boundary_words(store: BranchDesktopStore, event_id: str) -> tuple[str, str | None]:
    """A boundary's label ("you: …", "result of bash", "run ended completed") and kind."""
    stored = store.read_event(event_id)
    if stored is None:
        return "", None
    event = stored.event
    kind = boundary_kind(event)
    content: Mapping[str, Any] = event.get("content") or {}
    if kind == USER_MESSAGE:
        text = " ".join(str(content.get("text", "")).split())
        return f"you: {_clip(text, _LABEL_CHARS)}", kind
    if kind == TOOL_RESULT:
        return f"result of {content.get('name', 'a tool')}", kind
    if kind == RUN_ENDING:
        return f"run ended {event.get('status') or 'completed'}", kind
    return "", kind


def branch_origin(store: BranchDesktopStore, session_id: str) -> BranchOrigin | None:
    """The header of a branched session: its source and boundary (None: not a branch)."""
    record = branch_of(store, session_id)
    if record is None:
        return None
    source = store.get_session(record.source_session_id)
    label, kind = boundary_words(store, record.boundary_event_id)
    return BranchOrigin(
        source_session_id=_clip(record.source_session_id, _ID),
        source_title=_clip(source.title, _SHORT) if source is not None else "",
        boundary_event_id=_clip(record.boundary_event_id, _ID),
        boundary_label=_clip(label, _SHORT),
        boundary_kind=kind,
        current_files=record.current_files,
    )


def _anchor(
    items: Sequence[TranscriptItem], event_id: str, call_id: str | None, run_id: str | None
) -> int:
    """The index after which a branch made at ``event_id`` is marked: the item of that event
    (a user message, a run's ending notice), the card of the call a tool result answers, else
    the last item of its run; -1: none of them is shown (left out as earlier items)."""
    for index, item in enumerate(items):
        if item.item_id == event_id:
            return index
    if call_id is not None:
        for index in range(len(items) - 1, -1, -1):
            item = items[index]
            if item.type == "tool_card" and item.tool_call_id == call_id:
                return index
    if run_id is not None:
        for index in range(len(items) - 1, -1, -1):
            if items[index].run_id == run_id:
                return index
    return -1


def with_branch_prefix(
    store: BranchDesktopStore,
    transcript: Transcript,
    open_source: Callable[[str], Transcript],
) -> Transcript:
    """A branched session's transcript starts with its source's, up to the point it was
    branched at (the history its model is given, shown as it reads in the source: no card of it
    can be settled here), then a note that what follows is its own."""
    record = branch_of(store, transcript.session_id)
    if record is None:
        return transcript
    try:
        source = open_source(record.source_session_id)
    except (CodedError, ValueError):
        return transcript  # the source cannot be read now: the header still names it
    items = [item for item in source.items if item.type != "branch_marker"]
    stored = store.read_event(record.boundary_event_id)
    run_id = str(stored.event.get("runId")) if stored is not None else None
    call_id = _call_id(store, record.boundary_event_id) if stored is not None else None
    where = _anchor(items, record.boundary_event_id, call_id, run_id)
    prefix: list[TranscriptItem] = [
        item.model_copy(update={"settleable": False, "settle_folder": None})
        if item.type == "tool_card"
        else item
        for item in items[: where + 1]
    ]
    found = store.get_session(record.source_session_id)
    title = _clip(found.title if found is not None else record.source_session_id, 120)
    how = (
        "with a copy of the files as they were when it was made"
        if record.current_files
        else "in a copy of the folder as it was there"
    )
    divider = NoticeItem(
        item_id=_clip(f"branched:{transcript.session_id}", _ID),
        level=NoticeLevel.INFO,
        text=f"Branched from “{title}” here, {how}. What follows is this session's own.",
        code=None,
    )
    omitted = (source.omitted_earlier if where >= 0 else 0) + transcript.omitted_earlier
    return Transcript(
        transcript.session_id,
        (*prefix, divider, *transcript.items),
        omitted,
        branched_from=transcript.branched_from,
    )


def with_branch_markers(store: BranchDesktopStore, transcript: Transcript) -> Transcript:
    """The transcript with a marker after each point a session was branched from it, and its
    own origin when it is a branch."""
    origin = branch_origin(store, transcript.session_id)
    marks = branches_from(store, transcript.session_id)
    items = list(transcript.items)
    placed: list[tuple[int, int, BranchMarkerItem]] = []
    for order, mark in enumerate(marks):
        stored = store.read_event(mark.boundary_event_id)
        run_id = str(stored.event.get("runId")) if stored is not None else None
        call_id = _call_id(store, mark.boundary_event_id) if stored is not None else None
        where = _anchor(items, mark.boundary_event_id, call_id, run_id)
        if where < 0:
            continue
        branch = store.get_session(mark.session_id)
        placed.append(
            (
                where,
                order,
                BranchMarkerItem(
                    item_id=_clip(f"branch:{mark.session_id}", _ID),
                    run_id=_clip(run_id, _ID) if run_id else None,
                    branch_session_id=_clip(mark.session_id, _ID),
                    branch_title=_clip(branch.title, _SHORT) if branch is not None else "",
                    boundary_event_id=_clip(mark.boundary_event_id, _ID),
                ),
            )
        )
    # From the last anchor back, so earlier indexes stay right; several branches at one point
    # keep the order they were made in.
    for where, _order, marker in sorted(placed, key=lambda p: (p[0], p[1]), reverse=True):
        items.insert(where + 1, marker)
    over = max(0, len(items) - MAX_ITEMS_PER_OPEN)
    return Transcript(
        transcript.session_id,
        tuple(items[over:]),
        transcript.omitted_earlier + over,
        branched_from=origin,
    )
