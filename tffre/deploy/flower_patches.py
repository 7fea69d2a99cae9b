"""Changes to flwr 1.23.0, each in the processes tffre starts, each naming the code it works
around. No Flower option covers them: the races are in the object stores (SQLite and in
memory alike), the waits are literals or bound defaults, not settings of
``flower-superlink``/``flower-supernode``. With another flwr release they do
nothing and say so (re-read the places named below before bumping flwr).

* :func:`register_objects_first` (SuperLink): a race that loses messages (a bug).
* :func:`atomic_object_registration` (SuperLink): a race between two sites' replies that
  share an object (a bug: "FOREIGN KEY constraint failed", the site's SuperNode quit).
* :func:`survive_refused_replies` (SuperNode): a reply the SuperLink refuses is logged
  and dropped; the SuperNode goes on (flwr 1.23 lets the error end the process).
* :func:`report_admission` (SuperNode): one line when the SuperLink admits the node (its node
  id) and one line when it refuses it, then exit code :data:`REFUSED_EXIT`, where flwr 1.23
  logs the gRPC error over five lines and dies with "RuntimeError: generator didn't yield".
* :func:`superexec_without_tensorflow` (SuperLink): the ServerApp executor it starts runs
  through tffre's launcher, without TensorFlow (which it never uses).
* :func:`shorten_supernode_waits` (SuperNode) and :func:`shorten_pulls` (every process
  that pulls objects): Flower's fixed waits, which would be most of a round that
  computes for about a second (issue 22's loopback target).

Tried without (SuperLink + 2 SuperNodes on loopback, the tiny task of
``tests/tffre/deploy``, 0.1 s polls, a loaded 2-core machine): without
``register_objects_first``, 2 messages lost in 15 rounds (the SuperLink's "Object ... not
found"; GridLink's resend recovered them), none with it; without the SuperNode's waits
shortened 3.6-4.2 s a round, without the pulls' 2.8-3.4 s, with both 1.1-1.7 s. Without
``atomic_object_registration`` ``examples/deploy_local.py`` (3 sites) lost site a in
round 2; ``tests/tffre/deploy/test_flower_patches.py`` replays that interleaving.
"""

import functools
import sys
import threading
import time
import types

FLOWER_VERSION = "1.23.0"

#: The SuperNode's log lines of :func:`report_admission` (``deploy supernode`` reads them).
ADMITTED = "tffre: the SuperLink admitted this SuperNode as node {node_id}"
REFUSED = "tffre: the SuperLink refused this SuperNode: {reason}"
#: flower-supernode's exit code when the SuperLink refused it (:func:`report_admission`).
REFUSED_EXIT = 3


def _flower_matches():
    import flwr
    if flwr.__version__ != FLOWER_VERSION:
        print(f"note: flwr {flwr.__version__} is not {FLOWER_VERSION}: tffre.deploy.flower_patches "
              f"not applied", file=sys.stderr)
        return False
    return True


