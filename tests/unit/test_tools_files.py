"""File tools: evidence from the same transform the tool applies, atomic writes, exact edits."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from runtime.base.cancel_token import CancelToken
from runtime.tools.args_schema import schema_errors
from runtime.tools.file_state_evidence import file_write_result
from runtime.tools.tool_catalog import default_catalog
from runtime.tools.tool_contract import (
    Tool,
    ToolContext,
    ToolFailure,
    ToolRefusal,
    ToolRefusalCode,
)

IDENTITY = "workspace:v1:0b0e6a8e-4a52-4c1b-9a8f-5a8e5d7f2c11"


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(
        cwd=Path(os.path.realpath(tmp_path)), cancel=CancelToken(), workspace_identity=IDENTITY
    )


def _tool(name: str) -> Tool[Any]:
    tool = default_catalog().get(name)
    assert tool is not None
    return tool


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_write_evidence_matches_the_bytes_written_and_the_result(ctx: ToolContext) -> None:
    tool = _tool("write_file")
    prepared = tool.prepare({"path": "notes/a.txt", "content": "héllo\n"}, ctx)
    assert prepared.evidence == {
        "kind": "file_state_v1",
        "path": "notes/a.txt",
        "workspaceIdentity": IDENTITY,
        "before": {"exists": False},
        "expectedAfter": {"exists": True, "sha256": _sha("héllo\n".encode()), "size": 7},
    }
    assert not (ctx.cwd / "notes").exists()  # prepare has no side effect
    output = tool.run(prepared, ctx)
    data = (ctx.cwd / "notes" / "a.txt").read_bytes()
    assert data == "héllo\n".encode()
    assert output.result == file_write_result("write_file", prepared.evidence)
    assert output.result == {
        "path": "notes/a.txt",
        "bytesWritten": 7,
        "sha256": _sha(data),
        "created": True,
    }
    assert [p.name for p in (ctx.cwd / "notes").iterdir()] == ["a.txt"]  # no temp file left


def test_overwrite_records_the_prior_state(ctx: ToolContext) -> None:
    (ctx.cwd / "a.txt").write_bytes(b"old")
    prepared = _tool("write_file").prepare({"path": "a.txt", "content": "new"}, ctx)
    assert prepared.evidence is not None
    assert prepared.evidence["before"] == {"exists": True, "sha256": _sha(b"old"), "size": 3}
    assert _tool("write_file").run(prepared, ctx).result["created"] is False


def test_write_refuses_to_overwrite_a_change_made_after_preflight(ctx: ToolContext) -> None:
    (ctx.cwd / "a.txt").write_bytes(b"old")
    prepared = _tool("write_file").prepare({"path": "a.txt", "content": "new"}, ctx)
    (ctx.cwd / "a.txt").write_bytes(b"someone else")
    with pytest.raises(ToolFailure):
        _tool("write_file").run(prepared, ctx)
    assert (ctx.cwd / "a.txt").read_bytes() == b"someone else"


def test_edit_replaces_one_exact_unique_occurrence(ctx: ToolContext) -> None:
    (ctx.cwd / "h.txt").write_text("hi there\n")
    tool = _tool("edit_file")
    prepared = tool.prepare({"path": "h.txt", "old_string": "hi", "new_string": "hello"}, ctx)
    assert prepared.evidence is not None
    assert prepared.evidence["expectedAfter"]["sha256"] == _sha(b"hello there\n")
    output = tool.run(prepared, ctx)
    assert (ctx.cwd / "h.txt").read_text() == "hello there\n"
    assert output.result == {
        "path": "h.txt",
        "bytesWritten": 12,
        "sha256": _sha(b"hello there\n"),
        "replacements": 1,
    }


@pytest.mark.parametrize(
    ("content", "old", "code"),
    [
        (None, "x", ToolRefusalCode.EDIT_TARGET_MISSING),
        ("abc", "x", ToolRefusalCode.EDIT_NO_MATCH),
        ("a a", "a", ToolRefusalCode.EDIT_AMBIGUOUS),
    ],
)
def test_edit_refusals_happen_before_anything_runs(
    ctx: ToolContext, content: str | None, old: str, code: ToolRefusalCode
) -> None:
    if content is not None:
        (ctx.cwd / "e.txt").write_text(content)
    with pytest.raises(ToolRefusal) as caught:
        _tool("edit_file").prepare({"path": "e.txt", "old_string": old, "new_string": "z"}, ctx)
    assert caught.value.code == code


def test_writing_to_a_directory_or_symlink_target_is_refused(ctx: ToolContext) -> None:
    (ctx.cwd / "d").mkdir()
    with pytest.raises(ToolRefusal) as caught:
        _tool("write_file").prepare({"path": "d", "content": "x"}, ctx)
    assert caught.value.code == ToolRefusalCode.NOT_A_REGULAR_FILE


def test_without_workspace_identity_there_is_no_evidence(tmp_path: Path) -> None:
    ctx = ToolContext(cwd=Path(os.path.realpath(tmp_path)), cancel=CancelToken())
    prepared = _tool("write_file").prepare({"path": "a", "content": "x"}, ctx)
    assert prepared.evidence is None
    assert _tool("write_file").run(prepared, ctx).result["bytesWritten"] == 1


def test_read_file_lines_and_errors(ctx: ToolContext) -> None:
    (ctx.cwd / "r.txt").write_text("one\ntwo\nthree\n")
    tool = _tool("read_file")
    full = tool.run(tool.prepare({"path": "r.txt"}, ctx), ctx).result
    assert full == {
        "path": "r.txt",
        "content": "one\ntwo\nthree\n",
        "totalLines": 3,
        "truncated": False,
    }
    part = tool.run(tool.prepare({"path": "r.txt", "offset": 2, "limit": 1}, ctx), ctx).result
    assert part["content"] == "two\n" and part["truncated"] is True
    with pytest.raises(ToolFailure, match="does not exist"):
        tool.run(tool.prepare({"path": "missing.txt"}, ctx), ctx)
    (ctx.cwd / "bin").write_bytes(b"\x00\x01")
    with pytest.raises(ToolFailure, match="binary"):
        tool.run(tool.prepare({"path": "bin"}, ctx), ctx)


def test_list_dir_and_glob(ctx: ToolContext) -> None:
    (ctx.cwd / "b.txt").write_text("12")
    (ctx.cwd / "a").mkdir()
    (ctx.cwd / "a" / "c.txt").write_text("")
    listing = _tool("list_dir")
    result = listing.run(listing.prepare({}, ctx), ctx).result
    assert result["entries"] == [
        {"name": "a", "type": "dir"},
        {"name": "b.txt", "type": "file", "size": 2},
    ]
    glob = _tool("glob")
    assert glob.run(glob.prepare({"pattern": "**/*.txt"}, ctx), ctx).result["matches"] == [
        "a/c.txt",
        "b.txt",
    ]


@pytest.mark.parametrize(
    ("tool", "args", "fragment"),
    [
        ("write_file", {"path": "a"}, "content is required"),
        ("write_file", {"path": "a", "content": 3}, "must be of type string"),
        ("read_file", {"path": "a", "extra": 1}, "extra is not a known argument"),
        ("read_file", {"path": ""}, "must not be empty"),
        ("bash", {"command": "ls", "timeout_seconds": 0}, "at least 1"),
        ("bash", {"command": "ls", "timeout_seconds": True}, "integer"),
        ("bash", [], "must be of type object"),
    ],
)
def test_schemas_reject_bad_arguments_with_named_messages(
    tool: str, args: object, fragment: str
) -> None:
    errors = schema_errors(_tool(tool).parameters, args)
    assert any(fragment in error for error in errors), errors


def test_catalog_declares_recovery_modes() -> None:
    catalog = default_catalog()
    modes = {name: catalog.tools()[name].recovery_mode for name in catalog.names()}
    assert modes == {
        "bash": "never_auto_retry",
        "edit_file": "reconcile",
        "glob": "replay_safe",
        "list_dir": "replay_safe",
        "read_file": "replay_safe",
        "write_file": "reconcile",
    }


def _effect(tool: str, ctx: ToolContext, result: Any) -> object:
    """What a run of ``tool`` from the test below did: its answer or the file it changed."""
    if tool == "write_file":
        return (ctx.cwd / "new.txt").read_text()
    if tool == "edit_file":
        return (ctx.cwd / "r.txt").read_text()
    if tool == "bash":
        return result["output"].strip()
    key = {"read_file": "content", "list_dir": "entries", "glob": "matches"}[tool]
    return result[key]


@pytest.mark.parametrize(
    ("tool", "args", "effect"),
    [
        ("read_file", {"path": "r.txt", "offset": 2, "limit": 1}, "two\n"),
        ("write_file", {"path": "new.txt", "content": "fresh\n"}, "fresh\n"),
        ("edit_file", {"path": "r.txt", "old_string": "two", "new_string": "2"}, "one\n2\nthree\n"),
        ("list_dir", {"path": "sub"}, [{"name": "s.txt", "type": "file", "size": 1}]),
        ("glob", {"pattern": "**/*.txt"}, ["r.txt", "sub/s.txt"]),
        ("bash", {"command": "echo planned", "timeout_seconds": 5}, "planned"),
    ],
)
def test_a_tool_runs_what_its_typed_plan_says_not_the_raw_arguments(
    ctx: ToolContext, tool: str, args: dict[str, object], effect: object
) -> None:
    """``prepare`` turns the checked arguments into the tool's own frozen plan; ``run`` reads
    only that plan (the arguments stay for the ledger)."""
    (ctx.cwd / "r.txt").write_text("one\ntwo\nthree\n")
    (ctx.cwd / "sub").mkdir()
    (ctx.cwd / "sub" / "s.txt").write_text("s")
    prepared = _tool(tool).prepare(args, ctx)
    plan = prepared.plan
    assert dataclasses.is_dataclass(plan) and not isinstance(plan, type)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(plan, dataclasses.fields(plan)[0].name, None)
    output = _tool(tool).run(dataclasses.replace(prepared, args={}), ctx)
    assert not output.is_error, output.result
    assert _effect(tool, ctx, output.result) == effect
