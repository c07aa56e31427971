"""The ignore rules of a repository enclosing the session folder, the ``info/exclude`` of
the folder's own, and the user's own excludes file (docs/design/workspace.md section 1).

A session folder inside a larger repository (a package of a monorepo) is ignored by that
repository's rules as well as its own: ``node_modules/`` in the monorepo's top ``.gitignore``
keeps the package's ``node_modules`` out of Git, and out of the snapshots. The rules are read,
never written, from the nearest enclosing repository: its ``info/exclude`` (in the common
folder of a linked worktree, whose ``.git`` is a file naming it, as Git reads it) and the
``.gitignore`` of every folder from its top down to the session folder's parent. Each rule is
rewritten for the session folder and the lot goes to the private repository's
``info/exclude`` (lower in precedence than the folder's own ``.gitignore`` files, as in Git).

Rewriting, for a rule read in folder ``A`` with the session folder at ``A/P``: a rule without a
``/`` (but a trailing one) matches at any depth and is kept as it is; a rule starting with
``**/`` too; an anchored rule whose leading segments match ``P`` segment by segment (``*``,
``?`` and ``[...]`` as Git reads them) keeps the rest, anchored at the folder; an anchored rule
that cannot reach into ``P`` (another folder, or ``**`` before ``P`` ends) is left out.
Negations (``!``) are rewritten the same way.

The user's excludes file (``core.excludesFile``, by default ``$XDG_CONFIG_HOME/git/ignore`` or
``~/.config/git/ignore``) is what ``git status`` reads below every other rule: editors' swap
files and IDE folders are commonly kept out of Git there. It applies only to a folder in a Git
repository (its own or an enclosing one, whose top its anchored rules are read from), as Git
applies it. The setting is read from the configuration files as Git reads them (the system's
unless ``GIT_CONFIG_NOSYSTEM``, the user's or ``GIT_CONFIG_GLOBAL``, then the repository's; the
last one wins, with the files they include where they include them: ``include.path`` and
``includeIf "gitdir:…"``), by reading the files, never by running anything.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

_MAX_RULE_BYTES = 1024 * 1024
# In a restored or branched copy: the rules the source folder was captured under that the copy
# cannot read where it is (an enclosing repository's, the user's excludes file for a folder in a
# repository), in Maka's own folder at its top.
INHERITED_RULES = ".maka/inherited-ignore"


def rules_to_inherit(source: Path) -> str:
    """What a copy of ``source`` keeps of the rules its snapshots were taken under, beside
    the ones it carries itself (its clone's ``info/exclude``): the user's excludes file and an
    enclosing repository's, rewritten for ``source``, and what ``source`` inherited in turn.
    A package of a monorepo restored beside the monorepo ignored ``node_modules/`` no more."""
    return user_rules(source) + enclosing_rules(source) + inherited_rules(source)


def inherited_rules(folder: Path) -> str:
    """The rules a copy was given (``rules_to_inherit``), "" for any other folder (or when
    ``.maka`` is not a plain folder or the file not a plain file)."""
    folder = Path(os.path.abspath(folder))
    try:
        if os.path.islink(folder / ".maka") or os.path.islink(folder / INHERITED_RULES):
            return ""
    except OSError:
        return ""
    lines = _read(folder / INHERITED_RULES)
    return "".join(f"{line}\n" for line in lines)


def enclosing_rules(folder: Path) -> str:
    """The enclosing repository's ignore rules rewritten for ``folder`` ("" when there is no
    enclosing repository or it ignores nothing)."""
    folder = Path(os.path.abspath(folder))
    top = enclosing_top(folder)
    if top is None:
        return ""
    inside = folder.relative_to(top).parts
    lines: list[str] = []
    found = git_dirs(top)
    if found is not None:  # the common folder's: a linked worktree's is the main repository's
        lines.extend(_rewritten(_read(found[1] / "info" / "exclude"), inside))
    for depth in range(len(inside)):
        here = top.joinpath(*inside[:depth])
        lines.extend(_rewritten(_read(here / ".gitignore"), inside[depth:]))
    return "".join(f"{line}\n" for line in lines)


def own_rules(folder: Path) -> str:
    """The ``info/exclude`` rules of the folder's own repository (its common folder's, for a
    linked worktree or a submodule), which Git reads below the ``.gitignore`` files as the
    private repository reads its own; "" when the folder has no ``.git`` of its own."""
    folder = Path(os.path.abspath(folder))
    if not os.path.lexists(folder / ".git"):
        return ""
    found = git_dirs(folder)
    if found is None:
        return ""
    lines = _rewritten(_read(found[1] / "info" / "exclude"), ())
    return "".join(f"{line}\n" for line in lines)


def user_rules(folder: Path) -> str:
    """The rules of the user's excludes file rewritten for ``folder`` ("" when the folder is in
    no Git repository, or the file is missing or empty)."""
    folder = Path(os.path.abspath(folder))
    top = folder if os.path.lexists(folder / ".git") else enclosing_top(folder)
    if top is None:
        return ""
    path = excludes_file(top)
    if path is None:
        return ""
    lines = _rewritten(_read(path), folder.relative_to(top).parts)
    return "".join(f"{line}\n" for line in lines)


def excludes_file(top: Path) -> Path | None:
    """The excludes file Git reads for the work tree at ``top``: the last ``core.excludesFile``
    of the configuration files, else the default one; None when it is set empty."""
    environ = os.environ
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    xdg = Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "git"
    configs: list[Path] = []
    if environ.get("GIT_CONFIG_NOSYSTEM", "").lower() not in ("1", "true", "yes", "on"):
        configs.append(Path(environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"))
    named = environ.get("GIT_CONFIG_GLOBAL")
    configs.extend([Path(named)] if named else [xdg / "config", home / ".gitconfig"])
    found = git_dirs(top)
    if found is not None:
        configs.extend([found[1] / "config", found[0] / "config.worktree"])
    value: str | None = None
    git_dir = found[0] if found is not None else None
    for config in configs:
        setting = _core_excludes_file(config, git_dir)
        if setting is not None:
            value = setting
    if value is None:
        return xdg / "ignore"
    if not value:
        return None
    if value == "~" or value.startswith("~/"):
        return home / value[2:]
    expanded = Path(os.path.expanduser(value))
    return expanded if expanded.is_absolute() else top / expanded


_SECTION = re.compile(r"^\s*\[\s*([A-Za-z0-9.-]+)\s*(\"((?:[^\"\\]|\\.)*)\")?\s*\]")
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(=\s*(.*))?$")
_MAX_INCLUDE_DEPTH = 10  # as Git's own limit


def _core_excludes_file(config: Path, git_dir: Path | None, depth: int = 0) -> str | None:
    """The last ``core.excludesFile`` value in one configuration file and the files it
    includes where it includes them (``include.path``, and ``includeIf "gitdir:…"`` /
    ``"gitdir/i:…"`` when the repository's folder matches; other conditions are taken as not
    met); None when it sets none (a bare key reads as empty)."""
    value: str | None = None
    section, subsection = "", None
    lines = _read(config)
    at = 0
    while at < len(lines):
        line = lines[at]
        at += 1
        header = _SECTION.match(line)
        if header is not None:
            section = header.group(1).lower()
            quoted = header.group(3)
            subsection = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else None
            line = line[header.end() :]
        key = _KEY.match(line)
        if key is None:
            continue
        name = key.group(1).lower()
        wanted = section == "core" and subsection is None and name == "excludesfile"
        including = name == "path" and (
            (section == "include" and subsection is None)
            or (section == "includeif" and _condition_met(subsection, config, git_dir))
        )
        if not (wanted or including):
            continue
        rest = "\n".join([key.group(3) or "", *lines[at:]])
        read, joined = _config_value(rest)
        at += joined
        if wanted:
            value = read
        elif read and depth < _MAX_INCLUDE_DEPTH:
            included = _included_path(read, config)
            setting = _core_excludes_file(included, git_dir, depth + 1)
            if setting is not None:
                value = setting
    return value


def _included_path(path: str, config: Path) -> Path:
    """An include's path as Git reads it: ``~/`` the home folder, relative to the including
    file's folder."""
    if path == "~" or path.startswith("~/"):
        return Path(os.path.expanduser("~")) / path[2:]
    expanded = Path(os.path.expanduser(path))
    return expanded if expanded.is_absolute() else config.parent / expanded


