"""The TFF execution context and the lifetime of its ``worker_binary``.

TFF 0.87's local C++ runtime starts a ``worker_binary`` subprocess on first
use. It inherits this process's stdout and outlives it, which hangs CI and any
script that reads our output. Three mechanisms stop it:

* importing :mod:`tffre` registers :func:`shutdown_workers` at interpreter exit
  (plain library use, without :func:`federated_runtime`);
* :func:`install_worker_death_signal` (applied when tffre first imports TFF)
  starts a watchdog, so a Python process ended by SIGTERM or SIGKILL, where no
  exit hook runs, does not leave its workers behind (below);
* :func:`federated_runtime` is a context manager that stops them on exit.

Processes are found with psutil: the workers are this process's children
named ``worker_binary``.

The watchdog is a small Python process (psutil only) that reads a pipe from
this process and does nothing else. When this process dies, however it dies,
the kernel closes the pipe: the watchdog reads EOF, kills every
``worker_binary`` that carries this process's tag and exits. The tag is an
environment variable (``TFFRE_WORKER_OWNER``) set here before TFF starts a
worker, so every worker inherits it; the workers are found by it because,
once their parent is dead, they are no longer anyone's children we could
name. The watchdog runs in its own session with no stdout, so it neither
gets a terminal's Ctrl-C nor holds a reader's pipe open. (A child made by a
bare ``os.fork`` shares the pipe: the watchdog then waits for it too.)

Why a watchdog: it needs nothing of TFF but the worker's name, and it covers
workers of any context that starts them. The two other ways are worse: a
``Popen`` with a parent-death signal (``PR_SET_PDEATHSIG``) has to be slipped
into TFF's private executor-factory module, since TFF starts the worker
itself; and owning the ``Popen`` through TFF's public pieces
(``tff.framework.ResourceManagingExecutorFactory``, ``RemoteExecutor``,
``SyncExecutionContext``) means copying TFF's local executor factory (port,
readiness, restart) and setting it as the default context, which a later
``tff.backends.native.set_sync_local_cpp_execution_context()`` would silently
undo.

This module imports nothing heavy (psutil: ~30 ms): ``import tffre`` stays cheap.
"""

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid

import psutil

_WORKER_NAME = "worker_binary"
_OWNER_VAR = "TFFRE_WORKER_OWNER"

# The watchdog's whole program (argv[1]: the tag). The read returns at EOF, when every
# copy of the pipe's write end is closed: this process has exited or been killed.
_WATCHDOG = f"""
import sys, psutil
sys.stdin.buffer.read()
for proc in psutil.process_iter(["name"]):
    try:
        if (proc.info["name"] == {_WORKER_NAME!r}
                and proc.environ().get({_OWNER_VAR!r}) == sys.argv[1]):
            proc.kill()
    except psutil.Error:
        pass
"""

_watchdog = None   # (owner pid, Popen): a forked child starts its own


def _workers():
    """This process's live (not zombie) ``worker_binary`` children, as psutil processes."""
    found = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if child.name() == _WORKER_NAME and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
    return found


def _alive(proc):
    with contextlib.suppress(psutil.Error):
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    return False


def worker_pids():
    """Returns the pids of the TFF ``worker_binary`` processes this process started."""
    return [proc.pid for proc in _workers()]


def _peak_mib(proc):
    # psutil reports the current RSS only; Linux keeps the peak (VmHWM) in /proc/PID/status.
    with contextlib.suppress(OSError, ValueError):
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    with contextlib.suppress(psutil.Error):
        return proc.memory_info().rss / 2**20
    return 0.0


def peak_rss_mib():
    """Peak resident memory so far, in MiB: this process and the live TFF workers.

    Read it before :func:`shutdown_workers`: a stopped worker's peak is gone.
    """
    import resource   # Unix only
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    worker = max((_peak_mib(proc) for proc in _workers()), default=0.0)
    return {"python": round(own, 1), "tff_worker": round(worker, 1),
            "total": round(own + worker, 1)}


def shutdown_workers(timeout=10.0):
    """Stops the TFF ``worker_binary`` processes started by this process.

    TFF restarts a worker on the next federated call, so this is safe to call
    between experiments. SIGTERM, then SIGKILL after ``timeout`` seconds. Returns the pids
    that were stopped.
    """
    workers = _workers()
    # SIGTERM, not TFF's own SIGINT: a worker started by a background job of a
    # non-interactive shell (`python run.py &` in a script) inherits SIGINT ignored, and
    # would then stop only at the SIGKILL, ``timeout`` seconds later. The worker catches
    # neither signal: both end it at once.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for proc in workers:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(map(_alive, workers)):
            time.sleep(0.05)
        if not any(map(_alive, workers)):
            break
    # Polled, not psutil.wait_procs: that would reap the workers, and a stopped worker
    # is left as a zombie for TFF's own Popen to reap: TFF signals its old pid before
    # restarting, and that must not fail (or hit a reused pid) because we reaped it first.
    return [proc.pid for proc in workers]


def install_worker_death_signal():
    """Starts the watchdog that kills this process's TFF workers when it dies (once).

    See the module docstring. Safe to call any number of times; a forked child
    gets its own watchdog and tag. Returns True if the watchdog runs.
    """
    global _watchdog
    if _watchdog is not None and _watchdog[0] == os.getpid() and _watchdog[1].poll() is None:
        return True
    if not sys.executable:
        return False
    tag = uuid.uuid4().hex
    try:
        proc = subprocess.Popen([sys.executable, "-c", _WATCHDOG, tag], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError:
        return False
    # Set after the watchdog started, so that it does not carry the tag itself.
    os.environ[_OWNER_VAR] = tag
    _watchdog = (os.getpid(), proc)
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

    TFF's local context reaps its worker when it is garbage-collected; left to
    interpreter teardown that runs after ``subprocess`` is gone and prints an
    ignored AttributeError (whether or not a worker ran). Replacing it here, with
    TFF's public setter, by a context that holds no runtime lets it run cleanly.
    """
    shutdown_workers()
    if "tensorflow_federated" not in sys.modules:
        return
    import gc
    import tensorflow_federated as tff

    class ExitedContext(tff.framework.SyncContext):
        """TFF's default context once the interpreter is exiting: it runs nothing."""

        def invoke(self, comp, arg):
            raise RuntimeError("TFF's runtime was released at interpreter exit")

    tff.framework.set_default_context(ExitedContext())
    gc.collect()


atexit.register(_release_tff_runtime)
