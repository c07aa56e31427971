"""Errors of the ledger contract.

Family tree::

    CodedError(code)                      the one root of coded errors (coded_error.py)
    └── LedgerError(code)                 base of the ledger's: every error carries a stable code
        ├── EventDecodeError              input is not a valid RuntimeEvent v1 (names the field)
        └── CanonicalEncodeError          a value cannot be written as canonical JSON

Storage and the runtime derive their own errors from ``LedgerError`` so that every failure a
caller sees has a code.
"""

from __future__ import annotations

from enum import StrEnum

from runtime.ledger.coded_error import CodedError


class DecodeCode(StrEnum):
    EVENT_SCHEMA_INVALID = "event_schema_invalid"
    JSON_INVALID = "json_invalid"
    NOT_CANONICAL = "not_canonical"


class LedgerError(CodedError):
    """Base of every ledger error; ``code`` is a stable machine code (a ``StrEnum`` member)."""

    def __init__(self, code: StrEnum, message: str) -> None:
        super().__init__(code, message)

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class EventDecodeError(LedgerError):
    """The input is not a RuntimeEvent v1. ``field`` is a dotted path such as ``content.args``."""

    def __init__(self, message: str, field: str = "", code: StrEnum | None = None) -> None:
        super().__init__(code or DecodeCode.EVENT_SCHEMA_INVALID, message)
        self.field = field


class CanonicalEncodeError(LedgerError):
    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(DecodeCode.EVENT_SCHEMA_INVALID, message)
        self.field = field
