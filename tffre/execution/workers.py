"""Client worker processes for the local executor (``client_workers="processes"``).

Several clients trained at once in *one* process share TensorFlow's thread
pools. A :class:`WorkerPool` gives each parallel client its own process
instead, as Flower's Ray workers do, with the cores divided among them
(intra- and inter-op threads). On a 2-core CPU, two LSTM clients at once took
0.57x the sequential loop's time in worker processes and 0.59x in threads
(Flower's best: 0.65x; ``benchmarks/round_time.py``); for small logistic
clients the trip to a worker costs more than it gains (0.68x, threads 0.61x).
Each worker is started with ``spawn`` (TensorFlow is not fork-safe), rebuilds the round's
:class:`~tffre.client_work.ClientTrainer` from a cloudpickle of it, and runs
the very same ``TrainerSlot`` loop as a thread would. Per client, the
broadcast, the client's dataset (its serialized graph, as TFF ships datasets,
or its batches as numpy) and its state go out; the upload (and next state)
comes back as numpy. The parent accumulates the uploads in client order, so a
round equals the sequential one. With GPUs, the workers take them round-robin.

As with any ``spawn`` pool, a script that uses it must guard its entry point
with ``if __name__ == "__main__":``, and a ``model_fn`` defined in an
importable module is pickled by reference (closures and ``__main__``
functions by value).

Workers start on the first round and stop with the pool (``close``, at
garbage collection or at exit). A worker's error is raised in the parent with
the worker's traceback (:class:`WorkerError`), and the next round starts
fresh workers.
"""

import collections
import multiprocessing
import multiprocessing.connection
import os
import threading
import traceback
import weakref

import numpy as np

TASK, STOP = "task", "stop"


def batches_of(dataset):
    """One pass over ``dataset`` as a list of numpy batch structures."""
    return list(dataset.as_numpy_iterator())


def pack_dataset(dataset):
    """What a worker gets for ``dataset``: its serialized graph, as TFF ships client datasets
    (the LSTM workload's ten clients: 2 ms, against 50 ms to iterate them), or, for a
    dataset that cannot be serialized (a Python generator, a py_function), its batches."""
    import tensorflow as tf
    try:
        graph = dataset._as_serialized_graph(   # noqa: SLF001 - tf.data's own serializer
            external_state_policy=tf.data.experimental.ExternalStatePolicy.FAIL).numpy()
        return "graph", graph, dataset.element_spec
    except Exception:   # noqa: BLE001 - any dataset the serializer refuses is sent as batches
        return "batches", batches_of(dataset), dataset.element_spec


def unpack_dataset(packed):
    """The ``tf.data.Dataset`` of :func:`pack_dataset`'s result."""
    import tensorflow as tf
    kind, value, element_spec = packed
    if kind == "graph":
        return tf.data.experimental.from_variant(
            tf.raw_ops.DatasetFromGraph(graph_def=value), structure=element_spec)
    return dataset_of(value, element_spec)


def dataset_of(batches, element_spec):
    """A ``tf.data.Dataset`` of ``batches`` (from :func:`batches_of`), with ``element_spec``'s
    structure; empty when there are none."""
    import tensorflow as tf
    if not batches:
        zeros = tf.nest.map_structure(
            lambda s: tf.zeros([0 if d is None else d for d in s.shape], s.dtype), element_spec)
        return tf.data.Dataset.from_tensors(zeros).take(0)
    dataset = None
    # Runs of equal-shaped batches are stacked into one slice dataset each (a client's
    # batches are all alike but for a short last one), so the chain stays short.
    run = []

    def flush():
        nonlocal dataset
        if not run:
            return
        stacked = tf.nest.map_structure(lambda *xs: np.stack(xs), *run)
        part = tf.data.Dataset.from_tensor_slices(stacked)
        dataset = part if dataset is None else dataset.concatenate(part)
        run.clear()

    def shapes(batch):
        return [np.shape(x) for x in tf.nest.flatten(batch)]

    for batch in batches:
        if run and shapes(run[0]) != shapes(batch):
            flush()
        run.append(batch)
    flush()
    return dataset


def numpy_structure(structure):
    """``structure`` with each tensor (or value) as a numpy array: what crosses to a worker
    and back, and what the local executor returns."""
    import tensorflow as tf
    return tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else np.asarray(t),
                                 structure)


