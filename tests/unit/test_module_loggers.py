"""Every logger of the app is under ``maka``: the host (the desktop's main process, ``maka
host``) configures that one, with its log file and its "maka: WARNING" lines on stderr. The
snapshot store's, retention's and the checkpointer's loggers were named by module, so in a
host their warnings missed the log file and reached the console as bare lines."""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "main_process", "renderer", "runtime", "storage")


def _logger_names() -> Iterator[tuple[Path, str]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "getLogger"
                    and node.args
                ):
                    yield path, ast.unparse(node.args[0])


def test_every_logger_is_under_maka() -> None:
    names = list(_logger_names())
    assert len(names) > 10
    stray = [
        f"{path.relative_to(ROOT)}: {name}"
        for path, name in names
        if not (name.startswith(("'maka", '"maka', "f'maka", 'f"maka')))
    ]
    assert stray == [], stray


def test_a_snapshot_warning_reaches_the_hosts_log_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.commands import gui_cmd
    from storage.checkpoints import checkpoint_store

    maka = logging.getLogger("maka")
    saved = (list(maka.handlers), maka.propagate, maka.level)
    maka.handlers.clear()
    try:
        gui_cmd._configure_logging(tmp_path)
        checkpoint_store._log.warning("the copy at %s will write its objects", "/w")
        for handler in maka.handlers:
            handler.flush()
    finally:
        for handler in maka.handlers:
            handler.close()
        maka.handlers[:] = saved[0]
        maka.propagate, maka.level = saved[1], saved[2]
    logged = (tmp_path / "logs" / "main.log").read_text(encoding="utf-8")
    assert "the copy at /w will write its objects" in logged, logged
    assert "maka: WARNING the copy at /w will write its objects" in capsys.readouterr().err
