"""Windows: a Job Object with kill-on-close holds every process a tool starts
(docs/design/recovery.md 9).

The host keeps the job's handle. When the host exits in any way (a crash, ``TerminateProcess``)
Windows closes the handle and kills every process in the job, grandchildren included; a finished
command's leftovers go when the host closes the handle itself (``close_job``). Elsewhere these
functions do nothing: POSIX hosts use the supervisor (``runtime/tools/tool_supervisor.py``).
"""

from __future__ import annotations

import subprocess
import sys

if sys.platform == "win32":
    import ctypes
    from ctypes import wintypes

    _JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9
    _JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000

    class _IoCounters(ctypes.Structure):
        _fields_ = [
            ("ReadOperationCount", ctypes.c_ulonglong),
            ("WriteOperationCount", ctypes.c_ulonglong),
            ("OtherOperationCount", ctypes.c_ulonglong),
            ("ReadTransferCount", ctypes.c_ulonglong),
            ("WriteTransferCount", ctypes.c_ulonglong),
            ("OtherTransferCount", ctypes.c_ulonglong),
        ]

    class _BasicLimits(ctypes.Structure):
        _fields_ = [
            ("PerProcessUserTimeLimit", ctypes.c_int64),
            ("PerJobUserTimeLimit", ctypes.c_int64),
            ("LimitFlags", wintypes.DWORD),
            ("MinimumWorkingSetSize", ctypes.c_size_t),
            ("MaximumWorkingSetSize", ctypes.c_size_t),
            ("ActiveProcessLimit", wintypes.DWORD),
            ("Affinity", ctypes.c_size_t),
            ("PriorityClass", wintypes.DWORD),
            ("SchedulingClass", wintypes.DWORD),
        ]

    class _ExtendedLimits(ctypes.Structure):
        _fields_ = [
            ("BasicLimitInformation", _BasicLimits),
            ("IoInfo", _IoCounters),
            ("ProcessMemoryLimit", ctypes.c_size_t),
            ("JobMemoryLimit", ctypes.c_size_t),
            ("PeakProcessMemoryUsed", ctypes.c_size_t),
            ("PeakJobMemoryUsed", ctypes.c_size_t),
        ]

    def attach_kill_on_close_job(process: subprocess.Popen[bytes]) -> int | None:
        """Put ``process`` in a new kill-on-close job; return the job handle (None if refused)."""
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        job = kernel32.CreateJobObjectW(None, None)
        if not job:
            return None
        limits = _ExtendedLimits()
        limits.BasicLimitInformation.LimitFlags = _JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        if not kernel32.SetInformationJobObject(
            job, _JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, ctypes.byref(limits), ctypes.sizeof(limits)
        ) or not kernel32.AssignProcessToJobObject(job, int(process._handle)):  # type: ignore[attr-defined]
            kernel32.CloseHandle(job)
            return None
        return int(job)

    def close_job(job: int | None) -> None:
        if job:
            ctypes.WinDLL("kernel32").CloseHandle(job)

else:

    def attach_kill_on_close_job(process: subprocess.Popen[bytes]) -> int | None:
        del process
        return None

    def close_job(job: int | None) -> None:
        del job
