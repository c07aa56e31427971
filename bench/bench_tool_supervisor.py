"""Benchmark: what the tool supervisor costs a bash call, side by side with an unsupervised one.

Runs the real ``bash`` tool (``BashTool.run``) on ``true`` and on ``echo x``, interleaved round
by round: once through the supervisor (the product's path: a small process that kills the
command's group if the host dies, docs/design/recovery.md section 9) and once with the supervisor
disabled (``MAKA_FAILPOINT=tool_supervisor_disabled``, the direct spawn the product used before).
Prints the median wall time of each and the difference per call.

Usage::

    .venv/bin/python -m bench.bench_tool_supervisor [--rounds 41]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from runtime.base.cancel_token import CancelToken
from runtime.ledger.crash_points import FAILPOINT_ENV, CrashPoint
from runtime.tools.bash_tool import BashTool
from runtime.tools.tool_contract import ToolContext


def _once(tool: BashTool, ctx: ToolContext, command: str, supervised: bool) -> float:
    if supervised:
        os.environ.pop(FAILPOINT_ENV, None)
    else:
        os.environ[FAILPOINT_ENV] = CrashPoint.TOOL_SUPERVISOR_DISABLED.value
    started = time.perf_counter()
    output = tool.run(tool.prepare({"command": command}, ctx), ctx)
    elapsed = time.perf_counter() - started
    assert not output.is_error, output.result
    return elapsed * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    tool = BashTool()
    with tempfile.TemporaryDirectory() as folder:
        ctx = ToolContext(cwd=Path(os.path.realpath(folder)), cancel=CancelToken())
        for command in ("true", "echo x"):
            supervised: list[float] = []
            direct: list[float] = []
            _once(tool, ctx, command, True)  # warm-up
            _once(tool, ctx, command, False)
            for _ in range(args.rounds):
                supervised.append(_once(tool, ctx, command, True))
                direct.append(_once(tool, ctx, command, False))
            s, d = statistics.median(supervised), statistics.median(direct)
            print(
                f"bash {command!r}: supervised {s:.1f} ms, direct {d:.1f} ms median "
                f"({args.rounds} rounds): +{s - d:.1f} ms per call, ratio {s / d:.2f}"
            )
    os.environ.pop(FAILPOINT_ENV, None)


if __name__ == "__main__":
    main()
