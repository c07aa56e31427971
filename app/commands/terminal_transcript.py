"""The terminal's transcript and permission questions now live in ``app.host.terminal_transcript``
(a host renders a terminal's lines with it too); the commands' imports keep working."""

from app.host.terminal_transcript import (
    InputLines,
    StdinPermissionAsker,
    TerminalTranscript,
    permission_question_text,
)

__all__ = ["InputLines", "StdinPermissionAsker", "TerminalTranscript", "permission_question_text"]
