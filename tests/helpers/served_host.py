"""A real ``HostApp`` (its socket, its request router) over fake services, started and ready:
the endpoint it announced (socket name and renderer token) for a test's wire clients."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.host.host_services import HostServices
from main_process.host_app import HostApp, HostConfig
from main_process.host_lifecycle import HostState


def serve(
    qtbot: QtBot, data_dir: Path, services: HostServices, capsys: pytest.CaptureFixture[str]
) -> tuple[HostApp, str, str]:
    """Start a host on ``data_dir`` serving ``services``; returns it once ready, with its
    socket name and its renderer token (the caller closes it)."""

    def factory(path: Path, *, safe_resume_enabled: bool) -> HostServices:
        return services

    config = HostConfig(
        data_dir=data_dir,
        safe_resume_enabled=True,
        launch_renderer=False,
        announce_endpoint=True,
        drain_timeout_s=5,
    )
    app = HostApp(config, factory, lambda _code: None)
    assert app.start() is None
    qtbot.waitUntil(lambda: app.lifecycle.state is HostState.READY, timeout=5000)
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("MAKA_MAIN_READY")]
    fields = dict(part.split("=", 1) for part in line[-1].split()[1:])
    return app, fields["socket"], fields["token"]
