"""The workspace-fact writer: the one path that commits ``workspaceCheckpoint`` and
``workspaceCheckpointFailed`` facts (docs/design/workspace.md section 2; the generic append
refuses them).

A fact is checked for its envelope (``runtime.ledger.workspace_facts``) and then appended like an
ordinary event of its run: the run must exist, be open (a sealed run takes no checkpoint) and
carry the T1 marker; an exact retry is a no-op.
"""

from __future__ import annotations

from runtime.ledger.codes import WriterRejectionCode
from runtime.ledger.store_ports import CommitResult, StoreRefusal
from runtime.ledger.workspace_facts import workspace_fact_problem
from storage.ledger.event_writer import Candidate, LedgerTransaction


def check_workspace_fact(candidate: Candidate) -> None:
    problem = workspace_fact_problem(candidate.event)
    if problem is not None:
        raise StoreRefusal(
            WriterRejectionCode.TRANSITION_SHAPE_CONFLICT, problem, candidate.event_id
        )


def commit_workspace_fact(tx: LedgerTransaction, candidate: Candidate) -> CommitResult:
    state = tx.run(candidate.event["runId"])
    tx.check_spine(state, [candidate])
    new, retried = tx.split_retries([candidate])
    if not new:
        return CommitResult(created=False, event_seq=retried[candidate.event_id])
    tx.check_seal(state, new)
    tx.check_marker(state, candidate, 0)
    return CommitResult(created=True, event_seq=tx.insert(state, candidate))


def commit_settled_baseline(tx: LedgerTransaction, candidate: Candidate) -> CommitResult:
    """A settled writing call's ``workspaceBaseline`` fact (docs/design/workspace.md section 3):
    only right after the call's attestation bundle (the caller sees to that), which may follow
    the run's terminal event, so the seal is not asked here; an exact retry is a no-op."""
    check_workspace_fact(candidate)
    state = tx.run(candidate.event["runId"])
    tx.check_spine(state, [candidate])
    new, retried = tx.split_retries([candidate])
    if not new:
        return CommitResult(created=False, event_seq=retried[candidate.event_id])
    return CommitResult(created=True, event_seq=tx.insert(state, candidate))
