"""The layers import one way (ARCHITECTURE.md); this test walks every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "main_process", "renderer", "runtime", "storage")

# (package prefix of the importing module, allowed top-level imports of project packages,
#  allowed third-party top-level modules; None = anything)
STDLIB = frozenset(__import__("sys").stdlib_module_names)


def _rules(module: str) -> tuple[set[str], set[str] | None]:
    """Allowed project prefixes and third-party roots for ``module``."""
    if module.startswith("runtime.ledger"):
        return {"runtime.ledger"}, {"pydantic", "pydantic_core", "rfc8785", "typing_extensions"}
    if module.startswith("runtime"):
        return {"runtime"}, {"pydantic", "pydantic_core", "rfc8785", "typing_extensions", "psutil"}
    if module.startswith("storage"):
        return {"storage", "runtime.ledger"}, {"pydantic", "typing_extensions"}
    if module.startswith("main_process"):
        return (
            {"main_process", "runtime", "storage", "app.bridge_contract"},
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
            {"renderer", "app.bridge_contract", "app.code_text"},
            {"PySide6", "pydantic", "typing_extensions"},
        )
    if module == "app.code_text":
        return {"app.code_text"}, set()
    if module == "app.bridge_contract":
        return {"app.bridge_contract"}, {"pydantic", "typing_extensions"}
    return set(PACKAGES), None


def _imports(path: Path, module: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: -node.level]
                names.append(".".join([*base, node.module] if node.module else base))
            elif node.module:
                names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _modules() -> list[tuple[str, Path]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append((".".join(parts), path))
    return found


def _allowed(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize(("module", "path"), _modules(), ids=str)
def test_module_imports_follow_the_layer_rules(module: str, path: Path) -> None:
    own, third_party = _rules(module)
    for name in _imports(path, module):
        root = name.split(".")[0]
        if root in STDLIB or root == "__future__":
            continue
        if root in PACKAGES:
            # "from app import bridge_contract" style is normalised by the ImportFrom branch
            if not _allowed(name, own):
                pytest.fail(f"{module} imports {name}, which its layer may not import")
            continue
        if third_party is not None and not _allowed(name, third_party):
            pytest.fail(f"{module} imports third-party {name}, which its layer may not import")


def test_the_walker_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import storage.ledger_store\nfrom PySide6 import QtWidgets\n")
    names = _imports(bad, "runtime.tools.bad")
    own, third = _rules("runtime.tools.bad")
    assert not _allowed("storage.ledger_store", own)
    assert third is not None
    assert not _allowed("PySide6.QtWidgets", third)
    assert "PySide6.QtWidgets" in names
