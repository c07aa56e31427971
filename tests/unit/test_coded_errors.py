"""One root for coded errors, every code an enum member, one mapper for the desktop and the CLI.

Walks every module of ``runtime``, ``storage``, ``app`` and ``main_process``: an exception class
that carries a ``code`` derives from :class:`CodedError`, a class-level code is a ``StrEnum``
member, and no coded error is raised with a bare string (or ``str(...)``) as its code."""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import re
from enum import StrEnum
from pathlib import Path
from types import SimpleNamespace

import pytest

from app import cli
from app.bridge_contract import BridgeErrorCode, BridgeProtocolError
from app.cli_errors import EXIT_ERROR, EXIT_USAGE, CliError
from app.host.host_services import HostServiceError
from main_process.request_router import _error_code
from runtime.ledger.coded_error import CodedError, CodedFailure, coded_failure
from runtime.ledger.codes import HostCode, StoreCode
from runtime.ledger.ledger_errors import LedgerError
from runtime.providers.provider_port import ProviderError, ProviderErrorCode

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("runtime", "storage", "app", "main_process")

EXEMPT: dict[type[BaseException], str] = {
    # app.bridge_contract imports nothing of the project (the renderer reads it); its code is
    # still an enum member, checked below.
    BridgeProtocolError: "wire contract module, imports no project module",
}

_MENTIONS_CODE = re.compile(r"\bself\.code\b|^\s+code\s*[:=]|\bcode\s*:\s*\w", re.M)


def _module_names() -> list[str]:
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts[-1] == "__main__":
                continue
            names.append(".".join(parts))
    return names


def _exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _module_names():
        module = importlib.import_module(name)
        for _, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
            ):
                found[f"{name}.{value.__qualname__}"] = value
    return list(found.values())


def _carries_code(cls: type[BaseException]) -> bool:
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] not in PACKAGES:
            continue
        if "code" in vars(klass) or "code" in getattr(klass, "__annotations__", {}):
            return True
        if _MENTIONS_CODE.search(inspect.getsource(klass)):
            return True
    return False


def test_the_walk_finds_the_coded_families() -> None:
    names = {cls.__name__ for cls in _exception_classes() if _carries_code(cls)}
    # The walk can see what it must check: one of each family at least.
    assert {
        "LedgerError",
        "ProviderError",
        "CheckpointError",
        "ToolRefusal",
        "CliError",
        "HostServiceError",
        "StartupRefused",
        "SessionChangeRefused",
        "UnknownCrashPoint",
        "RestoreFailed",
        "BridgeProtocolError",
    } <= names


def test_every_coded_exception_derives_from_the_one_root() -> None:
    strays = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _exception_classes()
        if _carries_code(cls) and not issubclass(cls, CodedError) and cls not in EXEMPT
    ]
    assert strays == []


def test_every_class_level_code_is_an_enum_member() -> None:
    for cls in _exception_classes():
        code = vars(cls).get("code")
        if code is not None:
            assert isinstance(code, StrEnum), f"{cls.__qualname__}.code = {code!r}"
    assert isinstance(BridgeProtocolError(BridgeErrorCode.FRAME_MALFORMED, "x").code, StrEnum)


def _code_positions() -> dict[str, int]:
    """Each coded error's name -> the position of its ``code`` parameter (none: no code
    argument, like ``RestoreFailed`` that takes the checkpoint error it wraps)."""
    positions = {}
    for cls in _exception_classes():
        if not (issubclass(cls, CodedError) or cls in EXEMPT):
            continue
        params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        if "code" in params:
            positions[cls.__name__] = params.index("code")
    return positions


