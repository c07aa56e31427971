"""The one root of every error that carries a stable code, and the one mapper from an error to
the code and sentence a user sees.

Every layer may import this module (it is in ``runtime/ledger``, the bottom layer). Each family
of coded errors (the ledger's, the store's, providers', tools', checkpoints', the host's and the
CLI's) derives from :class:`CodedError`, and its ``code`` is always a ``StrEnum`` member, so the
code a renderer or a terminal shows is one of the enums of ``runtime/ledger/codes.py`` (or of
the family's own module), never a free string.

:func:`coded_failure` is used by both the desktop's request router and the CLI: a coded error
yields its code and message; anything else yields ``None`` (the router answers
``internal_failure``, the CLI lets the defect surface).
"""

# No ``from __future__ import annotations`` here: the named tuples below must read real types
# (see ``runtime/ledger/run_records.py``; ``maka sessions`` start-up).

from enum import StrEnum
from typing import NamedTuple


class CodedError(Exception):
    """Base of every error with a stable machine ``code`` (a ``StrEnum`` member) and a
    ``message`` for people. ``text`` is what ``str(error)`` shows (the message by default)."""

    code: StrEnum
    message: str

    def __init__(self, code: StrEnum, message: str, *, text: str | None = None) -> None:
        super().__init__(message if text is None else text)
        self.code = code
        self.message = message


class CodedFailure(NamedTuple):
    """A named tuple, not a dataclass: every command imports this module, and ``dataclasses``
    brings ``inspect`` with it (about as much start-up time as the interpreter's own)."""

    code: StrEnum
    message: str


def coded_failure(error: BaseException | None) -> CodedFailure | None:
    """The code and message a user is shown for ``error``; ``None`` when it carries no code
    (an unexpected failure, a defect)."""
    if isinstance(error, CodedError):
        return CodedFailure(error.code, error.message)
    return None
