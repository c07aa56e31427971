"""What a restored copy reflects, in words (docs/design/workspace.md section 4), from the restore
point a ``workspaceTransition`` fact records (or a plan offers).

A copy holds the snapshot it was made from, which is not always the folder at the stop:

- ``at_stop`` (no ``restorePoint`` field): the boundary snapshot; the copy is the folder as the
  model last saw it;
- ``before_later_calls``: the newest snapshot predates calls that may have written (the run
  stopped between a call's result and the capture after it, or that capture failed): what those
  calls changed is not in the copy, even though their results say they ran;
- ``earlier_snapshot``: the snapshot at the stop is gone from the checkpoint store, so the copy
  is an earlier one of the lineage: the changes of every later call are not in it.

One source for every surface: the plan's offer, the transcript marker and the host notice that
tells the model (the history projection).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

AT_STOP = "at_stop"
BEFORE_LATER_CALLS = "before_later_calls"
EARLIER_SNAPSHOT = "earlier_snapshot"
CALLS_NAMED = 5


def restore_kind(body: Mapping[str, Any]) -> str:
    kind = body.get("restorePoint")
    return kind if kind in (BEFORE_LATER_CALLS, EARLIER_SNAPSHOT) else AT_STOP


SUBJECT_CHARS = 60
"""How much of a command a restore point's words quote."""


def call_subject(tool_name: str, args: Any) -> str:
    """A call as people know it, without an article: ``command "ls -la"``, ``write_file call
    on notes/a.txt``, else ``list_dir call``."""
    if isinstance(args, Mapping):
        if tool_name == "bash" and isinstance(args.get("command"), str):
            command = " ".join(args["command"].split())
            if len(command) > SUBJECT_CHARS:
                command = command[: SUBJECT_CHARS - 1] + "…"
            return f'command "{command}"'
        if isinstance(args.get("path"), str):
            return f"{tool_name} call on {args['path']}"
    return f"{tool_name} call"


def call_subjects(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each model tool call of ``events`` by its call id, as people know it (``call_subject``)."""
    subjects: dict[str, str] = {}
    for event in events:
        content = event.get("content")
        if isinstance(content, Mapping) and content.get("kind") == "function_call":
            subjects[str(content.get("id"))] = call_subject(
                str(content.get("name")), content.get("args")
            )
    return subjects


def _call(call: Mapping[str, Any], subjects: Mapping[str, str]) -> str:
    subject = subjects.get(str(call.get("toolCallId")))
    return subject or f"{call.get('toolName', '?')} {call.get('toolCallId', '?')}"


def calls_phrase(
    body: Mapping[str, Any], owner: str = "the", subjects: Mapping[str, str] | None = None
) -> str:
    """``the bash call c1`` / ``the 3 calls that may have written (bash c1, ...)``; with
    ``subjects`` (for people), the calls by what they did: ``the command "make"``."""
    subjects = subjects or {}
    calls: Sequence[Mapping[str, Any]] = body.get("laterCalls") or []
    count = len(calls) + int(body.get("moreLaterCalls") or 0)
    if count == 1 and calls:
        subject = subjects.get(str(calls[0].get("toolCallId")))
        if subject:
            return f"{owner} {subject}"
        return f"{owner} {calls[0].get('toolName', '?')} call {calls[0].get('toolCallId', '?')}"
    named = ", ".join(_call(call, subjects) for call in calls[:CALLS_NAMED])
    rest = count - min(len(calls), CALLS_NAMED)
    if rest:
        named += f" and {rest} more"
    return f"{owner} {count} calls that may have written ({named})"


def age_words(age_ms: int) -> str:
    """``less than a minute`` / ``1 minute`` / ``3 hours`` / ``2 days``."""
    minutes = age_ms // 60_000
    if minutes < 1:
        return "less than a minute"
    for size, unit in ((24 * 60, "day"), (60, "hour"), (1, "minute")):
        if minutes >= size:
            count = minutes // size
            return f"{count} {unit}" + ("" if count == 1 else "s")
    return "less than a minute"  # (never: minutes >= 1 here)


def point_phrase(body: Mapping[str, Any], subjects: Mapping[str, str] | None = None) -> str:
    """Where in the history an earlier snapshot was taken, and how much older it is than the one
    lost at the stop."""
    after: Mapping[str, Any] | None = body.get("snapshotAfterCall")
    subject = (subjects or {}).get(str(after.get("toolCallId"))) if after else None
    if after and subject:
        text = f"the snapshot taken after the {subject}"
    elif after:
        text = f"the snapshot taken after the {after.get('toolName', '?')} call " + str(
            after.get("toolCallId", "?")
        )
    else:
        text = "the snapshot taken at the start of a run, before any call that may have written"
    age = body.get("snapshotAgeMs")
    if isinstance(age, int) and not isinstance(age, bool):
        text += f", {age_words(age)} before the stop"
    return text


def copy_reflects(body: Mapping[str, Any], subjects: Mapping[str, str] | None = None) -> str:
    """For people: what the copy holds (the offer, the transcript marker); ``subjects``
    (``call_subjects``) names the calls by what they did rather than by their ids."""
    kind = restore_kind(body)
    if kind == BEFORE_LATER_CALLS:
        count = len(body.get("laterCalls") or []) + int(body.get("moreLaterCalls") or 0)
        them = "it" if count == 1 else "they"
        return (
            f"the folder as it was before {calls_phrase(body, subjects=subjects)}; what {them} "
            "changed is not in the copy"
        )
    if kind == EARLIER_SNAPSHOT:
        text = (
            f"the folder at an earlier point ({point_phrase(body, subjects)}), because the "
            "snapshot "
            "taken at the stop is gone"
        )
        if body.get("laterCalls"):
            later = calls_phrase(body, subjects=subjects)
            return text + f"; the agent's later changes ({later}) are not in it"
        return text + "; anything changed after it is not in the copy"
    return "the folder as it was at the stop"


def restore_notice(body: Mapping[str, Any]) -> str | None:
    """The host notice a continuation in a restored copy tells the model, when the copy is not
    the folder as the model last saw it (None: it is)."""
    kind = restore_kind(body)
    if kind == BEFORE_LATER_CALLS:
        count = len(body.get("laterCalls") or []) + int(body.get("moreLaterCalls") or 0)
        what, said = (
            ("that call", "its result above says it ran")
            if count == 1
            else ("those calls", "their results above say they ran")
        )
        return (
            "Note from the host: the user chose to continue in a restored copy of the folder. "
            f"The copy holds the files as they were before {calls_phrase(body, 'your')}: what "
            f"{what} changed is not in these files, even though {said}. "
            "Re-read the files before you rely on what you saw of them earlier."
        )
    if kind == EARLIER_SNAPSHOT:
        later = (
            f"the changes made by your later calls ({calls_phrase(body)}) are not in these files"
            if body.get("laterCalls")
            else "anything changed after it is not in these files"
        )
        return (
            "Note from the host: the user chose to continue in a restored copy of the folder. "
            "The snapshot taken when this session stopped was lost, so the copy holds the "
            f"files as they were at an earlier point ({point_phrase(body)}): {later}. Re-read "
            "the files before you rely on what you saw of them earlier."
        )
    return None
