"""What the interrupted banner says, apart from the widget that shows it (``interrupted_banner``).

The banner's states, what it knows of one session's resume (``SessionResume``), and the text
of each state: the title (naming what ended the run), body and button (``copy_for``), the
sentence per park reason, the changed files of a drift (under the drift's own reason when other
reasons park too, with what to do about those first and that the files still need a decision
afterwards: a decision never waives another gate), the details lines and the block "Copy
diagnostics" puts on the clipboard. Pure functions of that state: no widgets, so the words can
be read and tested without a window. Translations keep the banner's context.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from PySide6.QtCore import QCoreApplication

from app.bridge_contract import ResumeDiagnostic
from app.park_guidance import (
    DAMAGED_RECORD_HEADLINE,
    DAMAGED_RECORD_REASON,
    FILES_DECISION_CODES,
    FILES_DECISION_LATER,
    FILES_TAKEN_BY_ANSWER,
    HISTORY_REPLAY_CODES,
    LEDGER_DAMAGED,
    WRITE_NOT_DONE_HEADLINE,
    WRITE_NOT_DONE_NEXT_STEP,
    WRITE_NOT_DONE_REASON,
    ledger_check_code,
    park_severity,
    record_damaged,
    write_did_not_happen,
)
from renderer.park_text import Severity, can_try_again, describe, highest_severity, next_step
from runtime.ledger.file_names import shown_name


def _tr(text: str) -> str:
    return QCoreApplication.translate("InterruptedBanner", text)


class BannerState(StrEnum):
    HIDDEN = "hidden"
    DISABLED = "disabled"
    IDLE = "idle"
    RESUMING = "resuming"
    STARTED = "started"
    PARKED = "parked"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SessionResume:
    state: BannerState = BannerState.IDLE
    reasons: tuple[str, ...] = ()
    diagnostics: tuple[ResumeDiagnostic, ...] = field(default=())
    failure_code: str = ""
    failure_message: str = ""
    # Try again: set while a parked session is planned again, then the time it was checked.
    retrying: bool = False
    checked_at: str = ""
    automatic: bool = False  # automatic resume at start parked it
    # The user's ways forward when only the files stand in the way
    # (docs/design/workspace.md section 4).
    workspace_options: tuple[str, ...] = ()


def at_stop_note() -> str:
    return _tr(
        "Your folder stays as it is; the session continues in a copy of it as it was at the stop."
    )


def automatic_stop_note() -> tuple[str, str]:
    """The title, and the sentence said first, when the run Maka stopped in was itself an
    automatic Safe resume: automatic resume never takes such a run up again (the crash-loop
    guard), so the user is told why this session waits for them while others may have
    continued by themselves."""
    return (
        _tr("Maka stopped during an automatic Safe resume."),
        _tr("It is not continued automatically again, so a crash cannot repeat itself unattended."),
    )


def rebaseline_note(*, compared: bool, uncaptured: str = "") -> str:
    """The note beside **Continue with my current files**. ``uncaptured``: why the current
    files cannot be snapshotted (a nested repository): the snapshot at the stop may well be
    there (a restored copy is offered from it), so "no snapshot is left" would be untrue."""
    if uncaptured:
        return _tr(
            "The files stay as they are now, but {why}; the model is told they may have "
            "changed and re-reads them."
        ).replace("{why}", uncaptured.rstrip("."))
    if compared:
        return _tr(
            "The files stay as they are now; the model is told which changed and re-reads them."
        )
    return _tr(
        "The files stay as they are now; no snapshot is left to tell which changed, so the "
        "model is told they may have changed and re-reads them."
    )


def with_full_stop(text: str) -> str:
    return text if text.endswith(".") else f"{text}."


def checked_again(current: SessionResume) -> str:
    """After Try again: when it checked, and that the reasons listed above still hold."""
    if not (current.checked_at and current.reasons):
        return ""
    return (
        _tr("Checked again at {time}: still on hold because of the reason above.")
        if len(current.reasons) == 1
        else _tr("Checked again at {time}: still on hold because of the reasons above.")
    ).replace("{time}", current.checked_at)


# C901: one table of banner states, written as branches so each state's words read together.
def copy_for(  # noqa: C901
    state: BannerState,
    current: SessionResume,
    from_environment: bool = False,
) -> tuple[str, str, str]:
    """Title, body and action-button text for ``state``. ``from_environment``: the
    environment variable decides, so the settings checkbox is locked and is no way to turn
    Safe resume on."""
    restarted = _tr("Maka stopped before the last turn finished.")
    if state is BannerState.DISABLED and from_environment:
        return (
            restarted,
            _tr(
                "Safe resume is turned off, so this turn cannot be continued from where it "
                "stopped. Check your files, then send a new message to carry on. "
                "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME in the environment Maka was started from "
                "turns it off: start Maka without it to use the setting."
            ),
            "",
        )
    if state is BannerState.DISABLED:
        # Turning it on is no promise: Safe resume then checks the turn, and may still hold it
        # (a call with no settled outcome, a stale snapshot...); what it already found is named.
        found = [code for code in current.reasons if code != "resume_feature_disabled"]
        held = (
            _tr(" It already found what would hold it: {codes}.").replace(
                "{codes}", ", ".join(found)
            )
            if found
            else ""
        )
        return (
            restarted,
            _tr(
                "Safe resume is turned off, so this turn cannot be continued from where it "
                "stopped. Check your files, then send a new message to carry on, or turn on "
                "Safe resume in Settings (File › Settings…): it then checks the turn again "
                "and may still hold it back."
            )
            + held,
            "",
        )
    if state is BannerState.RESUMING:
        return (
            restarted,
            _tr("Checking the saved history, tools and workspace…"),
            _tr("Safe resume"),
        )
    if state is BannerState.PARKED:
        if "workspace_folder_missing" in current.reasons:
            title = _tr("The session's folder is missing.")
            return title, next_step(current.reasons), _tr("&Locate folder…")
        again = _tr("Try again") if offers_try_again(current) else ""
        others = other_reasons(current)
        changed = "" if others else changed_files_text(current)
        if changed:
            body = next_step(current.reasons, [d.code for d in current.diagnostics])
            if current.workspace_options:
                body = _tr(
                    "Choose how to continue below, or put the files back as they were and "
                    "choose Try again."
                )
            body = f"{checked_again(current)} {body}".strip()
            return _tr("Files changed since the run stopped."), f"{changed}\n\n{body}", again
        if write_not_done(current):
            return (
                park_tr(WRITE_NOT_DONE_HEADLINE),
                f"{checked_again(current)} {park_tr(WRITE_NOT_DONE_NEXT_STEP)}".strip(),
                again,
            )
        if highest_severity(current.reasons) is Severity.INFO:
            title = _tr("Nothing to resume right now.")
        elif damaged(current):
            title = park_tr(DAMAGED_RECORD_HEADLINE)
        elif current.automatic and not current.checked_at:
            title = _tr("Automatic resume is on hold.")
        else:
            title = _tr("Safe resume is on hold.")
        body = next_step(current.reasons, [d.code for d in current.diagnostics])
        if others:
            body = then_the_files(current, others)
        if current.workspace_options:  # a stale, failed or missing snapshot: the two buttons
            body = _tr(
                "Choose how to continue below, or check your files and send a new message to "
                "carry on."
            )
        return title, f"{checked_again(current)} {body}".strip(), again
    if state is BannerState.FAILED:
        known = describe(current.failure_code)
        text = known.sentence if known.known else current.failure_message
        if not text:
            text = _tr("Safe resume could not start.")
        return _tr("Safe resume could not start."), f"{text} [{current.failure_code}]", _tr("Retry")
    return (
        restarted,
        _tr(
            "Check the current state of your files first. Safe resume continues from the last "
            "step that is known to be complete, as a new run."
        ),
        _tr("Safe resume"),
    )


BANNER_CHANGED_FILES = 10
"""The banner names this many changed files, then "and N more" (all are in ``maka plan``)."""


def changed_files_text(current: SessionResume, code: str = "workspace_drift") -> str:
    """The changed files of a ``workspace_drift`` park (or, with ``code``, the files that
    differ from a stale snapshot), one a line (the first 10, then "and N more"); empty when the
    park has no such reason or names no file."""
    if code not in current.reasons:
        return ""
    drift = next((d for d in current.diagnostics if d.code == code), None)
    if drift is None or not drift.changed_paths:
        return ""
    words = {"added": _tr("added"), "modified": _tr("changed"), "deleted": _tr("deleted")}
    shown = drift.changed_paths[:BANNER_CHANGED_FILES]
    lines = [f"  {words[entry.change]}: {shown_name(entry.path)}" for entry in shown]
    rest = len(drift.changed_paths) - len(shown) + drift.more_changed_paths
    if rest:
        lines.append("  " + _tr("and {count} more").replace("{count}", f"{rest:,}"))
    return "\n".join(lines)


def other_reasons(current: SessionResume) -> tuple[str, ...]:
    """When the files' reason (drift, a stale, failed or missing snapshot) parks together with
    others that keep its ways forward from being offered: those others (they are cleared first,
    then the files are decided); else () (a refused folder for the copy, say, leaves the ways
    forward offered: the files' park is the story)."""
    reasons = current.reasons
    if current.workspace_options or not any(code in FILES_DECISION_CODES for code in reasons):
        return ()
    return tuple(code for code in reasons if code not in FILES_DECISION_CODES)


def then_the_files(current: SessionResume, others: tuple[str, ...]) -> str:
    """What to do about the other reasons first, then that the files still need a decision
    (when clearing those can lead there; else a new message is the way on), or that answering
    about the calls takes the folder as it is (the main process's
    ``workspace_settle_takes_folder`` note)."""
    codes = [d.code for d in current.diagnostics]
    first = next_step(others, codes)
    if not can_try_again(others, codes):
        return first
    if "workspace_settle_takes_folder" in codes:
        return f"{first} {park_tr(FILES_TAKEN_BY_ANSWER)}".strip()
    return f"{first} {park_tr(FILES_DECISION_LATER)}".strip()


def offers_try_again(current: SessionResume) -> bool:
    return can_try_again(current.reasons, (d.code for d in current.diagnostics))


def park_tr(text: str) -> str:
    return QCoreApplication.translate("ParkText", text)


def damaged(current: SessionResume) -> bool:
    """The park's unsettled tool state includes a damaged record of the history."""
    return record_damaged(current.reasons, (d.code for d in current.diagnostics))


def severity_of(current: SessionResume) -> Severity:
    """The parked banner's severity: ``error`` when a record is damaged."""
    return park_severity(current.reasons, (d.code for d in current.diagnostics))


def reason_severity(current: SessionResume, code: str) -> Severity:
    """One reason's severity as the details show it (a damaged record makes its
    ``dangling_tool_state`` an error)."""
    return (
        severity_of(current)
        if code == "dangling_tool_state" and damaged(current)
        else (describe(code).severity)
    )


def reason_sentence(current: SessionResume, code: str) -> str:
    if code == "dangling_tool_state" and damaged(current):
        return park_tr(DAMAGED_RECORD_REASON)
    return describe(code).sentence


def write_not_done(current: SessionResume) -> bool:
    return write_did_not_happen(
        current.reasons, ((d.code, d.tool_call_id) for d in current.diagnostics)
    )


def calls_are_writes_not_done(current: SessionResume) -> bool:
    """The park's unsettled calls are all writes recovery found not done, whatever the files'
    reasons beside them say (their ``workspace_*`` notes speak of the folder, not the calls)."""
    return "dangling_tool_state" in current.reasons and write_did_not_happen(
        ("dangling_tool_state",),
        (
            (d.code, d.tool_call_id)
            for d in current.diagnostics
            if not d.code.startswith("workspace_")
        ),
    )


def diagnostic_line(diagnostic: ResumeDiagnostic) -> str:
    """``code · tool (call id): message``; the operation is named once, so a message that names
    the call itself (``tool call bash (c1) is indeterminate``) is not prefixed with it again. The
    history replay's messages and a damaged record's name only their code: its sentence stands
    for them, with the event it is at."""
    code = diagnostic.code
    message = diagnostic.message or describe(code).sentence
    checked = ledger_check_code(code, diagnostic.sub_code)
    if checked is not None:
        code += f" [{checked}]" if checked != diagnostic.code else ""
        message = f"{describe(checked).sentence} {park_tr(LEDGER_DAMAGED)}"
    elif code in HISTORY_REPLAY_CODES:
        message = describe(code).sentence
    call_id = diagnostic.tool_call_id
    where = ""
    if (diagnostic.tool_name or call_id) and not (call_id and call_id in message):
        where = f" · {diagnostic.tool_name or '?'}" + (f" ({call_id})" if call_id else "")
    if diagnostic.event_id and (checked is not None or code in HISTORY_REPLAY_CODES):
        where += f" · event {diagnostic.event_id}"
    return f"{code}{where}: {message}"


def details_for(current: SessionResume) -> str:
    lines = [f"{code}  [{reason_severity(current, code).value}]" for code in current.reasons]
    if current.diagnostics:
        lines.append("")
        lines.extend(diagnostic_line(d) for d in current.diagnostics)
    return "\n".join(lines)


def _stale_subject(current: SessionResume) -> str | None:
    """The call after which the snapshot went stale, in words (the main process's ``subject``
    of its ``workspace_checkpoint_stale`` diagnostic), or None."""
    stale = next((d for d in current.diagnostics if d.code == "workspace_checkpoint_stale"), None)
    return stale.subject if stale is not None else None


STALE_NOTHING_DIFFERS = "no file in the folder differs from that snapshot"
"""How the planner's ``workspace_checkpoint_stale`` diagnostic ends when it compared the folder
with the stale snapshot and found no file that differs (``runtime.continuation.workspace_gate``;
the wire carries the changed files, not whether they were compared)."""


def stale_nothing_differs(current: SessionResume) -> bool:
    """The stale snapshot was compared with the folder and no file differs from it (what
    ``maka plan`` and the details say): the banner says so rather than leaving it unsaid."""
    stale = next((d for d in current.diagnostics if d.code == "workspace_checkpoint_stale"), None)
    return (
        stale is not None
        and not stale.changed_paths
        and not stale.more_changed_paths
        and STALE_NOTHING_DIFFERS in stale.message
    )


def reason_sentences(current: SessionResume, folder: str) -> list[tuple[str, str]]:
    """Each park reason with the sentence the banner lists for it (``folder``: where the
    session lives, named when it is missing)."""
    not_done = write_not_done(current)
    found: list[tuple[str, str]] = []
    for code in current.reasons:
        sentence = reason_sentence(current, code)
        if not_done or (code == "dangling_tool_state" and calls_are_writes_not_done(current)):
            sentence = park_tr(WRITE_NOT_DONE_REASON)
        elif code == "workspace_folder_missing" and folder:
            sentence = _tr(
                "The folder {folder} is no longer there; it was moved, deleted or replaced by a "
                "file."
            ).replace("{folder}", folder)
        elif code == "workspace_checkpoint_stale" or (
            code == "workspace_drift" and other_reasons(current)
        ):
            # Listed with other reasons (a drift), or a stale snapshot (what differs from it):
            # its files go under it, not under all of them.
            subject = _stale_subject(current) if code == "workspace_checkpoint_stale" else None
            if subject:
                sentence = _tr(
                    "The snapshot of the folder is out of date: {subject} may have changed files "
                    "after it."
                ).replace("{subject}", subject)
            files = changed_files_text(current, code)
            if files:
                if code == "workspace_checkpoint_stale":
                    sentence += "\n   " + _tr("These differ from the last snapshot:")
                sentence += "\n" + "\n".join(f"   {line}" for line in files.splitlines())
            elif code == "workspace_checkpoint_stale" and stale_nothing_differs(current):
                sentence += "\n   " + _tr("No file in the folder differs from the last snapshot.")
        found.append((code, sentence))
    return found


def diagnostics_block(session_id: str | None, current: SessionResume) -> str:
    """The block "Copy diagnostics" puts on the clipboard: codes, operations, sentences."""
    lines = [
        "Maka Safe resume diagnostics",
        f"session: {session_id}",
        f"result: {current.state.value}",
    ]
    if current.reasons:
        lines.append("reasons:")
        for code in current.reasons:
            severity, sentence = reason_severity(current, code), reason_sentence(current, code)
            lines.append(f"  {code} ({severity.value}): {sentence}")
    if current.diagnostics:
        lines.append("diagnostics:")
        lines.extend(f"  {diagnostic_line(d)}" for d in current.diagnostics)
    if current.failure_code:
        lines.append(f"error: {current.failure_code}: {current.failure_message}")
    return "\n".join(lines) + "\n"
