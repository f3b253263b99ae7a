"""Processes named so that another process can tell whether they still run: ``host:pid:start``, the start
time telling a reused pid apart. Dagster runs are tagged with their executing process's name, and lake leases
with their holder's."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from multiprocessing.synchronize import Event

PARENT_POLL_S = 1.0  # how often a pool worker looks for the process that started it
STOP_GRACE_S = 10.0  # how long a stopped pool worker's day run gets to end before the worker exits


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), so a reused pid is not taken for it."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def this_worker() -> str:
    """``host:pid:start`` of the current process."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_ticks(os.getpid())}"


def worker_alive(worker: str) -> bool | None:
    """Whether the process named by ``worker`` still runs; None when it ran on another host (unknown here)."""
    host, _, rest = worker.partition(":")
    pid_text, _, ticks = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isascii() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    return not ticks or _start_ticks(pid) in ("", ticks)


def exit_with_parent(parent: int, stop: Event | None = None) -> None:
    """A pool worker's initializer (``initargs=(os.getpid(), stop)``): the worker exits once ``parent``, the
    process that started it, is gone, even before it got here. A killed `fleet run` otherwise left its day
    pool (and multiprocessing's resource tracker, which waits for them) blocked forever, holding about a
    gigabyte. When ``stop`` is set (the parent was told to stop), the worker stops as a signal would stop
    it (Dagster ends the day's run), and exits at the latest STOP_GRACE_S later."""

    global _stop
    _stop = stop

    def watch() -> None:
        while os.getppid() == parent:
            if stop is not None and stop.is_set():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(STOP_GRACE_S)
                os._exit(143)
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="fleet-exit-with-parent", daemon=True).start()


_stop: Event | None = None  # a pool worker's stop event (exit_with_parent)


def stopping() -> bool:
    """Whether this pool worker's parent told it to stop: no new work is started then."""
    return _stop is not None and _stop.is_set()