def register_objects_first():
    """The SuperLink registers a message's objects before it stores the message. Call in the
    ``flower-superlink`` process before it starts; returns True when applied.

    flwr 1.23.0 stores the message first and registers its objects after:
    ``server/superlink/serverappio/serverappio_servicer.py`` ``PushMessages`` (line 210
    ``store_message_ins``, line 214 ``store_mapping_and_register_objects``) for the
    ServerApp's instructions, ``server/superlink/fleet/message_handler/message_handler.py``
    ``push_messages`` (line 188 ``store_message_res``, line 191) for a site's reply. A pull
    served by another gRPC thread in between finds the message but no object tree
    (``NoObjectInStoreError``) and *deletes the message* (``message_handler.py``
    ``pull_messages``, lines 160-163); the ServerApp then gets "Message Unavailable".
    Flower's later releases store both in one step (flwrlabs/flower PR #7564). Registering
    is idempotent, so each handler is wrapped, not rewritten: Flower's own call right after
    finds the objects registered already."""
    if not _flower_matches():
        return False
    from flwr.server.superlink.fleet.message_handler import message_handler as fleet
    from flwr.server.superlink.serverappio.serverappio_servicer import ServerAppIoServicer
    from flwr.supercore.object_store.utils import store_mapping_and_register_objects
    if getattr(fleet.push_messages, "registers_first", False):
        return True
    fleet_push, server_push = fleet.push_messages, ServerAppIoServicer.PushMessages

    def push_messages(request, state, store):   # a site's reply
        store_mapping_and_register_objects(store, request=request)
        return fleet_push(request, state, store)

    def PushMessages(self, request, context):   # the ServerApp's instructions
        if request.messages_list:
            store_mapping_and_register_objects(self.objectstore_factory.store(),
                                               request=request)
        return server_push(self, request, context)

    push_messages.registers_first = True
    fleet.push_messages = push_messages   # looked up at call time by fleet_servicer.py
    ServerAppIoServicer.PushMessages = PushMessages
    return True


_STORE_LOCK = threading.RLock()   # one per process: the SuperLink's gRPC threads share it


def atomic_object_registration():
    """The SuperLink's object store registers a message's object tree, and deletes one, as
    one step. Call in the ``flower-superlink`` process before it starts; returns True when
    applied.

    Objects are content-addressed (sha256 of their bytes), so two sites' replies share
    every equal array (a zero delta of a layer the round did not train, an equal example
    count, ...): one row, ``ref_count`` = number of parents. flwr 1.23.0
    ``supercore/object_store/sqlite_object_store.py`` ``preregister`` (lines 78-119)
    registers a tree one object per transaction, children first, and counts a child's
    reference only when its parent is inserted (line 103); ``delete`` (lines 184-217,
    called when the ServerApp confirms a reply it pulled: ``serverappio_servicer.py`` line
    550) removes children whose count falls to 0. Site A's reply registers the shared
    array X (already there from site B's reply: not counted yet), the ServerApp confirms
    B's reply, X's count falls to 0 and X is deleted, then A's parent row references X:
    ``INSERT INTO object_children`` (line 98) fails with "FOREIGN KEY constraint failed"
    (with the in-memory store, ``in_memory_object_store.py`` line 82, a KeyError or a
    tree with a missing child). The error goes back to site A's SuperNode, which quits
    (``supernode/start_client_internal.py`` line 244: only RunNotRunningException is
    caught, line 420). Here ``preregister``, ``delete`` and ``delete_objects_in_run`` of
    both stores hold one process-wide lock, so a tree is counted whole before any delete
    can look at it (the SQLite store opens one connection per request, all in the SuperLink's
    process: a lock in the process serializes them)."""
    if not _flower_matches():
        return False
    from flwr.supercore.object_store.in_memory_object_store import InMemoryObjectStore
    from flwr.supercore.object_store.sqlite_object_store import SqliteObjectStore
    for cls in (SqliteObjectStore, InMemoryObjectStore):
        for name in ("preregister", "delete", "delete_objects_in_run"):
            method = getattr(cls, name)
            if getattr(method, "locked", False):
                continue

            def locked(self, *args, _method=method, **kwargs):
                with _STORE_LOCK:
                    return _method(self, *args, **kwargs)
            locked = functools.wraps(method)(locked)
            locked.locked = True
            setattr(cls, name, locked)
    return True


