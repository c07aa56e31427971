"""A data folder an older Maka left (schema 3) met by the read-only commands first: they change
nothing, and their refusal says which command upgrades it; after that command the same read-only
command answers."""

from __future__ import annotations

import hashlib
from pathlib import Path

from storage.ledger.ledger_schema import SCHEMA_VERSION
from tests.helpers.maka_run import maka, scripted_env, write_script
from tests.helpers.schema_v3 import current_store_with_ledgers, write_schema_3


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_read_only_commands_name_the_command_that_upgrades_an_older_data_folder(
    tmp_path: Path,
) -> None:
    old = write_schema_3(current_store_with_ledgers(tmp_path / "current"), tmp_path / "data")
    data = old.parent
    before = _digest(old)
    for command in (["sessions"], ["doctor"]):
        refused = maka(command, data)
        said = refused.stdout + refused.stderr  # doctor reports its problems on stdout
        assert refused.returncode != 0
        assert "[schema_upgrade_required]" in said
        assert "'maka run'" in said and "desktop app" in said, said
        assert f"from schema 3 to {SCHEMA_VERSION}" in said, said
        assert "Traceback" not in said
    assert _digest(old) == before, "a read-only command changed nothing"

    work = tmp_path / "work"
    work.mkdir()
    script = write_script(tmp_path / "script.json", [[{"text": "Hello."}]])
    ran = maka(["run", "--cwd", str(work), "hi"], data, env=scripted_env(script))
    assert ran.returncode == 0, ran.stderr
    listed = maka(["sessions"], data)
    assert listed.returncode == 0, listed.stderr
    assert "schema_upgrade_required" not in listed.stderr
    assert "sess-a" in listed.stdout and "sess-c" in listed.stdout, "the old sessions are kept"
