"""A terminal's look for the running host: nothing listening means no host (the command reads the
folder itself); the terminal token is read only from a private file of this user; and the rows of
``maka sessions`` cross the wire unchanged, key for key."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.bridge_contract import SessionsOverviewedPush, encode_frame, parse_frame_payload
from app.host.host_client import _read_token, attach
from app.host.ipc_endpoint import (
    prepare_endpoint,
    publish_terminal_token,
    release_endpoint,
    terminal_token_path,
)
from app.host.session_rows import rows_from_wire, session_row, wire_rows
from runtime.agent.session_overview import SessionOverview
from runtime.ledger.branch_facts import BRANCH_START_V1, branch_record
from runtime.ledger.store_ports import RunStatus, SessionRecord

TOKEN = "k" * 43


def test_no_socket_and_a_socket_nobody_listens_on_are_no_host(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    assert attach(data) is None
    endpoint = prepare_endpoint(data, environ={})
    publish_terminal_token(data, TOKEN)
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(endpoint)  # a killed host's socket file: bound, nobody listening
    left.close()
    assert attach(data) is None
    release_endpoint(data, endpoint)
    assert not os.path.exists(terminal_token_path(data))


def test_the_token_is_read_only_from_a_private_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    prepare_endpoint(data, environ={})
    path = terminal_token_path(data)
    assert _read_token(data) is None
    publish_terminal_token(data, TOKEN)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert _read_token(data) == TOKEN
    os.chmod(path, 0o644)
    assert _read_token(data) is None
    os.unlink(path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(TOKEN)
    os.chmod(elsewhere, 0o600)
    os.symlink(elsewhere, path)
    assert _read_token(data) is None


_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40).filter(
    lambda t: bool(t.strip())
)


_ids = st.from_regex(r"[a-z0-9_-]{1,40}", fullmatch=True)
_BRANCH = branch_record(
    {
        "protocol": BRANCH_START_V1,
        "sessionId": "session_new",
        "source": {
            "sessionId": "session_src",
            "runId": "run-1",
            "highWater": 3,
            "prefixDigest": "sha256:" + "a" * 64,
            "boundaryEventId": "evt-3",
        },
        "snapshot": {"checkpointRef": "refs/maka/session_src/run-1/1"},
        "currentFiles": False,
        "workspacePath": "/copy",
    },
    5,
)

_overviews = st.builds(
    SessionOverview,
    session=st.builds(
        SessionRecord,
        session_id=st.from_regex(r"[a-z0-9-]{1,40}", fullmatch=True),
        cwd=_text.map(lambda t: "/" + t.replace("\0", "")),
        title=_text,
        created_at=st.integers(min_value=0, max_value=2**53),
    ),
    last_run_status=st.none() | st.sampled_from(list(RunStatus)),
    failure_class=st.none() | st.sampled_from(["app_restarted", "provider_error"]),
    interrupted=st.booleans(),
    run_count=st.integers(min_value=0, max_value=10_000),
    resumable=st.booleans(),
    branched_from=st.none() | st.just(_BRANCH),
    branches=st.lists(st.tuples(_ids, _ids), max_size=3).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(overviews=st.lists(_overviews, max_size=5))
def test_rows_cross_the_wire_unchanged(overviews: list[SessionOverview]) -> None:
    sent = SessionsOverviewedPush(rows=wire_rows(overviews))
    received = parse_frame_payload(encode_frame(sent)[4:])
    assert isinstance(received, SessionsOverviewedPush)
    assert rows_from_wire(received.rows) == [session_row(o, unowned=False) for o in overviews]