def survive_refused_replies():
    """A reply the SuperLink refuses (a gRPC error flwr does not retry) is logged and dropped,
    and the SuperNode goes on pulling. Call in the ``flower-supernode`` process before it
    starts; returns True when applied.

    flwr 1.23.0 ``supernode/start_client_internal.py`` calls ``_push_messages`` (line 244)
    in its main loop and catches only ``RunNotRunningException`` there (line 420): any other
    error of the push (e.g. an exception in the SuperLink's handler, status UNKNOWN) ends
    the SuperNode, and with it the site, for every later round and run. The reply is lost
    either way (``_push_messages`` deletes it in its ``finally``, line 427); the server
    counts the site missing for that round (round-timeout) and it takes part again in the
    next."""
    if not _flower_matches():
        return False
    import grpc
    import flwr.supernode.start_client_internal as supernode
    from flwr.common.logger import log
    push = supernode._push_messages
    if getattr(push, "survives", False):
        return True

    def _push_messages(*args, **kwargs):
        try:
            return push(*args, **kwargs)
        except grpc.RpcError as err:
            details = err.details() if hasattr(err, "details") else str(err)
            log(40, "the SuperLink refused a reply (%s); it is dropped, the SuperNode goes on "
                "(tffre.deploy.flower_patches.survive_refused_replies)", details)
    _push_messages.survives = True
    supernode._push_messages = _push_messages   # looked up at call time by the main loop
    return True


class _LaunchedSuperExec:
    """``subprocess`` as flwr's SuperLink module sees it, but ``Popen`` of a
    ``flower-superexec`` command starts ``launcher(*command)`` instead."""

    def __init__(self, module, launcher):
        self._module = module
        self._launcher = launcher

    def __getattr__(self, name):
        return getattr(self._module, name)

    def Popen(self, command, *args, **kwargs):   # noqa: N802 (subprocess's name)
        if isinstance(command, (list, tuple)) and command and command[0] == "flower-superexec":
            command = self._launcher(*command)
        return self._module.Popen(command, *args, **kwargs)


def superexec_without_tensorflow(launcher):
    """The SuperLink starts its ServerApp executor (``flower-superexec``) through tffre's
    launcher, which keeps TensorFlow out of it: ``launcher(entry_point, *args)`` is the
    command that runs a console script that way (:func:`tffre.deploy.launch.flower_command`,
    which passes itself: this module does not import the launcher). Call in the
    ``flower-superlink`` process before it starts; returns True when applied.

    flwr 1.23.0 ``server/app.py`` starts the executor with ``subprocess.Popen(["flower-superexec",
    ...])`` (line 426). The executor only starts ``flwr-serverapp`` processes (which import
    TensorFlow as the ServerApp needs), yet importing flwr's server package imports
    TensorFlow when it is installed (``server/utils/tensorboard.py``): measured, 7-8 CPU-s
    (3.3 on the faster machine kind) and 540 MiB against 0.5-1 CPU-s and 72 MiB without, on
    the server's machine, for nothing."""
    if not _flower_matches():
        return False
    from flwr.server import app as superlink
    if not isinstance(superlink.subprocess, _LaunchedSuperExec):
        superlink.subprocess = _LaunchedSuperExec(superlink.subprocess,   # read at call time
                                                  launcher)
    return True


def shorten_supernode_waits(poll):
    """The SuperNode's sleeps last at most ``poll`` seconds. Call in the ``flower-supernode``
    process before it starts; returns True when applied.

    flwr 1.23.0 ``supernode/start_client_internal.py`` sleeps ``time.sleep(3)`` when it
    pulled no message (line 241) and ``time.sleep(0.5)`` between looks for its ClientApp's
    reply (lines 365, 398): literals, no option. Only that module's ``time`` is replaced
    (by a copy whose ``sleep`` is capped). Its object pulls are shortened too
    (:func:`shorten_pulls`)."""
    if not _flower_matches():
        return False
    import flwr.supernode.start_client_internal as supernode
    shim = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time)
                                    if not k.startswith("__")})
    shim.sleep = lambda seconds: time.sleep(min(float(seconds), float(poll)))
    supernode.time = shim
    shorten_pulls(initial_backoff=min(float(poll), 0.01), cap=max(float(poll), 0.1))
    return True