def _condition_met(condition: str | None, config: Path, git_dir: Path | None) -> bool:
    """``gitdir:PATTERN`` (``gitdir/i:`` without case) against the repository's folder."""
    if condition is None or git_dir is None:
        return False
    kind, _, pattern = condition.partition(":")
    if kind not in ("gitdir", "gitdir/i") or not pattern:
        return False
    if pattern.startswith("~/"):
        pattern = os.path.expanduser("~") + pattern[1:]
    elif pattern.startswith("./"):
        pattern = str(config.parent) + pattern[1:]
    elif not os.path.isabs(pattern):
        pattern = "**/" + pattern
    if pattern.endswith("/"):
        pattern += "**"
    folder = os.path.realpath(git_dir)
    fold = kind == "gitdir/i"
    return any(_wildmatch(pattern, candidate, fold) for candidate in {str(git_dir), folder})


def _wildmatch(pattern: str, path: str, fold: bool) -> bool:
    """Git's wildmatch with ``**`` across folders, ``*`` and ``?`` within one."""
    regex = ""
    at = 0
    while at < len(pattern):
        if pattern.startswith("**/", at):
            regex += "(?:.*/)?"
            at += 3
        elif pattern.startswith("**", at):
            regex += ".*"
            at += 2
        elif pattern[at] == "*":
            regex += "[^/]*"
            at += 1
        elif pattern[at] == "?":
            regex += "[^/]"
            at += 1
        else:
            regex += re.escape(pattern[at])
            at += 1
    return re.fullmatch(regex, path, re.IGNORECASE if fold else 0) is not None


