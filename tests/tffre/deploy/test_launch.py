"""tffre.deploy.launch: a Daemon's process stops when the process that started it dies; the
ClientApp outlives a lost message."""

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


def test_a_message_whose_objects_are_gone_is_lost_but_the_clientapp_serves_the_next(
        monkeypatch, capsys):
    """The failure of a killed-and-restarted SuperLink (its object store went with it): the
    pull of one message raises flwr's ObjectUnavailableError, a push fails over gRPC; the
    site says so in one line each and goes on serving, where it used to exit."""
    import types
    import grpc
    from flwr.common.inflatable_utils import ObjectUnavailableError
    import flwr.proto.clientappio_pb2_grpc as stubs
    import flwr.supernode.runtime.run_clientapp as runtime
    from tffre.deploy import launch

    tokens = iter(["lost-pull", "lost-push", "served"])
    served, pushed = [], []

    class Stub:
        def __init__(self, channel):
            pass

        def ListAppsToLaunch(self, request):
            return types.SimpleNamespace(run_ids=[7])

        def RequestToken(self, request):
            return types.SimpleNamespace(token=next(tokens, ""))

    class Gone(grpc.RpcError):
        def details(self):
            return "Socket closed"

    def pull(stub, token):
        if token == "lost-pull":
            raise ObjectUnavailableError("64ed")
        metadata = types.SimpleNamespace(message_type="train", group_id=token)
        return types.SimpleNamespace(metadata=metadata), "context", None, None

    def push(stub, token, reply, context):
        if token == "lost-push":
            raise Gone()
        pushed.append(token)

    def app(message, context):
        served.append(message.metadata.group_id)
        return "reply"

    monkeypatch.setattr(stubs, "ClientAppIoStub", Stub)
    monkeypatch.setattr(runtime, "pull_clientappinputs", pull)
    monkeypatch.setattr(runtime, "push_clientappoutputs", push)
    monkeypatch.setattr(launch, "open_local_channel",
                        lambda address: types.SimpleNamespace(close=lambda: None))
    launch.serve_clientapp("127.0.0.1:9", poll=0.001, app=app,
                           should_stop=lambda: pushed == ["served"])
    err = capsys.readouterr().err.splitlines()
    assert served == ["lost-push", "served"] and pushed == ["served"]
    assert err == ["ClientApp: could not pull a message from the SuperNode: Object with ID "
                   "'64ed' is not yet available.",
                   "ClientApp: could not push a reply to the SuperNode: Socket closed"]
