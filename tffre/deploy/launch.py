"""Starting Flower's daemons and tffre's long-lived ClientApp process; stopping all of them.

* ``python -m tffre.deploy.launch ENTRY_POINT ARGS...`` runs one of flwr's console
  scripts (``flower-superlink``, ``flower-supernode``, ``flwr``) with TensorFlow kept
  out: flwr imports it when it is installed (``flwr/server/utils/tensorboard.py``),
  which costs a daemon 3-8 CPU-s and about 540 MiB for nothing (0.5-1 CPU-s and 72 MiB
  without; ``import flwr.server``, measured on both machine kinds). With ``TFFRE_FLOWER_POLL``
  set, a SuperNode's fixed waits are shortened; a SuperNode survives a refused reply and
  says in one line whether the SuperLink admitted it; a SuperLink gets its two races
  closed (:mod:`tffre.deploy.flower_patches`).
* :func:`serve_clientapp`: a site's ClientApp in one long-lived process. The
  SuperNode runs with ``--isolation process`` and this loop takes its messages over
  the node's local ClientAppIo API, runs tffre's ClientApp
  (:data:`tffre.deploy.client_app.app`) and pushes the reply. Flower's default
  (``--isolation subprocess``) starts a new Python process per message, which
  imports TensorFlow and builds the model again each round (15-20 s here). The loop
  runs only tffre's ClientApp: it never imports code the server sends (the run's
  FAB), and refuses a run whose app is not tffre's.
* :class:`Daemon`: a started process in its own process group, stopped with its
  children (SIGTERM, then SIGKILL), and killed by the kernel if this process dies
  first (``PR_SET_PDEATHSIG``, which the child asks for itself: :func:`die_with_parent`).
"""

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

POLL_VARIABLE = "TFFRE_FLOWER_POLL"
PARENT_VARIABLE = "TFFRE_DIE_WITH_PARENT"
CLIENT_APP = "tffre.deploy.client_app:app"
SERVER_APP = "tffre.deploy.server_app:app"


def flower_command(entry_point, *args):
    """The command line running flwr's console script ``entry_point`` through this launcher."""
    return [sys.executable, "-m", "tffre.deploy.launch", entry_point, *map(str, args)]


