"""tffre.deploy.launch: a Daemon's process stops when the process that started it dies."""

import subprocess
import sys

import psutil
import pytest
from processes import still_running

SLEEPER = ("import time; {call}time.sleep(60)")
PARENT = ("import sys; from tffre.deploy.launch import Daemon; "
          "d = Daemon([sys.executable, '-c', {child!r}], log={log!r}); print(d.pid, flush=True)")


def _orphan(call, log):
    """Starts a Daemon (its output to ``log``, so that it holds no pipe of ours) from a parent
    process that then exits; returns the Daemon's pid."""
    child = SLEEPER.format(call=call)
    out = subprocess.run([sys.executable, "-c", PARENT.format(child=child, log=str(log))],
                         capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.parametrize("asks", [True, False])
def test_a_daemon_dies_with_its_parent_only_when_it_asks(asks, tmp_path):
    call = ("from tffre.deploy.launch import die_with_parent; die_with_parent(); "
            if asks else "")
    pid = _orphan(call, tmp_path / "daemon.log")
    try:
        # The child asks the kernel itself (no preexec_fn: Python between fork and exec in a
        # threaded parent crashed children in CI); one that does not ask outlives its parent.
        assert (not still_running([pid], 20 if asks else 3)) is asks
    finally:
        if psutil.pid_exists(pid):
            psutil.Process(pid).kill()
