"""Small commands import only what they need (start-up time): ``maka sessions`` lists real
sessions without the store's writers, the event model's validator, the run loop, the providers or
``dataclasses`` (which imports ``inspect``, ``dis``, ``tokenize`` and ``ast``: about as much
start-up time as the interpreter's own); ``maka ledger plan`` on an empty file builds no
validator; ``maka --version`` loads no command at all. Each is the real command in a child that
reports what it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_sessions_resume_hint_cli import interrupted_session
from tests.helpers.maka_run import maka

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from app.cli import main
code = main(sys.argv[1:])
modules = sorted(sys.modules)  # before the probe's own json
import json
print(json.dumps({"code": code, "modules": modules}), file=sys.stderr)
"""

HEAVY = (
    "pydantic",
    "pydantic_core",
    "storage.ledger.ledger_store",
    "storage.ledger.event_writer",
    "runtime.ledger.event_model",
    "runtime.agent.run_loop",
    "runtime.agent.session_service",
    "runtime.providers.provider_port",
    "logging.handlers",
    "dataclasses",
    "inspect",
    "socket",
    "shutil",
)


LISTING_LEAVES_OUT = (
    "json",  # only --json prints with it, and a resumable row reads the desktop's settings
    "hashlib",  # the host's socket name hashes with the built-in SHA-256
    "queue",  # queue and threading only once a host answers
    "threading",
    "signal",
    "runtime.ledger.crash_points",  # a read-only open runs no migration
    "storage.ledger.tool_process_store",
    "runtime.ledger.ledger_ports",  # the ports and the writers' records
    "storage.instance_lock",  # tested only when a last run is still marked running
    "runtime.ledger.codes_ledger",  # of the code enums, only the database refusals and run endings
    "runtime.ledger.codes_host",
    "runtime.ledger.codes_recovery",
    "runtime.ledger.codes_workspace",
)
"""What listing completed sessions as text leaves out besides ``HEAVY`` (start-up time; issue
35: ``maka sessions`` at 1,000 sessions within 2.5x ``python -c pass``)."""


def _probe(args: list[str], data: Path) -> tuple[str, int, list[str]]:
    environment = {**os.environ, "MAKA_DATA_DIR": str(data)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return done.stdout, int(report["code"]), list(report["modules"])


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if name in modules]


def test_sessions_lists_real_sessions_without_the_writers_or_the_event_model(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    for prompt in ("list files", "write hello.txt saying hi"):
        assert maka(["run", "--cwd", str(work), prompt], data).returncode == 0
    stdout, code, modules = _probe(["sessions"], data)
    assert code == 0
    assert stdout.count("completed") == 2, stdout
    assert _loaded(modules, HEAVY + LISTING_LEAVES_OUT) == []
    stdout_json, code, _ = _probe(["sessions", "--json"], data)
    assert code == 0 and len(json.loads(stdout_json)["sessions"]) == 2


def test_sessions_decides_its_resume_hint_without_the_resume_seam(tmp_path: Path) -> None:
    """A session ``maka resume`` would carry on: whether Safe resume is on (the desktop's
    setting here) is read without the seam, the planner or the settings' contract models."""
    data, session = interrupted_session(tmp_path)
    (data / "settings.json").write_text(json.dumps({"safe_resume": "1"}))
    stdout, code, modules = _probe(["sessions"], data)
    assert code == 0
    assert f"(maka resume {session} continues it or says what holds it)" in stdout, stdout
    seam = (
        "app.resume_composition",
        "app.host.plan_report",
        "app.host.resume_seam",
        "app.host.desktop_settings",
    )
    assert _loaded(modules, HEAVY + seam) == []


def test_ledger_plan_of_an_empty_file_builds_no_validator(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    _stdout, code, modules = _probe(["ledger", "plan", str(empty)], tmp_path / "data")
    assert code == 0
    assert _loaded(modules, ("pydantic", "pydantic_core", "sqlite3", "storage")) == []


VERSION_PROBE = """
import sys
from app.cli import main
try:
    main(["--version"])
except SystemExit:
    pass
prefixes = ("app.commands", "runtime", "storage", "dataclasses", "inspect")
print(sorted(m for m in sys.modules if m.startswith(prefixes)), file=sys.stderr)
"""

ROOT_OF_CODED_ERRORS = ["runtime", "runtime.ledger", "runtime.ledger.coded_error"]
"""What ``CliError`` needs: its base class (standard library only, no ``dataclasses``) and two
package markers."""


def test_version_loads_no_command() -> None:
    done = subprocess.run(
        [sys.executable, "-c", VERSION_PROBE],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.startswith("maka ")
    assert done.stderr.strip().splitlines()[-1] == str(ROOT_OF_CODED_ERRORS)


def test_run_loads_no_window_contract_unless_the_desktop_stored_a_provider(
    tmp_path: Path,
) -> None:
    """A turn in the terminal reads the desktop's provider settings only when the desktop stored
    some: the wire contract's models (about half a second of start-up on this machine) stay out
    of every ``maka run`` of a user who never opened the settings."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    args = ["run", "--cwd", str(work), "--provider", "demo", "hello"]
    _stdout, code, modules = _probe(args, data)
    assert code == 0
    assert _loaded(modules, ("app.bridge_contract", "app.host.desktop_settings")) == []
    (data / "settings.json").write_text(json.dumps({"openai_tool_choice": "off"}))
    _stdout, code, modules = _probe(args, data)
    assert code == 0
    assert "app.host.desktop_settings" in modules  # the stored choice is read and applied


def test_the_embedded_ledger_never_imports_the_postgresql_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``MAKA_DATABASE_URL`` a whole turn (the store's writers, T1 and T2 included) and the
    listing run on SQLite alone: psycopg and the PostgreSQL engine stay unloaded
    (docs/postgres.md)."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    engine = ("psycopg", "psycopg_binary", "storage.ledger.postgres_store")
    monkeypatch.delenv("MAKA_DATABASE_URL", raising=False)
    _, code, modules = _probe(["run", "--cwd", str(work), "write hello.txt saying hi"], data)
    assert code == 0
    assert "storage.ledger.ledger_store" in modules
    assert _loaded(modules, engine) == []
    _, code, modules = _probe(["sessions"], data)
    assert code == 0 and _loaded(modules, engine) == []


COMPILE_PROBE = """
import sys
sources = []
def hook(event, args):
    if event == "compile" and args[1] == "<string>":  # not a module's own source
        source = args[0]
        sources.append(source.decode() if isinstance(source, bytes) else str(source))
sys.addaudithook(hook)
from app.cli import main
main(["sessions"])
print(repr([source for source in sources if not source.startswith("lambda _cls")]), file=sys.stderr)
"""


def test_sessions_compiles_no_annotation(tmp_path: Path) -> None:
    """The named tuples on the listing's path read real types, not names: a name becomes a
    forward reference that ``typing`` compiles, and the first ``compile`` of a process costs
    ~2.5 ms (every AST node type is built). Only the named tuples' own constructors (the
    ``lambda _cls`` sources ``collections.namedtuple`` evaluates) are compiled."""
    work = tmp_path / "work"
    work.mkdir()
    data = tmp_path / "data"
    assert maka(["run", "--cwd", str(work), "list files"], data).returncode == 0
    done = subprocess.run(
        [sys.executable, "-c", COMPILE_PROBE],
        cwd=REPO,
        env={**os.environ, "MAKA_DATA_DIR": str(data), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "completed" in done.stdout, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