def shorten_pulls(initial_backoff=0.01, cap=0.1):
    """Object pulls in this process retry an object not pushed yet after ``initial_backoff``
    seconds, doubling up to ``cap``. Returns True when applied.

    flwr 1.23.0 ``common/inflatable_utils.py`` ``pull_objects`` (line 209) and
    ``pull_and_inflate_object_from_tree`` (line 439) back off from ``PULL_INITIAL_BACKOFF``
    = 1 s up to ``PULL_BACKOFF_CAP`` = 10 s (``common/constant.py`` lines 171-172), bound
    as keyword defaults, and no caller passes them (the ServerApp's
    ``server/grid/grpc_grid.py`` line 319, the SuperNode's ``start_client_internal.py``
    line 326, the ClientApp's ``supernode/runtime/run_clientapp.py`` line 171). A reply is
    listed as soon as its message is pushed, before its objects are: with a 0.1 s poll
    nearly every pull meets one not yet there, and waits a whole second. Only the two
    defaults change. Retrying after 0.01 s, doubling to 0.1 s (0.05 s to 0.5 s before) took
    the 2-site round of ``benchmarks/deploy_round_time.py --poll 0.02`` from 0.34 s to
    0.29-0.30 s: a few more gRPC calls on loopback, against the round's waiting."""
    if not _flower_matches():
        return False
    from flwr.common import inflatable_utils
    for function in (inflatable_utils.pull_objects,
                     inflatable_utils.pull_and_inflate_object_from_tree):
        function.__kwdefaults__.update(initial_backoff=float(initial_backoff),
                                       backoff_cap=float(cap))
    return True


def report_admission():
    """The SuperNode says in one line whether the SuperLink admitted it, and exits with
    :data:`REFUSED_EXIT` after one line when it was refused. Call in the
    ``flower-supernode`` process before it starts; returns True when applied.

    flwr 1.23.0 ``client/grpc_rere_client/connection.py`` ``grpc_request_response`` registers
    and activates the node inside the connection's context manager (lines 357-360); a
    refusal (an unregistered key: FAILED_PRECONDITION "No SuperNode found with the given
    public key.") is caught there and logged whole, the gRPC error's repr over five lines
    (line 373), and the generator ends without yielding, so
    ``supernode/start_client_internal.py`` line 200 (``with _init_connection(...)``) dies with
    "RuntimeError: generator didn't yield" and a traceback. Its admission is not logged at
    all. Here the module's ``log`` gets the error's details on one line, and
    ``_init_connection`` is wrapped: admitted, it logs :data:`ADMITTED`; refused, it logs
    :data:`REFUSED` and exits (Flower's exit handlers run first, as in ``flwr_exit``)."""
    if not _flower_matches():
        return False
    import contextlib
    from logging import ERROR, INFO
    import grpc
    import flwr.client.grpc_rere_client.connection as connection
    import flwr.supernode.start_client_internal as supernode
    from flwr.common.exit.exit_handler import trigger_exit_handlers
    from flwr.common.logger import log
    opened = supernode._init_connection
    if getattr(opened, "reports", False):
        return True
    why = []

    def one_line_log(level, msg, *args, **kwargs):
        if isinstance(msg, grpc.RpcError) and hasattr(msg, "details"):
            why.append(f"{msg.details()} ({msg.code().name})")
            return log(level, "%s", why[-1])
        return log(level, msg, *args, **kwargs)

    @contextlib.contextmanager
    def _init_connection(*args, **kwargs):
        entered = False
        try:
            with opened(*args, **kwargs) as conn:
                entered = True
                log(INFO, ADMITTED.format(node_id=conn[0]))
                yield conn
        except RuntimeError as err:
            if entered or "didn't yield" not in str(err):
                raise
            log(ERROR, REFUSED.format(reason=why[-1] if why else "no reason given"))
            trigger_exit_handlers()
            sys.exit(REFUSED_EXIT)

    _init_connection.reports = True
    connection.log = one_line_log   # looked up at call time by grpc_request_response
    supernode._init_connection = _init_connection   # looked up at call time (line 200)
    return True
