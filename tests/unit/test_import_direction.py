"""The layers import one way (docs/design/architecture.md); this test walks every module's imports.

Every import counts: at module level, inside a function and under ``TYPE_CHECKING`` alike.
Inside ``runtime/`` the subpackages are ordered (``RUNTIME_LAYERS``), and no module anywhere is
part of an import cycle (``import_cycles``). The Qt-free host (``app.host``) imports neither Qt
nor the desktop's processes, and the CLI's commands (but ``maka gui``, which starts the desktop)
import neither ``main_process`` nor ``renderer``."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "main_process", "renderer", "runtime", "storage", "maka_start")

# (package prefix of the importing module, allowed top-level imports of project packages,
#  allowed third-party top-level modules; None = anything)
STDLIB = frozenset(__import__("sys").stdlib_module_names)

RUNTIME_LAYERS = ("ledger", "base", "providers", "tools", "recovery", "continuation", "agent")
"""``runtime``'s subpackages, lowest first: each imports only itself and the ones before it."""

RUNTIME_BESIDE: dict[str, str] = {}
"""Subpackages beside the order: each may import the layers up to the named one, and no
``runtime`` module but its own imports it (none at present)."""


HOST_MAY_IMPORT = (
    "app.host",
    "app.bridge_contract",
    "app.code_text",
    "app.park_guidance",
    "app.visible_text",
    "app.data_paths",
    "runtime",
    "storage",
)
"""What the Qt-free host the desktop's main process and the CLI share may import: never
``main_process``, ``renderer`` or a command."""

POSTGRES_DRIVER_MODULES = frozenset({"storage.ledger.postgres_connection"})
"""The one module that imports psycopg (the ledger on PostgreSQL, docs/postgres.md)."""

HOST_THIRD_PARTY = ("pydantic", "pydantic_core", "typing_extensions", "psutil", "platformdirs")
"""The host's third-party imports: no Qt (``PySide6``) among them."""

CLI_MAY_IMPORT = ("app", "runtime", "storage", "maka_start")
"""The CLI (``app.cli``, its commands and the rest of ``app``) reaches the desktop's code only
through ``app.host``."""

GUI_COMMANDS = frozenset({"app.commands.gui_cmd"})
"""``maka gui`` starts the desktop: the one command that imports ``main_process`` and
``renderer``."""


def _runtime_prefixes(module: str) -> set[str]:
    """The ``runtime`` subpackages ``module`` (a ``runtime`` module) may import."""
    parts = module.split(".")
    if len(parts) == 1:
        return {"runtime"}
    sub = parts[1]
    if sub in RUNTIME_LAYERS:
        below = RUNTIME_LAYERS[: RUNTIME_LAYERS.index(sub) + 1]
        return {f"runtime.{layer}" for layer in below}
    if sub in RUNTIME_BESIDE:
        below = RUNTIME_LAYERS[: RUNTIME_LAYERS.index(RUNTIME_BESIDE[sub]) + 1]
        return {f"runtime.{sub}"} | {f"runtime.{layer}" for layer in below}
    pytest.fail(f"runtime.{sub} has no place in RUNTIME_LAYERS or RUNTIME_BESIDE")


ONE_MODULE_RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "app.visible_text": (("app.visible_text",), ()),
    "app.gui_thread_gc": (("app.gui_thread_gc",), ("PySide6.QtCore",)),
    "app.code_text": (("app.code_text",), ()),
    "app.park_guidance": (("app.park_guidance", "app.code_text"), ()),
    "app.bridge_contract": (("app.bridge_contract",), ("pydantic", "typing_extensions")),
    # the console script's first step: Maka's own packages first, then the CLI
    "maka_start": (("maka_start", "app.cli"), ()),
}
"""Modules with rules of their own: (project prefixes, third-party roots) each may import."""


def _rules(module: str) -> tuple[set[str], set[str] | None]:
    """Allowed project prefixes and third-party roots for ``module``."""
    if module.startswith("runtime.ledger"):
        return {"runtime.ledger"}, {"pydantic", "pydantic_core", "rfc8785", "typing_extensions"}
    if module.startswith("runtime"):
        return _runtime_prefixes(module), {
            "pydantic",
            "pydantic_core",
            "rfc8785",
            "typing_extensions",
            "psutil",
        }
    if module in POSTGRES_DRIVER_MODULES:
        return {"storage", "runtime.ledger"}, {"pydantic", "typing_extensions", "psycopg"}
    if module.startswith("storage"):
        return {"storage", "runtime.ledger"}, {"pydantic", "typing_extensions"}
    if module.startswith("main_process"):
        return (
            {
                "main_process",
                "runtime",
                "storage",
                "app.bridge_contract",
                "app.host",
                "app.gui_thread_gc",
            },
            {
                "PySide6.QtCore",
                "PySide6.QtNetwork",
                "pydantic",
                "psutil",
                "typing_extensions",
                "platformdirs",
            },
        )
    if module.startswith("renderer"):
        return (
            {
                "renderer",
                "app.bridge_contract",
                "app.code_text",
                "app.park_guidance",
                "app.visible_text",
                # the shape of a database URL, checked before the Settings dialog saves it
                "runtime.ledger.database_url",
                "runtime.ledger.codes",
                # what a session's title may be, checked before Rename sends one
                "runtime.ledger.session_title",
                # a file name shown on one line (the banner's changed files)
                "runtime.ledger.file_names",
                # a maka command the window suggests, with the data folder it was given
                "runtime.ledger.command_words",
            },
            {"PySide6", "pydantic", "typing_extensions"},
        )
    if module == "app.host" or module.startswith("app.host."):
        return set(HOST_MAY_IMPORT), set(HOST_THIRD_PARTY)
    if module in GUI_COMMANDS:
        return set(PACKAGES), None
    if module in ONE_MODULE_RULES:
        own, third_party = ONE_MODULE_RULES[module]
        return set(own), set(third_party)
    if module == "app" or module.startswith("app."):
        return set(CLI_MAY_IMPORT), None
    return set(PACKAGES), None


