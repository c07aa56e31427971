"""A session made without a title (the desktop names it after its folder) takes its first
message as its title; a session that has a title of its own, or already a run, keeps it."""

from __future__ import annotations

from pathlib import Path

from runtime.agent.permission_policy import PermissionMode, PermissionPolicy
from runtime.agent.session_service import SessionService
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunStatus
from runtime.providers.offline_demo_provider import OfflineDemoProvider
from storage.ledger.ledger_store import open_store


class _Quiet:
    def text_delta(self, text: str) -> None: ...

    def thinking_delta(self, text: str) -> None: ...

    def committed(self, event: RuntimeEvent) -> None: ...

    def run_status(self, run_id: str, status: RunStatus, failure_class: str | None) -> None: ...


def _service(tmp_path: Path) -> tuple[SessionService, Path]:
    store = open_store(tmp_path / "data")
    service = SessionService(store=store, provider_factory=OfflineDemoProvider, owner_epoch=1)
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    return service, folder


def _send(service: SessionService, session_id: str, text: str) -> None:
    outcome = service.send_turn(session_id, text, _Quiet(), PermissionPolicy(PermissionMode.DENY))
    assert outcome.status is RunStatus.COMPLETED


def test_the_first_message_names_a_session_named_after_its_folder(tmp_path: Path) -> None:
    service, folder = _service(tmp_path)
    session = service.create_session(folder)
    assert session.title == "project"
    _send(service, session.session_id, "\n  list files  \nand more lines\n")
    assert service.get_session(session.session_id).title == "list files"
    _send(service, session.session_id, "find *.txt")
    assert service.get_session(session.session_id).title == "list files"


def test_a_session_with_a_title_of_its_own_keeps_it(tmp_path: Path) -> None:
    service, folder = _service(tmp_path)
    session = service.create_session(folder, title="release notes")
    _send(service, session.session_id, "list files")
    assert service.get_session(session.session_id).title == "release notes"


def test_a_long_first_message_gives_a_title_that_says_it_was_shortened(tmp_path: Path) -> None:
    service, folder = _service(tmp_path)
    session = service.create_session(folder)
    _send(service, session.session_id, "x" * 200)
    assert service.get_session(session.session_id).title == "x" * 79 + "…"
    other = service.create_session(folder)
    _send(service, other.session_id, "word " * 40)  # cut at a space: no trailing blank
    title = service.get_session(other.session_id).title
    assert title.endswith("word…") and len(title) <= 80


def test_a_session_that_already_has_a_run_keeps_its_folder_title(tmp_path: Path) -> None:
    service, folder = _service(tmp_path)
    session = service.create_session(folder)
    _send(service, session.session_id, "   ")  # no line to name it by
    assert service.get_session(session.session_id).title == "project"
    _send(service, session.session_id, "list files")
    assert service.get_session(session.session_id).title == "project"


def test_sessions_started_with_the_same_message_can_be_told_apart(tmp_path: Path) -> None:
    service, folder = _service(tmp_path)
    other_folder = tmp_path / "elsewhere"
    other_folder.mkdir()
    titles = []
    for where in (folder, other_folder, folder, folder):
        session = service.create_session(where)
        _send(service, session.session_id, "list files")
        titles.append(service.get_session(session.session_id).title)
    assert titles == [
        "list files",
        "list files — elsewhere",
        "list files — project",
        "list files — project (2)",
    ]
    assert len(set(titles)) == len(titles)


def test_a_title_taken_from_a_message_has_no_control_character(tmp_path: Path) -> None:
    """``write \\e]0;x\\a.md``: the title kept ESC and BEL, which a rename refuses."""
    from runtime.ledger.session_title import title_allowed

    service, folder = _service(tmp_path)
    session = service.create_session(folder)
    _send(service, session.session_id, "write \x1b]0;pwn\x07.md saying \x9b2Jx\x7f")
    title = service.get_session(session.session_id).title
    assert title == "write  ]0;pwn .md saying  2Jx"
    assert title_allowed(title)
    assert not title_allowed("a\x9bb") and not title_allowed("a\x7fb")  # C1 and DEL refused
