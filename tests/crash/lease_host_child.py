"""Child process of the lease-fencing test: one host of a session on the PostgreSQL ledger.

Usage: python -m tests.crash.lease_host_child URL ROLE TTL_MS

``first``: creates the session and its run (taking the lease with ``TTL_MS``), appends the user's
event, prints ``ready``, then for each ``t1 CALL_ID`` line on stdin commits a T1 and prints its
outcome as JSON (``{"code": ...}`` for a refusal).
``second``: takes the session's lease over, appends one event and prints the lease's epoch.
"""

from __future__ import annotations

import json
import sys

from runtime.ledger.store_ports import StoreRefusal
from storage.ledger.postgres_store import LeaseSettings, open_postgres_store
from tests.helpers.ledger_builders import RunIds, call_event, dispatch_event, model_text, user_text
from tests.helpers.store_workloads import add_run

IDS = RunIds("sess-lease", "inv-lease", "run-lease", "turn-lease")


def main(url: str, role: str, ttl_ms: int) -> None:
    settings = LeaseSettings(ttl_ms=ttl_ms, runway_ms=0)
    with open_postgres_store(url, owner=f"host-{role}", lease_settings=settings) as store:
        if role == "second":
            lease = store.take_session_lease(IDS.session_id)
            store.append_event(model_text("the new host", event_id="second-host", ids=IDS))
            print(json.dumps({"epoch": lease.epoch}), flush=True)
            return
        add_run(store, IDS)
        store.append_event(user_text(ids=IDS))
        print("ready", flush=True)
        for line in sys.stdin:
            call_id = line.split()[1]
            call = call_event(call_id, ids=IDS)
            try:
                result = store.commit_tool_prepared(call, dispatch_event(call))
                print(json.dumps({"created": result.created, "seq": result.event_seq}), flush=True)
            except StoreRefusal as refusal:
                print(json.dumps({"code": str(refusal.code)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
