"""The speed machinery of ``maka ledger plan``, apart from the contract it must equal.

``maka ledger plan`` on a long run decodes the file on two cores (``parallel_decode``: fork,
shared memory, ``marshal``), scans the tail in the child (``tail_scan``) and plans the run as a
head and a tail apart (``plan_parts``), reading the plain path only through its one extension
point: ``resume_plan.plan_resolved`` and ``plan_verdict`` with the resolver's
``resolve_scanned``. The plain path (``resume_plan.plan_resume`` and the resolver) knows nothing
of this package; property tests check that every fast path gives the plain path's result.

Only the read-only ledger tools (``app/commands``) import this package.
"""
