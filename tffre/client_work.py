"""Client work: local training with a *Keras* optimizer, as plain TensorFlow both executors run.

A :class:`ClientTrainer` holds what a client does in a round; a
:class:`TrainerSlot` is one model and one optimizer to do it with. The TFF
executor builds a fresh slot inside each client computation; the local
executor keeps one slot per parallel worker and resets it for each client.
Either way the same methods run: :meth:`TrainerSlot.begin` (load the
broadcast weights and optimizer state, set the proximal anchor, load the
frozen model copies, count the labels), :meth:`TrainerSlot.step` (one batch:
the algorithm's objective, gradients, Keras ``apply_gradients``) and
:meth:`TrainerSlot.finish` (the upload, and the client's next state). What
the objective, the upload and the state are is the algorithm's
:class:`tffre.definition.Definition`.

TFF 0.87's own client works take ``tff.learning.optimizers``; ours runs any
Keras optimizer (SGD, Adam, SelfAdam, PAdam, PGD, ...). By default the
optimizer state (Adam moments, step count) starts from zero at each round:
the sampled clients change from round to round and no client keeps state
between rounds. With ``keep_optimizer_state=True`` the state is kept *at the
server* instead: each client starts from it and uploads its final state,
weighted, and the server stores the weighted mean.

The client update follows TFF's convention, ``initial - trained`` trainable
weights. Its weight is n_k, the client's number of training examples (one pass
over its dataset), as FLCMC Eq. 6 says; ``client_weighting="processed"`` weighs
by the examples processed in local training (epochs and the step cap
included, what TFF's ``ClientWeighting.NUM_EXAMPLES`` counts) and
``"uniform"`` gives every client 1. An update with a NaN or Inf is zeroed,
its weight set to 0, its kept optimizer state zeroed and its training
metrics dropped; it counts in ``num_excluded_clients`` and is never averaged in.
"""

import collections
import collections.abc
import dataclasses
import functools
from typing import Any, Optional, Tuple

import tensorflow as tf
import tensorflow_federated as tff

import optimizers
from tffre import runtime
from tffre.aggregators import WeightedMean, has_state
from tffre.definition import CLIENT_WEIGHTINGS, Definition, ObjectiveContext, WeightedStructMean

runtime.install_worker_death_signal()

ModelWeights = tff.learning.models.ModelWeights


def spec_of(structure):
    """TensorSpecs of a structure of tensors, arrays or specs."""
    def one(t):
        if isinstance(t, tf.TensorSpec):
            return t
        t = tf.convert_to_tensor(t) if not isinstance(t, (tf.Tensor, tf.Variable)) else t
        return tf.TensorSpec(t.shape, t.dtype)
    return tf.nest.map_structure(one, structure)


@dataclasses.dataclass(frozen=True)
class Layout:
    """What a round's functions need to know of the model, read once off a built slot
    (:func:`read_layout`): specs, which weights are shared, personal or statistics, and the
    aggregator of each upload part.

    Attributes:
      metric_kinds: (name, class, config) of each Keras metric, to finalize summed values.
      input_spec, model_spec, optimizer_state_spec, metrics_spec: TensorSpecs.
      personal: indices of the personal trainable weights (never uploaded; FedRep, FedRoD).
      statistics: indices of the non-trainable normalisation statistics (averaged).
      constant: indices of the other non-trainable weights (sent once per client).
      shared: indices of the trainable weights whose deltas are uploaded.
      num_classes: the width of the model's main output.
      extras_spec, client_state_spec: the definition's server extras and client state.
      aggregators: {"model" | "extra" | "statistics": aggregator}, the upload's pieces with their
        own mergeable aggregation (see :mod:`tffre.aggregators`).
    """
    metric_kinds: Tuple
    input_spec: Any
    model_spec: Any
    optimizer_state_spec: list
    metrics_spec: Any
    personal: Tuple[int, ...]
    statistics: Tuple[int, ...]
    constant: Tuple[int, ...]
    shared: Tuple[int, ...]
    num_classes: int
    extras_spec: Any
    client_state_spec: Optional[Any]
    aggregators: Any


