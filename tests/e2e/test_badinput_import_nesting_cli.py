"""``maka import --json`` of a file nested too deep for the JSON decoder: exit 2 with one JSON
error document (``import_line_invalid``), no traceback, no data folder created."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.maka_process import maka_executable

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    "line",
    [
        "[" * 3000 + "]" * 3000,
        '{"a":' * 3000 + "1" + "}" * 3000,
        '{"kind":"maka.session.v1","title":' + "[" * 3000 + "]" * 3000 + "}",
    ],
    ids=["arrays", "objects", "record"],
)
def test_a_deep_file_is_refused_as_one_json_error(tmp_path: Path, line: str) -> None:
    data_dir = tmp_path / "data"
    source = tmp_path / "deep.jsonl"
    source.write_text(line + "\n")
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    env["MAKA_DATA_DIR"] = str(data_dir)
    result = subprocess.run(
        [*maka_executable(), "import", "--json", str(source)],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, stderr
    assert "Traceback" not in stderr and "RecursionError" not in stderr
    assert json.loads(result.stdout)["error"]["code"] == "import_line_invalid"
    assert "maka: error [import_line_invalid]: line 1:" in stderr
    assert not data_dir.exists()