def _serve(payload, loop, threads, index, conn):
    """A worker's main: build a slot from the pickled trainer, then train clients on request."""
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import cloudpickle
        import tensorflow as tf
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:   # one GPU per worker, round-robin, grown as needed (not all of its memory)
            gpu = gpus[index % len(gpus)]
            tf.config.set_visible_devices(gpu, "GPU")
            tf.config.experimental.set_memory_growth(gpu, True)
        if threads:
            # Both pools: two processes running the LSTM benchmark's lean loop on two cores,
            # with one intra-op and one inter-op thread each, took 0.75 s a round, against
            # 0.99 s with two inter-op threads.
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        trainer = cloudpickle.loads(payload)
        slot = trainer.slot()
        run = slot.train_steps if loop == "steps" else tf.function(
            slot.train_while if loop == "while" else slot.train)
        conn.send(("ready", None))
    except BaseException:   # noqa: B902 - reported to the parent, which raises it
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            message = conn.recv()
        except EOFError:   # the parent is gone
            return
        if message[0] == STOP:
            return
        _, client, broadcast, packed, client_state = message
        try:
            dataset = unpack_dataset(packed)
            args = (broadcast, dataset) if client_state is None else (
                broadcast, dataset, client_state)
            conn.send(("done", (client, numpy_structure(run(*args)))))
        except BaseException:   # noqa: B902
            conn.send(("error", traceback.format_exc()))


class WorkerError(RuntimeError):
    """A client worker process failed; the message carries its traceback."""


class WorkerPool:
    """``size`` spawned processes that each train one client at a time (module docstring).

    Args:
      trainer: the round's described :class:`~tffre.client_work.ClientTrainer`
        (pickled with cloudpickle, so its model_fn may be a closure).
      size: number of worker processes.
      loop: the loop form, as the local executor's.
      threads: TensorFlow intra-op and inter-op threads per worker (0: TF's
        defaults); by default the CPU cores divided among the workers.
    """

    def __init__(self, trainer, size, *, loop="while", threads=None):
        import cloudpickle
        self.size = size
        self.loop = loop
        self.threads = max(1, (os.cpu_count() or 1) // size) if threads is None else threads
        self._payload = cloudpickle.dumps(trainer)
        self._conns = []
        self._procs = []
        self._lock = threading.Lock()
        self._finalizer = None

    def start(self):
        """Starts the workers (once) and waits until each has built its slot."""
        if self._procs:
            return
        ctx = multiprocessing.get_context("spawn")
        for index in range(self.size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, daemon=True,
                               args=(self._payload, self.loop, self.threads, index, child))
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        self._finalizer = weakref.finalize(self, _stop, list(self._conns), list(self._procs))
        try:
            for conn, proc in zip(self._conns, self._procs):
                self._receive(conn, proc)
        except WorkerError:
            self.close()   # a later round tries fresh workers again
            raise

    @staticmethod
    def _receive(conn, proc):
        try:
            kind, value = conn.recv()
        except EOFError:
            proc.join(5)
            raise WorkerError(f"client worker process {proc.pid} died "
                              f"(exit code {proc.exitcode})") from None
        if kind == "error":
            raise WorkerError(f"client worker process {proc.pid} failed:\n{value}")
        return value

    def map(self, broadcast, datasets, client_states):
        """Trains each client (``datasets[i]``, ``client_states[i]`` or None) on the next free
        worker; returns their results in client order.

        One client per worker at a time: a worker that finishes early takes the next
        client, so one slow client does not hold a queue behind it.
        """
        with self._lock:
            self.start()
            broadcast = numpy_structure(broadcast)
            pending = collections.deque(enumerate(zip(datasets, client_states)))
            results = [None] * len(pending)
            busy = set()

            def send(conn):
                index, (dataset, state) = pending.popleft()
                conn.send((TASK, index, broadcast, pack_dataset(dataset),
                           None if state is None else numpy_structure(state)))
                busy.add(conn)

            for conn in self._conns:
                if pending:
                    send(conn)
            failure = None
            while busy:
                for conn in multiprocessing.connection.wait(list(busy)):
                    busy.discard(conn)
                    try:
                        index, value = self._receive(conn, self._procs[self._conns.index(conn)])
                    except WorkerError as error:
                        # Read the other replies first, so that none is left for the next
                        # round, then start fresh workers.
                        failure = failure or error
                        pending.clear()
                        continue
                    results[index] = value
                    if pending:
                        send(conn)
            if failure is not None:
                self.close()    # the next round starts fresh workers
                raise failure
            return results

    def close(self):
        """Stops the workers."""
        if self._finalizer is not None:
            self._finalizer()
        self._conns, self._procs = [], []


def _stop(conns, procs):
    for conn in conns:
        try:
            conn.send((STOP,))
        except (OSError, ValueError):
            pass
    for proc in procs:
        proc.join(5)
        if proc.is_alive():
            proc.terminate()
