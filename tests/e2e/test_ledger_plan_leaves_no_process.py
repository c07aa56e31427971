"""``maka ledger plan`` on a file of several megabytes (large enough that the command once decoded
it on two processes; its recovery facts send it to the general path): when the real command
ends, no process of it is left. The probe makes itself the subreaper of the command's processes
(Linux ``PR_SET_CHILD_SUBREAPER``), so a process the command did not wait for, still running or
ended, becomes the probe's child when the command exits and is seen by ``waitpid``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.ledger_builders import ENDINGS, clean_ledger, to_jsonl
from tests.helpers.maka_process import maka_executable

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER"),
]

SUBREAPER_PROBE = """
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    raise SystemExit("prctl failed")
command = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out, err = command.communicate(timeout=600)
left = []
while True:
    try:
        pid, status = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    left.append(pid)
print(json.dumps({"code": command.returncode, "out": out.decode(), "err": err.decode(),
                  "left": left}))
"""


@pytest.mark.parametrize("form", [[], ["--json"]])
def test_no_process_of_the_plan_outlives_it(tmp_path: Path, form: list[str]) -> None:
    ledger = tmp_path / "large.jsonl"
    ledger.write_bytes(to_jsonl(clean_ledger(len(ENDINGS) * 800)))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SUBREAPER_PROBE,
            *maka_executable(),
            "ledger",
            "plan",
            str(ledger),
            *form,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["code"] == 0, report["err"]
    assert report["out"], "the plan printed nothing"
    assert report["left"] == [], "processes of the command outlived it"
