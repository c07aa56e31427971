"""The folder side of settling a call (docs/design/workspace.md section 3): the settled call's
run as ``runtime.continuation.settle_baseline`` needs it, for every surface (``maka settle``,
``/settle`` in the TUI, the desktop card)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from app.bridge_contract import SettleFolderNote, ToolCardItem, TranscriptItem
from app.host.host_services import Transcript
from runtime.continuation.continuation_planner import ContinuationPlan
from runtime.continuation.settle_baseline import (
    SettleFolder,
    baseline_preview,
    capture_baseline,
)
from runtime.ledger.checkpoint_ports import CheckpointCarrier, SettleBaseline
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunHeader, SessionRecord, StoredEvent, ToolOperationRecord
from runtime.recovery.settlement import BaselineCapture, SettlementStore, find_operation


class SettleFolderStore(SettlementStore, Protocol):
    def read_run_header(self, run_id: str) -> RunHeader | None: ...

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...

    def get_session(self, session_id: str) -> SessionRecord | None: ...

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...


def settle_folder(
    store: SettleFolderStore, carrier: CheckpointCarrier | None, operation: ToolOperationRecord
) -> SettleFolder | None:
    """The call's run and folder, or None (no carrier, no workspace identity, or a run that
    is no longer the session's latest: the session moved on with a new turn, whose own
    snapshots describe the folder, so an answer about an older call takes nothing of it)."""
    if carrier is None:
        return None
    header = store.read_run_header(operation.run_id)
    if header is None or not header.workspace_identity:
        return None
    runs = store.list_session_runs(header.session_id)
    latest = max(runs, key=lambda run: (run.created_at, run.run_id), default=None)
    if latest is not None and latest.run_id != header.run_id:
        return None
    session = store.get_session(header.session_id)
    cwd = session.cwd if session is not None else header.cwd
    events = [row.event for row in store.read_run_events(operation.run_id)]
    return SettleFolder(
        carrier,
        Path(os.path.realpath(cwd)),
        header.workspace_identity,
        header.session_id,
        header.run_id,
        operation.tool_name,
        events,
    )


def baseline_capture(
    store: SettleFolderStore, carrier: CheckpointCarrier | None, now_ms: Callable[[], int]
) -> BaselineCapture:
    """What ``settle`` asks for just before it records the answer."""

    def capture(operation: ToolOperationRecord, ran: bool) -> SettleBaseline | None:
        run = settle_folder(store, carrier, operation)
        if run is None:
            return None
        other = _not_its_workspace(run)
        return other if other is not None else capture_baseline(run, ran, now_ms())

    return capture


def _not_its_workspace(run: SettleFolder) -> SettleBaseline | None:
    """A folder whose marker does not name the run's workspace (none, another, or damaged: a
    ``git clean -fdx`` deleted it and a look made a new one, or another folder stands at the
    place) is never taken as the run's starting point: nothing proves it is the folder the
    run wrote to. The answer is recorded without it (the park stays, and says why)."""
    from storage.sessions.workspace_identity import read_workspace_identity

    try:
        found = read_workspace_identity(run.folder)
    except LedgerError as error:
        return SettleBaseline(None, problem=f"{error.code}: {error.message}")
    if found is not None and found.identity == run.workspace_identity:
        return None
    return SettleBaseline(
        None,
        problem="workspace_identity_mismatch: the folder is not shown to be the workspace the "
        "run wrote to (its marker "
        + ("is missing" if found is None else f"names {found.identity}")
        + ")",
    )


def settle_preview(
    store: SettleFolderStore, carrier: CheckpointCarrier | None, session_id: str, reference: str
) -> SettleBaseline | None:
    """What answering about the call would do to the folder's starting point, said before the
    user answers; None when nothing (a read-only call, no checkpoints, an unknown call)."""
    try:
        operation = find_operation(store, session_id, reference)
    except LedgerError:
        return None
    run = settle_folder(store, carrier, operation)
    if run is None:
        return None
    other = _not_its_workspace(run)
    return other if other is not None else baseline_preview(run)


FOLDER_NOTE_PATHS = 10


def folder_note(preview: SettleBaseline) -> SettleFolderNote:
    paths = preview.changed_paths()
    return SettleFolderNote(
        compared=preview.changes is not None,
        changed_paths=[path[:500] for path in paths[:FOLDER_NOTE_PATHS]],
        more_changed=max(0, len(paths) - FOLDER_NOTE_PATHS),
        unreadable=preview.problem is not None,
        not_its_workspace=(preview.problem or "").startswith("workspace_identity_mismatch"),
    )


def folder_note_now(
    store: SettleFolderStore,
    carrier: CheckpointCarrier | None,
    session_id: str,
    tool_call_id: str,
) -> SettleFolderNote | None:
    """The note a settleable card would show now (the folder looked at again); None when
    answering does nothing to the folder."""
    if carrier is None:
        return None
    preview = settle_preview(store, carrier, session_id, tool_call_id)
    return folder_note(preview) if preview is not None else None


def note_words(note: SettleFolderNote) -> str:
    """A card's note on the folder in a few words (for ``settle_folder_changed``'s message)."""
    if note.unreadable:
        return "the folder cannot be read"
    if not note.compared:
        return "there is no snapshot to compare the folder with"
    count = len(note.changed_paths) + note.more_changed
    if not count:
        return "no file changed since the last snapshot"
    from runtime.ledger.file_names import shown_name

    shown = ", ".join(shown_name(path) for path in note.changed_paths)
    if note.more_changed:
        shown += f" and {note.more_changed} more"
    files = "1 file" if count == 1 else f"{count} files"
    return f"{files} changed since the last snapshot: {shown}"


def folder_changed_words(shown: SettleFolderNote, now: SettleFolderNote) -> str:
    """What ``settle_folder_changed`` says: what the card said, and what holds now."""
    return f"It said {note_words(shown)}; now {note_words(now)}."


class ShownFolderNotes:
    """The settleable cards of each session as last sent with their folder notes, so the main
    process can re-send a card whose note no longer holds (and only such a card) when the
    session's park is checked again, or when an answer came on a note that no longer holds.
    Thread-safe: the transcript is read on query threads, answers on turn threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cards: dict[str, dict[str, ToolCardItem]] = {}

    def remember(self, transcript: Transcript) -> None:
        """The cards of a transcript just read for a window (its own, not a branch prefix's)."""
        cards = {
            item.tool_call_id: item
            for item in transcript.items
            if isinstance(item, ToolCardItem) and item.settle_folder is not None
        }
        with self._lock:
            self._cards[transcript.session_id] = cards

    def forget(self, session_id: str, tool_call_id: str) -> None:
        """The call was answered: its card no longer asks."""
        with self._lock:
            self._cards.get(session_id, {}).pop(tool_call_id, None)

    def sent(self, session_id: str, tool_call_id: str) -> ToolCardItem | None:
        with self._lock:
            return self._cards.get(session_id, {}).get(tool_call_id)

    def with_note(
        self, session_id: str, tool_call_id: str, note: SettleFolderNote, fallback: ToolCardItem
    ) -> ToolCardItem:
        """The card as last sent (else ``fallback``) with ``note``, remembered as sent."""
        with self._lock:
            cards = self._cards.setdefault(session_id, {})
            card = cards.get(tool_call_id, fallback).model_copy(update={"settle_folder": note})
            cards[tool_call_id] = card
        return card

    def refreshed(
        self, store: SettleFolderStore, carrier: CheckpointCarrier | None, session_id: str
    ) -> tuple[ToolCardItem, ...]:
        """The session's cards whose note changed since sent, each with its note now."""
        with self._lock:
            cards = list(self._cards.get(session_id, {}).values())
        fresh: list[ToolCardItem] = []
        for card in cards:
            now = folder_note_now(store, carrier, session_id, card.tool_call_id)
            if now is None or now == card.settle_folder:
                continue
            updated = card.model_copy(update={"settle_folder": now})
            with self._lock:
                kept = self._cards.get(session_id, {})
                if kept.get(card.tool_call_id) is not card:
                    continue  # answered or read again meanwhile: that says what holds
                kept[card.tool_call_id] = updated
            fresh.append(updated)
        return tuple(fresh)


