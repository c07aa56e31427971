"""What the model is shown of a branched session's source (issue #36).

A branched session's turns see, before their own history, the prefix its ``branchStart`` fact
refers to. Branched at a run's ending, that is what the source's next turn is shown: every turn
up to and including that run (``committed_context``). Branched inside a run (a user message, a
tool result), it is exactly what Safe resume replays of a lineage (``ContinuationTurn``): the
source session's turns before the boundary run's lineage, then the lineage's replayed history
cut at the boundary.
A branch of a branch puts its source's own prefix first, and so on to the first session. The
prefix's digests are checked every time: a source whose history no longer matches refuses the
turn (``branch_source_changed``) rather than showing the model something else.

A branch made with the current files instead of a snapshot ends its prefix with a host notice,
as a rebaseline does: the files are the source folder's as they were when the branch was made,
not as they were at that point of the history.
"""

from __future__ import annotations

from runtime.agent.continuation_turn import history_before_lineage
from runtime.agent.outcome_notices import committed_context
from runtime.agent.session_overview import ordered_runs
from runtime.continuation.branch_prefix import (
    RUN_ENDING,
    BranchStore,
    branch_chain,
    resolve_recorded,
)
from runtime.ledger.branch_facts import BranchRecord
from runtime.providers.history_projection import history_from_events, omitted_event_ids
from runtime.providers.provider_port import HistoryItem, HostNotice


def current_files_notice(record: BranchRecord) -> str:
    return (
        "Note from the host: this conversation was branched from an earlier point of another "
        "session, and no snapshot of the folder was kept for that point. The files here are a "
        "copy of that session's folder as it was when the branch was made, so they may differ "
        "from what the history above shows. Re-read the files before you rely on them."
    )


def branch_prefix_history(store: BranchStore, session_id: str) -> tuple[HistoryItem, ...]:
    """The provider history of the session's branch prefixes, oldest ancestor first (empty for a
    session that was not branched). Raises ``BranchRefused``."""
    items: list[HistoryItem] = []
    for record in reversed(branch_chain(store, session_id)):
        prefix = resolve_recorded(store, record)
        if record.fact["source"].get("boundaryKind") == RUN_ENDING:
            # A whole turn: what the source's next turn was shown of it and the turns before.
            runs = ordered_runs(store.list_session_runs(record.source_session_id))
            ending = next(i for i, run in enumerate(runs) if run.run_id == record.source_run_id)
            items.extend(committed_context(store, runs[: ending + 1])[0])
        else:
            # Inside a turn: the lineage cut at the boundary, as Safe resume replays it.
            context = prefix.replay.runtime_context
            items.extend(
                history_before_lineage(
                    store,
                    record.source_session_id,
                    prefix.lineage_run_ids,
                    frozenset(omitted_event_ids(context)),
                )
            )
            items.extend(history_from_events(context))
        if record.current_files:
            items.append(HostNotice(current_files_notice(record)))
    return tuple(items)
