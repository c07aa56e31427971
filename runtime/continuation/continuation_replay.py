"""Composite continuation replay over a run lineage (docs/design/recovery.md section 6).

Each generation of a lineage is an *immutable prefix*: a run's committed events 1..n with their
digest. A segment is replayable when its tool state is settled (completed or provably not
dispatched) and its provider projection has no blocking diagnostic; it is then trimmed to its last
stable boundary (a user message or a tool result), which also trims calls that were never
dispatched. The composite plan is the oldest ancestor first and the immediate source last; each
segment is projected exactly once, so a trimmed suffix is never reintroduced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from runtime.continuation.provider_replay import (
    PROVIDER_PROJECTION_VERSION,
    ItemKind,
    ProviderItem,
    project_provider_items,
    provider_replay_digest,
)
from runtime.ledger.canonical_codec import canonical_json_bytes, sha256_digest
from runtime.ledger.codes import ISSUE_CODE, RESOLVER_REASON, ResolverStatus
from runtime.ledger.event_model import RuntimeEvent, is_hidden
from runtime.ledger.workspace_facts import is_decision_fact
from runtime.recovery.recovery_resolver import resolve_recovery


class SegmentBlockReason(StrEnum):
    TOOL_RECOVERY_UNSETTLED = "tool_recovery_unsettled"
    TOOL_RECOVERY_CORRUPTION = "tool_recovery_corruption"
    PROVIDER_REPLAY_UNSUPPORTED = "provider_replay_unsupported"
    PROVIDER_REPLAY_NON_SUFFIX_GAP = "provider_replay_non_suffix_gap"


@dataclass(frozen=True, slots=True)
class RunIdentity:
    session_id: str
    invocation_id: str
    run_id: str
    turn_id: str

    def to_json(self) -> dict[str, str]:
        return {
            "sessionId": self.session_id,
            "invocationId": self.invocation_id,
            "runId": self.run_id,
            "turnId": self.turn_id,
        }


@dataclass(frozen=True, slots=True)
class ImmutablePrefix:
    """A run's committed events 1..``last_event_seq`` and their prefix digest."""

    identity: RunIdentity
    events: tuple[RuntimeEvent, ...]
    last_event_seq: int
    prefix_digest: str

    @property
    def last_event_id(self) -> str:
        return self.events[-1]["id"] if self.events else ""


@dataclass(frozen=True, slots=True)
class SegmentIssue:
    """Why a segment is not replayable, naming the operation where there is one."""

    code: str
    message: str
    event_id: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    # The code the issue stands for beside its own, as a field (never read out of ``message``):
    # the ledger check a damaged record failed, or the resolver's reason for a call.
    detail: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplaySegment:
    prefix: ImmutablePrefix
    replay_events: tuple[RuntimeEvent, ...]
    provider_items: tuple[ProviderItem, ...]
    trimmed_event_ids: tuple[str, ...]

    def boundary_json(self) -> dict[str, object]:
        return {
            "protocol": "runtime_prefix_segment_v1",
            "identity": self.prefix.identity.to_json(),
            "lastEventSeq": self.prefix.last_event_seq,
            "lastEventId": self.prefix.last_event_id,
            "prefixDigest": self.prefix.prefix_digest,
        }


@dataclass(frozen=True, slots=True)
class SegmentBlocked:
    reason: SegmentBlockReason
    issues: tuple[SegmentIssue, ...]


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    segments: tuple[ReplaySegment, ...]
    manifest_digest: str
    provider_replay_digest: str
    runtime_context: tuple[RuntimeEvent, ...]
    provider_items: tuple[ProviderItem, ...]

    @property
    def immediate(self) -> ReplaySegment:
        return self.segments[-1]


@dataclass(frozen=True, slots=True)
class ReplayBlocked:
    reason: SegmentBlockReason
    segment_index: int
    issues: tuple[SegmentIssue, ...]