def main(argv=None):
    """``python -m tffre.deploy.launch ENTRY_POINT ARGS...`` (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        print("usage: python -m tffre.deploy.launch ENTRY_POINT [ARGS...]", file=sys.stderr)
        return 2
    die_with_parent()
    sys.modules["tensorflow"] = None   # import tensorflow -> ModuleNotFoundError: flwr skips it
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    entry_point = argv[0]
    from tffre.deploy import flower_patches
    poll = os.environ.get(POLL_VARIABLE)
    if poll and entry_point == "flower-supernode":
        flower_patches.shorten_supernode_waits(float(poll))
    if entry_point == "flower-supernode":
        flower_patches.survive_refused_replies()
        flower_patches.report_admission()
    if entry_point == "flower-superlink":
        flower_patches.register_objects_first()
        flower_patches.atomic_object_registration()
        flower_patches.superexec_without_tensorflow(flower_command)
    from importlib.metadata import entry_points
    found = [e for e in entry_points(group="console_scripts") if e.name == entry_point]
    if not found:
        print(f"no console script {entry_point!r} (is flwr installed?)", file=sys.stderr)
        return 2
    sys.argv = [entry_point, *argv[1:]]
    return found[0].load()() or 0


def die_with_parent():
    """In a :class:`Daemon`'s process, first thing: asks the kernel for SIGTERM when the
    process that started it dies (``PR_SET_PDEATHSIG``); SIGTERM at once if it already has.

    Done here rather than in a ``preexec_fn``: Python code run between fork and exec in a
    threaded parent (TensorFlow's, gRPC's, pytest's) can crash the child before it starts
    (CI saw a segfault and, with filelock 4.3's fork hook, an abort there).
    """
    parent = os.environ.pop(PARENT_VARIABLE, None)
    if not parent:
        return
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    if str(os.getppid()) != parent:        # the parent died before the prctl
        os.kill(os.getpid(), signal.SIGTERM)


class Daemon:
    """A process started in its own process group (see the module docstring).

    Args:
      command: the command line.
      log: a file path for its stdout and stderr (None: inherited).
      env: extra environment variables.
    """

    def __init__(self, command, log=None, env=None, name=None):
        self.name = name or os.path.basename(command[0])
        self.command = list(command)   # to start it again
        self.log_path = log
        out = open(log, "ab") if log else None
        environment = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", **(env or {}),
                       PARENT_VARIABLE: str(os.getpid())}
        try:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT if out
                                            else None, env=environment,
                                            start_new_session=True)
        finally:
            if out is not None:
                out.close()
        self.pid = self.process.pid

    def alive(self):
        return self.process.poll() is None

    def group(self):
        """The live processes of this daemon's process group (itself and its children)."""
        import psutil
        found = []
        for proc in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error, OSError):
                if os.getpgid(proc.pid) == self.pid:
                    found.append(proc)
        return found

    def stop(self, timeout=10.0):
        """SIGTERM to the process group, SIGKILL to what is left after ``timeout`` seconds;
        returns the pids that needed SIGKILL."""
        return stop_all([self], timeout)


def stop_all(daemons, timeout=10.0):
    """Stops ``daemons`` together (see :meth:`Daemon.stop`); returns the pids that needed
    SIGKILL."""
    import psutil
    members = [proc for daemon in daemons for proc in daemon.group()]
    for daemon in daemons:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(daemon.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(members, timeout=timeout)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=timeout)
    for daemon in daemons:
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.process.wait(timeout=timeout)
    return [p.pid for p in alive]


def wait_for_port(host, port, timeout, daemon=None):
    """Waits until ``host:port`` accepts connections; RuntimeError naming the daemon's log when
    it exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon is not None and not daemon.alive():
            raise RuntimeError(f"{daemon.name} exited (code {daemon.process.returncode}); see "
                               f"{daemon.log_path}")
        with contextlib.suppress(OSError):
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        time.sleep(0.2)
    raise RuntimeError(f"{host}:{port} did not open within {timeout:g} s"
                       + (f"; see {daemon.log_path}" if daemon and daemon.log_path else ""))


def free_port():
    """A free TCP port on 127.0.0.1."""
    import portpicker
    return portpicker.pick_unused_port()


def fab_app(fab):
    """The ClientApp reference of a run's FAB (its pyproject's components), or None."""
    import io
    import zipfile
    try:
        import tomli
        with zipfile.ZipFile(io.BytesIO(fab.content)) as archive:
            config = tomli.loads(archive.read("pyproject.toml").decode())
        return config["tool"]["flwr"]["app"]["components"]["clientapp"]
    except Exception:   # not a readable FAB
        return None


LOCAL_CHANNEL = ("ClientApp connected to its SuperNode on loopback {address} (same machine, "
                 "not the network)")
_INSECURE_RECORD = "Opened insecure gRPC connection"


class _LocalChannelRecord:
    """A logging filter dropping Flower's "Opened insecure gRPC connection" record."""

    @staticmethod
    def filter(record):
        return _INSECURE_RECORD not in record.getMessage()


