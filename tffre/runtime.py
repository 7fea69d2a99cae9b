"""The TFF execution context and the lifetime of its ``worker_binary``.

TFF 0.87's local C++ runtime starts a ``worker_binary`` subprocess on first
use. It inherits this process's stdout and outlives it, which hangs CI and any
script that reads our output. Three mechanisms stop it:

* importing :mod:`tffre` registers :func:`shutdown_workers` at interpreter exit
  (plain library use, without :func:`federated_runtime`);
* :func:`install_worker_death_signal` (applied when tffre first imports TFF)
  makes the kernel send the worker SIGKILL when its parent dies, so a
  Python process ended by SIGTERM or SIGKILL, where no exit hook runs, does not
  leave it behind (Linux ``PR_SET_PDEATHSIG``);
* :func:`federated_runtime` is a context manager that stops it on exit.

This module imports nothing heavy: ``import tffre`` stays cheap.
"""

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time
import types

_WORKER_NAME = "worker_binary"


def _children_running(name=_WORKER_NAME, parent=None):
    """Returns the pids of live processes whose parent is ``parent`` and whose command names ``name``."""
    parent = os.getpid() if parent is None else parent
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
        except OSError:
            continue
        # Field 4 of /proc/PID/stat is the parent pid; the command name in
        # field 2 may contain spaces, so split after its closing parenthesis.
        fields = stat[stat.rfind(")") + 2:].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == parent and name in cmdline and state != "Z":
            pids.append(int(entry))
    return pids


def worker_pids():
    """Returns the pids of the TFF ``worker_binary`` processes this process started."""
    return _children_running()


def peak_rss_mib():
    """Peak resident memory so far, in MiB: this process and the live TFF workers (VmHWM).

    Read it before :func:`shutdown_workers`: a stopped worker's peak is gone.
    """
    import resource
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    worker = 0.0
    for pid in worker_pids():
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        worker = max(worker, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return {"python": round(own, 1), "tff_worker": round(worker, 1),
            "total": round(own + worker, 1)}


def shutdown_workers(timeout=10.0):
    """Stops the TFF ``worker_binary`` processes started by this process.

    TFF restarts a worker on the next federated call, so this is safe to call
    between experiments. Returns the pids that were stopped.
    """
    pids = worker_pids()
    for sig in (signal.SIGINT, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and worker_pids():
            time.sleep(0.05)
        if not worker_pids():
            break
    # The stopped worker is left as a zombie for TFF's own Popen to reap: TFF
    # signals its old pid before restarting, and that must not fail (or hit a
    # reused pid) because we reaped it first.
    return pids


_PR_SET_PDEATHSIG = 1


def _death_signal_preexec():
    """Runs in the forked child before exec: die with SIGKILL when the parent thread dies.

    The death signal survives ``execve``. If the parent is already gone (a race
    with its death), exit at once rather than run orphaned.
    """
    parent = _death_signal_preexec.parent
    if _death_signal_preexec.libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return  # no death signal on this kernel: the exit hooks remain
    if os.getppid() != parent:
        os._exit(1)


class _DeathSignalPopen(subprocess.Popen):
    """``subprocess.Popen`` whose child gets a parent-death signal (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        if kwargs.get("preexec_fn") is None:
            _death_signal_preexec.parent = os.getpid()
            kwargs["preexec_fn"] = _death_signal_preexec
        super().__init__(*args, **kwargs)


def install_worker_death_signal():
    """Makes TFF start its ``worker_binary`` with a parent-death signal (Linux only).

    TFF's local executor factory starts the worker with ``subprocess.Popen``;
    this gives that module a ``subprocess`` whose ``Popen`` sets
    ``PR_SET_PDEATHSIG``, so the worker is killed by the kernel when the
    Python process dies, even by SIGKILL. The signal fires when the *thread*
    that started the worker ends; TFF starts it from its event-loop thread,
    which lives as long as the execution context. Returns True if installed.
    """
    if not sys.platform.startswith("linux"):
        return False
    from tensorflow_federated.python.core.impl.executor_stacks import executor_factory
    if isinstance(getattr(executor_factory, "subprocess", None), types.SimpleNamespace):
        return True
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    _death_signal_preexec.libc = ctypes.CDLL(libc_name, use_errno=True)
    names = {k: getattr(subprocess, k) for k in dir(subprocess) if not k.startswith("__")}
    names["Popen"] = _DeathSignalPopen
    executor_factory.subprocess = types.SimpleNamespace(**names)
    return True


@contextlib.contextmanager
def federated_runtime():
    """Context manager that shuts the TFF workers down on exit, even on error."""
    try:
        yield
    finally:
        shutdown_workers()


def _release_tff_runtime():
    """At exit: stop the workers, then drop TFF's execution context while Python still works.

    TFF's ServiceManager reaps its worker in ``__del__``; left to interpreter
    teardown that runs after ``subprocess`` is gone and prints an ignored
    AttributeError. Replacing the default context here lets it run cleanly.
    """
    shutdown_workers()
    import sys
    if "tensorflow_federated" not in sys.modules:
        return
    import gc
    from tensorflow_federated.python.core.impl.context_stack import context_stack_impl
    from tensorflow_federated.python.core.impl.context_stack import runtime_error_context
    context_stack_impl.context_stack.set_default_context(
        runtime_error_context.RuntimeErrorContext())
    gc.collect()


atexit.register(_release_tff_runtime)
