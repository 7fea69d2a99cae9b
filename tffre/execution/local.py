"""The local executor: a :class:`tffre.mapreduce.Round` run in this Python process.

It calls the very functions the TFF executor wraps (prepare, work, zero,
accumulate, report, update), compiled with ``tf.function``, on TensorFlow's
devices: a GPU when TensorFlow sees one, else the CPU. Clients train one after
another by default; ``max_parallel_clients`` trains several at once, each on
its own model and optimizer ("slot"): in its own thread (``client_workers=
"threads"``; several GPUs take the slots round-robin), or in its own worker
process with its own TensorFlow runtime (``"processes"``,
:mod:`tffre.execution.workers`; on a CPU, small models gain more from it, as
threads share one runtime's thread pools). Uploads are accumulated in client
order, so a parallel round equals a sequential one.

Three loop forms run a client's local steps (the same ``TrainerSlot.step``):
``"while"`` (default), one compiled graph per client with a while loop over
the batches; ``"steps"``, a Python loop of compiled per-batch steps; and
``"reduce"``, one ``dataset.reduce`` graph as in TFF's worker. In the Python
process ``dataset.reduce`` is slow (an LSTM round: 11x the lean loop, against
1.0x for "while"; ``benchmarks/round_time.py``).
"""

import collections
import concurrent.futures
import queue

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tffre.execution import CLIENT_WORKERS, LOOPS   # the one registry's vocabularies
from tffre.execution.workers import WorkerPool, numpy_structure
from tffre.mapreduce import ModelWeights, spec_of
from tffre.process import AlgorithmInfo, MeasuredLearningProcess, ProcessFunctions, RoundFacts
from tffre.types_util import spec_nbytes


def _devices():
    gpus = tf.config.list_logical_devices("GPU")
    return [d.name for d in gpus] or ["/CPU:0"]


def keras_v2_again(model):
    """Undoes Keras' switch of layer classes to their graph-mode (v1) versions.

    When TFF traces a Keras model in a ``tf.Graph`` (building a TFF process),
    Keras rewrites the *classes* of that model's layers to their v1 bases,
    which breaks every eager model built before ("Your Layer or Model is in an
    invalid state"). The local executor's models are eager, so it swaps the
    classes back before each round (``keras.src.utils.version_utils``, TF 2.14).
    """
    from keras.src.engine import base_layer, base_layer_v1, training, training_v1
    from keras.src.utils import version_utils
    keras_model = getattr(model, "keras_model", model)
    for obj in [keras_model, *keras_model.submodules]:
        if isinstance(obj, training_v1.Model):
            version_utils.swap_class(type(obj), training.Model, training_v1.Model, True)
        if isinstance(obj, base_layer_v1.Layer):
            version_utils.swap_class(type(obj), base_layer.Layer, base_layer_v1.Layer, True)


#: The round's compiled functions, one at a time on tensors (:meth:`LocalExecutor.steps`):
#: prepare(state), zero(), accumulate(acc, upload), report(acc), update(state, aggregate) and
#: work(broadcast, dataset, client_state=None), one client on a free slot.
RoundSteps = collections.namedtuple("RoundSteps",
                                    "prepare zero accumulate report update work")