def open_local_channel(address):
    """The gRPC channel from a site's ClientApp to its SuperNode's ClientAppIo API at
    ``address``, which must be on loopback; logs :data:`LOCAL_CHANNEL` for it.

    The channel has no TLS: it never leaves the machine (the SuperNode binds the API to
    127.0.0.1; Flower's own per-message ClientApp connects the same way). Flower logs every
    channel without certificates as "Opened insecure gRPC connection (no certificates were
    passed)", which beside a SuperLink connection with TLS reads as if the site's traffic
    were unencrypted: that record is dropped for this channel only, and the line says what
    it is. The SuperNode's own connection to the SuperLink is another process's: its log,
    and ``--insecure``'s warning, are untouched."""
    import ipaddress
    import logging
    from flwr.common.grpc import create_channel
    host = address.rsplit(":", 1)[0].strip("[]")
    if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"the ClientAppIo API must be on loopback, not {address}")
    logger = logging.getLogger("flwr")
    quiet = _LocalChannelRecord()
    logger.addFilter(quiet)
    try:
        channel = create_channel(server_address=address, insecure=True, root_certificates=None)
    finally:
        logger.removeFilter(quiet)
    print(LOCAL_CHANNEL.format(address=address), flush=True)
    return channel


def serve_clientapp(address, *, poll=0.05, should_stop=lambda: False, app=None):
    """Runs tffre's ClientApp for the messages a SuperNode (``--isolation process``) holds at
    its ClientAppIo ``address``, until ``should_stop()``."""
    from flwr.app import Error, Message
    from flwr.common.constant import ErrorCode
    from flwr.common.inflatable_utils import (ObjectIdNotPreregisteredError,
                                              ObjectUnavailableError)
    import grpc
    from flwr.proto.appio_pb2 import ListAppsToLaunchRequest, RequestTokenRequest
    from flwr.proto.clientappio_pb2_grpc import ClientAppIoStub
    from flwr.supernode.runtime.run_clientapp import (pull_clientappinputs,
                                                      push_clientappoutputs)
    from tffre.deploy import flower_patches
    flower_patches.shorten_pulls()
    if app is None:
        from tffre.deploy.client_app import app
    channel = open_local_channel(address)
    stub = ClientAppIoStub(channel)
    try:
        while not should_stop():
            try:
                runs = stub.ListAppsToLaunch(ListAppsToLaunchRequest()).run_ids
                token = stub.RequestToken(RequestTokenRequest(run_id=runs[0])).token \
                    if runs else ""
            except grpc.RpcError:   # the SuperNode is starting or gone: should_stop decides
                token = ""
            if not token:
                time.sleep(poll)
                continue
            start = time.perf_counter()
            try:
                message, context, _, fab = pull_clientappinputs(stub, token)
            except (grpc.RpcError, ObjectUnavailableError,
                    ObjectIdNotPreregisteredError) as err:
                # This message is lost (the server goes on without this site for it, and says
                # hello again later); the site stays up for the next. A SuperLink restarted
                # while its message was in flight no longer holds the message's objects.
                _lost("pull a message from", err)
                continue
            pulled = time.perf_counter()
            wanted = fab_app(fab) if fab is not None else CLIENT_APP
            if wanted != CLIENT_APP:
                reply = Message(Error(code=ErrorCode.LOAD_CLIENT_APP_EXCEPTION,
                                      reason=f"this site runs only tffre's ClientApp "
                                             f"({CLIENT_APP}), not {wanted!r}"),
                                reply_to=message)
            else:
                try:
                    reply = app(message=message, context=context)
                except Exception as err:   # as flwr-clientapp: an error reply, go on
                    reason = " ".join(f"{type(err).__name__}: {err}".split())
                    print(f"ClientApp error: {reason}", file=sys.stderr, flush=True)
                    reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                                          reason=reason), reply_to=message)
            ran = time.perf_counter()
            try:
                push_clientappoutputs(stub, token, reply, context)
            except grpc.RpcError as err:   # the SuperNode or its SuperLink went: as a pull's
                _lost("push a reply to", err)
                continue
            print(f"{message.metadata.message_type} {message.metadata.group_id}: pull "
                  f"{pulled - start:.2f} s, run {ran - pulled:.2f} s, push "
                  f"{time.perf_counter() - ran:.2f} s", flush=True)
    finally:
        channel.close()


def _lost(what, err):
    """Says on stderr, in one line, that a message was lost and why."""
    why = err.details() if callable(getattr(err, "details", None)) else err
    print(f"ClientApp: could not {what} the SuperNode: {why}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
