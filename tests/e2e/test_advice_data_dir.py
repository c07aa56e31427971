"""A command Maka suggests carries the data folder the command was given (docs/design/cli.md,
"Commands Maka suggests"): a session crashed with ``maka --data-dir "it's data" run ...`` (a
relative folder, with a space and a quote in its name) is advised with ``maka --data-dir
'/abs/it'"'"'s data' plan S``, and that command, pasted as printed (``shlex.split``), finds the
session from the same folder and from another one. The same folder given through
``MAKA_DATA_DIR``, which a pasted command inherits, adds nothing. Real ``maka``, real store."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_settle_cli import FLAG, SCRIPT  # the counting turn and the flag
from tests.helpers.maka_process import maka_executable, start_main
from tests.helpers.maka_run import committed_runs, scripted_env, write_script

pytestmark = pytest.mark.e2e

DATA = "it's data"
"""The data folder, relative to ``here``: a space and a quote, so the suggestion must quote it."""


class Folders:
    def __init__(self, tmp_path: Path, data: str = DATA) -> None:
        self.here = tmp_path / "here"
        self.elsewhere = tmp_path / "elsewhere"
        self.work = tmp_path / "work"
        for folder in (self.here, self.elsewhere, self.work):
            folder.mkdir()
        self.given = data
        self.data = self.here / data
        self.env = {**scripted_env(write_script(tmp_path / "script.json", SCRIPT[:1])), **FLAG}

    def maka(
        self, argv: list[str], cwd: Path, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` as typed (``maka`` first), run from ``cwd`` with no MAKA_DATA_DIR unless
        ``env`` names one."""
        assert argv[0] == "maka", argv
        environment = {
            key: value
            for key, value in os.environ.items()
            if key not in ("MAKA_DATA_DIR", "MAKA_FAILPOINT", "MAKA_PROVIDER")
        }
        environment.update({"QT_QPA_PLATFORM": "offscreen", **self.env, **(env or {})})
        return subprocess.run(
            [*maka_executable(), *argv[1:]],
            cwd=cwd,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def crash_inside_bash(self) -> str:
        """A ``bash`` call killed inside its command: the run is left marked running, its
        outcome unknown. The session's id."""
        argv = ["maka", "--data-dir", self.given, "run", "--cwd", str(self.work)]
        crashed = self.maka(
            [*argv, "--permission-mode", "auto", "count once"],
            self.here,
            {"MAKA_FAILPOINT": "P4"},
        )
        assert crashed.returncode == -9, crashed.stderr
        return committed_runs(self.data)[0][0].session_id


def _suggested(text: str, pattern: str) -> list[str]:
    """The command ``pattern``'s group 1 finds in ``text``, split as a shell splits it."""
    found = re.search(pattern, text)
    assert found is not None, text
    return shlex.split(found.group(1))


def test_a_pasted_suggestion_finds_the_session_from_any_folder(tmp_path: Path) -> None:
    folders = Folders(tmp_path)
    session = folders.crash_inside_bash()
    given = ["--data-dir", str(folders.data)]  # absolute, quoted by the suggestion

    # The option after the command (as the user may type it), the folder relative.
    shown = folders.maka(["maka", "timeline", "--data-dir", DATA, session], folders.here)
    assert shown.returncode == 0, shown.stderr
    plan = _suggested(shown.stdout, r"(maka .*?) repairs it now")
    assert plan == ["maka", *given, "plan", session]
    assert shlex.quote(str(folders.data)) in shown.stdout
    # Its --json twin: doctor's note words the same command.
    doctor = folders.maka(["maka", "--data-dir", DATA, "doctor", "--json"], folders.here)
    (note,) = [n for n in json.loads(doctor.stdout)["notes"] if n["code"] == "run_awaiting_repair"]
    assert _suggested(note["message"], r"(maka .*?) ends it as interrupted") == plan

    for cwd in (folders.here, folders.elsewhere):
        planned = folders.maka(plan, cwd)
        assert planned.returncode == 3, planned.stdout + planned.stderr  # parked, found
        assert "dangling_tool_state" in planned.stdout
        assert "session_not_found" not in planned.stderr
    assert not (folders.elsewhere / DATA).exists()

    # Every suggestion of the park carries the folder; the settle one, run from elsewhere,
    # records the answer in the same data folder.
    settle = _suggested(planned.stdout, r"on the record: (maka .*? c1) --ran \(or --not-run\)")
    assert settle == ["maka", *given, "settle", session, "c1"]
    settled = folders.maka([*settle, "--ran"], folders.elsewhere)
    assert settled.returncode == 0, settled.stdout + settled.stderr
    resume = _suggested(settled.stdout, r"Safe resume can now continue: (.*)")
    assert resume == ["maka", *given, "resume", session]
    resumed = folders.maka([*resume, "--permission-mode", "auto"], folders.elsewhere)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Counted once." in resumed.stdout
    assert len(committed_runs(folders.data)) == 2  # the continuation, in the same folder


def test_a_data_folder_from_the_environment_adds_nothing(tmp_path: Path) -> None:
    folders = Folders(tmp_path)
    session = folders.crash_inside_bash()
    through_env = {"MAKA_DATA_DIR": DATA}
    planned = folders.maka(["maka", "plan", session], folders.here, through_env)
    assert planned.returncode == 3, planned.stdout + planned.stderr
    assert f"on the record: maka settle {session} c1 --ran" in planned.stdout
    assert "--data-dir" not in planned.stdout
    # Nor does the per-user default (no folder given at all): the session is not there.
    listed = folders.maka(
        ["maka", "sessions"],
        folders.here,
        {"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "xdg")},
    )
    assert listed.returncode == 0, listed.stderr
    assert "--data-dir" not in listed.stdout
    assert "maka run --cwd DIR" in listed.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="terminal clients attach over Unix sockets")
@pytest.mark.parametrize("host_given", ["flag", "environment"])
def test_a_host_words_what_it_sends_a_terminal_as_the_terminal_would_alone(
    tmp_path: Path, host_given: str
) -> None:
    """A host answers an attached terminal's ``maka plan`` in the terminal's words: a terminal
    given ``--data-dir`` gets suggestions naming that folder, whatever the host was given (one
    whose folder came from ``MAKA_DATA_DIR`` would have pasted a command opening the default
    folder); one that found the folder through ``MAKA_DATA_DIR`` gets none, as alone."""
    folders = Folders(tmp_path, "data")  # (the helper reads the host's socket path unquoted)
    session = folders.crash_inside_bash()
    flag = ("--data-dir", str(folders.data)) if host_given == "flag" else ()
    host = start_main(folders.data, folders.env, "host", *flag)  # (MAKA_DATA_DIR set too)
    try:
        host.wait_ready()
        given = folders.maka(
            ["maka", "--data-dir", str(folders.data), "plan", session], folders.elsewhere
        )
        inherited = folders.maka(
            ["maka", "plan", session], folders.elsewhere, {"MAKA_DATA_DIR": str(folders.data)}
        )
        assert host.process.poll() is None, host.stderr()
    finally:
        host.stop()
    for served in (given, inherited):
        assert served.returncode == 3, served.stdout + served.stderr
        assert "[store_locked]" not in served.stderr  # (served by the host, not read alone)
    pattern = r"on the record: (maka .*? c1) --ran \(or --not-run\)"
    settle = _suggested(given.stdout, pattern)
    assert settle == ["maka", "--data-dir", str(folders.data), "settle", session, "c1"]
    assert _suggested(inherited.stdout, pattern) == ["maka", "settle", session, "c1"]


@pytest.mark.parametrize("host_given", ["flag", "environment"])
def test_a_terminal_s_turn_through_a_host_is_worded_as_the_terminal_would(
    tmp_path: Path, host_given: str
) -> None:
    """A terminal's ``maka run`` reaches its turn through a lookup on the host's query pool
    and a callback on its event loop: what the turn says (here the refusal of a session whose
    folder moved, naming ``maka sessions relocate``) is worded as the terminal would alone, as
    ``maka plan`` is."""
    folders = Folders(tmp_path, "data")
    session = folders.crash_inside_bash()
    folders.work.rename(tmp_path / "moved")
    flag = ("--data-dir", str(folders.data)) if host_given == "flag" else ()
    quiet = {key: value for key, value in folders.env.items() if key not in FLAG}  # no auto-resume
    host = start_main(folders.data, quiet, "host", *flag)
    try:
        host.wait_ready()
        run = ["run", "--session", session, "--permission-mode", "auto", "again"]
        given = folders.maka(["maka", "--data-dir", str(folders.data), *run], folders.elsewhere)
        inherited = folders.maka(
            ["maka", *run], folders.elsewhere, {"MAKA_DATA_DIR": str(folders.data)}
        )
        assert host.process.poll() is None, host.stderr()
    finally:
        host.stop()
    pattern = r"\((maka .*?sessions relocate \S+) NEW_FOLDER"
    assert _suggested(given.stderr, pattern) == [
        "maka", "--data-dir", str(folders.data), "sessions", "relocate", session,
    ]  # fmt: skip
    assert _suggested(inherited.stderr, pattern) == ["maka", "sessions", "relocate", session]
