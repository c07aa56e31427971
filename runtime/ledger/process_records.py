"""Tool process records: which OS process a tool call started (docs/design/recovery.md section 9).

Not a ledger fact: a host table the store keeps beside the ledger. The host records a tool's
process right after spawning it and the T2 transaction clears the record, so a record that is
still present after a restart names a process started by a call whose outcome was never
committed. Whether that process still runs is a question for the operating system (pid, create
time and boot id together, so a reused pid is never taken for ours); the runtime asks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol


class ToolProcessRecord(NamedTuple):
    operation_id: str
    session_id: str
    run_id: str
    tool_name: str
    command: str
    pid: int
    process_group: int
    """The process group (POSIX) or 0 (Windows: a Job Object, named by the pid)."""
    create_time: float
    boot_id: str
    owner_epoch: int
    started_at: int


class ToolProcessTable(Protocol):
    def record_tool_process(self, record: ToolProcessRecord) -> None: ...

    def list_tool_processes(
        self, *, session_id: str | None = None, operation_id: str | None = None
    ) -> Sequence[ToolProcessRecord]: ...

    def delete_tool_process(self, operation_id: str, pid: int) -> None: ...
