"""The bridge contract: every kind round-trips; anything off-contract raises a coded error."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import bridge_contract as bc
from app.bridge_contract import BridgeErrorCode, BridgeProtocolError, MessageKind

TOKEN = "t" * 32

SAMPLES: list[bc.Message] = [
    bc.HelloRequest(token=TOKEN, protocol_version=bc.PROTOCOL_VERSION, correlation_id="c0"),
    bc.SessionsListRequest(correlation_id="c1"),
    bc.SessionsCreateRequest(cwd="/home/ann/project"),
    bc.SessionsOpenRequest(session_id="s1"),
    bc.TurnsSendRequest(session_id="s1", text="write hello.txt saying hi ✓"),
    bc.TurnsCancelRequest(session_id="s1"),
    bc.PermissionsAnswerRequest(
        session_id="s1", request_id="p1", decision=bc.PermissionDecision.DENY
    ),
    bc.ResumeLatestRequest(session_id="s1", correlation_id="r1"),
    bc.ToolsSettleRequest(
        session_id="s1", tool_call_id="c1", outcome=bc.AttestationChoice.RAN, note="checked"
    ),
    bc.SettingsGetRequest(),
    bc.SettingsUpdateRequest(
        provider=bc.ProviderChoice.OPENAI_COMPATIBLE,
        openai_base_url="http://localhost:11434/v1",
        openai_model="llama3",
        openai_api_key="sk-secret",
    ),
    bc.SettingsTestDatabaseRequest(database_url="postgresql://maka:****@db/maka"),
    bc.DatabaseTestedPush(
        ok=True, server_version="16.4", schema_version=2, program_schema_version=2
    ),
    bc.WindowActivateRequest(),
    bc.SessionsRelocateRequest(session_id="s1", cwd="/new/place", correlation_id="r7"),
    bc.SessionsRenameRequest(session_id="s1", title="Release checklist"),
    bc.SessionsRemoveRequest(session_id="s1", correlation_id="r8"),
    bc.SessionsExportRequest(session_id="s1", path="/tmp/s1.jsonl"),
    bc.HelloOkPush(host_state=bc.HostState.READY, safe_resume_enabled=True),
    bc.HelloRejectedPush(code="token_invalid", message="wrong token"),
    bc.SessionsListedPush(
        sessions=(
            bc.SessionSummary(session_id="s1", cwd="/p", title="First"),
            bc.SessionSummary(
                session_id="s2",
                cwd="/q",
                title="Second",
                last_run_status=bc.RunStatusValue.FAILED,
                interrupted=True,
                failure_class="app_restarted",
            ),
        )
    ),
    bc.SessionUpdatedPush(session=bc.SessionSummary(session_id="s1", cwd="/p", title="x")),
    bc.SessionOpenedPush(
        session_id="s1",
        omitted_earlier=3,
        items=(
            bc.UserMessageItem(item_id="i1", text="hi"),
            bc.ThinkingItem(item_id="i2", text="hmm"),
            bc.ToolCardItem(
                item_id="i3",
                tool_call_id="call-1",
                tool_name="write_file",
                args_summary='path="hello.txt"',
                status=bc.ToolCardStatus.INDETERMINATE,
                park_reason="dangling_tool_state",
            ),
            bc.AssistantMessageItem(item_id="i4", run_id="r1", text="done"),
            bc.NoticeItem(item_id="i5", level=bc.NoticeLevel.WARN, text="n", code="x_y"),
            bc.ContinuationMarkerItem(item_id="i6", run_id="r2", source_run_id="r1"),
        ),
    ),
    bc.TranscriptItemPush(
        session_id="s1",
        item=bc.ToolCardItem(
            item_id="i3",
            tool_call_id="call-1",
            tool_name="read_file",
            status=bc.ToolCardStatus.COMPLETED_AFTER_RECOVERY,
        ),
    ),
    bc.RunStatusPush(
        session_id="s1",
        run_id="r1",
        status=bc.RunStatusValue.FAILED,
        failure_class="app_restarted",
    ),
    bc.PermissionRequestedPush(session_id="s1", request_id="p1", tool_name="shell", summary="ls"),
    bc.ResumeStartedPush(session_id="s1", run_id="r2", turn_id="t2", correlation_id="r1"),
    bc.ResumeParkedPush(
        session_id="s1",
        rejection_reasons=("dangling_tool_state", "workspace_identity_mismatch"),
        diagnostics=(
            bc.ResumeDiagnostic(
                code="pending_tool_result",
                message="no result",
                tool_call_id="call-1",
                tool_name="write_file",
            ),
        ),
    ),
    bc.ResumeFailedPush(session_id="s1", code="host_draining", message="closing"),
    bc.ToolSettledPush(
        session_id="s1",
        tool_call_id="c1",
        recorded=False,
        code="operation_settled",
        resume_available=False,
    ),
    bc.HostStatePush(state=bc.HostState.RECOVERING, detail="3 of 10"),
    bc.SettingsCurrentPush(provider=bc.ProviderChoice.OFFLINE_DEMO, api_key_set=True),
    bc.ErrorPush(code="session_not_found", message="no such session"),
    bc.WindowShowPush(),
    bc.SessionRemovedPush(session_id="s1"),
    bc.SessionExportedPush(session_id="s1", path="/tmp/s1.jsonl", events=12),
    bc.ProcessesStopRequest(session_id="s1"),
    bc.ProcessesStoppedPush(session_id="s1", stopped=1, resume_available=False),
    bc.TimelineOpenRequest(session_id="s1"),
    bc.TimelineRowsRequest(
        session_id="s1",
        run_id="r1",
        start=0,
        count=500,
        filters=bc.TimelineRowFilter(status="unknown", tool="bash"),
    ),
    bc.TimelineEventRequest(session_id="s1", run_id="r1", event_id="e1"),
    bc.TimelineOpenedPush(
        session_id="s1",
        runs=(
            bc.TimelineRunHead(run_id="r1", depth=0, status="failed", row_count=2, event_count=3),
        ),
        plan=bc.TimelinePlan(
            disposition="park",
            rejection_reasons=("dangling_tool_state",),
            pins=(bc.TimelinePin(code="pending_tool_result", run_id="r1", seq=2),),
        ),
    ),
    bc.TimelinePagePush(
        session_id="s1",
        run_id="r1",
        start=0,
        total=1,
        rows=(
            bc.TimelineRowItem(
                seq=2,
                kind="tool",
                status="unknown",
                summary="bash: outcome unknown",
                tool_name="bash",
                tool_call_id="c1",
                entries=(
                    bc.TimelineEntryItem(
                        seq=2,
                        event_id="e2",
                        kind="tool_call",
                        lane="function_call",
                        status="ok",
                        ts=1,
                        summary="call bash",
                    ),
                ),
            ),
        ),
    ),
    bc.TimelineEventShownPush(session_id="s1", run_id="r1", event_id="e2", canonical_json="{}"),
    bc.HelloRequest(
        token=TOKEN,
        protocol_version=bc.PROTOCOL_VERSION,
        role=bc.ClientRole.TERMINAL,
        correlation_id="c9",
    ),
    bc.HelloOkPush(
        host_state=bc.HostState.READY,
        safe_resume_enabled=False,
        host_kind=bc.HostKind.HEADLESS,
        host_pid=4242,
    ),
    bc.SessionsOverviewRequest(correlation_id="o1"),
    bc.SessionsPlanRequest(session_id="s1", correlation_id="p1"),
    bc.SessionPlannedPush(
        session_id="s1",
        continues=False,
        summary=("Safe resume would not continue", "  - dangling_tool_state"),
        document='{"continues": false}',
    ),
    bc.SessionsOverviewedPush(
        rows=(
            bc.SessionRow(
                session_id="s1",
                cwd="/p",
                title="First",
                created_at=1,
                interrupted=True,
                run_count=2,
                folder_missing=False,
                resumable=True,
                last_run_status=bc.RunStatusValue.FAILED,
                failure_class="app_restarted",
            ),
        )
    ),
    bc.TimelineLocateRequest(
        session_id="s1",
        run_id="r1",
        seq=40_000,
        filters=bc.TimelineRowFilter(kind="tool", text="bash", only_problems=True),
    ),
    bc.TimelineLocatedPush(session_id="s1", run_id="r1", seq=40_000, position=12),
    bc.TurnsRunRequest(cwd="/w", text="go", permission_mode="ask", max_steps=5, correlation_id="r"),
    bc.TurnsResumeRequest(session_id="s1", permission_mode="deny", as_json=True),
    bc.TurnStartedPush(session_id="s1", cwd="/w", provider_label="demo", notes=("note: x",)),
    bc.TurnOutputPush(session_id="s1", text="[tool] bash ls\n", stream="stdout"),
    bc.TurnEndedPush(session_id="s1", run_id="r1", status=bc.RunStatusValue.COMPLETED),
    bc.ResumeEndedPush(session_id="s1", exit_code=3),
    bc.BranchOptionsRequest(session_id="s1", correlation_id="c20"),
    bc.BranchCreateRequest(session_id="s1", event_id="e7", to="/home/ann/fork", current_files=True),
    bc.BranchOptionsListedPush(
        session_id="s1",
        title="tidy the parser",
        cwd="/home/ann/project",
        default_folder="/home/ann/project-branch-1",
        options=(
            bc.BranchOptionItem(
                event_id="e7",
                run_id="r1",
                seq=3,
                kind="tool_result",
                ts=1,
                label="result of bash",
                snapshot_bound=True,
                snapshot_kept=False,
                tool_call_id="call-1",
            ),
        ),
    ),
    bc.BranchMadePush(
        session_id="s1", event_id="e7", new_session_id="s9", cwd="/home/ann/project-branch-1"
    ),
    bc.BranchRefusedPush(
        session_id="s1", event_id="e7", code="branch_snapshot_unavailable", message="none"
    ),
    bc.SessionOpenedPush(
        session_id="s9",
        items=(
            bc.BranchMarkerItem(
                item_id="branch:s10", branch_session_id="s10", boundary_event_id="e1"
            ),
        ),
        branched_from=bc.BranchOrigin(
            source_session_id="s1", boundary_event_id="e7", boundary_label="result of bash"
        ),
    ),
    bc.SessionsWatchRequest(session_id="s1", correlation_id="w1"),
    bc.TerminalCommandRequest(session_id="s1", command="branch", arguments="e7 /tmp/fork"),
    bc.SessionDriverPush(session_id="s1", driver="a terminal (maka run, pid 12)"),
    bc.PermissionClosedPush(
        session_id="s1",
        request_id="p1",
        decision=bc.PermissionDecision.ALLOW,
        answered_in="the terminal (maka tui, pid 12)",
    ),
    bc.TerminalTextPush(session_id="s1", text="you> hi", done=True, branched_to="s9"),
]


def test_a_terminal_says_its_command_in_hello_and_nothing_else() -> None:
    """``hello.command`` names a ``maka`` command from a closed list: anything else is refused
    as ``message_invalid`` (a client cannot name itself in words of its own)."""
    ok = {"kind": "hello", "token": TOKEN, "protocolVersion": 1, "role": "terminal"}
    parsed = bc.parse_frame_payload(json.dumps({**ok, "command": "tui"}).encode())
    assert isinstance(parsed, bc.HelloRequest) and parsed.command is bc.TerminalCommand.TUI
    bad = json.dumps({**ok, "command": "the desktop window"}).encode()
    assert _code(bad) is BridgeErrorCode.MESSAGE_INVALID
    assert {MessageKind.SESSIONS_WATCH, MessageKind.TERMINAL_COMMAND} <= bc.TERMINAL_ONLY_KINDS


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _code(payload: bytes, **kwargs: frozenset[MessageKind]) -> BridgeErrorCode:
    with pytest.raises(BridgeProtocolError) as info:
        bc.parse_frame_payload(payload, **kwargs)
    return info.value.code


def test_samples_cover_every_kind_and_the_kind_sets_partition_them() -> None:
    assert {m.kind for m in SAMPLES} == set(MessageKind)
    assert set(MessageKind) == bc.REQUEST_KINDS | bc.PUSH_KINDS
    assert not bc.REQUEST_KINDS & bc.PUSH_KINDS


def test_a_branch_request_is_bounded_and_strict() -> None:
    body = b'{"kind":"branch.create","sessionId":"s1","eventId":"e1","currentFiles":"yes"}'
    with pytest.raises(bc.BridgeProtocolError):
        bc.parse_frame_payload(body, accept=bc.REQUEST_KINDS)
    body = b'{"kind":"branch.create","sessionId":"s1","eventId":"e1","snapshot":"x"}'
    with pytest.raises(bc.BridgeProtocolError):
        bc.parse_frame_payload(body, accept=bc.REQUEST_KINDS)
    long_path = "/" + "a" * bc.MAX_PATH_CHARS
    with pytest.raises(ValueError):
        bc.BranchCreateRequest(session_id="s1", event_id="e1", to=long_path)
    # ``maka branch`` beside a host sends the window's own requests (as ``maka tui``'s /branch
    # already branched through ``terminal.command``); a window keeps them too
    assert {bc.MessageKind.BRANCH_OPTIONS, bc.MessageKind.BRANCH_CREATE} <= (
        bc.TERMINAL_REQUEST_KINDS - bc.TERMINAL_ONLY_KINDS
    )


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: str(m.kind))
def test_every_kind_round_trips_through_a_frame(message: bc.Message) -> None:
    frame = bc.encode_frame(message)
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    body = json.loads(frame[4:])
    assert body["kind"] == message.kind.value
    assert all("_" not in key for key in body), "wire names are camelCase"
    assert bc.parse_frame_payload(frame[4:]) == message
    reader = bc.FrameReader()
    assert reader.feed(frame) == [message]
    assert reader.buffered == 0


@pytest.mark.parametrize(
    "extra",
    [
        {"workspaceIdentity": "workspace:v1:8d0b6c1e-0000-4000-8000-000000000000"},
        {"sourceRunId": "r1"},
        {"runId": "r1"},
        {"turnId": "t1"},
        {"expectedRuntimeEventHighWater": 7},
        {"tools": ["read_file"]},
        {"backgroundOperationsSettled": True},
    ],
)
def test_resume_latest_carries_a_session_id_and_nothing_else(extra: dict[str, object]) -> None:
    body = {"kind": "sessions.resumeLatest", "sessionId": "s1", **extra}
    assert _code(json.dumps(body).encode()) is BridgeErrorCode.MESSAGE_INVALID
    reader = bc.FrameReader(accept=bc.REQUEST_KINDS)
    with pytest.raises(BridgeProtocolError):
        reader.feed(_frame(json.dumps(body).encode()))


def test_every_model_forbids_extra_fields() -> None:
    for message in SAMPLES:
        body = json.loads(bc.encode_frame(message)[4:])
        body["claimedFact"] = 1
        assert _code(json.dumps(body).encode()) is BridgeErrorCode.MESSAGE_INVALID


def test_snake_case_and_coerced_types_are_refused_on_the_wire() -> None:
    assert _code(b'{"kind":"sessions.open","session_id":"s1"}') is BridgeErrorCode.MESSAGE_INVALID
    hello = {"kind": "hello", "token": TOKEN, "protocolVersion": "1"}
    assert _code(json.dumps(hello).encode()) is BridgeErrorCode.MESSAGE_INVALID
    extra_in_item = {
        "kind": "transcript.item",
        "sessionId": "s1",
        "item": {"type": "user_message", "itemId": "i", "text": "x", "html": "<b>"},
    }
    assert _code(json.dumps(extra_in_item).encode()) is BridgeErrorCode.MESSAGE_INVALID


def test_bounds_are_enforced() -> None:
    too_long = {"kind": "turns.send", "sessionId": "s1", "text": "x" * (bc.MAX_TEXT_CHARS + 1)}
    assert _code(json.dumps(too_long).encode()) is BridgeErrorCode.MESSAGE_INVALID
    short_token = {"kind": "hello", "token": "abc", "protocolVersion": 1}
    assert _code(json.dumps(short_token).encode()) is BridgeErrorCode.MESSAGE_INVALID
    bad_code = {"kind": "error", "code": "Not A Code", "message": ""}
    assert _code(json.dumps(bad_code).encode()) is BridgeErrorCode.MESSAGE_INVALID
    empty_reasons = {"kind": "resume.parked", "sessionId": "s", "rejectionReasons": []}
    assert _code(json.dumps(empty_reasons).encode()) is BridgeErrorCode.MESSAGE_INVALID


@pytest.mark.parametrize(
    "payload",
    [b"", b"\xff\xfe\x00garbage", b"not json", b"[1,2]", b'"hello"', b"null", b"{"],
)
def test_garbage_is_frame_malformed(payload: bytes) -> None:
    assert _code(payload) is BridgeErrorCode.FRAME_MALFORMED


@pytest.mark.parametrize(
    "payload", [b'{"kind":"sessions.delete","sessionId":"s"}', b'{"sessionId":"s"}', b'{"kind":1}']
)
def test_unknown_or_missing_kind(payload: bytes) -> None:
    assert _code(payload) is BridgeErrorCode.UNKNOWN_KIND


def test_direction_is_enforced_by_accept() -> None:
    push = bc.encode_frame(bc.HostStatePush(state=bc.HostState.READY))[4:]
    assert _code(push, accept=bc.REQUEST_KINDS) is BridgeErrorCode.KIND_NOT_ACCEPTED
    request = bc.encode_frame(bc.SessionsListRequest())[4:]
    assert _code(request, accept=bc.PUSH_KINDS) is BridgeErrorCode.KIND_NOT_ACCEPTED


def test_oversized_frame_is_refused_from_its_header_alone() -> None:
    reader = bc.FrameReader()
    with pytest.raises(BridgeProtocolError) as info:
        reader.feed(struct.pack(">I", bc.MAX_FRAME_BYTES + 1) + b"{")
    assert info.value.code is BridgeErrorCode.FRAME_TOO_LARGE
    assert reader.buffered == 0
    with pytest.raises(BridgeProtocolError):
        reader.feed(bc.encode_frame(bc.SessionsListRequest()))


def test_encode_refuses_a_frame_the_peer_would_refuse() -> None:
    sessions = tuple(
        bc.SessionSummary(session_id=f"s{i}", cwd="/" + "d" * 4000, title="t") for i in range(4300)
    )
    with pytest.raises(BridgeProtocolError) as info:
        bc.encode_frame(bc.SessionsListedPush(sessions=sessions))
    assert info.value.code is BridgeErrorCode.FRAME_TOO_LARGE
    assert _code(b" " * (bc.MAX_FRAME_BYTES + 1)) is BridgeErrorCode.FRAME_TOO_LARGE


def test_reader_is_poisoned_after_garbage_and_drops_the_batch() -> None:
    good = bc.encode_frame(bc.SessionsListRequest())
    reader = bc.FrameReader()
    with pytest.raises(BridgeProtocolError) as info:
        reader.feed(good + _frame(b"garbage") + good)
    assert info.value.code is BridgeErrorCode.FRAME_MALFORMED
    with pytest.raises(BridgeProtocolError):
        reader.feed(good)


def test_error_message_never_echoes_the_payload() -> None:
    secret = "s3cr3t-token-value-0123456789"
    with pytest.raises(BridgeProtocolError) as info:
        bc.parse_frame_payload(json.dumps({"kind": "hello", "token": secret}).encode())
    assert secret not in str(info.value)


@settings(max_examples=150, deadline=None)
@given(
    picks=st.lists(st.sampled_from(range(len(SAMPLES))), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
)
def test_reader_yields_the_same_messages_for_any_chunking(
    picks: list[int], cuts: list[int]
) -> None:
    messages = [SAMPLES[i] for i in picks]
    stream = b"".join(bc.encode_frame(m) for m in messages)
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    reader = bc.FrameReader()
    out: list[bc.Message] = []
    for chunk in chunks:
        out.extend(reader.feed(chunk))
    assert out == messages
    assert reader.buffered == 0


@settings(max_examples=200, deadline=None)
@given(junk=st.binary(min_size=1, max_size=64))
def test_random_bytes_either_wait_for_more_or_raise_a_coded_error(junk: bytes) -> None:
    reader = bc.FrameReader()
    try:
        out = reader.feed(junk)
    except BridgeProtocolError as exc:
        assert exc.code in set(BridgeErrorCode)
    else:
        assert out == []


def test_a_hello_without_a_role_is_the_renderers_and_a_terminal_says_so() -> None:
    plain = bc.parse_frame_payload(
        json.dumps({"kind": "hello", "token": TOKEN, "protocolVersion": 1}).encode()
    )
    assert isinstance(plain, bc.HelloRequest) and plain.role is bc.ClientRole.RENDERER
    terminal = {"kind": "hello", "token": TOKEN, "protocolVersion": 1, "role": "terminal"}
    parsed = bc.parse_frame_payload(json.dumps(terminal).encode())
    assert isinstance(parsed, bc.HelloRequest) and parsed.role is bc.ClientRole.TERMINAL
    unknown = {**terminal, "role": "administrator"}
    assert _code(json.dumps(unknown).encode()) is BridgeErrorCode.MESSAGE_INVALID


def test_a_terminal_may_ask_only_what_its_commands_use() -> None:
    assert bc.TERMINAL_REQUEST_KINDS <= bc.REQUEST_KINDS
    assert MessageKind.SESSIONS_OVERVIEW in bc.TERMINAL_REQUEST_KINDS
    # what `maka sessions relocate / rename / remove` send beside a host
    for kind in (MessageKind.SESSIONS_RELOCATE, MessageKind.SESSIONS_RENAME):
        assert kind in bc.TERMINAL_REQUEST_KINDS
    assert MessageKind.SESSIONS_REMOVE in bc.TERMINAL_REQUEST_KINDS
    for kind in (
        MessageKind.SETTINGS_UPDATE,
        MessageKind.SESSIONS_EXPORT,
        MessageKind.WINDOW_ACTIVATE,
    ):
        assert kind not in bc.TERMINAL_REQUEST_KINDS


def test_a_terminal_turn_names_a_session_or_a_folder_and_nothing_more() -> None:
    assert MessageKind.TURNS_RUN in bc.TERMINAL_REQUEST_KINDS
    assert MessageKind.TURNS_RESUME in bc.TERMINAL_REQUEST_KINDS
    assert MessageKind.TURNS_SEND not in bc.TERMINAL_REQUEST_KINDS
    assert bc.TERMINAL_ONLY_KINDS <= bc.TERMINAL_REQUEST_KINDS
    neither = {"kind": "turns.run", "text": "go", "permissionMode": "ask"}
    assert _code(json.dumps(neither).encode()) is BridgeErrorCode.MESSAGE_INVALID
    for extra in (
        {"sessionId": "s1", "provider": "openai"},
        {"sessionId": "s1", "permissionMode": "yolo"},
        {"sessionId": "s1", "text": "x" * (bc.MAX_TEXT_CHARS + 1)},
        {"sessionId": "s1", "maxSteps": 0},
        {"sessionId": "s1", "columns": 5},
    ):
        body = {**neither, **extra}
        assert _code(json.dumps(body).encode()) is BridgeErrorCode.MESSAGE_INVALID, extra
    resume = {"kind": "turns.resume", "sessionId": "s1", "permissionMode": "auto", "runId": "r"}
    assert _code(json.dumps(resume).encode()) is BridgeErrorCode.MESSAGE_INVALID
    ended = {"kind": "resume.ended", "sessionId": "s1", "exitCode": 7}
    assert _code(json.dumps(ended).encode(), accept=bc.PUSH_KINDS) is (
        BridgeErrorCode.MESSAGE_INVALID
    )


def test_the_overview_request_carries_nothing_and_rows_are_bounded() -> None:
    extra = {"kind": "sessions.overview", "sessionId": "s1"}
    assert _code(json.dumps(extra).encode()) is BridgeErrorCode.MESSAGE_INVALID
    row = {
        "sessionId": "s1",
        "cwd": "/p",
        "title": "t",
        "createdAt": 1,
        "interrupted": False,
        "runCount": -1,
        "folderMissing": False,
        "resumable": False,
    }
    pushed = {"kind": "sessions.overviewed", "rows": [row]}
    assert _code(json.dumps(pushed).encode()) is BridgeErrorCode.MESSAGE_INVALID
    too_many = {"kind": "sessions.overviewed", "rows": [{**row, "runCount": 0}] * 20_001}
    assert _code(json.dumps(too_many).encode()) is BridgeErrorCode.MESSAGE_INVALID
