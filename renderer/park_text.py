"""The renderer's view of the one code table (``app/code_text.py``) and of the next steps
(``app/park_guidance.py``), translated with Qt.

Both are Qt-free so the CLI and the TUI print the same words without loading Qt;
this module only passes each English source string through
``QCoreApplication.translate("ParkText", ...)``, so a loaded ``QTranslator`` localises them.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QCoreApplication

from app.code_text import (
    DIAGNOSTICS,
    FAILURES,
    PARK_REASONS,
    REVALIDATION,
    UNKNOWN_CODE,
    CodeText,
    Severity,
    highest_severity,
    lookup,
)
from app.park_guidance import (
    CHANGEABLE,
    DAMAGED_RECORD_NEXT_STEP,
    DOCTOR_COMMAND,
    NEXT_STEP_BY_SEVERITY,
    NEXT_STEPS,
    can_try_again,
    next_step_source,
)
from runtime.ledger.command_words import maka_command

CONTEXT = "ParkText"

__all__ = [
    "CHANGEABLE",
    "DIAGNOSTICS",
    "FAILURES",
    "NEXT_STEPS",
    "NEXT_STEP_BY_SEVERITY",
    "PARK_REASONS",
    "REVALIDATION",
    "CodeText",
    "Severity",
    "can_try_again",
    "describe",
    "highest_severity",
    "next_step",
]


def describe(code: str) -> CodeText:
    """Severity and translated sentence for ``code``; unknown codes fall back to ``error``."""
    entry = lookup(code)
    if entry is not None:
        sentence = QCoreApplication.translate(CONTEXT, entry.sentence)
        return CodeText(code, entry.severity, sentence, True, entry.next_step, entry.fields)
    sentence = QCoreApplication.translate(CONTEXT, UNKNOWN_CODE).replace("{code}", code)
    return CodeText(code, Severity.ERROR, sentence, False)


def next_step(codes: Iterable[str], diagnostic_codes: Iterable[str] | None = None) -> str:
    """The sentence saying what to do after a park with ``codes`` ("" when the reasons say it);
    with ``diagnostic_codes`` it promises Try again only when confirming can change the park."""
    source = next_step_source(codes, diagnostic_codes)
    if not source:
        return ""
    text = QCoreApplication.translate(CONTEXT, source)
    if source == DAMAGED_RECORD_NEXT_STEP:
        # The command to run in a terminal, worded for the data folder this Maka was given
        # (``--data-dir``), as every command Maka suggests is.
        text = text.replace(DOCTOR_COMMAND, maka_command("doctor"))
    return text
