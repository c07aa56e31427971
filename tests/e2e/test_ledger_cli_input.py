"""The real ``maka ledger check|scan|plan`` on input that is not a clean ledger (docs/design/cli.md,
"Ledger tools"): ``check`` lists an undecodable line as a problem (line number and code) and exits
1; ``scan`` and ``plan`` refuse it with exit 2 and ``maka: error [code]: FILE: line N...``; a file
that cannot be opened exits 2 with a coded error; an export file's own records are named as
such; ``--data-dir`` is accepted (and ignored) wherever it appears."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.ledger_builders import RunIds, clean_ledger, to_jsonl
from tests.helpers.maka_process import maka_executable
from tests.helpers.store_workloads import commit_ledger, store_with_runs

pytestmark = pytest.mark.e2e

CODED_ERROR = re.compile(r"^maka: error \[[a-z_]+\]: \S")
EXPORT_HINT = "not a RuntimeEvent: ledger tools read one run's events; `maka import` reads export"


def maka(
    *args: str | Path, data_dir: Path | None = None, check_data_dir: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the real command. Unless told otherwise, ``MAKA_DATA_DIR`` points at a directory
    that must still not exist afterwards: the ledger tools never touch a database."""
    env = {key: value for key, value in os.environ.items() if key != "MAKA_FAILPOINT"}
    if data_dir is not None:
        env["MAKA_DATA_DIR"] = str(data_dir)
    done = subprocess.run(
        [*maka_executable(), *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    if data_dir is not None and check_data_dir:
        assert not data_dir.exists()
    return done


def assert_coded(stderr: str) -> None:
    """Every line on stderr is ``maka: error [code]: message`` (an error without a code is a
    defect)."""
    lines = stderr.splitlines()
    assert lines, "an error was expected on stderr"
    for line in lines:
        assert CODED_ERROR.match(line), line


def ledger_lines() -> list[bytes]:
    """A clean ledger's lines (each without its newline)."""
    return to_jsonl(clean_ledger(3)).split(b"\n")[:-1]


def joined(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def torn(tmp_path: Path) -> tuple[Path, int, str]:
    lines = ledger_lines()
    path = tmp_path / "torn.jsonl"
    path.write_bytes(joined(lines)[:-25])  # the last line lost its end and its newline
    return path, len(lines), "torn_last_line"


def not_json(tmp_path: Path) -> tuple[Path, int, str]:
    lines = ledger_lines()
    lines[1] = b"this is not json"
    path = tmp_path / "not-json.jsonl"
    path.write_bytes(joined(lines))
    return path, 2, "json_invalid"


def not_utf8(tmp_path: Path) -> tuple[Path, int, str]:
    lines = ledger_lines()
    lines[2] = lines[2].replace(b'"', b'"\xff\xfe', 1)
    path = tmp_path / "not-utf8.jsonl"
    path.write_bytes(joined(lines))
    return path, 3, "json_invalid"


def deep_with_kind(tmp_path: Path) -> tuple[Path, int, str]:
    """Nested past the JSON decoder's depth, with ``"kind"`` in it: the look for an export
    record hit the decoder's recursion limit and every ledger tool printed a traceback."""
    lines = ledger_lines()
    lines[1] = b'{"kind":' + b"[" * 5000 + b"]" * 5000 + b"}"
    path = tmp_path / "deep-kind.jsonl"
    path.write_bytes(joined(lines))
    return path, 2, "json_invalid"


BAD_INPUTS = [torn, not_json, not_utf8, deep_with_kind]


# ---- lines that do not decode -----------------------------------------------------------------


@pytest.mark.parametrize("bad_input", BAD_INPUTS, ids=lambda make: make.__name__)
def test_check_lists_an_undecodable_line_and_exits_one(tmp_path: Path, bad_input: object) -> None:
    assert callable(bad_input)
    path, line, code = bad_input(tmp_path)
    data_dir = tmp_path / "no-data"

    text = maka("ledger", "check", path, data_dir=data_dir)
    assert text.returncode == 1, text.stderr
    assert text.stderr == ""
    listed = [row for row in text.stdout.splitlines() if row.startswith(f"{path}:{line}: ")]
    assert len(listed) == 1 and listed[0].startswith(f"{path}:{line}: {code}: ")
    assert "clean ledger" not in text.stdout

    as_json = maka("ledger", "check", path, "--json", data_dir=data_dir)
    assert as_json.returncode == 1, as_json.stderr
    assert as_json.stderr == ""
    document = json.loads(as_json.stdout)
    assert (document["clean"], document["readable"]) == (False, False)
    assert [(p["line"], p["code"]) for p in document["problems"]] == [(line, code)]


@pytest.mark.parametrize("bad_input", BAD_INPUTS, ids=lambda make: make.__name__)
def test_the_three_tools_agree_on_an_undecodable_line(tmp_path: Path, bad_input: object) -> None:
    """``check`` reports the line (exit 1); ``scan`` and ``plan`` refuse the file (exit 2) with
    the same code and line, in the coded error form."""
    assert callable(bad_input)
    path, line, code = bad_input(tmp_path)
    assert maka("ledger", "check", path, "--json").returncode == 1
    for command in ("scan", "plan"):
        done = maka("ledger", command, path, "--json")
        assert done.returncode == 2, (command, done.stderr)
        assert json.loads(done.stdout)["error"]["code"] == code  # the one --json document
        assert_coded(done.stderr)
        assert done.stderr.startswith(f"maka: error [{code}]: {path}: line {line}: ")


def test_a_late_bad_line_in_a_large_file_is_a_problem_of_check(tmp_path: Path) -> None:
    lines = to_jsonl(clean_ledger(3_000)).split(b"\n")[:-1]
    bad = len(lines) - 5
    lines[bad - 1] = lines[bad - 1][:-1]  # cut the closing brace: not JSON any more
    path = tmp_path / "large.jsonl"
    path.write_bytes(joined(lines))
    done = maka("ledger", "check", path, "--json")
    assert done.returncode == 1 and done.stderr == ""
    problems = json.loads(done.stdout)["problems"]
    assert [(p["line"], p["code"]) for p in problems] == [(bad, "json_invalid")]
    plan = maka("ledger", "plan", path, "--json")
    assert plan.returncode == 2
    assert plan.stderr.startswith(f"maka: error [json_invalid]: {path}: line {bad}: ")


# ---- files that cannot be opened --------------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "scan", "plan"])
@pytest.mark.parametrize("what", ["missing", "directory"])
def test_a_file_that_cannot_be_opened_exits_two_with_a_code(
    tmp_path: Path, command: str, what: str
) -> None:
    path = tmp_path / "absent.jsonl"
    if what == "directory":
        path = tmp_path / "a-directory.jsonl"
        path.mkdir()
    # --data-dir after the subcommand: rejected by the parser (a usage error) before the fix.
    done = maka("ledger", command, path, "--data-dir", tmp_path / "no-data")
    assert done.returncode == 2
    assert done.stdout == ""
    assert_coded(done.stderr)
    assert done.stderr.startswith("maka: error [ledger_file_unreadable]: ")
    assert str(path) in done.stderr
    assert not (tmp_path / "no-data").exists()


@pytest.mark.parametrize("command", ["check", "scan", "plan"])
def test_a_device_is_refused_before_it_is_read(tmp_path: Path, command: str) -> None:
    """``maka ledger check /dev/zero`` read the device for ever, its memory growing without
    bound: a device is no ledger file, refused before anything is read."""
    done = maka("ledger", command, "/dev/zero", data_dir=tmp_path / "no-data")
    assert done.returncode == 2, done.stderr
    assert_coded(done.stderr)
    assert "cannot read /dev/zero: it is a device, not a ledger file" in done.stderr
    # A folder and a socket, which cannot even be opened, are named as what they are too.
    import socket

    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        for path, what in ((tmp_path, "a folder"), (tmp_path / "sock", "a socket")):
            done = maka("ledger", command, path, data_dir=tmp_path / "no-data")
            assert done.returncode == 2, done.stderr
            assert f"cannot read {path}: it is {what}, not a ledger file" in done.stderr


def test_plan_stops_at_a_line_longer_than_any_ledger_line(tmp_path: Path) -> None:
    """The streaming plan reads a block at a time: a line of 64 MiB and more (a file of zeros,
    a binary) stops it with a code instead of being held whole."""
    path = tmp_path / "zeros.jsonl"
    with path.open("wb") as file:  # sparse: no disk used
        file.truncate((64 << 20) + (8 << 20))
    done = maka("ledger", "plan", path, data_dir=tmp_path / "no-data")
    assert done.returncode == 2, done.stderr
    assert_coded(done.stderr)
    assert "line 1 is longer than 64 MiB" in done.stderr


def test_plan_stops_at_a_long_line_that_ends_within_a_block(tmp_path: Path) -> None:
    """A line a little longer than 64 MiB whose newline falls in the block that took it past
    the limit: only the unfinished rest was measured, so it was decoded (about 900 MB held)."""
    path = tmp_path / "long.jsonl"
    with path.open("wb") as file:  # sparse zeros, then a newline and a second line
        file.seek((64 << 20) + (1 << 20))
        file.write(b"\n{}\n")
    done = maka("ledger", "plan", path, data_dir=tmp_path / "no-data")
    assert done.returncode == 2, done.stderr
    assert_coded(done.stderr)
    assert "line 1 is longer than 64 MiB" in done.stderr, done.stderr


# ---- export files -----------------------------------------------------------------------------


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    """A file written by the real ``maka export``: a session line, a run header, the events."""
    ids = RunIds()
    data_dir = tmp_path / "data"
    with store_with_runs(data_dir, ids) as store:
        commit_ledger(store, clean_ledger(2, ids=ids))
    path = tmp_path / "session.jsonl"
    exported = maka("export", ids.session_id, "-o", path, data_dir=data_dir, check_data_dir=False)
    assert exported.returncode == 0, exported.stderr
    lines = path.read_bytes().split(b"\n")
    assert b'"kind":"maka.session.v1"' in lines[0]
    assert b'"kind":"maka.run_header.v1"' in lines[1]
    return path


def test_check_names_the_records_of_an_export_file(export_file: Path) -> None:
    done = maka("ledger", "check", export_file, "--json")
    assert done.returncode == 1 and done.stderr == ""
    problems = json.loads(done.stdout)["problems"]
    assert [(p["line"], p["code"]) for p in problems] == [
        (1, "event_schema_invalid"),
        (2, "event_schema_invalid"),
    ]
    assert problems[0]["message"] == (
        "line 1 is a session export record (maka.session.v1), " + EXPORT_HINT + " files"
    )
    assert problems[1]["message"].startswith(
        "line 2 is a run header export record (maka.run_header.v1), " + EXPORT_HINT
    )
    assert all("field" not in problem for problem in problems)

    text = maka("ledger", "check", export_file)
    assert text.returncode == 1
    assert (
        f"{export_file}:1: event_schema_invalid: line 1 is a session export record" in text.stdout
    )
    assert "required key" not in text.stdout


@pytest.mark.parametrize("command", ["scan", "plan"])
def test_scan_and_plan_name_the_session_record_of_an_export_file(
    export_file: Path, command: str
) -> None:
    done = maka("ledger", command, export_file, "--json")
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "event_schema_invalid"
    assert_coded(done.stderr)
    assert done.stderr == (
        f"maka: error [event_schema_invalid]: {export_file}: line 1 is a session export record "
        f"(maka.session.v1), {EXPORT_HINT} files\n"
    )


def test_a_run_header_among_events_is_named_with_its_line(tmp_path: Path) -> None:
    lines = ledger_lines()
    header = {"kind": "maka.run_header.v1", "runId": "run-1", "sessionId": "sess-1"}
    lines.insert(3, json.dumps(header).encode())
    path = tmp_path / "with-header.jsonl"
    path.write_bytes(joined(lines))
    done = maka("ledger", "plan", path, "--json")
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"maka: error [event_schema_invalid]: {path}: line 4 is a run header export record "
        "(maka.run_header.v1), not a RuntimeEvent"
    )


# ---- --data-dir -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("plan", ["plan", "--data-dir", "{dir}", "{file}", "--json"]),
        ("plan", ["plan", "{file}", "--json", "--data-dir={dir}"]),
        ("plan", ["plan", "{file}", "--expected-high-water", "1", "--data-dir", "{dir}"]),
        ("scan", ["scan", "{file}", "--data-dir", "{dir}", "--json"]),
        ("check", ["check", "--data-dir", "{dir}", "{file}"]),
        ("check", ["check", "{file}", "--json", "--data-dir", "{dir}"]),
    ],
)
def test_data_dir_is_accepted_after_the_subcommand_and_ignored(
    tmp_path: Path, command: str, words: list[str]
) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(to_jsonl(clean_ledger(3)))
    data_dir = tmp_path / "no-data"
    args = [word.format(dir=data_dir, file=path) for word in words]
    without = [arg for arg in args if not arg.startswith("--data-dir") and arg != str(data_dir)]
    done = maka("ledger", *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == maka("ledger", *without).stdout
    assert not data_dir.exists()


@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("maka.checkpoints.v1", "the export's record of its snapshots file"),
        ("maka.branch_start.v1", "a branch's start export record"),
    ],
)
def test_check_names_every_record_an_export_writes(tmp_path: Path, kind: str, named: str) -> None:
    """The snapshots record (an export's last line) and a branch's start record were called
    events missing their ``id``."""
    lines = ledger_lines()
    lines.append(json.dumps({"kind": kind, "x": 1}).encode())
    path = tmp_path / "export-like.jsonl"
    path.write_bytes(joined(lines))
    done = maka("ledger", "check", path, "--json")
    [problem] = json.loads(done.stdout)["problems"]
    assert problem["message"].startswith(f"line {len(lines)} is {named} ({kind}), "), problem
    assert "required key" not in done.stdout