def read_layout(slot, make_aggregator):
    """The :class:`Layout` of ``slot``'s model, with ``make_aggregator(shapes)`` for the deltas.

    Types are read off the built model and traced functions, never run. The
    executor passes its own slot: the TFF executor one built in a throwaway
    graph, the local executor its first eager slot (building a Keras model in a
    graph would break the eager ones made before it).
    """
    definition, model = slot.definition, slot.model
    input_spec = model.input_spec
    model_spec = tf.nest.map_structure(lambda v: tf.TensorSpec(v.shape, v.dtype), model.weights())
    # Personal variables (FedRep, FedRoD) are neither uploaded nor aggregated.
    personal = tuple(sorted(definition.personal_variables(model)))
    # Normalisation statistics are averaged like the model; the other non-trainable
    # weights are constant (sent once per client, see Round.constant_broadcast_bytes).
    statistics = tuple(model.statistics_indices())
    x_spec = model.x_spec
    probe_x = tf.nest.map_structure(
        lambda s: tf.zeros([1 if d is None else d for d in s.shape], s.dtype), x_spec)
    traced = tf.function(lambda x: model.outputs(x, training=False))
    outputs = traced.get_concrete_function(spec_of(probe_x)).structured_outputs
    num_classes = int(model.main_output(outputs).shape[-1])
    extras_spec = spec_of(definition.initial_extras(model))
    client_state = definition.initial_client_state(model)
    client_state_spec = None if client_state is None else spec_of(client_state)
    # The extra uploads' types, traced (not run) on a context of zeros.
    zeros = lambda spec: tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), spec)  # noqa
    probe = tf.data.Dataset.from_tensors(zeros(spec_of(
        tf.nest.map_structure(lambda s: tf.TensorSpec([1] + s.shape[1:], s.dtype),
                              input_spec))))

    def upload_of():
        return definition.client_upload(ObjectiveContext(
            model=model, dataset=probe, extras=zeros(extras_spec),
            label_counts=tf.zeros([num_classes]),
            client_state=None if client_state is None else zeros(client_state_spec),
            initial_weights=zeros(model_spec.trainable), hparams=definition.hparams))
    extra_spec = spec_of(tf.function(upload_of).get_concrete_function().structured_outputs)
    shared = tuple(i for i in range(len(model_spec.trainable)) if i not in personal)
    aggregators = collections.OrderedDict()
    if definition.uploads_model:
        aggregators["model"] = make_aggregator([model_spec.trainable[i].shape for i in shared])
    if tf.nest.flatten(extra_spec):
        aggregators["extra"] = definition.upload_aggregator(extra_spec)
    if statistics:
        aggregators["statistics"] = WeightedStructMean([model_spec.non_trainable[i]
                                                  for i in statistics])
    return Layout(
        # How to rebuild each Keras metric to finalize its summed variables (as TFF's
        # keras_finalizer does, but reusable: the local executor builds them once).
        metric_kinds=tuple((m.name, type(m), m.get_config()) for m in model.get_metrics()),
        input_spec=input_spec, model_spec=model_spec,
        optimizer_state_spec=slot.optimizer_state_spec(),
        metrics_spec=collections.OrderedDict(
            (m.name, [tf.TensorSpec(v.shape, v.dtype) for v in m.variables])
            for m in model.get_metrics()),
        personal=personal, statistics=statistics,
        constant=tuple(i for i in range(len(model_spec.non_trainable)) if i not in statistics),
        shared=shared, num_classes=num_classes, extras_spec=extras_spec,
        client_state_spec=client_state_spec, aggregators=aggregators)


