"""Benchmark: ``write_file`` / ``read_file`` through folder descriptors vs following the path.

The file tools walk from the session folder's descriptor, one ``O_NOFOLLOW | O_DIRECTORY`` open
per folder on the path, and write and rename relative to the parent's descriptor
(``runtime/tools/confined_fs.py``). The baseline is what they did before, inline: resolve the
path, observe the target, write a temporary file by path, ``fsync``, ``os.replace``, ``fsync`` the
folder; and for reads ``open(path).read()``. Both write the same bytes to the same kind of
target (``a/b/c/fN.txt``), interleaved, in one process; the figure is the ratio of the medians
(preflight + run for the tools; the same steps for the baseline).

Usage::

    .venv/bin/python -m bench.bench_file_tools [--iterations 400]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path


def _baseline_write(root: Path, raw: str, text: str) -> None:
    """The former write_file: preflight by path (resolve, observe, evidence), then the write by
    path, re-observing the target just before the replace."""
    from runtime.tools.file_state_evidence import observe_file, write_evidence
    from runtime.tools.workspace_paths import resolve_workspace_path

    target = resolve_workspace_path(root, raw, for_write=True)
    before, _ = observe_file(target.absolute)
    data = text.encode("utf-8")
    write_evidence(target.relative, "workspace:v1:x", before, data)
    path = target.absolute
    path.parent.mkdir(parents=True, exist_ok=True)
    observe_file(path)
    temp = path.parent / f".{path.name}.maka-{secrets.token_hex(6)}.tmp"
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = os.stat(path).st_mode & 0o7777
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644 if mode is None else mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _baseline_read(root: Path, raw: str) -> dict[str, object]:
    """The former read_file: preflight by path (resolve), then open the path, read, and shape
    the same result."""
    from runtime.tools.tool_contract import PreparedCall
    from runtime.tools.workspace_paths import resolve_workspace_path

    target = resolve_workspace_path(root, raw)
    prepared = PreparedCall(
        "read_file",
        {"path": raw},
        summary=f"read {target.relative}",
        plan={"absolute": str(target.absolute), "relative": target.relative},
    )
    with Path(prepared.plan["absolute"]).open("rb") as handle:
        data = handle.read(256 * 1024 + 1)
    truncated = len(data) > 256 * 1024
    if b"\x00" in data[:8192]:
        raise ValueError("binary")
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    return {
        "path": target.relative,
        "content": "".join(lines[0:]),
        "totalLines": len(lines),
        "truncated": truncated,
    }


def main() -> None:
    from runtime.base.cancel_token import CancelToken
    from runtime.tools.tool_catalog import default_catalog
    from runtime.tools.tool_contract import ToolContext

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=400)
    args = parser.parse_args()
    catalog = default_catalog()
    write, read = catalog.get("write_file"), catalog.get("read_file")
    assert write is not None and read is not None
    with tempfile.TemporaryDirectory(prefix="maka-bench-tools-") as temp:
        root = Path(os.path.realpath(temp))
        ctx = ToolContext(cwd=root, cancel=CancelToken(), workspace_identity="workspace:v1:x")
        timings: dict[str, list[float]] = {k: [] for k in ("tool_w", "base_w", "tool_r", "base_r")}
        data = "line of text\n" * 200
        for index in range(args.iterations):
            relative = f"a/b/c/f{index % 50}.txt"
            started = time.perf_counter()
            write.run(write.prepare({"path": relative, "content": data}, ctx), ctx)
            timings["tool_w"].append(time.perf_counter() - started)
            started = time.perf_counter()
            _baseline_write(root, f"x/y/z/f{index % 50}.txt", data)
            timings["base_w"].append(time.perf_counter() - started)
            started = time.perf_counter()
            read.run(read.prepare({"path": relative}, ctx), ctx)
            timings["tool_r"].append(time.perf_counter() - started)
            started = time.perf_counter()
            _baseline_read(root, f"x/y/z/f{index % 50}.txt")
            timings["base_r"].append(time.perf_counter() - started)
    med = {key: statistics.median(values) for key, values in timings.items()}
    print(
        f"write_file: tool {med['tool_w'] * 1e3:.3f} ms, path-following baseline "
        f"{med['base_w'] * 1e3:.3f} ms, ratio {med['tool_w'] / med['base_w']:.2f}"
    )
    print(
        f"read_file: tool {med['tool_r'] * 1e6:.1f} us, path-following baseline "
        f"{med['base_r'] * 1e6:.1f} us, ratio {med['tool_r'] / med['base_r']:.2f}"
    )


if __name__ == "__main__":
    main()
