"""Executors: where a :class:`tffre.mapreduce.Round` runs, and their one registry.

* ``"tff"`` (:mod:`tffre.execution.tff`): TFF's own runtime, the reference.
  Each round is one TFF computation that lowers to MapReduceForm. TFF 0.87's
  only runtime is the ``worker_binary`` subprocess, a CPU-only TensorFlow build
  (TFF issues #3709 and #4600: 0% GPU use), so it never uses a GPU.
* ``"local"`` (:mod:`tffre.execution.local`): the same round functions called
  in this Python process, on TensorFlow's devices (GPU when present), with
  clients one after another or ``max_parallel_clients`` at a time, in threads
  or in worker processes (:mod:`tffre.execution.workers`).
* ``"auto"``: ``local`` when TensorFlow sees a GPU, else ``tff``.

Both return a :class:`tffre.process.MeasuredLearningProcess` with the same
``initialize``/``next``/``get_model_weights``/``set_model_weights`` and the
same round metrics.

**The registry.** :data:`EXECUTOR_REGISTRY` declares each executor once: its name, the
builder of its process, its flag help, and the client loops and client workers it offers
(with theirs). The run settings' flag choices and help (:mod:`tffre.runner.run_settings`),
the local executor's checks and :func:`build_process`'s dispatch all read it, so a new
executor is its module and one line here (``docs/adding-an-executor.md``).

Nothing here imports TensorFlow until a process is built or "auto" resolved.
"""

import dataclasses
import importlib
from typing import Tuple

#: The name that picks an executor by the machine (:data:`AUTO_CHOICE`).
AUTO = "auto"


@dataclasses.dataclass(frozen=True)
class Executor:
    """One executor's declaration (a row of :data:`EXECUTOR_REGISTRY`).

    Attributes:
      name: its ``--executor`` value.
      builder: ``"module:function"``: ``function(factory, **settings, **info)`` returns the
        :class:`tffre.process.MeasuredLearningProcess` (``info``: ``name``, ``hparams``,
        ``model_fn``, ``evaluation``, ``wrap_model_fn``), imported only when it is used.
      help: what it is, for the flag's help ("TFF's runtime (CPU only)").
      loops: {name: help} of the client loop forms it offers (``--loop``), first the default.
      client_workers: {name: help} of where it can run parallel clients (``--client-workers``).
      parallel: it reads ``max_parallel_clients``.
    """
    name: str
    builder: str
    help: str
    loops: Tuple[Tuple[str, str], ...] = ()
    client_workers: Tuple[Tuple[str, str], ...] = ()
    parallel: bool = False

    def settings(self, max_parallel_clients, loop, client_workers):
        """The execution settings this executor reads, as its builder's keyword arguments."""
        out = {}
        if self.parallel:
            out["max_parallel_clients"] = max_parallel_clients
        if self.loops:
            out["loop"] = loop
        if self.client_workers:
            out["client_workers"] = client_workers
        return out

    def load_builder(self):
        """The builder function (imports its module: TensorFlow, TFF)."""
        module, _, function = self.builder.partition(":")
        return getattr(importlib.import_module(module), function)


#: Every executor, once. Adding one: its module, and a line here.
EXECUTOR_REGISTRY = (
    Executor("tff", "tffre.execution.tff:build_tff_process", "TFF's runtime (CPU only)"),
    Executor("local", "tffre.execution.local:build_local_process",
             "this process, GPU when present",
             loops=(("while", "one graph with a while loop (fastest)"),
                    ("steps", "per-batch compiled steps"),
                    ("reduce", "dataset.reduce")),
             client_workers=(("threads", "in threads of this process"),
                             ("processes", "in worker processes with a TensorFlow runtime "
                                           "each (faster for small models on a CPU)")),
             parallel=True),
)
#: What "auto" picks: {visible device kind: executor name}.
AUTO_CHOICE = {"GPU": "local", "CPU": "tff"}
#: The help of "auto".
AUTO_HELP = "local when a GPU is visible"


def _union(field):
    out = []
    for executor in EXECUTOR_REGISTRY:
        out += [name for name, _ in getattr(executor, field) if name not in out]
    return tuple(out)


#: ``--executor``'s values: "auto" and every registered executor.
EXECUTORS = (AUTO,) + tuple(e.name for e in EXECUTOR_REGISTRY)
#: ``--loop``'s values: every loop form some executor offers.
LOOPS = _union("loops")
#: ``--client-workers``' values: every client worker some executor offers.
CLIENT_WORKERS = _union("client_workers")


def _help_of(field, lead=""):
    """``--loop``'s or ``--client-workers``' help: which executors offer it, then ``lead`` and
    each value's help."""
    offering = [e for e in EXECUTOR_REGISTRY if getattr(e, field)]
    listed = list(dict(kv for e in offering for kv in getattr(e, field)).values())
    listed = ", ".join(listed[:-1]) + ", or " + listed[-1] if len(listed) > 2 else \
        ", or ".join(listed)
    return f"{' or '.join(e.name for e in offering)} executor: {lead}{listed}"


def executor_help():
    """``--executor``'s help: each executor's, then "auto"'s."""
    return "; ".join([f"{e.name}: {e.help}" for e in EXECUTOR_REGISTRY] +
                     [f"{AUTO}: {AUTO_HELP}"])


def loop_help():
    """``--loop``'s help, from the executors that offer loops."""
    return _help_of("loops")


def client_workers_help():
    """``--client-workers``' help: "parallel clients" and where each worker kind runs them."""
    return _help_of("client_workers", lead="parallel clients ")


def _unknown(name):
    # The registry as it is now (a test may add a row), not the names taken at import.
    names = (AUTO,) + tuple(e.name for e in EXECUTOR_REGISTRY)
    return ValueError(f"executor must be one of {', '.join(names)}, got {name!r}")


def get_executor(name):
    """The :class:`Executor` named ``name`` ("auto" not resolved); ValueError listing them."""
    for executor in EXECUTOR_REGISTRY:
        if executor.name == name:
            return executor
    raise _unknown(name)


def resolve_executor(executor):
    """``executor`` with "auto" resolved: "local" when a GPU is visible, else "tff"."""
    if executor != AUTO:
        return get_executor(executor).name
    import tensorflow as tf
    return AUTO_CHOICE["GPU" if tf.config.list_physical_devices("GPU") else "CPU"]


def build_process(factory, *, executor="auto", max_parallel_clients=1, loop="while",
                  client_workers="threads", **info):
    """The learning process of the round ``factory`` makes (a
    :class:`tffre.mapreduce.RoundFactory`) on ``executor`` (see the module docstring): the
    registered executor's builder, given the execution settings it reads.

    ``info``: what the process carries for the runner: ``name``, ``hparams``,
    ``model_fn`` and ``evaluation`` (see :class:`tffre.process.MeasuredLearningProcess`).
    """
    chosen = get_executor(resolve_executor(executor))
    return chosen.load_builder()(factory, **chosen.settings(max_parallel_clients, loop,
                                                            client_workers), **info)
