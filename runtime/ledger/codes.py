"""Every stable machine code of docs/design/codes.md and docs/design/ledger.md, as append-only
``StrEnum`` s.

Codes are persisted and shown verbatim; never rename a member or reuse a value for another
meaning. Sentences and severities for the user live in one presentation table, not here.

Import every code from this module. The enums are defined in five modules beside it
(``codes_ledger``, ``codes_store``, ``codes_workspace``, ``codes_recovery``, ``codes_host``),
and each is loaded the first time one of its enums is asked for: creating an enum member is the
costliest part of Python's enum machinery, and a small command needs few of the ~270 members
(``maka sessions`` only ``codes_store``'s 21). :func:`code_enums` loads and lists them all.
"""

from __future__ import annotations

import importlib
from enum import StrEnum
from typing import TYPE_CHECKING

ISSUE_CODE = "issueCode"
"""A diagnostic's detail field naming the ledger check (``ScanIssueCode``) a damaged record
failed: carried as a field, never read out of the message."""
RESOLVER_REASON = "resolverReason"
"""A diagnostic's detail field naming the resolver's reason (``ResolverReason``) for a call that
is parked, unsettled or corrupt."""

__all__ = [
    "ISSUE_CODE",
    "RESOLVER_REASON",
    "AttestationRefusal",
    "BranchCode",
    "BundleCode",
    "CheckpointFailureCode",
    "CheckpointUnavailableCode",
    "DiagnosticCode",
    "Disposition",
    "DoctorCode",
    "FailureClass",
    "HostCode",
    "Lane",
    "LedgerFileCode",
    "OperationStatus",
    "ParkReason",
    "ReconcileObservation",
    "RecoveryDisposition",
    "RecoveryReasonCode",
    "ResolverReason",
    "ResolverStatus",
    "RestoreCode",
    "RevalidationCode",
    "ScanIssueCode",
    "SettlementOrigin",
    "StoreCode",
    "TransferCode",
    "TransitionKind",
    "WorkspaceMarkerCode",
    "WriterRejectionCode",
    "code_enums",
]

_WHERE: dict[str, str] = {
    "Lane": "runtime.ledger.codes_ledger",
    "ScanIssueCode": "runtime.ledger.codes_ledger",
    "TransitionKind": "runtime.ledger.codes_ledger",
    "WriterRejectionCode": "runtime.ledger.codes_ledger",
    "StoreCode": "runtime.ledger.codes_store",
    "WorkspaceMarkerCode": "runtime.ledger.codes_workspace",
    "CheckpointUnavailableCode": "runtime.ledger.codes_workspace",
    "CheckpointFailureCode": "runtime.ledger.codes_workspace",
    "RestoreCode": "runtime.ledger.codes_workspace",
    "BranchCode": "runtime.ledger.codes_workspace",
    "TransferCode": "runtime.ledger.codes_workspace",
    "BundleCode": "runtime.ledger.codes_workspace",
    "ReconcileObservation": "runtime.ledger.codes_recovery",
    "RecoveryDisposition": "runtime.ledger.codes_recovery",
    "ResolverStatus": "runtime.ledger.codes_recovery",
    "ResolverReason": "runtime.ledger.codes_recovery",
    "SettlementOrigin": "runtime.ledger.codes_recovery",
    "OperationStatus": "runtime.ledger.codes_recovery",
    "Disposition": "runtime.ledger.codes_recovery",
    "DiagnosticCode": "runtime.ledger.codes_recovery",
    "ParkReason": "runtime.ledger.codes_recovery",
    "RevalidationCode": "runtime.ledger.codes_recovery",
    "FailureClass": "runtime.ledger.codes_store",
    "RecoveryReasonCode": "runtime.ledger.codes_host",
    "AttestationRefusal": "runtime.ledger.codes_host",
    "LedgerFileCode": "runtime.ledger.codes_host",
    "DoctorCode": "runtime.ledger.codes_host",
    "HostCode": "runtime.ledger.codes_host",
}
"""Each enum's module."""

if TYPE_CHECKING:
    from runtime.ledger.codes_host import (
        AttestationRefusal,
        DoctorCode,
        HostCode,
        LedgerFileCode,
        RecoveryReasonCode,
    )
    from runtime.ledger.codes_ledger import (
        Lane,
        ScanIssueCode,
        TransitionKind,
        WriterRejectionCode,
    )
    from runtime.ledger.codes_recovery import (
        DiagnosticCode,
        Disposition,
        OperationStatus,
        ParkReason,
        ReconcileObservation,
        RecoveryDisposition,
        ResolverReason,
        ResolverStatus,
        RevalidationCode,
        SettlementOrigin,
    )
    from runtime.ledger.codes_store import FailureClass, StoreCode
    from runtime.ledger.codes_workspace import (
        BranchCode,
        BundleCode,
        CheckpointFailureCode,
        CheckpointUnavailableCode,
        RestoreCode,
        TransferCode,
        WorkspaceMarkerCode,
    )
else:

    def __getattr__(name: str) -> type[StrEnum]:
        """Load an enum's module the first time the enum is asked for (PEP 562)."""
        module = _WHERE.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        enum: type[StrEnum] = getattr(importlib.import_module(module), name)
        globals()[name] = enum
        return enum


def code_enums() -> tuple[type[StrEnum], ...]:
    """Every code enum of this module, in the order they are declared (loads them all)."""
    return tuple(getattr(importlib.import_module(module), name) for name, module in _WHERE.items())


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
