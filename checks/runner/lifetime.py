"""Child processes that die with the process that started them, however it ends.

Shared by the clause workers (checks/runner/worker.py), the vector runner (checks/vectors/run.py) and the proof
workers of ``rlspec prove``: no import beyond the standard library, so a command that needs neither torch
nor Hypothesis does not load them to get this.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

ORPHAN_POLL = 0.5  # seconds between a child's checks that its parent is alive (the portable fallback)


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` ends, however it ends (SIGKILL included).

    On Linux the kernel sends SIGKILL when the parent ends (``PR_SET_PDEATHSIG``); everywhere, as a second
    line, a daemon thread exits the process once its parent is gone. The thread needs the GIL, which native
    code that hangs usually releases."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            PR_SET_PDEATHSIG = 1
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
            pass
    if os.getppid() != parent:  # the parent ended between the fork and the prctl
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL)
        os._exit(1)

    threading.Thread(target=watch, name="rlspec-orphan-watch", daemon=True).start()
