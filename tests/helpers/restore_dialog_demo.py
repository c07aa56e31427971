"""The confirmation "Continue in a restored copy…" opens, for people to look at.

    xvfb-run -a -s "-screen 0 1400x900x24" .venv/bin/python -m tests.helpers.restore_dialog_demo \
        docs/screenshots
"""

from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

from PySide6.QtWidgets import QApplication, QMessageBox

from app import bridge_contract as bc
from renderer.interrupted_banner import InterruptedBanner
from tests.helpers.fake_bridge import FakeBridge


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "docs/screenshots")
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication([])
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    banner.resize(900, 300)
    banner.show()
    banner.set_session("s1", interrupted=True, folder="/home/ann/projects/release-notes")
    drift = bc.ResumeDiagnostic(
        code="workspace_drift",
        message="1 file changed",
        changed_paths=(bc.ChangedPath(path="CHANGELOG.md", change="modified"),),
    )
    bridge.push_parked(
        "s1", ("workspace_drift",), (drift,), workspace_options=("isolated_restore", "rebaseline")
    )

    def shot(box: QMessageBox) -> int:
        box.show()
        for _ in range(20):
            app.processEvents()
        path = out / "banner-restore-confirm.png"
        box.grab().save(str(path))
        print(path)
        return 0

    with mock.patch.object(QMessageBox, "exec", shot):
        banner.restore_button.click()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
