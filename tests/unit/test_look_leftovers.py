"""``maka plan`` and ``maka timeline`` look at the snapshot store through a stand-in in a
temporary folder, removed when they end; one ended by SIGTERM or a closed terminal left its
folder (up to a few MB) for good. Each is named with its process id, and the next look removes
those whose process is gone."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from storage.checkpoints.checkpoint_store import GitCheckpointStore


def test_a_look_removes_the_stand_ins_of_looks_whose_process_is_gone(tmp_path: Path) -> None:
    temp = Path(tempfile.gettempdir())
    gone = temp / "maka-look-999999999-left"  # (no process has that id)
    gone.mkdir(exist_ok=True)
    (gone / "index").write_bytes(b"x" * 100)
    alive = temp / f"maka-look-{os.getppid()}-live"  # (our parent runs)
    alive.mkdir(exist_ok=True)
    try:
        store = GitCheckpointStore(tmp_path / "data", look_only=True)
        assert not gone.exists()
        assert alive.exists()
        mine = [p for p in temp.glob(f"maka-look-{os.getpid()}-*") if p.is_dir()]
        assert mine, "the look's own stand-in is named with its process id"
        del store
    finally:
        for place in (gone, alive):
            if place.exists():
                for child in place.iterdir():
                    child.unlink()
                place.rmdir()