def _bare_code(node: ast.expr) -> bool:
    """A string literal, an f-string or ``str(...)``: a code that is no enum member."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str"


def test_no_coded_error_is_raised_with_a_bare_string_code() -> None:
    positions = _code_positions()
    assert {"CliError", "LedgerError", "EventDecodeError"} <= positions.keys()
    bare = []
    for package in (*PACKAGES, "tests"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                callee = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else None
                )
                if callee not in positions:
                    continue
                codes = [kw.value for kw in node.keywords if kw.arg == "code"]
                if len(node.args) > positions[callee]:
                    codes.append(node.args[positions[callee]])
                if any(_bare_code(code) for code in codes):
                    bare.append(f"{path.relative_to(ROOT)}:{node.lineno} {callee}")
    assert bare == []


def test_the_check_itself_sees_a_bare_string_code() -> None:
    call = ast.parse('CliError("session_gone", "no session")').body[0]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    assert _bare_code(call.value.args[0])
    enum_call = ast.parse('CliError(HostCode.INVALID_CWD, "x")').body[0]
    assert isinstance(enum_call, ast.Expr) and isinstance(enum_call.value, ast.Call)
    assert not _bare_code(enum_call.value.args[0])


def test_host_codes_keep_their_wire_strings() -> None:
    # The IPC contract and the CLI's output show these verbatim.
    assert HostCode.HOST_NOT_READY.value == "host_not_ready"
    assert HostCode.HOST_DRAINING.value == "host_draining"
    assert HostCode.SESSION_BUSY.value == "session_busy"
    assert HostCode.INTERNAL_FAILURE.value == "internal_failure"
    assert HostCode.BACKGROUND_OPERATION_PENDING.value == "background_operation_pending"
    assert HostCode.USAGE_INVALID.value == "usage_invalid"
    assert HostCode.INTERRUPTED.value == "interrupted"
    assert HostCode.FAILPOINT_UNKNOWN.value == "failpoint_unknown"


# ---- the mapper ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        LedgerError(StoreCode.STORE_CORRUPT, "the database is damaged"),
        CliError(HostCode.PROMPT_EMPTY, "the prompt is empty", EXIT_USAGE),
        ProviderError(ProviderErrorCode.EMPTY_STREAM, "the provider sent nothing"),
        HostServiceError(HostCode.SESSION_BUSY, "the session is running"),
    ],
)
def test_a_coded_error_maps_to_its_code_and_message(error: CodedError) -> None:
    failure = coded_failure(error)
    assert failure == CodedFailure(error.code, error.message)
    assert isinstance(failure.code, StrEnum)
    code, message = _error_code(error)
    assert (code, message) == (str(error.code), error.message)


@pytest.mark.parametrize("error", [None, RuntimeError("boom"), SystemExit(0), KeyError("code")])
def test_anything_else_maps_to_no_code(error: BaseException | None) -> None:
    assert coded_failure(error) is None
    assert _error_code(error)[0] == "internal_failure"


def test_the_router_shortens_a_long_message() -> None:
    code, message = _error_code(HostServiceError(HostCode.INVALID_CWD, "x" * 5000))
    assert code == "invalid_cwd"
    assert len(message) == 4000


def _fake_command(error: BaseException) -> SimpleNamespace:
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true")

    def run(_: argparse.Namespace) -> int:
        raise error

    return SimpleNamespace(add_arguments=add_arguments, run=run)


@pytest.mark.parametrize(
    ("error", "exit_code"),
    [
        (CliError(HostCode.CWD_REQUIRED, "a new session needs --cwd DIR", EXIT_USAGE), EXIT_USAGE),
        (LedgerError(StoreCode.STORE_CORRUPT, "the database is damaged"), EXIT_ERROR),
        # Not the CLI's own nor the ledger's: a provider's refusal is reported the same way.
        (ProviderError(ProviderErrorCode.EMPTY_STREAM, "the provider sent nothing"), EXIT_ERROR),
    ],
)
def test_the_cli_reports_every_coded_error_with_its_code(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: CodedError,
    exit_code: int,
) -> None:
    monkeypatch.setattr(cli, "_load", lambda _name: _fake_command(error))
    assert cli.main(["plan", "--json"]) == exit_code
    out, err = capsys.readouterr()
    assert err.strip() == f"maka: error [{error.code}]: {error.message}"
    assert json.loads(out) == {"error": {"code": str(error.code), "message": error.message}}


def test_the_cli_keeps_the_traceback_of_a_defect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_load", lambda _name: _fake_command(RuntimeError("a defect")))
    with pytest.raises(RuntimeError, match="a defect"):
        cli.main(["plan"])


def test_the_root_imports_only_the_standard_library() -> None:
    # ``maka --version`` loads it (CliError derives from it): it must stay free to import, and
    # ``dataclasses`` is not free (it imports ``inspect``, ``dis``, ``tokenize`` and ``ast``).
    tree = ast.parse((ROOT / "runtime/ledger/coded_error.py").read_text(encoding="utf-8"))
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported == {"enum", "typing"}  # no postponed annotations: see the module
    for package in ("runtime/__init__.py", "runtime/ledger/__init__.py"):
        body = ast.parse((ROOT / package).read_text(encoding="utf-8")).body
        assert all(isinstance(node, ast.Expr) for node in body), f"{package} runs code"
