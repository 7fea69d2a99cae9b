"""Process helpers for the tests that start processes: whether one still runs, and waiting
for some to exit."""

import time

import psutil


def running(pid):
    """True while ``pid`` runs; a zombie (exited, not yet reaped) counts as exited."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def still_running(pids, seconds):
    """Those of ``pids`` still running once all have exited or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    alive = [p for p in pids if running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if running(p)]
    return alive
