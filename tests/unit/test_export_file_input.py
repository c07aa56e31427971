"""What ``maka import`` reads before it touches a data directory: the file, a bounded line at a
time (``read_export_file``); the session and run folders, absolute only (``parse_export``); and,
when the session is already here, which of its title and folder the stored session kept."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from runtime.ledger.codes import TransferCode
from runtime.ledger.store_ports import SessionRecord
from storage.ledger.ledger_store import open_store
from storage.sessions.session_export import (
    MAX_LINE_BYTES,
    TransferError,
    parse_export,
    read_export_file,
)
from storage.sessions.session_import import KeptValue
from tests.helpers.ledger_builders import RunIds, clean_ledger
from tests.helpers.store_workloads import add_run, commit_ledger

IDS = RunIds("sess-f", "inv-f", "run-f", "turn-f")


def _file(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "export.jsonl"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"0123456789\n",
        b"0123456789",
        b"0123456789\n0123456789\n0123456789",
        b"\n\n\n0123456789\n" * 7,
    ],
)
def test_lines_up_to_the_limit_are_read_whole(tmp_path: Path, data: bytes) -> None:
    assert read_export_file(_file(tmp_path, data), max_line=10) == data


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"01234567890", 1),
        (b"01234567890\n", 1),
        (b"0123456789\n01234567890\n", 2),
        (b"0\n1\n2\n" + b"x" * 25, 4),
        (b"0\n" * 9 + b"x" * 11 + b"\n0\n", 10),
        (b"\0" * 1000, 1),
    ],
)
def test_a_longer_line_is_refused_with_its_number(tmp_path: Path, data: bytes, line: int) -> None:
    with pytest.raises(TransferError) as caught:
        read_export_file(_file(tmp_path, data), max_line=10)
    assert caught.value.code == TransferCode.IMPORT_LINE_INVALID
    assert caught.value.line == line
    assert f"line {line} is longer than 10 bytes" in caught.value.message


def test_the_limit_is_64_mib_and_said_so(tmp_path: Path) -> None:
    """At the real limit (a sparse file: no disk written): the line of the limit's length is
    read; one byte more is refused, in MiB."""
    path = tmp_path / "big.jsonl"
    with path.open("wb") as file:
        file.truncate(MAX_LINE_BYTES)
    assert len(read_export_file(path)) == MAX_LINE_BYTES
    with path.open("ab") as file:
        file.write(b"\0")
    with pytest.raises(TransferError) as caught:
        read_export_file(path)
    assert MAX_LINE_BYTES == 64 << 20
    assert "line 1 is longer than 64 MiB" in caught.value.message


def test_a_device_is_refused_before_it_is_read() -> None:
    with pytest.raises(TransferError) as caught:
        read_export_file(Path(os.devnull))
    assert caught.value.code == TransferCode.IMPORT_FILE_UNREADABLE
    assert "it is a device" in caught.value.message


def test_a_folder_is_named_as_one_not_with_the_systems_error(tmp_path: Path) -> None:
    with pytest.raises(TransferError) as caught:
        read_export_file(tmp_path)
    assert caught.value.code == TransferCode.IMPORT_FILE_UNREADABLE
    assert caught.value.message.startswith("it is a folder, not an export file")


def _export(tmp_path: Path) -> bytes:
    with open_store(tmp_path / "origin") as store:
        add_run(store, IDS)
        commit_ledger(store, clean_ledger(2, ids=IDS))
        buffer = io.BytesIO()
        store.export_session(IDS.session_id, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("folder", ["relative/dir", "", ".", "work", "/work\x00x"])
@pytest.mark.parametrize("line", [1, 2])
def test_a_folder_that_is_not_absolute_is_refused(tmp_path: Path, folder: str, line: int) -> None:
    lines = _export(tmp_path).split(b"\n")
    assert b'"cwd":"/work"' in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(
        b'"cwd":"/work"', json.dumps({"cwd": folder})[1:-1].encode()
    )
    with pytest.raises(TransferError) as caught:
        parse_export(b"\n".join(lines))
    assert (caught.value.code, caught.value.line) == (TransferCode.IMPORT_LINE_INVALID, line)
    assert "must be an absolute path on this system" in caught.value.message


def test_the_stored_title_and_folder_are_kept_and_reported(tmp_path: Path) -> None:
    data = _export(tmp_path)
    with open_store(tmp_path / "copy") as copy:
        assert copy.import_session(data).kept == ()
        copy.rename_session(IDS.session_id, "Renamed")
        assert copy.import_session(data).kept == (KeptValue("title", "Renamed", "a session"),)
        copy.relocate_session(IDS.session_id, "/moved")
        report = copy.import_session(data)
        assert report.kept == (
            KeptValue("title", "Renamed", "a session"),
            KeptValue("cwd", "/moved", "/work"),
        )
        assert report.events_created == 0
        assert copy.get_session(IDS.session_id) == SessionRecord(
            IDS.session_id, "/moved", "Renamed", 1
        )


@pytest.mark.parametrize(
    "bad",
    ["../../etc/evil", "a/b", ".hidden", "ends.", "x.lock", "a..b", "tab\tid", "", "é", "a:b"],
)
@pytest.mark.parametrize("key", ["sessionId", "runId"])
def test_an_id_maka_would_not_make_is_refused(tmp_path: Path, key: str, bad: str) -> None:
    """A session's and a run's ids name its snapshots in the checkpoint store (a ref's
    parts) and its rows in every list: one from a file must be one Maka makes."""
    data = _export(tmp_path)
    old = {"sessionId": IDS.session_id, "runId": IDS.run_id}[key]
    field = f'"{key}":"{old}"'.encode()
    assert field in data
    with pytest.raises(TransferError) as caught:
        parse_export(data.replace(field, json.dumps({key: bad})[1:-1].encode()))
    assert caught.value.code == TransferCode.IMPORT_LINE_INVALID
    assert "nothing was imported" in caught.value.message or "bad" in caught.value.message
    with open_store(tmp_path / "copy") as copy:
        with pytest.raises(TransferError):
            copy.import_session(data.replace(field, json.dumps({key: bad})[1:-1].encode()))
        assert copy.list_sessions() == []


@pytest.mark.parametrize("title", ["two\nlines", "cr\rline", "sep\u2028line", "\x0bx"])
def test_a_title_of_more_than_one_line_is_refused(tmp_path: Path, title: str) -> None:
    data = _export(tmp_path)
    first, rest = data.split(b"\n", 1)
    value = json.loads(first)
    value["title"] = title
    with pytest.raises(TransferError) as caught:
        parse_export(json.dumps(value).encode() + b"\n" + rest)
    assert (caught.value.code, caught.value.line) == (TransferCode.IMPORT_LINE_INVALID, 1)
    assert "more than one line" in caught.value.message


def test_a_title_with_other_characters_a_message_can_hold_is_kept(tmp_path: Path) -> None:
    """A title Maka makes is the first line of a message: a tab or an escape character may be
    in it (the terminal shows those by name), and a round trip keeps it."""
    data = _export(tmp_path)
    first, rest = data.split(b"\n", 1)
    value = json.loads(first)
    value["title"] = "a\ttab and \x1b[31m"
    assert parse_export(json.dumps(value).encode() + b"\n" + rest).session.title == value["title"]