def build_segment(prefix: ImmutablePrefix) -> ReplaySegment | SegmentBlocked:
    """Checks in order: tool corruption, unsettled tools, provider projection, suffix gaps."""
    resolution = resolve_recovery(list(prefix.events))
    corrupt = [d for d in resolution.decisions if d.status is ResolverStatus.CORRUPTION]
    if resolution.has_corruption or corrupt:
        issues = [
            SegmentIssue(
                "tool_recovery_corruption",
                f"tool call {d.tool_call_id} has corrupt ledger facts ({d.reason})",
                d.call_runtime_event_id,
                d.tool_call_id,
                d.tool_name,
                {RESOLVER_REASON: str(d.reason)},
            )
            for d in corrupt
        ] + [
            SegmentIssue(
                "tool_ledger_corruption",
                f"ledger issue {i.code}",
                i.event_id,
                detail={ISSUE_CODE: str(i.code)},
            )
            for i in resolution.issues
        ]
        return SegmentBlocked(SegmentBlockReason.TOOL_RECOVERY_CORRUPTION, tuple(issues))
    unsettled = [
        d
        for d in resolution.decisions
        if d.status in (ResolverStatus.INDETERMINATE, ResolverStatus.PARKED)
    ]
    if unsettled:
        return SegmentBlocked(
            SegmentBlockReason.TOOL_RECOVERY_UNSETTLED,
            tuple(
                SegmentIssue(
                    "pending_tool_result"
                    if d.status is ResolverStatus.INDETERMINATE
                    else "tool_recovery_parked",
                    f"tool call {d.tool_name or '?'} ({d.tool_call_id}) is {d.status.value}"
                    f" ({d.reason})",
                    d.call_runtime_event_id,
                    d.tool_call_id,
                    d.tool_name,
                    {RESOLVER_REASON: str(d.reason)},
                )
                for d in unsettled
            ),
        )
    projection = project_provider_items(prefix.events)
    if projection.blocking:
        return SegmentBlocked(
            SegmentBlockReason.PROVIDER_REPLAY_UNSUPPORTED,
            tuple(
                SegmentIssue(d.code.value, f"provider replay: {d.code.value}", d.event_id)
                for d in projection.blocking
            ),
        )
    # An unresolved call followed by replayable content is a gap in the middle of the history.
    for call_id, call_position in projection.unmatched_calls:
        if any(position > call_position for position in projection.item_positions):
            return SegmentBlocked(
                SegmentBlockReason.PROVIDER_REPLAY_NON_SUFFIX_GAP,
                (
                    SegmentIssue(
                        "provider_replay_non_suffix_gap",
                        f"tool call {call_id} has no result but later history exists",
                        prefix.events[call_position]["id"],
                        call_id,
                    ),
                ),
            )
    # Trim after the last stable item: a tool result or a user text.
    stable_index = -1
    for index, item in enumerate(projection.items):
        if item.kind is ItemKind.TOOL_RESULT or (
            item.kind is ItemKind.TEXT and item.role == "user"
        ):
            stable_index = index
    cut_position = projection.item_positions[stable_index] if stable_index >= 0 else -1
    trimmed_positions = {
        position for position in projection.item_positions if position > cut_position
    } | {position for _, position in projection.unmatched_calls if position > cut_position}
    kept_items = tuple(
        item
        for item, position in zip(projection.items, projection.item_positions, strict=True)
        if position <= cut_position
    )
    replay_events = tuple(
        event
        for position, event in enumerate(prefix.events)
        if position not in trimmed_positions
        and (not is_hidden(event) or is_decision_fact(event))  # its notice is model content
        and not event["partial"]
    )
    trimmed_ids = tuple(prefix.events[position]["id"] for position in sorted(trimmed_positions))
    return ReplaySegment(prefix, replay_events, kept_items, trimmed_ids)


def manifest_digest(segments: tuple[ReplaySegment, ...]) -> str:
    body = {
        "protocol": "runtime_boundary_cursor_v1",
        "segments": [segment.boundary_json() for segment in segments],
    }
    return sha256_digest(
        b"maka.runtime-boundary-manifest.v1\x00" + canonical_json_bytes(body),
    )


def build_replay_plan(prefixes: tuple[ImmutablePrefix, ...]) -> ReplayPlan | ReplayBlocked:
    """The composite plan over a lineage, oldest ancestor first."""
    segments: list[ReplaySegment] = []
    for index, prefix in enumerate(prefixes):
        built = build_segment(prefix)
        if isinstance(built, SegmentBlocked):
            return ReplayBlocked(built.reason, index, built.issues)
        segments.append(built)
    frozen = tuple(segments)
    items = tuple(item for segment in frozen for item in segment.provider_items)
    return ReplayPlan(
        segments=frozen,
        manifest_digest=manifest_digest(frozen),
        provider_replay_digest=provider_replay_digest(items),
        runtime_context=tuple(event for segment in frozen for event in segment.replay_events),
        provider_items=items,
    )


__all__ = [
    "PROVIDER_PROJECTION_VERSION",
    "ImmutablePrefix",
    "ReplayBlocked",
    "ReplayPlan",
    "ReplaySegment",
    "RunIdentity",
    "SegmentBlockReason",
    "SegmentIssue",
    "build_replay_plan",
    "build_segment",
]
