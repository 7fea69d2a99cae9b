"""The flwr 1.23.0 workarounds of :mod:`tffre.deploy.flower_patches` that fix Flower bugs:
the SuperLink's object store counting a tree whole before a delete can look at it, and a
SuperNode going on after the SuperLink refuses a reply."""

import threading

import grpc
import pytest

from tffre.deploy import flower_patches

flwr = pytest.importorskip("flwr")
pytestmark = pytest.mark.skipif(flwr.__version__ != flower_patches.FLOWER_VERSION,
                                reason="the patches apply to flwr 1.23.0 only")

X, B, A = "1" * 64, "2" * 64, "3" * 64   # object ids (sha256-shaped): X shared by B and A


def tree(object_id, *children):
    from flwr.proto.message_pb2 import ObjectTree
    return ObjectTree(object_id=object_id, children=list(children))


def test_a_reply_sharing_an_object_with_one_being_deleted_registers_whole(tmp_path,
                                                                           monkeypatch):
    """Site b's reply B -> X was pulled; the ServerApp confirms it (delete B) while site a's
    reply A -> X registers. flwr 1.23.0 alone: X's count falls to 0 and X goes between
    a's two registrations, then "FOREIGN KEY constraint failed" (the demo's failure)."""
    from flwr.supercore.object_store import sqlite_object_store as module
    assert flower_patches.atomic_object_registration()
    store = module.SqliteObjectStore(str(tmp_path / "store.db"), verify=False)
    store.initialize()
    store.preregister(1, tree(B, tree(X)))
    store.put(X, b"x")
    store.put(B, b"b")
    # Site a's registration pauses right after X (children first), as a gRPC thread may.
    x_registered, go_on = threading.Event(), threading.Event()
    real_iterate = module.iterate_object_tree

    def pausing(object_tree):
        for node in real_iterate(object_tree):
            yield node
            if node.object_id == X and object_tree.object_id == A:
                x_registered.set()
                go_on.wait(30)
    monkeypatch.setattr(module, "iterate_object_tree", pausing)
    errors = []   # what site a's registration returned or raised

    def register_a():
        try:
            own = module.SqliteObjectStore(store.database_path, verify=False)
            own.initialize()
            errors.append(own.preregister(1, tree(A, tree(X))))
        except Exception as err:   # noqa: BLE001 -- the failure under test
            errors.append(err)

    def delete_b():
        own = module.SqliteObjectStore(store.database_path, verify=False)
        own.initialize()
        own.delete(B)
    site_a = threading.Thread(target=register_a)
    site_a.start()
    assert x_registered.wait(30)
    server = threading.Thread(target=delete_b)
    server.start()
    server.join(1.0)   # unpatched, the delete runs to its end here
    go_on.set()
    site_a.join(30)
    server.join(30)
    assert not site_a.is_alive() and not server.is_alive()
    result, = errors
    assert not isinstance(result, Exception), result
    # A's tree is whole; X was kept for it (a need not push it again: it is available).
    assert store.get_object_tree(A) == tree(A, tree(X))
    assert store.get(X) == b"x" and B not in store
    assert result == [A]


def test_a_supernode_goes_on_after_the_superlink_refuses_a_reply(monkeypatch):
    import flwr.supernode.start_client_internal as supernode

    class Refused(grpc.RpcError):
        def details(self):
            return "Exception calling application: FOREIGN KEY constraint failed"
    calls = []

    def push(**kwargs):
        calls.append(kwargs)
        raise Refused()
    monkeypatch.setattr(supernode, "_push_messages", push)
    assert flower_patches.survive_refused_replies()
    assert supernode._push_messages(state=None) is None   # logged, not raised
    assert calls == [{"state": None}]


def test_the_superlinks_executor_starts_through_the_launcher(monkeypatch):
    """flwr's SuperLink starts ``flower-superexec``; patched, it starts it through tffre's
    launcher (no TensorFlow there); any other command, and the module's other names, pass
    through. The real SuperLink's executor is checked in test_deploy_e2e.py."""
    import subprocess
    import sys
    from flwr.server import app as superlink
    started = []

    class Module:   # stands in for subprocess: records what would start
        PIPE = subprocess.PIPE

        @staticmethod
        def Popen(command, *args, **kwargs):   # noqa: N802
            started.append(command)
    from tffre.deploy.launch import flower_command
    monkeypatch.setattr(superlink, "subprocess", Module())
    assert flower_patches.superexec_without_tensorflow(flower_command)
    assert flower_patches.superexec_without_tensorflow(flower_command)   # wrapped once
    superlink.subprocess.Popen(["flower-superexec", "--insecure", "--plugin-type", "serverapp"])
    superlink.subprocess.Popen(["flwr-serverapp", "--insecure"])
    assert started == [
        [sys.executable, "-m", "tffre.deploy.launch", "flower-superexec", "--insecure",
         "--plugin-type", "serverapp"],
        ["flwr-serverapp", "--insecure"]]
    assert superlink.subprocess.PIPE == subprocess.PIPE