_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "\\": "\\", '"': '"'}


def _config_value(text: str) -> tuple[str, int]:
    """A configuration value as Git reads it from ``text`` (what follows the ``=``, then the
    file's next lines): quotes joined, escapes read, each blank inside read as a space (the
    leading and trailing ones dropped), a comment (``#`` or ``;`` outside quotes) cut, a
    backslash at a line's end joining the next line; with the number of lines it joined. A
    value Git refuses (an open quote, an unknown escape) reads as far as it goes."""
    value: list[str] = []
    spaces = 0
    quoted = comment = False
    joined = 0
    chars = iter(text)
    for char in chars:
        if char == "\n":
            break
        if comment:
            continue
        if char.isspace() and not quoted:
            spaces += 1 if "".join(value) else 0
            continue
        if not quoted and char in "#;":
            comment = True
            continue
        value.append(" " * spaces)
        spaces = 0
        if char == "\\":
            following = next(chars, "")
            if following == "\n":
                joined += 1
            else:
                value.append(_ESCAPES.get(following, ""))
        elif char == '"':
            quoted = not quoted
        else:
            value.append(char)
    return "".join(value), joined


def enclosing_top(folder: Path) -> Path | None:
    """The top of the work tree holding the (absolute) ``folder`` below it: the nearest folder
    above it with a ``.git`` (a folder, or the file of a linked worktree or a submodule); None
    when ``folder`` has a ``.git`` of its own (Git reads nothing from above it) or no folder
    above it has one."""
    if os.path.lexists(folder / ".git"):
        return None
    for parent in folder.parents:
        if os.path.lexists(parent / ".git"):
            return parent
    return None


def git_dirs(top: Path) -> tuple[Path, Path] | None:
    """The repository folder of the work tree at ``top`` and its common folder (where the
    objects, the configuration and ``info`` are: the main repository's for a linked worktree,
    named by ``commondir``, else the same folder); None when ``.git`` is neither a folder nor a
    file naming one (``gitdir: <path>``, relative to ``top``)."""
    dot = top / ".git"
    try:
        if dot.is_symlink() or not (dot.is_dir() or dot.is_file()):
            return None
        git_dir = dot if dot.is_dir() else _named_git_dir(dot)
        if git_dir is None:
            return None
        common = git_dir
        if (git_dir / "commondir").is_file():
            shared = (git_dir / "commondir").read_text("utf-8").strip()
            common = Path(os.path.normpath(git_dir / shared)) if shared else git_dir
    except (OSError, UnicodeDecodeError):
        return None
    return git_dir, common


def _named_git_dir(dot: Path) -> Path | None:
    """The folder a ``.git`` file names."""
    with open(dot, "rb") as handle:
        text = handle.read(4096).decode("utf-8", "surrogateescape").strip()
    if not text.startswith("gitdir:") or "\n" in text:
        return None
    named = Path(text.removeprefix("gitdir:").strip())
    git_dir = Path(os.path.normpath(dot.parent / named))
    return git_dir if git_dir.is_dir() else None


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
