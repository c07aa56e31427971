"""The user's attestation of an unknown outcome (docs/design/recovery.md section 8,
docs/design/ledger.md section 5.7).

A call interrupted between T1 and T2 (a ``bash`` command, typically) stays ``indeterminate``: the
ledger cannot know whether it ran. The person at the keyboard often can. Their answer is recorded
as one recovery bundle:

- a reconcile observation ``user_attested_ran`` / ``user_attested_not_run`` with
  ``observationSchema: user_attestation_v1``, carrying ``attestedBy`` (``local_user``),
  ``attestedAt`` (ms since the epoch), ``ownerEpoch`` (of the host that recorded it) and an
  optional ``note``; ``observationDigest`` = sha256 of the canonical ``{attestedBy, attestedAt,
  ownerEpoch, note?}``;
- a recovered outcome bound to the call: "ran" is a non-error result ``{attestation: "ran",
  outputRecorded: false, attestedAt, note?, message}``, "did not run" an error result
  ``{attestation: "not_run", attestedAt, note?, message}``; ``message`` tells the model plainly
  that the user confirmed it, when, and that no output was recorded;
- a decision ``completed`` with reason ``user_attested_ran`` / ``user_attested_not_run``.

The values are valid for any ``recoveryMode`` and only with this schema. The user settles after
startup recovery closed the run, so an attestation bundle is the one kind of fact that may follow
a run's terminal event (``attestation_suffix_ok``): the run stays sealed against everything else.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from runtime.ledger.canonical_codec import canonical_json_bytes, sha256_digest
from runtime.ledger.codes import AttestationRefusal, ReconcileObservation, RecoveryReasonCode
from runtime.ledger.event_model import MAX_SAFE_INTEGER, RuntimeEvent

ATTESTATION_SCHEMA = "user_attestation_v1"
LOCAL_USER = "local_user"
MAX_NOTE_CHARS = 500

ATTESTED_REASONS: Mapping[ReconcileObservation, RecoveryReasonCode] = {
    ReconcileObservation.USER_ATTESTED_RAN: RecoveryReasonCode.USER_ATTESTED_RAN,
    ReconcileObservation.USER_ATTESTED_NOT_RUN: RecoveryReasonCode.USER_ATTESTED_NOT_RUN,
}
"""The only reasonCode a completed decision may give for each attested observation."""

ATTESTATION_FIELDS = frozenset({"attestedBy", "attestedAt", "ownerEpoch", "note"})


@dataclass(frozen=True, slots=True)
class Attestation:
    """Who said it, when, under which host, and their note."""

    attested_at: int
    owner_epoch: int
    note: str | None = None
    attested_by: str = LOCAL_USER

    def fields(self) -> dict[str, Any]:
        """The fields as they travel in the observation (``note`` only when given)."""
        body: dict[str, Any] = {
            "attestedBy": self.attested_by,
            "attestedAt": self.attested_at,
            "ownerEpoch": self.owner_epoch,
        }
        if self.note is not None:
            body["note"] = self.note
        return body

    def digest(self) -> str:
        return sha256_digest(canonical_json_bytes(self.fields()))


class SettleVerdict(NamedTuple):
    """Whether the user may settle a tool call on their word, as the run's committed facts say
    (``runtime.recovery.settle_verdict``): ``code`` None when they may, else the refusal's code
    and a sentence saying why. Host facts (the run is an earlier start's, no process of the call
    survives) are checked after it."""

    code: StrEnum | None
    message: str = ""
    # Open for one answer only: "it did not run", confirming what recovery found (a file write
    # it found untouched); ``message`` says why "it ran" is refused.
    not_run_only: bool = False

    @property
    def open(self) -> bool:
        return self.code is None


SettleJudge = Callable[[Sequence[RuntimeEvent], str], SettleVerdict]
"""Given a run's committed events (in ledger order) and an operation id: the verdict. The store
asks it inside the attestation's write transaction, so the facts it reads are the ones the
attestation would follow."""


def _is_int(value: object, low: int) -> bool:
    return type(value) is int and low <= value <= MAX_SAFE_INTEGER


def note_problem(note: str | None) -> str | None:
    """Why ``note`` cannot be recorded, or None."""
    if note is None:
        return None
    if note.strip() == "":
        return "the note is empty (leave it out instead)"
    if len(note) > MAX_NOTE_CHARS:
        return f"the note is longer than {MAX_NOTE_CHARS} characters"
    return None


def note_code(note: str | None) -> AttestationRefusal:
    """The code of ``note_problem``'s refusal: an empty note or one too long."""
    empty = note is not None and note.strip() == ""
    return (
        AttestationRefusal.ATTESTATION_NOTE_EMPTY
        if empty
        else (AttestationRefusal.ATTESTATION_NOTE_TOO_LONG)
    )


