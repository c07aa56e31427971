"""``maka tui``'s ``/transcript`` and ``/branch`` lines, written to a given output.

The TUI prints them when it opens the store itself; beside a running host (the desktop or
``maka host``) the host writes the same lines with this same code from its own store and sends
them back (``terminal.text``, docs/design/hosts.md section 1), so the output does not depend on
the path that served the command. ``reader`` is what the lines are read from: anything with the
data folder's ``store``, its session ``service`` and its ``data_dir``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.ledger.command_words import maka_command

Out = Callable[[str], None]
"""Writes one line (``print`` in the TUI; a buffer in the host)."""

CONTINUED_MARKER = "--- Continued with Safe resume after Maka stopped ---"
CONTINUED_MARKERS = {
    "restart": CONTINUED_MARKER,
    "stop": "--- Continued with Safe resume after the stop ---",
    "failure": "--- Continued with Safe resume after the failure ---",
}
BRANCH_USAGE = "usage: /branch [EVENT [DIR] [--current-files]]"
TRIMMED_WORDS = "snapshot kept until the next prune (removed by retention; a branch keeps it)"
"""A branch point whose snapshot retention removed while its objects wait for the prune (as
``maka checkpoints`` says "removed by retention"): a branch made from it names it again."""
DAMAGED_ASIDE_WORDS = (
    "snapshot damaged, moved aside (a capture of the folder still holding those bytes writes "
    "it again)"
)
"""A branch point whose snapshot a check found damaged (as ``maka checkpoints`` says it)."""


def say_if_branched(reader: Any, session_id: str, out: Out = print) -> None:
    """The header of a branched session: its source and boundary (issue #36)."""
    from app.host.branch_session import branch_header_words, branch_of

    record = branch_of(reader.store, session_id)
    if record is not None:
        out(f"this session was {branch_header_words(record)}")


def transcript(reader: Any, session_id: str, out: Out = print) -> None:
    """``/transcript``: the branched header when there is one, then every entry."""
    say_if_branched(reader, session_id, out)
    print_transcript(reader.service, session_id, branch_marks(reader, session_id), out)


def branch(reader: Any, session_id: str, text: str, out: Out = print) -> Any:
    """``/branch``: the same service as ``maka branch``; a refusal prints its code. The new
    session's record when a branch was made (the chat switches to it), else None."""
    import shlex

    from app.host.branch_session import branch_options, branch_session
    from app.host.host_bootstrap import now_ms
    from runtime.continuation.lifecycle_log import LifecycleLog
    from runtime.ledger.ledger_errors import LedgerError

    try:  # a folder name with spaces is quoted, as in a shell: /branch EVENT "my copy"
        words = shlex.split(text)[1:]
    except ValueError:  # (a quote left open)
        out(f"a quote is not closed; {BRANCH_USAGE}")
        return None
    current_files = "--current-files" in words
    words = [word for word in words if word != "--current-files"]
    if len(words) > 2:
        out(BRANCH_USAGE)
        return None
    if any(not word.strip() for word in words):  # ``""``: an empty name, not a folder named ""
        out("branch refused [invalid_argument]: the event id or the folder name is empty")
        return None
    carrier = reader.service.checkpoints
    try:
        if not words:
            options = branch_options(reader.store, carrier, session_id)
            width = max((len(option.boundary.event_id) for option in options), default=0)
            for option in options:
                b = option.boundary
                kept = "snapshot kept" if option.snapshot_kept else "no snapshot"
                if option.trimmed:
                    kept = TRIMMED_WORDS
                elif option.damaged_aside:
                    kept = DAMAGED_ASIDE_WORDS
                if b.unsettled:
                    kept = (
                        f"not branchable (a call had no settled outcome yet: see {b.settled_at})"
                        if b.settled_at is not None
                        else "not branchable (a call has no settled outcome there)"
                    )
                label = visible_label(b.label)
                out(f"  {b.event_id:<{width}}  {b.kind:<12} {label:<50}  {kept}")
            if not options:
                out("no point to branch from yet")
            else:
                out("branch one: /branch EVENT [DIR]")
            return None
        result = branch_session(
            reader.store,
            carrier,
            session_id,
            words[0],
            now_ms=now_ms,
            to=words[1] if len(words) > 1 else None,
            current_files=current_files,
            lifecycle=LifecycleLog.in_data_dir(reader.data_dir, now_ms),
        )
    except LedgerError as refused:
        out(f"branch refused [{refused.code}]: {refused.message}")
        return None
    new = result.session
    out(f"branched into session {new.session_id} in {new.cwd}; the source is unchanged")
    return new


def visible_label(label: str) -> str:
    from app.visible_text import visible

    shown = visible(label, strict=True)  # a hidden character shown by name takes room too
    return shown if len(shown) <= 50 else f"{shown[:49]}…"


def branch_marks(reader: Any, session_id: str) -> dict[tuple[str, str], list[str]]:
    """Where sessions were branched from this one, keyed as the transcript meets the points:
    ``("item", event id)`` a user message, ``("call", call id)`` a tool result, ``("run", run
    id)`` a run's ending."""
    from app.host.branch_session import branches_from
    from runtime.continuation.branch_prefix import USER_MESSAGE, boundary_kind

    marks: dict[tuple[str, str], list[str]] = {}
    for mark in branches_from(reader.store, session_id):
        stored = reader.store.read_event(mark.boundary_event_id)
        if stored is None:
            continue
        kind = boundary_kind(stored.event)
        content = stored.event.get("content") or {}
        if kind == USER_MESSAGE:
            key = ("item", mark.boundary_event_id)
        elif kind is not None and content.get("kind") == "function_response":
            key = ("call", str(content.get("id")))
        else:
            key = ("run", str(stored.event["runId"]))
        marks.setdefault(key, []).append(mark.session_id)
    return marks


def _say_marks(marks: dict[tuple[str, str], list[str]], key: tuple[str, str], out: Out) -> None:
    for new in marks.pop(key, []):
        out(f"── branched here into session {new} ({maka_command(f'tui --session {new}')})")


def print_transcript(
    service: Any,
    session_id: str,
    marks: dict[tuple[str, str], list[str]] | None = None,
    out: Out = print,
) -> None:
    """Every entry, control characters shown by name (never sent raw), and where sessions were
    branched from this one."""
    from app.visible_text import visible

    marks = marks or {}
    run_id: str | None = None
    for continued, entry in service.transcript_by_run(session_id):
        if continued is not None:
            out(CONTINUED_MARKERS.get(continued, CONTINUED_MARKER))
        if entry is None:
            continue
        if run_id is not None and entry.run_id != run_id:
            _say_marks(marks, ("run", run_id), out)
        run_id = entry.run_id
        _print_entry(entry, visible, out)
        if entry.type == "user_message":
            _say_marks(marks, ("item", entry.item_id), out)
        elif entry.type == "tool_card":
            _say_marks(marks, ("call", entry.tool_call_id), out)
    if run_id is not None:
        _say_marks(marks, ("run", run_id), out)


def _card_status(entry: Any) -> str:
    """A tool card's status as the desktop's card qualifies it: a call refused because the
    turn was cancelled, or denied, did not fail ("failed" beside the timeline's "not run")."""
    if entry.status == "failed" and entry.code == "cancelled":
        return "cancelled"
    if entry.status == "failed" and entry.code == "permission_denied":
        return "denied"
    return str(entry.status)


def _print_entry(entry: Any, visible: Any, out: Out) -> None:
    if entry.type == "user_message":
        out(f"you> {visible(entry.text)}")
    elif entry.type == "assistant_message":
        out(visible(entry.text.rstrip()))
    elif entry.type == "tool_card":
        args = visible(entry.args_summary, strict=True)
        out(f"[tool] {visible(entry.tool_name)} {args}  ({_card_status(entry)})")
        if entry.result_summary:
            out(f"  {visible(entry.result_summary)}")
        if entry.attestation is not None:
            from runtime.ledger.attestation import when_text

            what = "it ran" if entry.attestation == "ran" else "it did not run"
            when = when_text(entry.attested_at) if entry.attested_at is not None else ""
            out(f"  confirmed by you: {what} ({when})")
            if entry.attestation_note:
                out(f"  your note: {visible(entry.attestation_note)}")
        elif entry.settleable and entry.status == "indeterminate":
            out(f"  outcome unknown; if you know: /settle {entry.tool_call_id} ran|not-run")
    elif entry.type == "notice":
        out(f"[{entry.level}] {visible(entry.text)}")
