"""Client worker processes for the local executor (``client_workers="processes"``).

Several clients trained at once in *one* process share TensorFlow's thread
pools. A :class:`WorkerPool` gives each parallel client its own process
instead, as Flower's Ray workers do, with the cores divided among them
(intra- and inter-op threads). On a 2-core CPU, two LSTM clients at once took
0.57x the sequential loop's time in worker processes and 0.59x in threads
(Flower's best: 0.65x; ``benchmarks/round_time.py``); for small logistic
clients the trip to a worker costs more than it gains (0.68x, threads 0.61x).

The pool is a ``concurrent.futures.ProcessPoolExecutor`` with the ``spawn``
start method (TensorFlow is not fork-safe). Its initializer runs once per
worker: it rebuilds the round's :class:`~tffre.client_work.ClientTrainer` from
a cloudpickle of it (pickled once, in the parent), builds one slot and the very
same ``TrainerSlot`` loop as a thread would, sets the worker's TensorFlow
threads and, with GPUs, takes one GPU round-robin (a worker index from a
shared counter). Each client is one task: the broadcast, the client's dataset
(its serialized graph, as TFF ships datasets, or its batches as numpy) and its
state go out; the upload (and next state) comes back as numpy. A worker that
finishes early takes the next client; only ``size + 1`` clients are packed and
queued at a time. The parent accumulates the uploads in client order, so a
round equals the sequential one.

As with any ``spawn`` pool, a script that uses it must guard its entry point
with ``if __name__ == "__main__":``, and a ``model_fn`` defined in an
importable module is pickled by reference (closures and ``__main__``
functions by value).

Workers start on the first round and stop with the pool (``close``, at
garbage collection or at exit), or when the parent process dies. A worker's
error is raised in the parent with the worker's traceback (:class:`WorkerError`;
a worker that cannot build its slot reports its traceback with its first
client), as is a worker's death (``BrokenProcessPool``); either way the pool is
shut down and the next round starts fresh workers.
"""

import concurrent.futures
import multiprocessing
import multiprocessing.connection
import os
import threading
import traceback
import weakref
from concurrent.futures.process import BrokenProcessPool

import numpy as np


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


# In a worker process: its loop function, or the traceback of a failed start.
_worker = {}


def _exit_with_parent():
    """Ends this worker when the parent process dies, however it dies.

    The pool's queues never report EOF to a worker (each worker holds both ends), so a
    thread waits on the parent's sentinel, which the kernel closes when the parent ends.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    sentinel = parent.sentinel

    def watch():
        multiprocessing.connection.wait([sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _start_worker(payload, loop, threads, counter):
    """The pool's initializer: build a slot from the pickled trainer (once per worker)."""
    _exit_with_parent()
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import cloudpickle
        import tensorflow as tf
        with counter.get_lock():
            index = counter.value
            counter.value += 1
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
        slot = cloudpickle.loads(payload).slot()
        _worker["run"] = slot.train_steps if loop == "steps" else tf.function(
            slot.train_while if loop == "while" else slot.train)
    except BaseException:   # noqa: B902 - raised with the first client (module docstring)
        # An initializer's exception only reaches the worker's log: the parent would see a
        # broken pool without the reason.
        _worker["error"] = traceback.format_exc()


def _train(broadcast, packed, client_state):
    """A task: one client's training on this worker's slot, its result as numpy."""
    if "error" in _worker:
        raise RuntimeError(f"the worker could not start:\n{_worker['error']}")
    dataset = unpack_dataset(packed)
    args = (broadcast, dataset) if client_state is None else (broadcast, dataset, client_state)
    return numpy_structure(_worker["run"](*args))


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
        self._executor = None
        self._finalizer = None
        self._lock = threading.Lock()

    def start(self):
        """The running executor (its workers start with their first clients)."""
        if self._executor is None:
            ctx = multiprocessing.get_context("spawn")
            self._executor = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.size, mp_context=ctx, initializer=_start_worker,
                initargs=(self._payload, self.loop, self.threads, ctx.Value("i", 0)))
            self._finalizer = weakref.finalize(self, self._executor.shutdown, wait=True,
                                               cancel_futures=True)
        return self._executor

    def map(self, broadcast, datasets, client_states):
        """Trains each client (``datasets[i]``, ``client_states[i]`` or None) on the next free
        worker; returns their results in client order.

        One client per task: a worker that finishes early takes the next client, so one
        slow client does not hold a queue behind it.
        """
        with self._lock:
            try:
                return self._map(numpy_structure(broadcast), list(zip(datasets, client_states)))
            except BrokenProcessPool as error:
                self.close()
                cause = f":\n{error.__cause__}" if error.__cause__ is not None else ""
                raise WorkerError(f"a client worker process died ({error}){cause}") from None
            except BaseException:
                self.close()   # cancels the rest; the next round starts fresh workers
                raise

    def _map(self, broadcast, clients):
        executor = self.start()
        results = [None] * len(clients)
        running = {}
        waiting = iter(enumerate(clients))

        def submit_next():
            for index, (dataset, state) in waiting:
                state = None if state is None else numpy_structure(state)
                running[executor.submit(_train, broadcast, pack_dataset(dataset), state)] = index
                return

        # One more than the workers in flight (as the executor's own call queue holds), so a
        # worker that finishes finds its next client queued; the others are packed later.
        for _ in range(self.size + 1):
            submit_next()
        while running:
            done, _ = concurrent.futures.wait(running,
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                index = running.pop(future)
                try:
                    results[index] = future.result()
                except BrokenProcessPool:
                    raise
                except Exception as error:  # noqa: BLE001 - the worker's, with its traceback
                    # concurrent.futures gives the worker's traceback as the cause.
                    remote = error.__cause__ or "".join(traceback.format_exception(error))
                    raise WorkerError(f"client worker process failed:\n{remote}") from None
                submit_next()
        return results

    def close(self):
        """Stops the workers: cancels the clients not started and joins the processes."""
        if self._finalizer is not None:
            self._finalizer()
        self._executor, self._finalizer = None, None