def client_part(aggregator, value, weight, broadcast, key):
    """Upload part ``key`` of a client: ``aggregator.client(value, weight)``, and for an
    aggregator with server state (:func:`tffre.aggregators.has_state`: e.g. DP's clipping
    norm) the round's parameters it broadcast too."""
    if not has_state(aggregator):
        return aggregator.client(value, weight)
    return aggregator.client(value, weight, broadcast["aggregator_params"][key])


def carried_optimizer_variables(optimizer):
    """The optimizer variables that make up its state (moments, step count), without anchors."""
    return optimizers.training_state(optimizer)


def _batch_size(batch):
    return tf.cast(tf.shape(tf.nest.flatten(batch)[0])[0], tf.int64)


def _xy(batch):
    if isinstance(batch, collections.abc.Mapping):
        return batch["x"], batch["y"]
    return batch[0], batch[1]


def _sum_over(dataset, per_batch, zero, loop):
    """The sum of ``per_batch(batch)`` over one pass of ``dataset`` (``zero`` for none).

    In TFF's worker, ``dataset.reduce`` is cheap. In the Python process one reduce op costs
    ~20 ms, and a graph while loop over the iterator pays its executor overhead for every
    batch (0.2 ms; more when worker processes share the cores): an LSTM client round spent
    8% of its time counting its examples, and two worker processes 15%. There tf.data
    computes the per-batch values in C++ and hands them over at once, stacked (3x cheaper
    than the while loop). Either way the sums are exact for counts.
    """
    if loop == "reduce":
        return dataset.reduce(zero, lambda total, batch: total + per_batch(batch))

    def value(*batch):   # tuples arrive unpacked, a dict or a single tensor as one argument
        return per_batch(batch[0] if len(batch) == 1 else batch)

    # The leading zero keeps the stack non-empty for an empty dataset.
    values = tf.data.Dataset.from_tensors(zero).concatenate(dataset.map(value))
    return tf.reduce_sum(values.batch(tf.int64.max).get_single_element(), axis=0)


class ClientTrainer:
    """What a client does in a round: local epochs with a Keras optimizer, then its upload.

    Args:
      model_fn: no-arg callable returning a fresh :class:`tffre.client_model.ClientModel`.
      optimizer_fn: no-arg callable returning a fresh Keras optimizer.
      num_epochs: passes over the client dataset.
      num_iters: cap on local steps (batches) across all epochs; None = no cap.
      client_weighting: the update weight, one of :data:`CLIENT_WEIGHTINGS`.
      keep_optimizer_state: start from the server-kept optimizer state and
        upload the final one (see the module docstring).
      definition: the algorithm's :class:`~tffre.definition.Definition`
        (objective, uploads, client state); FedAvg's by default.
      layout: the round's :class:`Layout` (:func:`read_layout`); None for a trainer
        whose slots read their own, with FedAvg's weighted mean (a trainer used alone).
    """

    def __init__(self, model_fn, optimizer_fn, *, num_epochs=1, num_iters=None,
                 client_weighting="dataset_size", keep_optimizer_state=False, definition=None,
                 layout=None):
        if client_weighting not in CLIENT_WEIGHTINGS:
            raise ValueError(f"client_weighting must be one of {', '.join(CLIENT_WEIGHTINGS)}, "
                             f"got {client_weighting!r}")
        self.model_fn = model_fn
        self.optimizer_fn = optimizer_fn
        self.num_epochs = num_epochs
        self.num_iters = num_iters
        self.client_weighting = client_weighting
        self.keep_optimizer_state = keep_optimizer_state
        self.definition = definition or Definition(Definition.Hparams())
        if keep_optimizer_state and not self.definition.uploads_model:
            raise ValueError("keep_optimizer_state needs an algorithm that uploads the model")
        self.layout = layout

    @classmethod
    def from_hparams(cls, model_fn, optimizer_fn, hparams, definition=None):
        """The trainer of an algorithm's resolved hyperparameters (:class:`tffre.definition.Hparams`)."""
        return cls(model_fn, optimizer_fn, num_epochs=hparams.num_epochs,
                   num_iters=hparams.num_iters, client_weighting=hparams.client_weighting,
                   keep_optimizer_state=hparams.keep_optimizer_state, definition=definition)

    @property
    def decays(self):
        """True when the local learning rate decays per round (the hyperparameters' ``lr_decay``
        is not 1): a round then broadcasts its number (:meth:`learning_rate_at`)."""
        return float(getattr(self.definition.hparams, "lr_decay", 1.0)) != 1.0

    def learning_rate_at(self, round_number):
        """The local learning rate of round ``round_number`` (from 0; a tensor): the
        hyperparameters' ``learning_rate`` times ``lr_decay`` to that power (float32)."""
        hp = self.definition.hparams
        return hp.learning_rate * tf.pow(tf.constant(float(hp.lr_decay), tf.float32),
                                         tf.cast(round_number, tf.float32))

    def with_layout(self, layout):
        """This trainer for a round of ``layout``: what its slots read and upload."""
        return ClientTrainer(self.model_fn, self.optimizer_fn, num_epochs=self.num_epochs,
                             num_iters=self.num_iters, client_weighting=self.client_weighting,
                             keep_optimizer_state=self.keep_optimizer_state,
                             definition=self.definition, layout=layout)

    def slot(self, reuse=None):
        """A model and a built optimizer to train clients with (in the current graph or eagerly);
        ``reuse``: a slot whose built model, optimizer and frozen copies to take over."""
        return TrainerSlot(self, reuse)

    def local_data(self, dataset):
        """The batches one round trains on: ``num_epochs`` passes, capped at ``num_iters`` steps."""
        data = dataset.repeat(self.num_epochs)
        return data if self.num_iters is None else data.take(self.num_iters)