def attestation_from_payload(payload: Mapping[str, Any]) -> Attestation | None:
    """The attestation fields of a reconcile payload, or None when any is missing or wrong."""
    by, at, epoch = payload.get("attestedBy"), payload.get("attestedAt"), payload.get("ownerEpoch")
    note = payload.get("note")
    if by != LOCAL_USER or not isinstance(at, int) or not isinstance(epoch, int):
        return None
    if not _is_int(at, 0) or not _is_int(epoch, 1):
        return None
    if "note" in payload and (not isinstance(note, str) or note_problem(note) is not None):
        return None
    return Attestation(at, epoch, note if isinstance(note, str) else None, by)


def when_text(attested_at: int) -> str:
    """``attestedAt`` for people and the model: ``2026-12-01 16:20 UTC``."""
    moment = datetime.datetime.fromtimestamp(attested_at / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def attestation_message(ran: bool, attestation: Attestation, write_not_done: bool = False) -> str:
    """What the model is told (deterministic: derived from the recorded fields only);
    ``write_not_done``: the user confirmed what recovery found, a file write that did not
    happen (the file as it was before it)."""
    when = when_text(attestation.attested_at)
    if ran:
        text = (
            f"Maka stopped before this call's result was recorded. On {when} the user confirmed "
            "that it ran. No output was recorded: only the user's confirmation is known."
        )
    elif write_not_done:
        text = (
            f"Maka stopped before this call's result was recorded. Recovery found the file as "
            f"it was before the write, and on {when} the user confirmed it: the write did not "
            "happen. Nothing was written."
        )
    else:
        text = (
            f"Maka stopped before this call's result was recorded. On {when} the user confirmed "
            "that it did not run. No output was recorded."
        )
    if attestation.note is not None:
        text += f" The user's note: {attestation.note}"
    return text


def attestation_result(
    ran: bool, attestation: Attestation, write_not_done: bool = False
) -> dict[str, Any]:
    """The recovered outcome's ``result`` (its ``isError`` is ``not ran``)."""
    result: dict[str, Any] = {"attestation": "ran" if ran else "not_run"}
    if ran:
        result["outputRecorded"] = False
    result["attestedAt"] = attestation.attested_at
    if attestation.note is not None:
        result["note"] = attestation.note
    result["message"] = attestation_message(ran, attestation, write_not_done)
    return result


def outcome_matches(
    observation: ReconcileObservation, attestation: Attestation, content: Mapping[str, Any]
) -> bool:
    """The recovered outcome says what the attestation says: the choice, the error flag, the
    time and the note (the ``message`` must be text; its wording may change between versions)."""
    ran = observation is ReconcileObservation.USER_ATTESTED_RAN
    result = content.get("result")
    if (content.get("isError") is True) == ran or not isinstance(result, Mapping):
        return False
    expected = attestation_result(ran, attestation)
    if set(result) != set(expected) or not isinstance(result.get("message"), str):
        return False
    return all(result[key] == value for key, value in expected.items() if key != "message")


def is_attestation_fact(event: Mapping[str, Any]) -> bool:
    """A recovery fact of an attestation bundle: a reconcile observation with this schema, or a
    decision whose reason is an attested one."""
    actions = event.get("actions")
    recovery = actions.get("toolRecovery") if isinstance(actions, Mapping) else None
    payload = recovery.get("payload") if isinstance(recovery, Mapping) else None
    if not isinstance(payload, Mapping):
        return False
    return payload.get("observationSchema") == ATTESTATION_SCHEMA or payload.get("reasonCode") in (
        RecoveryReasonCode.USER_ATTESTED_RAN,
        RecoveryReasonCode.USER_ATTESTED_NOT_RUN,
    )


def _is_bound_response(event: Mapping[str, Any]) -> bool:
    content = event.get("content")
    refs = event.get("refs")
    return (
        isinstance(content, Mapping)
        and content.get("kind") == "function_response"
        and isinstance(refs, Mapping)
        and "operationId" in refs
    )


def attestation_suffix_ok(after_terminal: Sequence[Mapping[str, Any]]) -> bool:
    """``after_terminal`` (the events that follow a run's terminal event) are only whole
    attestation bundles: reconcile, outcome, decision, each bound to one operation, each maybe
    followed by the baseline its settling recorded (``<operationId>_attest_baseline``,
    docs/design/workspace.md section 3). An empty suffix is fine. Whether each bundle is *valid*
    is the bundle rules' business."""
    from runtime.ledger.workspace_facts import is_settled_baseline

    start = 0
    while start < len(after_terminal):
        if len(after_terminal) - start < 3:
            return False
        reconcile, outcome, decision = after_terminal[start : start + 3]
        operation = (reconcile.get("refs") or {}).get("operationId")
        if (
            not is_attestation_fact(reconcile)
            or not is_attestation_fact(decision)
            or not _is_bound_response(outcome)
            or operation is None
            or (outcome.get("refs") or {}).get("operationId") != operation
            or (decision.get("refs") or {}).get("operationId") != operation
        ):
            return False
        start += 3
        if start < len(after_terminal):
            following = after_terminal[start]
            if is_settled_baseline(following) and following.get("id") == (
                f"{operation}_attest_baseline"
            ):
                start += 1
    return True
