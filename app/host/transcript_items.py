"""The runtime's transcript entries -> the bridge contract's transcript items.

The runtime projects committed events into plain ``TranscriptEntry`` values (no wire types); this
module is the one place that turns them into the contract's bounded pydantic items: texts are
clipped to the contract's limits, codes that are not well-formed codes are dropped rather than
sent, and the runtime's ``pending`` card (a call not yet dispatched while the run is live) is shown
as ``running``. A continuation run is preceded by a marker item, so the renderer can show where
the continuation begins.

A card's ``park_reason`` also qualifies a running or failed card with a code, so the renderer can
say what happened in honest words without a new status in the contract:

* ``awaiting_permission`` on a ``running`` card: the call is committed but not dispatched while
  the run is live. A call that needs no permission is committed together with its dispatch, so
  this is the wait for the user's answer.
* ``cancelled`` / ``permission_denied`` on a ``failed`` card: the user stopped the turn, or the
  user (or the permission mode) refused the call: the committed result's code, which the
  runtime's entry carries (``transcript_projection.result_code``).

A run the user cancelled ends with an ``info`` notice, not a warning: nothing went wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from app.bridge_contract import (
    MAX_ITEMS_PER_OPEN,
    MAX_NOTE_CHARS,
    MAX_SUMMARY_CHARS,
    MAX_TEXT_CHARS,
    AssistantMessageItem,
    AttestationChoice,
    ContinuationMarkerItem,
    NoticeItem,
    NoticeLevel,
    ThinkingItem,
    ToolCardItem,
    ToolCardStatus,
    TranscriptItem,
    UserMessageItem,
)
from app.host.host_services import Transcript
from runtime.agent.text_limits import shorten
from runtime.agent.transcript_projection import TranscriptEntry

_CHOICES = {"ran": AttestationChoice.RAN, "not_run": AttestationChoice.NOT_RUN}
_CODE = re.compile(r"^[a-z][a-z0-9_]{0,79}$")
_ID_CHARS = 200

_CARD_STATUS = {
    "pending": ToolCardStatus.RUNNING,
    "running": ToolCardStatus.RUNNING,
    "succeeded": ToolCardStatus.SUCCEEDED,
    "failed": ToolCardStatus.FAILED,
    "indeterminate": ToolCardStatus.INDETERMINATE,
    "parked": ToolCardStatus.PARKED,
    "not_dispatched": ToolCardStatus.NOT_DISPATCHED,
    "completed_after_recovery": ToolCardStatus.COMPLETED_AFTER_RECOVERY,
}


AWAITING_PERMISSION = "awaiting_permission"
HOST_STOPPED = "host_stopped"
"""A command whose run ended without its result: it was stopped when Maka stopped (the tool
supervisor ends its process group with the host, docs/design/recovery.md section 9) and may have
run in part."""
CANCELLED = "cancelled"
PERMISSION_DENIED = "permission_denied"


def _card_qualifier(entry: TranscriptEntry) -> str | None:
    if entry.status == "pending":
        return AWAITING_PERMISSION
    if entry.status == "failed" and entry.code in (CANCELLED, PERMISSION_DENIED):
        return entry.code
    if entry.status == "indeterminate" and entry.tool_name == "bash":
        return HOST_STOPPED
    return None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_summary(text: str, limit: int) -> str:
    """Shortened to fit the wire, saying how much is left out (never a silent cut)."""
    if len(text) <= limit:
        return text
    return shorten(text, limit - 40)  # room for "… (N more characters)"


def _code(value: str | None) -> str | None:
    return value if value is not None and _CODE.match(value) else None


def wire_item(entry: TranscriptEntry, item_id: str | None = None) -> TranscriptItem | None:
    """The wire item for ``entry`` (``item_id`` overrides the entry's id); None for an entry
    type this contract version does not know."""
    key = _clip(item_id or entry.item_id, _ID_CHARS)
    run_id = _clip(entry.run_id, _ID_CHARS) or None
    if entry.type == "user_message":
        return UserMessageItem(item_id=key, run_id=run_id, text=_clip(entry.text, MAX_TEXT_CHARS))
    if entry.type == "assistant_message":
        return AssistantMessageItem(
            item_id=key, run_id=run_id, text=_clip(entry.text, MAX_TEXT_CHARS)
        )
    if entry.type == "thinking":
        return ThinkingItem(item_id=key, run_id=run_id, text=_clip(entry.text, MAX_TEXT_CHARS))
    if entry.type == "tool_card":
        return ToolCardItem(
            item_id=key,
            run_id=run_id,
            tool_call_id=_clip(entry.tool_call_id or entry.item_id, _ID_CHARS),
            tool_name=_clip(entry.tool_name or "tool", _ID_CHARS),
            args_summary=_clip_summary(entry.args_summary, MAX_SUMMARY_CHARS),
            status=_CARD_STATUS.get(entry.status, ToolCardStatus.INDETERMINATE),
            result_summary=_clip_summary(entry.result_summary, MAX_SUMMARY_CHARS),
            park_reason=_code(entry.park_reason) or _card_qualifier(entry),
            args_full=_clip(entry.args_full, MAX_SUMMARY_CHARS),
            settleable=entry.settleable,
            attestation=_CHOICES.get(entry.attestation or ""),
            attested_at=entry.attested_at if entry.attestation in _CHOICES else None,
            attestation_note=_clip(entry.attestation_note, MAX_NOTE_CHARS)
            if entry.attestation in _CHOICES and entry.attestation_note
            else None,
        )
    if entry.type == "notice":
        try:
            level = NoticeLevel(entry.level)
        except ValueError:
            level = NoticeLevel.INFO
        if entry.code == "cancelled_by_user":
            level = NoticeLevel.INFO
        return NoticeItem(
            item_id=key,
            run_id=run_id,
            level=level,
            text=_clip(entry.text, MAX_SUMMARY_CHARS),
            code=_code(entry.code),
        )
    return None


def continuation_marker(
    run_id: str, source_run_id: str | None, after: str = "restart", automatic: bool = False
) -> ContinuationMarkerItem:
    return ContinuationMarkerItem(
        item_id=_clip(f"continuation:{run_id}", _ID_CHARS),
        run_id=_clip(run_id, _ID_CHARS),
        source_run_id=_clip(source_run_id, _ID_CHARS) if source_run_id else None,
        after="stop" if after == "stop" else "failure" if after == "failure" else "restart",
        automatic=automatic,
    )


def session_transcript(
    session_id: str,
    runs: Sequence[tuple[str, str | None, Sequence[TranscriptEntry]]],
    after: Mapping[str, str] | None = None,
    automatic: frozenset[str] = frozenset(),
) -> Transcript:
    """All runs, oldest first: (run id, continuation source run id or None, entries). Keeps the
    newest ``MAX_ITEMS_PER_OPEN`` items and counts the rest in ``omitted_earlier``. ``after``:
    by continuation run id, what it followed (``continued_after``; default ``restart``);
    ``automatic``: the continuation runs automatic resume started."""
    items: list[TranscriptItem] = []
    for run_id, source_run_id, entries in runs:
        if source_run_id is not None:
            followed = (after or {}).get(run_id, "restart")
            marker = continuation_marker(run_id, source_run_id, followed, run_id in automatic)
            items.append(marker)
        for entry in entries:
            item = wire_item(entry)
            if item is not None:
                items.append(item)
    omitted = max(0, len(items) - MAX_ITEMS_PER_OPEN)
    return Transcript(session_id, tuple(items[omitted:]), omitted)
