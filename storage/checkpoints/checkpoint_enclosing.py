"""The ignore rules of a repository enclosing the session folder (docs/design/workspace.md section
1).

A session folder inside a larger repository (a package of a monorepo) is ignored by that
repository's rules as well as its own: ``node_modules/`` in the monorepo's top ``.gitignore``
keeps the package's ``node_modules`` out of Git, and out of the snapshots. The rules are read,
never written, from the nearest enclosing repository: its ``.git/info/exclude`` and the
``.gitignore`` of every folder from its top down to the session folder's parent. Each rule is
rewritten for the session folder and the lot goes to the private repository's
``info/exclude`` (lower in precedence than the folder's own ``.gitignore`` files, as in Git).

Rewriting, for a rule read in folder ``A`` with the session folder at ``A/P``: a rule without a
``/`` (but a trailing one) matches at any depth and is kept as it is; a rule starting with
``**/`` too; an anchored rule whose leading segments match ``P`` segment by segment (``*``,
``?`` and ``[...]`` as Git reads them) keeps the rest, anchored at the folder; an anchored rule
that cannot reach into ``P`` (another folder, or ``**`` before ``P`` ends) is left out.
Negations (``!``) are rewritten the same way.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

_MAX_RULE_BYTES = 1024 * 1024


def enclosing_rules(folder: Path) -> str:
    """The enclosing repository's ignore rules rewritten for ``folder`` ("" when there is no
    enclosing repository or it ignores nothing)."""
    top = _enclosing_top(folder)
    if top is None:
        return ""
    inside = folder.relative_to(top).parts
    lines: list[str] = []
    exclude = top / ".git" / "info" / "exclude"
    if exclude.is_file():
        lines.extend(_rewritten(_read(exclude), inside))
    for depth in range(len(inside)):
        here = top.joinpath(*inside[:depth])
        lines.extend(_rewritten(_read(here / ".gitignore"), inside[depth:]))
    return "".join(f"{line}\n" for line in lines)


def _enclosing_top(folder: Path) -> Path | None:
    if (folder / ".git").exists():
        return None  # a repository of its own: Git reads no rule from above it
    for parent in folder.parents:
        if (parent / ".git").exists():
            return parent
    return None


def _read(path: Path) -> list[str]:
    try:
        with open(path, "rb") as handle:
            body = handle.read(_MAX_RULE_BYTES)
    except OSError:
        return []
    return body.decode("utf-8", "surrogateescape").splitlines()


def _rewritten(rules: list[str], inside: tuple[str, ...]) -> list[str]:
    """``rules`` read in a folder, for the folder ``inside`` below it."""
    found: list[str] = []
    for line in rules:
        rule = line.rstrip()
        if rule.endswith("\\") and line != rule:
            rule += " "  # an escaped trailing space stays
        if not rule or rule.startswith("#"):
            continue
        negated = rule.startswith("!")
        body = rule[1:] if negated else rule
        moved = _moved(body, inside)
        if moved is not None:
            found.append(("!" if negated else "") + moved)
    return found


def _moved(rule: str, inside: tuple[str, ...]) -> str | None:
    directory_only = rule.endswith("/")
    core = rule.rstrip("/")
    if "/" not in core:
        return rule  # matches at any depth
    if core.startswith("**/"):
        return rule
    segments = core.lstrip("/").split("/")
    if len(segments) <= len(inside):
        return None  # names the folder or a folder above it, not something inside
    for segment, name in zip(segments, inside, strict=False):
        if segment == "**" or not fnmatch.fnmatchcase(name, segment):
            return None
    rest = "/".join(segments[len(inside) :])
    return "/" + rest + ("/" if directory_only else "")
