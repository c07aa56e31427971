"""``maka timeline S --run ""`` (an unset shell variable) said ``run_not_found: session S has
no run `` with nothing after "run". An empty run id names no run: it is refused as
``invalid_argument``, as ``maka branch --at ""`` is, before anything is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import cli
from app.cli_errors import EXIT_USAGE
from runtime.ledger.store_ports import SessionRecord
from storage.ledger.ledger_store import open_store


@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_run_id_is_refused_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    data_dir = tmp_path / "data"
    with open_store(data_dir) as store:
        store.create_session(SessionRecord("s1", str(tmp_path), "t", 1))
    args = ["timeline", "--data-dir", str(data_dir), "s1", "--run", given]
    assert cli.main(args) == EXIT_USAGE
    said = capsys.readouterr()
    assert said.out == ""
    assert "invalid_argument" in said.err, said.err
    assert "the run id (--run) is empty; nothing was changed" in said.err, said.err
    assert "run_not_found" not in said.err

    assert cli.main([*args, "--json"]) == EXIT_USAGE
    document = json.loads(capsys.readouterr().out)
    assert document["error"]["code"] == "invalid_argument", document
