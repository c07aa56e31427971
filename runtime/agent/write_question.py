"""What a write's permission question says: the target, the size, whether it replaces an
existing file (and how big that is) or creates a new one, and a short preview of the content.

Why it is worked out before asking: "write notes.txt" does not tell the user that the file
exists and is about to be replaced; the answer must be given knowing what will happen. The file
is only looked at (``lstat``), never opened for writing; a path the tool will refuse keeps the
plain question (the refusal follows).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.agent.text_limits import PROMPT_CHARS, shorten
from runtime.tools.tool_contract import ToolRefusal
from runtime.tools.workspace_paths import resolve_workspace_path

PREVIEW_LINES = 6
PREVIEW_LINE_CHARS = 120


def _size(count: int) -> str:
    return "1 byte" if count == 1 else f"{count:,} bytes"


def _existing(path: Path) -> str:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "new file"
    except OSError:
        return "the target could not be checked"
    if stat.S_ISREG(info.st_mode):
        return f"replaces an existing {info.st_size:,}-byte file"
    if stat.S_ISDIR(info.st_mode):
        return "the target is a folder"
    return "the target is not a regular file"


def _split_lines(text: str) -> list[str]:
    """Lines broken at ``\n`` only (a ``\r\n`` ending counts as one): ``str.splitlines``
    would also break at a lone ``\r`` and other separators, so ``line1\r\x1b[2Kevil`` (which a
    terminal shows as ``evil``) would read as two honest lines instead of one whose carriage
    return the prompt names."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start another
    return lines


def preview(text: str) -> str:
    """The first ``PREVIEW_LINES`` lines, each shortened, saying how many more there are."""
    lines = _split_lines(text)
    shown = [shorten(line, PREVIEW_LINE_CHARS) for line in lines[:PREVIEW_LINES]]
    rest = len(lines) - len(shown)
    if rest > 0:
        shown.append(f"… ({rest} more line{'s' if rest != 1 else ''})")
    return "\n".join("  " + line for line in shown)


def write_question(name: str, args: Mapping[str, Any], cwd: Path) -> str | None:
    """The question for ``write_file`` / ``edit_file``, or None to ask plainly."""
    if name not in ("write_file", "edit_file"):
        return None
    try:
        target = resolve_workspace_path(cwd, args.get("path"), for_write=True)
    except (ToolRefusal, OSError, ValueError):
        return None
    where = shorten(target.relative, PROMPT_CHARS)
    if name == "write_file":
        content = str(args.get("content", ""))
        size = len(content.encode("utf-8"))
        return (
            f"write {where} ({_size(size)}; {_existing(target.absolute)})\n"
            f"content:\n{preview(content)}"
        )
    old = str(args.get("old_string", ""))
    new = str(args.get("new_string", ""))
    try:
        size_note = f"{_size(os.lstat(target.absolute).st_size)} now"
    except OSError:
        size_note = "it does not exist now"
    return (
        f"edit {where} ({size_note}): replace {_lines(old)} with {_lines(new)}\n"
        f"replace:\n{preview(old)}\nwith:\n{preview(new)}"
    )


def _lines(text: str) -> str:
    count = len(_split_lines(text)) if text else 1
    return "1 line" if count == 1 else f"{count} lines"
