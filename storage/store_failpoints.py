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
  "recovery decision committed"; the user's attestation goes through the same writer and also
  honours ``attestation_after_commit``)
- ``run_ending_after_event_insert``, ``run_ending_after_commit``
- ``continuation_admission_before_commit`` (claim, target header and start event inserted, not
  committed; also honours ``P11``, the catalog id of "continuation run creation"),
  ``after_continuation_admission_committed`` (all three committed, provider not yet called)
"""

from __future__ import annotations

import os
import signal

FAILPOINT_ENV = "MAKA_FAILPOINT"


def _wanted() -> str | None:
    return os.environ.get(FAILPOINT_ENV)


def wanted_failpoint() -> str | None:
    """The failpoint named by ``MAKA_FAILPOINT`` right now (None when unset or empty). A writer
    on the hot path reads it once per store call and passes it to ``reach_failpoint``."""
    return os.environ.get(FAILPOINT_ENV) or None


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
        "attestation_after_commit",
        "run_ending_after_event_insert",
        "run_ending_after_commit",
        "continuation_admission_before_commit",
        "after_continuation_admission_committed",
        "P10",
        "P11",
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


def reach_failpoint(wanted: str | None, *names: str) -> None:
    """``store_failpoint`` with the environment already read (``wanted_failpoint``) at the start
    of the same store call: SIGKILL this process if ``wanted`` is one of ``names``."""
    if wanted is not None and wanted in names:
        os.kill(os.getpid(), signal.SIGKILL)
