"""The failpoint catalog (docs/design/recovery.md section 2) and the SIGKILL hook."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.recovery.failpoints import (
    CONTINUATION_FAILPOINTS,
    FAILPOINT_ENV,
    RUNTIME_RESUME_FAILPOINTS,
    CommittedPrefix,
    CrashPoint,
    failpoint,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_catalog_has_the_exact_ids_boundaries_and_prefixes() -> None:
    assert [(p.id, p.boundary, p.committed_prefix.value) for p in RUNTIME_RESUME_FAILPOINTS] == [
        ("P0", "before tool preparation (T1)", "before_function_call"),
        ("P1", "function_call committed before prepared journal", "after_function_call"),
        ("P2", "prepared journal committed before implementation", "after_function_call"),
        ("P3", "tool implementation in progress", "after_function_call"),
        ("P4", "side effect completed before outcome transaction (T2)", "after_function_call"),
        ("P5", "function_response committed before outcome journal", "after_function_response"),
        (
            "P6",
            "outcome transaction committed before model result delivery",
            "after_function_response",
        ),
        ("P7", "tool result delivered before the next provider step", "after_function_response"),
        ("P8", "terminal RuntimeEvent commit", "after_function_response"),
        ("P9", "terminal run header commit", "after_terminal_event"),
        ("P10", "recovery decision commit", "after_terminal_event"),
        ("P11", "continuation run creation", "after_terminal_event"),
    ]


def test_the_distinct_prefixes_appear_in_causal_order() -> None:
    seen: list[CommittedPrefix] = []
    for point in RUNTIME_RESUME_FAILPOINTS:
        if point.committed_prefix not in seen:
            seen.append(point.committed_prefix)
    assert seen == list(CommittedPrefix)


def test_the_continuation_failpoints_are_named() -> None:
    assert CONTINUATION_FAILPOINTS == (
        "after_continuation_admission_committed",
        "after_continuation_terminal_committed",
    )


def test_a_failpoint_that_is_not_armed_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAILPOINT_ENV, "P3")
    failpoint(CrashPoint.P4)
    failpoint(CrashPoint.P2, CrashPoint.T1_AFTER_COMMIT)
    monkeypatch.delenv(FAILPOINT_ENV)
    failpoint(CrashPoint.P3)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL exit status is POSIX")
@pytest.mark.parametrize(
    "name", ["P4", "after_continuation_admission_committed", "t1_after_commit"]
)
def test_an_armed_failpoint_kills_the_process_after_flushing_its_output(
    tmp_path: Path, name: str
) -> None:
    marker = tmp_path / "finally-ran"
    child = textwrap.dedent(
        f"""
        import sys
        from runtime.recovery.failpoints import CrashPoint, failpoint
        print("before", flush=False)
        sys.stderr.write("err-before")
        try:
            failpoint(CrashPoint.P0, CrashPoint({name!r}))
            print("after")
        finally:
            open({str(marker)!r}, "w").close()
        """
    )
    env = {**os.environ, FAILPOINT_ENV: name}
    done = subprocess.run(
        [sys.executable, "-c", child],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL
    assert done.stdout == "before\n"
    assert done.stderr == "err-before"
    assert not marker.exists()
