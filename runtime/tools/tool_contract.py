"""What a tool is: a JSON schema, a recovery mode, a *prepare* step and a *run* step.

``prepare`` runs during preflight, before T1, and must have no side effect: it confines paths to
the workspace, checks what depends on the current state (an edit's unique match) and computes the
file evidence the T1 dispatch carries. Its refusals (``ToolRefusal``) become an *unbound* error
response: the tool never ran. ``run`` happens after T1 and is the only place with side effects;
``ToolFailure`` (or any exception) from it becomes an ``isError`` response committed by T2.

Splitting the two is what lets the evidence be "computed by the same transform the tool applies":
``prepare`` computes the new bytes once, the dispatch records their hash, ``run`` writes exactly
those bytes.

Each tool has its own typed *plan* (a frozen dataclass): ``prepare`` turns the arguments (already
checked against the tool's JSON schema, ``arguments_invalid`` otherwise) into it, and ``run``
reads only the plan, never the raw arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from runtime.base.cancel_token import CancelToken
from runtime.ledger.coded_error import CodedError
from runtime.ledger.event_model import FileStateEvidence, RecoveryMode


class ToolRefusalCode(StrEnum):
    """Why a call was refused before T1 (the ``code`` of an unbound error response)."""

    UNKNOWN_TOOL = "unknown_tool"
    ARGUMENTS_INVALID = "arguments_invalid"
    LOOP_GATE_BLOCKED = "loop_gate_blocked"
    PERMISSION_DENIED = "permission_denied"
    PATH_INVALID = "path_invalid"
    PATH_OUTSIDE_WORKSPACE = "path_outside_workspace"
    PATH_PROTECTED = "path_protected"
    NOT_A_REGULAR_FILE = "not_a_regular_file"
    EDIT_TARGET_MISSING = "edit_target_missing"
    EDIT_NO_MATCH = "edit_no_match"
    EDIT_AMBIGUOUS = "edit_ambiguous"
    CANCELLED = "cancelled"
    # The operating system refused the path during preflight (a file used as a folder, a link
    # loop, a name too long): the model sees why and can correct the path.
    PATH_UNUSABLE = "path_unusable"
    # Preflight itself failed unexpectedly (a defect): the call ends, the turn goes on.
    PREFLIGHT_FAILED = "preflight_failed"


class ToolFailureCode(StrEnum):
    """The ``code`` of an error result committed by T2 when the tool itself raised unexpectedly."""

    TOOL_INTERNAL_ERROR = "tool_internal_error"


class ToolRefusal(CodedError):
    code: ToolRefusalCode

    def __init__(self, code: ToolRefusalCode, message: str) -> None:
        super().__init__(code, message, text=f"{code}: {message}")


class ToolFailure(Exception):
    """The tool ran and failed; ``result`` (optional) is committed as the error result."""

    def __init__(self, message: str, result: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = dict(result) if result is not None else {"error": message}


class ProcessRecorder(Protocol):
    """Records a process a tool just started (``tool_processes``, docs/design/recovery.md section
    9); raises when it cannot, and the tool then stops the process rather than run it unrecorded."""

    def __call__(
        self,
        ctx: ToolContext,
        tool_name: str,
        command: str,
        pid: int,
        process_group: int,
        *,
        create_time: float | None = None,
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Everything a tool may touch. ``cwd`` is the realpath of the session folder;
    ``workspace_identity`` (``workspace:v1:<uuid>``) comes from the composition root."""

    cwd: Path
    cancel: CancelToken
    workspace_identity: str | None = None
    session_id: str = ""
    run_id: str = ""
    shell_registry: Any = None  # BackgroundShellRegistry | None (kept loose to avoid a cycle)
    operation_id: str = ""
    process_recorder: ProcessRecorder | None = None
    bash_timeout_seconds: float = 120.0
    output_cap_bytes: int = 64 * 1024


PlanT = TypeVar("PlanT")


@dataclass(frozen=True, slots=True)
class PreparedCall(Generic[PlanT]):
    """A call that passed preflight: its arguments as the model sent them (what the ledger
    records), the T1 evidence, and the tool's own ``plan`` that ``run`` carries out."""

    tool_name: str
    args: Mapping[str, Any]
    evidence: FileStateEvidence | None = None
    summary: str = ""
    plan: PlanT = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    result: Any
    is_error: bool = False


class Tool(Protocol[PlanT]):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def recovery_mode(self) -> RecoveryMode: ...

    def prepare(self, args: Mapping[str, Any], ctx: ToolContext) -> PreparedCall[PlanT]: ...

    def run(self, prepared: PreparedCall[PlanT], ctx: ToolContext) -> ToolOutput: ...
