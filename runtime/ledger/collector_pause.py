"""Pausing Python's cyclic garbage collector around work that builds many acyclic objects.

Decoding a ledger or projecting it makes hundreds of thousands of small containers that form no
cycles; each generation-2 collection the allocations trigger meanwhile re-traverses every event
already in memory, which can cost more than the work itself. Nothing collectable accumulates
while such work runs, so the collector is paused for its duration and resumed after (left off if
it was off).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the collector for the block; resume it after if it was on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