def _imports(path: Path, module: str) -> list[str]:
    """Every name ``path`` (module ``module``) imports, anywhere in it; ``from X import Y``
    gives ``X.Y`` (``Y`` may be a module), relative imports made absolute."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
                names.append(source)
            elif node.module:
                source = node.module
            else:
                continue
            names.extend(f"{source}.{alias.name}" for alias in node.names)
    return names


def _modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[tuple[str, Path]]:
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append((".".join(parts), path))
    return found


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (the longest known module each name starts
    with; an import of a package's name is an edge to its ``__init__``)."""
    modules = dict(_modules(root, packages))
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges: set[str] = set()
        for name in _imports(path, module):
            target = name
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                edges.add(target)
        graph[module] = edges
    return graph


def import_cycles(root: Path, packages: tuple[str, ...]) -> list[list[str]]:
    """The import cycles among the modules of ``packages`` under ``root``: every strongly
    connected set of two or more modules, each sorted, in sorted order."""
    graph = import_graph(root, packages)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan; the graph is a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def _allowed(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _violations(module: str, path: Path) -> list[str]:
    """What ``module`` (at ``path``) imports that its layer may not, one sentence each."""
    own, third_party = _rules(module)
    found: list[str] = []
    for name in _imports(path, module):
        root = name.split(".")[0]
        if root in STDLIB or root == "__future__":
            continue
        if root in PACKAGES:
            # "from app import bridge_contract" style is normalised by the ImportFrom branch
            if not _allowed(name, own):
                found.append(f"{module} imports {name}, which its layer may not import")
            continue
        if third_party is not None and not _allowed(name, third_party):
            found.append(f"{module} imports third-party {name}, which its layer may not import")
    return found


@pytest.mark.parametrize(("module", "path"), _modules(), ids=str)
def test_module_imports_follow_the_layer_rules(module: str, path: Path) -> None:
    assert _violations(module, path) == []


def test_planted_host_and_command_violations_fail(tmp_path: Path) -> None:
    """A copy of ``app/`` with Qt, ``main_process`` and ``renderer`` imports planted in the
    host and in a command: each planted module fails, the copied modules (``maka gui`` among
    them) pass."""
    shutil.copytree(ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__"))
    planted = {
        "app.host.planted_qt": "from PySide6.QtCore import QObject\n",
        "app.host.planted_main": "def f():\n    import main_process.host_app\n",
        "app.host.planted_renderer": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from renderer import theme\n"
        ),
        "app.host.planted_command": "from app.commands import run_cmd\n",
        "app.commands.planted_main": "from main_process.host_app import HostApp\n",
        "app.commands.planted_renderer": "def f():\n    from renderer.theme import COLORS\n",
        "app.planted_cli": "from main_process import host_app\n",
    }
    for module, source in planted.items():
        (tmp_path / Path(*module.split("."))).with_suffix(".py").write_text(source)
    failing = {module for module, path in _modules(tmp_path, ("app",)) if _violations(module, path)}
    assert failing == set(planted)
    assert "app.commands.gui_cmd" in dict(_modules(tmp_path, ("app",)))


def test_the_walker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import storage.ledger.ledger_store\nfrom PySide6 import QtWidgets\n")
    names = _imports(bad, "runtime.tools.bad")
    own, third = _rules("runtime.tools.bad")
    assert not _allowed("storage.ledger.ledger_store", own)
    assert third is not None
    assert not _allowed("PySide6.QtWidgets", third)
    assert "PySide6.QtWidgets" in names


def test_the_walker_sees_a_runtime_layer_importing_upwards() -> None:
    own, _ = _rules("runtime.tools.tool_contract")
    assert not _allowed("runtime.agent.run_loop.CancelToken", own)
    assert _allowed("runtime.providers.provider_port.ProviderPort", own)
    assert _allowed("runtime.base.cancel_token.CancelToken", own)


def test_a_runtime_subpackage_without_a_place_in_the_order_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"runtime\.newthing has no place"):
        _rules("runtime.newthing.module")


def test_no_module_is_part_of_an_import_cycle() -> None:
    assert import_cycles(ROOT, PACKAGES) == []


def test_a_cycle_is_found_however_its_imports_are_hidden(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    # a <-> b: one import only for the type checker, the other inside a function
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n"
    )
    (package / "b.py").write_text("class B:\n    def f(self):\n        from pkg import a\n")
    # c -> d -> e -> c through relative imports; f imports c but is in no cycle
    (package / "c.py").write_text("from . import d\n")
    (package / "d.py").write_text("from .e import E\n")
    (package / "e.py").write_text("E = 1\nimport pkg.c\n")
    (package / "f.py").write_text("import pkg.c\n")
    assert import_cycles(tmp_path, ("pkg",)) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d", "pkg.e"]]
    (package / "a.py").write_text("")  # the cycle broken
    assert import_cycles(tmp_path, ("pkg",)) == [["pkg.c", "pkg.d", "pkg.e"]]