def with_folder_notes(
    store: SettleFolderStore, carrier: CheckpointCarrier | None, transcript: Transcript
) -> Transcript:
    """The desktop's transcript with each settleable card's folder note (what answering does to
    the folder's starting point)."""
    if carrier is None:
        return transcript
    items: list[TranscriptItem] = []
    for item in transcript.items:
        preview = None
        if isinstance(item, ToolCardItem) and item.settleable and item.attestation is None:
            preview = settle_preview(store, carrier, transcript.session_id, item.tool_call_id)
        if preview is not None:
            items.append(item.model_copy(update={"settle_folder": folder_note(preview)}))
        else:
            items.append(item)
    return replace(transcript, items=tuple(items))


def folder_words(
    store: SettleFolderStore,
    carrier: CheckpointCarrier | None,
    plan: ContinuationPlan,
    call_ids: Iterable[str],
) -> dict[str, str]:
    """For a parked plan's calls the user may settle (``call_ids``): tool call id -> what
    answering about it also does to the folder (``preview_words``; none for a read-only call),
    for the terminal's advice."""
    words: dict[str, str] = {}
    if carrier is None or plan.continues:
        return words
    for call_id in call_ids:
        if call_id in words:
            continue
        preview = settle_preview(store, carrier, plan.session_id, call_id)
        if preview is not None:
            words[call_id] = preview_words(preview)
    return words


def preview_words(preview: SettleBaseline) -> str:
    """The sentence every surface shows before the answer."""
    if preview.problem is not None:
        return (
            "Answering also tries to take the folder as it is now as the new starting point, "
            f"but cannot take it now ({preview.problem})."
        )
    if preview.changes is None:
        return (
            "Answering also takes the folder as it is now as the new starting point; there is "
            "no snapshot to compare it with."
        )
    paths = preview.changed_paths()
    if not paths:
        return (
            "Answering also takes the folder as it is now as the new starting point; no file "
            "changed since the last snapshot."
        )
    from runtime.ledger.file_names import shown_name
    from runtime.ledger.workspace_facts import changed_count_words

    shown = ", ".join(shown_name(path) for path in paths[:10]) + (
        f" and {len(paths) - 10} more" if len(paths) > 10 else ""
    )
    return (
        "Answering also takes the folder as it is now as the new starting point; "
        f"{changed_count_words(paths)} changed since the last snapshot: {shown}."
    )
