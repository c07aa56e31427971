"""Child process of the Phase 0 crash contract: append one failpoint's committed prefix through
the real SQLite writers, say READY only after every commit returned, then wait to be killed.

Usage: python -m tests.crash.phase0_crash_child DATA_DIR FAILPOINT_ID EVENT_COUNT MARKER_PATH

The ``finally`` block writes ``MARKER_PATH``: after a SIGKILL it must not exist, which proves the
process died at the crash point rather than exiting through Python's normal shutdown.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from storage.ledger.ledger_store import open_store
from tests.helpers.phase0_crash_ledger import crash_template_events
from tests.helpers.store_workloads import commit_ledger


def main(argv: list[str]) -> int:
    data_dir, failpoint_id, count, marker = Path(argv[0]), argv[1], int(argv[2]), Path(argv[3])
    try:
        store = open_store(data_dir)
        results = commit_ledger(store, crash_template_events(failpoint_id)[:count])
        if not all(result.created for result in results):
            print("NOT-CREATED", flush=True)
            return 1
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        threading.Event().wait()  # until SIGKILL
        return 0
    finally:
        marker.write_text("the child exited normally", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
