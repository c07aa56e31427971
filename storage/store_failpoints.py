"""Named crash points inside the store's transactions (RECOVERY.md section 2, principle 5).

With ``MAKA_FAILPOINT=<name>`` in the environment the process kills itself with SIGKILL when it
reaches that point: no ``finally`` block, no rollback, no ``atexit``; exactly what a power cut or
an OOM kill does. The crash tests drive a real child process into each point and check that the
database holds the state from before the transaction or the state from after it, nothing between.

Storage may import only ``runtime.ledger``, so it carries this small hook itself rather than
importing the runtime's generic one; both read the same variable.

Points (``*_insert`` ones sit inside the open write transaction, ``*_after_commit`` right after
``COMMIT``):

- ``t1_after_call_insert``, ``t1_after_dispatch_insert``, ``t1_after_commit``
- ``t2_after_response_insert``, ``t2_after_commit``
- ``bundle_after_reconcile_insert``, ``bundle_after_outcome_insert``,
  ``bundle_after_decision_insert``, ``bundle_after_commit`` (also honours ``P10``, the catalog id of
  "recovery decision committed")
- ``run_ending_after_event_insert``, ``run_ending_after_commit``
- ``after_continuation_admission_committed`` (claim, target header and start event committed,
  provider not yet called)
"""

from __future__ import annotations

import os
import signal
from typing import Any

FAILPOINT_ENV = "MAKA_FAILPOINT"

# ``os.environ.get`` of a missing variable encodes the key and raises and catches a KeyError:
# about 3 us on the T1/T2 path, five times per tool call. ``os.environ`` keeps its encoded
# variables in a plain dict that every ``os.environ`` write updates, so that dict is read
# directly when this Python has it (the same view ``os.environ.get`` gives).
_ENVIRON_DATA: Any = getattr(os.environ, "_data", None)
_ENCODED_KEY: Any = os.environ.encodekey(FAILPOINT_ENV) if _ENVIRON_DATA is not None else None


def _wanted() -> str | None:
    if _ENVIRON_DATA is None or type(_ENVIRON_DATA) is not dict:
        return os.environ.get(FAILPOINT_ENV)
    raw = _ENVIRON_DATA.get(_ENCODED_KEY)
    return None if raw is None else os.environ.decodevalue(raw)


STORE_FAILPOINTS = frozenset(
    {
        "t1_after_call_insert",
        "t1_after_dispatch_insert",
        "t1_after_commit",
        "t2_after_response_insert",
        "t2_after_commit",
        "bundle_after_reconcile_insert",
        "bundle_after_outcome_insert",
        "bundle_after_decision_insert",
        "bundle_after_commit",
        "run_ending_after_event_insert",
        "run_ending_after_commit",
        "after_continuation_admission_committed",
        "P10",
    }
)


def store_failpoint(*names: str) -> None:
    """SIGKILL this process if ``MAKA_FAILPOINT`` names one of ``names``.

    Reads the environment each time (a test may set it after import); the cost is one dict
    lookup.
    """
    wanted = _wanted()
    if wanted and wanted in names:
        os.kill(os.getpid(), signal.SIGKILL)