class TrainerSlot:
    """One model and one optimizer (and the algorithm's frozen model copies); trains one client
    at a time (see :class:`ClientTrainer`)."""

    def __init__(self, trainer, reuse=None):
        self.trainer = trainer
        self.definition = trainer.definition
        if reuse is None:
            self.model = trainer.model_fn()
            self.optimizer = trainer.optimizer_fn()
            self.optimizer.build(self.model.trainable_variables)
            self.frozen = {name: trainer.model_fn() for name in self.definition.frozen_models()}
        else:
            self.model, self.optimizer, self.frozen = reuse.model, reuse.optimizer, reuse.frozen
        self.weights = self.model.weights()
        self.carried = carried_optimizer_variables(self.optimizer)
        # Does the objective read anything beyond the batch? (the per-batch-steps form then
        # passes the round's tensors to each step; otherwise it passes nothing)
        self._objective_reads_round = (type(self.definition).objective
                                       is not Definition.objective)
        self._step = None

    @functools.cached_property
    def layout(self):
        """The round's :class:`Layout`; a trainer used alone (no round) reads its own, with
        FedAvg's weighted mean."""
        if self.trainer.layout is not None:
            return self.trainer.layout
        return read_layout(self, WeightedMean)

    def optimizer_state_spec(self):
        """The kept optimizer state's float32 specs ([] unless ``keep_optimizer_state``)."""
        if not self.trainer.keep_optimizer_state:
            return []
        return [tf.TensorSpec(v.shape, tf.float32) for v in self.carried]

    def label_counts(self, dataset, loop="reduce"):
        """float32 [num_classes]: how many of the client's examples carry each label (one pass)."""
        c = self.layout.num_classes

        def counts(batch):
            y = tf.cast(tf.reshape(_xy(batch)[1], [-1]), tf.int32)
            return tf.math.bincount(y, minlength=c, maxlength=c, dtype=tf.float32)
        return _sum_over(dataset, counts, tf.zeros([c], tf.float32), loop)

    def begin(self, broadcast, dataset=None, client_state=None, loop="reduce"):
        """Loads the broadcast weights, optimizer state and frozen copies; resets metrics; sets the
        anchor. Returns the round's tensors the objective may read."""
        tf.nest.map_structure(lambda v, t: v.assign(t), self.weights, broadcast["model"])
        # Personal weights start from the client's own (the broadcast ones before its first round).
        for j, i in enumerate(self.layout.personal):
            own = client_state["personal"][j]
            self.weights.trainable[i].assign(
                tf.where(client_state["seen"] > 0, own, broadcast["model"].trainable[i]))
        # The learning rate has one road: the hyperparameters, which built the optimizer (its
        # constructor's rate) and decay it here by the round the server broadcasts (only when
        # lr_decay is set); no rate travels in the broadcast.
        if "round" in broadcast:
            self.optimizer.learning_rate.assign(self.trainer.learning_rate_at(broadcast["round"]))
        state = broadcast["optimizer_state"]
        for i, var in enumerate(self.carried):
            # A fresh optimizer (the default) starts from zero: step 0, zero moments.
            var.assign(tf.cast(state[i], var.dtype) if state else tf.zeros_like(var))
        if hasattr(self.optimizer, "set_anchor"):
            self.optimizer.set_anchor(tf.nest.flatten(broadcast["model"].trainable))
        for name, weights_of in self.definition.frozen_models().items():
            for var, value in zip(self.frozen[name].trainable_variables,
                                  weights_of(broadcast, client_state)):
                var.assign(value)
        self.model.reset_metrics()
        counts = self.label_counts(dataset, loop) if self.definition.uses_label_counts else None
        return collections.OrderedDict(extras=broadcast.get("extras", collections.OrderedDict()),
                                       initial=broadcast["model"].trainable,
                                       label_counts=counts, client_state=client_state)

    def context(self, info, **fields):
        """An :class:`ObjectiveContext` over the round's tensors ``info`` and ``fields``."""
        return ObjectiveContext(model=self.model, extras=info["extras"],
                                label_counts=info["label_counts"],
                                client_state=info["client_state"],
                                initial_weights=info["initial"],
                                hparams=self.definition.hparams, **fields)

    def step(self, batch, info):
        """One local step on ``batch``; returns its number of examples (int64)."""
        x, y = _xy(batch)
        frozen = {name: tf.nest.map_structure(tf.stop_gradient, model.outputs(x, training=False))
                  for name, model in self.frozen.items()}
        with tf.GradientTape() as tape:
            outputs = self.model.outputs(x, training=True)
            loss = self.definition.objective(self.context(info, x=x, y=y, outputs=outputs,
                                                          frozen=frozen))
        trainable = tf.nest.flatten(self.weights.trainable)
        grads = tape.gradient(loss, trainable)
        self.optimizer.apply_gradients(zip(grads, trainable))
        return tf.cast(self.model.update_metrics(y, outputs, loss), tf.int64)

    @staticmethod
    def dataset_size(dataset, loop="reduce"):
        """n_k of Eq. 6: examples in one pass over ``dataset`` (whatever the epochs and cap)."""
        return _sum_over(dataset, _batch_size, tf.constant(0, tf.int64), loop)

    def finish(self, broadcast, dataset, num_processed, info, loop="reduce"):
        """The client's upload after training (update, extra uploads, weight, metrics, exclusion,
        state), and its next state for a stateful algorithm."""
        definition = self.definition
        after = self.context(info, dataset=dataset)
        checks = []
        if definition.uploads_model:
            # Only the shared variables' deltas leave the client (personal ones stay).
            flat = [tf.subtract(b, w) for i, (b, w) in enumerate(zip(
                broadcast["model"].trainable, self.weights.trainable))
                if i not in self.layout.personal]
            checks += flat
        extra = definition.client_upload(after)
        checks += [tf.cast(t, tf.float32) for t in tf.nest.flatten(extra)
                   if t.dtype.is_floating]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(u)) for u in checks]) \
            if checks else tf.constant(True)
        weighting = self.trainer.client_weighting
        if weighting == "dataset_size":
            n_k = self.dataset_size(dataset, loop)
        elif weighting == "processed":
            n_k = num_processed
        else:
            n_k = tf.constant(1, tf.int64)
        weight = tf.where(finite, tf.cast(n_k, tf.float32), 0.0)

        def zero_if_excluded(t):   # 0 * NaN is NaN: an excluded client's values become zeros
            return tf.where(finite, t, tf.zeros_like(t))

        values = collections.OrderedDict(
            model=lambda: [zero_if_excluded(u) for u in flat],
            extra=lambda: tf.nest.map_structure(zero_if_excluded, extra),
            statistics=lambda: [zero_if_excluded(self.weights.non_trainable[i])
                                for i in self.layout.statistics])
        upload = collections.OrderedDict(
            (key, client_part(aggregator, values[key](), weight, broadcast, key))
            for key, aggregator in self.layout.aggregators.items())
        upload["optimizer_state"] = [
            weight * zero_if_excluded(tf.cast(v, tf.float32)) for v in self.carried
        ] if self.trainer.keep_optimizer_state else []
        upload["metrics"] = tf.nest.map_structure(zero_if_excluded,
                                                  self.model.report_local_unfinalized_metrics())
        upload["excluded"] = tf.cast(tf.logical_not(finite), tf.int32)
        if not definition.stateful:
            return upload
        return upload, definition.next_client_state(after)

    def untrained(self, broadcast, dataset, client_state=None):
        """What :meth:`train` returns when no local step runs: the same structure, without
        the training step in the graph. A process that never trains (a deployment's server)
        traces this for the upload's spec: tracing a transformer's training costs seconds."""
        info = self.begin(broadcast, dataset, client_state)
        return self.finish(broadcast, dataset, tf.constant(0, tf.int64), info)

    def train(self, broadcast, dataset, client_state=None):
        """Trains one client with a ``dataset.reduce`` loop, as one graph (TFF's form)."""
        info = self.begin(broadcast, dataset, client_state)
        num = self.trainer.local_data(dataset).reduce(
            tf.constant(0, tf.int64), lambda n, batch: n + self.step(batch, info))
        return self.finish(broadcast, dataset, num, info)

    def train_while(self, broadcast, dataset, client_state=None):
        """Trains one client with a while loop over the dataset's iterator, as one graph.

        The local executor's default: in the Python process it is the fastest
        form (no Python between steps), where ``dataset.reduce`` is slow.
        """
        info = self.begin(broadcast, dataset, client_state, loop="while")
        num = tf.constant(0, tf.int64)
        for batch in iter(self.trainer.local_data(dataset)):
            num += self.step(batch, info)
        return self.finish(broadcast, dataset, num, info, loop="while")

    def train_steps(self, broadcast, dataset, client_state=None):
        """Trains one client with a Python loop of compiled per-batch steps (eager callers).

        In the Python process a ``dataset.reduce`` loop can run several times
        slower than per-batch ``tf.function`` steps (an LSTM: 3.3x), so the
        local executor offers this form. It runs the same :meth:`step`.
        """
        if self._step is None:
            self._begin = tf.function(lambda b, d, s: self.begin(b, d, s, loop="steps"))
            self._step = tf.function(self.step, reduce_retracing=True)
            self._finish = tf.function(
                lambda b, d, n, i: self.finish(b, d, n, i, loop="steps"))
        info = self._begin(broadcast, dataset, client_state)
        # Passing the round's tensors to every step costs their flattening on each call:
        # only an objective that reads them gets them.
        step_info = info if self._objective_reads_round else collections.OrderedDict(
            extras=None, initial=None, label_counts=None, client_state=None)
        num = 0
        for batch in self.trainer.local_data(dataset):
            num += self._step(batch, step_info)
        return self._finish(broadcast, dataset, tf.cast(num, tf.int64), info)