class LocalExecutor:
    """Runs rounds of an algorithm's round in-process (see the module docstring).

    Args:
      factory: the :class:`tffre.mapreduce.RoundFactory`; the round is read off this
        executor's first slot (eager: building a Keras model in a graph would break the
        eager models made before it).
      max_parallel_clients: clients trained at once (one slot each).
      loop: "while", "steps" or "reduce".
      client_workers: "threads" (slots in this process) or "processes" (one
        worker process per slot; this process keeps one slot for the specs).
    """

    def __init__(self, factory, *, max_parallel_clients=1, loop="while",
                 client_workers="threads"):
        if loop not in LOOPS:
            raise ValueError(f"loop must be one of {', '.join(LOOPS)}, got {loop!r}")
        if max_parallel_clients < 1:
            raise ValueError(f"max_parallel_clients must be >= 1, got {max_parallel_clients}")
        if client_workers not in CLIENT_WORKERS:
            raise ValueError(f"client_workers must be one of {', '.join(CLIENT_WORKERS)}, "
                             f"got {client_workers!r}")
        devices = _devices()
        with tf.device(devices[0]):
            probe = factory.probe()
        self.round = round_ = factory.build(probe)
        processes = client_workers == "processes" and max_parallel_clients > 1
        # With worker processes this process keeps one slot (specs, initial weights).
        self.slots = []
        for i in range(1 if processes else max_parallel_clients):
            device = devices[i % len(devices)]
            with tf.device(device):
                slot = round_.trainer.slot(reuse=probe if i == 0 else None)
            self.slots.append(_Slot(slot, device, loop))
        self._free = queue.Queue()
        for slot in self.slots:
            self._free.put(slot)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_parallel_clients) \
            if max_parallel_clients > 1 and not processes else None
        self.workers = WorkerPool(round_.trainer, max_parallel_clients,
                                  loop=loop) if processes else None
        self._prepare = tf.function(round_.prepare)
        self._zero = tf.function(round_.zero)
        self._accumulate = tf.function(round_.accumulate)
        self._report = tf.function(round_.report)
        objects = round_.server_objects()   # built once, outside tf.function
        self._update = tf.function(lambda state, aggregate: round_.update(state, aggregate,
                                                                          objects))

    def initialize(self):
        """The server state: the first slot's freshly built model weights."""
        slot = self.slots[0].slot
        weights = ModelWeights(trainable=[v.numpy() for v in slot.weights.trainable],
                               non_trainable=[v.numpy() for v in slot.weights.non_trainable])
        return numpy_structure(self.round.initial_state(
            weights, numpy_structure(self.round.definition.initial_extras(slot.model))))

    def initial_client_state(self):
        """A client's state before its first round (stateful algorithms)."""
        return numpy_structure(
            self.round.definition.initial_client_state(self.slots[0].slot.model))

    def steps(self):
        """The :class:`RoundSteps` :meth:`next` runs, to call one at a time (a deployment runs
        them on two sides: :class:`tffre.federation.split_round.SplitRound`)."""
        return RoundSteps(self._prepare, self._zero, self._accumulate, self._report,
                          self._update, self._work)

    def _work(self, broadcast, dataset, client_state=None):
        slot = self._free.get()
        try:
            with tf.device(slot.device):
                if client_state is None:
                    return slot.run(broadcast, dataset)
                return slot.run(broadcast, dataset, client_state)
        finally:
            self._free.put(slot)

    def next(self, state, client_data, client_states=None, transform=None):
        """One round: broadcast, train every client, accumulate in order, update.

        With per-client state (``client_states``, one per dataset) it returns
        the output and the clients' next states. ``transform(index, upload)``, when given,
        replaces a client's upload before it is aggregated (simulated faulty sites:
        :mod:`tffre.faults`).
        """
        for slot in self.slots:
            keras_v2_again(slot.slot.model)
            for frozen in slot.slot.frozen.values():
                keras_v2_again(frozen)
        state = tf.nest.map_structure(tf.convert_to_tensor, state)
        broadcast = self._prepare(state)
        acc = self._zero()
        stateful = client_states is not None
        states_in = client_states if stateful else [None] * len(client_data)
        if self.workers is not None:
            results = self.workers.map(broadcast, client_data, states_in)
        elif self._pool is None:
            results = (self._work(broadcast, ds, cs) for ds, cs in zip(client_data, states_in))
        else:
            futures = [self._pool.submit(self._work, broadcast, ds, cs)
                       for ds, cs in zip(client_data, states_in)]
            results = (future.result() for future in futures)
        next_states = []
        for index, result in enumerate(results):   # client order: the sum is the sequential one
            if stateful:
                result, next_state = result
                next_states.append(numpy_structure(next_state))
            if transform is not None:
                result = transform(index, result)
            acc = self._accumulate(acc, result)
        new_state, metrics = self._update(state, self._report(acc))
        output = tff.learning.templates.LearningProcessOutput(numpy_structure(new_state),
                                                              numpy_structure(metrics))
        return (output, next_states) if stateful else output

    @staticmethod
    def get_model_weights(state):
        """The global model weights of ``state``."""
        return state["model"]

    def set_model_weights(self, state, weights):
        """``state`` with its model weights replaced (same structure as ``initialize``'s)."""
        weights = ModelWeights(trainable=[np.asarray(w) for w in weights.trainable],
                               non_trainable=[np.asarray(w) for w in weights.non_trainable])
        return self.round.with_model(state, weights)

    def upload_spec(self, trained=True):
        """The TensorSpecs of one client's upload (traced, not run). ``trained=False`` traces
        the client's work without its training step (``TrainerSlot.untrained``: the same
        structure, a fraction of the trace), for a process that will not train."""
        first = self.slots[0]
        element = tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape, s.dtype),
                                        self.round.input_spec)
        args = [self.round.broadcast_spec(), tf.data.DatasetSpec(element)]
        if self.round.stateful:
            args.append(self.round.client_state_spec)
        # The slot's own client loop when it is a tf.function: the first round then reuses this
        # trace instead of tracing the client's training (seconds for a transformer) again.
        if not trained:
            run = tf.function(first.slot.untrained)
        elif hasattr(first.run, "get_concrete_function"):
            run = first.run
        else:
            run = tf.function(first.slot.train)
        with tf.device(first.device):
            outputs = run.get_concrete_function(*args).structured_outputs
        return spec_of(outputs[0] if self.round.stateful else outputs)


class _Slot:
    """A trainer slot with the device it lives on and its client loop in the chosen form (all
    forms run the same ``TrainerSlot.step``)."""

    def __init__(self, slot, device, loop):
        self.slot = slot
        self.device = device
        self.run = slot.train_steps if loop == "steps" else tf.function(
            slot.train_while if loop == "while" else slot.train)


def build_local_process(factory, *, max_parallel_clients=1, loop="while",
                        client_workers="threads", **info):
    """Builds the round of ``factory`` on the local executor, measured (bytes from the round's
    specs). ``info``: the process's name, hparams, model_fn and evaluation."""
    executor = LocalExecutor(factory, max_parallel_clients=max_parallel_clients, loop=loop,
                             client_workers=client_workers)
    round_ = executor.round
    return MeasuredLearningProcess(
        ProcessFunctions(
            executor.initialize, executor.next, executor.get_model_weights,
            executor.set_model_weights,
            initial_client_state=executor.initial_client_state if round_.stateful else None),
        algorithm=AlgorithmInfo(**info), executor="local",
        facts=RoundFacts(input_spec=round_.input_spec,
                         broadcast_bytes_per_client=spec_nbytes(round_.broadcast_spec()),
                         constant_bytes_per_client=round_.constant_broadcast_bytes(),
                         upload_bytes_per_client=spec_nbytes(executor.upload_spec()),
                         personal_indices=round_.personal))
