"""One federated round as MapReduce-shaped TensorFlow functions: the definition every executor runs.

A :class:`Round` is TFF's MapReduceForm written by hand, in plain TensorFlow:

    broadcast = prepare(server_state)                           server
    upload_k  = work(slot, broadcast, dataset_k)                each client
    aggregate = report(merge/accumulate(zero(), upload_1..K))   server, one aggregation
    server_state', metrics = update(server_state, aggregate)    server

The TFF executor (:mod:`tffre.execution.tff`) wraps each function in a
``tff.tensorflow.computation`` and joins them with one broadcast and one
``tff.federated_aggregate``, so every round lowers to MapReduceForm and the
client's upload is exactly the type of ``work``'s result. The local executor
(:mod:`tffre.execution.local`) calls the same functions in the Python
process, on TensorFlow's devices. They cannot drift: it is one definition.

The server state is ``OrderedDict(model=ModelWeights, optimizer_state=[...],
extras=...)`` (the optimizer state is empty unless it is kept at the server;
the extras are the algorithm's, see :mod:`tffre.definition`). For
an algorithm with per-client state, ``work`` also takes the client's state
and returns ``(upload, next_state)``; the next state stays at the client.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tffre.definition import ObjectiveContext
from tffre.client_work import ClientTrainer
from tffre.types_util import to_py  # noqa: F401  (re-exported for the executors)

ModelWeights = tff.learning.models.ModelWeights


def spec_of(structure):
    """TensorSpecs of a structure of tensors, arrays or specs."""
    def one(t):
        if isinstance(t, tf.TensorSpec):
            return t
        t = tf.convert_to_tensor(t) if not isinstance(t, (tf.Tensor, tf.Variable)) else t
        return tf.TensorSpec(t.shape, t.dtype)
    return tf.nest.map_structure(one, structure)


class Round:
    """The MapReduce-shaped definition of an algorithm's round (see the module docstring).

    Args:
      trainer: the :class:`tffre.client_work.ClientTrainer` (it holds the model_fn).
      make_aggregator: callable(shapes) -> a mergeable aggregator
        (:mod:`tffre.aggregators`) for the trainable weights' deltas.
      server_learning_rate: the server step: 1 for the mean (Eq. 6), lambda
        for attention (Eq. 14).
    """

    def __init__(self, trainer, make_aggregator, server_learning_rate, *, learning_rate=None,
                 lr_decay=1.0):
        self.trainer = trainer
        self.make_aggregator = make_aggregator
        self.server_learning_rate = float(server_learning_rate)
        # Local learning rate decay per round (FedCB: 0.99): the server keeps a round counter
        # and broadcasts learning_rate * lr_decay**round; without decay neither exists.
        self.lr_decay = float(lr_decay)
        self.decays = self.lr_decay != 1.0
        if self.decays and learning_rate is None:
            raise ValueError("lr_decay needs the local learning_rate")
        self.learning_rate = learning_rate
        self.aggregator = None

    def describe(self, slot):
        """Reads the specs (weights, metrics, optimizer state, extras, uploads) off a built slot;
        call once.

        The executor passes its own slot: the TFF executor one built in a
        throwaway graph, the local executor its first eager slot (building a
        Keras model in a graph would break the eager ones made before it).
        """
        if self.aggregator is not None:
            return self
        definition = self.definition = self.trainer.definition
        # How to rebuild each Keras metric to finalize its summed variables (as TFF's
        # keras_finalizer does, but reusable: the local executor builds them once).
        self.metric_kinds = [(m.name, type(m), m.get_config()) for m in slot.model.get_metrics()]
        self.input_spec = slot.model.input_spec
        self.model_spec = tf.nest.map_structure(
            lambda v: tf.TensorSpec(v.shape, v.dtype), slot.model.weights())
        self.optimizer_state_spec = slot.optimizer_state_spec()
        self.metrics_spec = collections.OrderedDict(
            (m.name, [tf.TensorSpec(v.shape, v.dtype) for v in m.variables])
            for m in slot.model.get_metrics())
        # Personal variables (FedRep, FedRoD) are neither uploaded nor aggregated.
        self.personal = tuple(sorted(definition.personal_variables(slot.model)))
        self.trainer.personal = self.personal
        # Normalisation statistics are averaged like the model; the other non-trainable
        # weights are constant (sent once per client, see constant_broadcast_bytes).
        self.statistics = tuple(slot.model.statistics_indices())
        self.trainer.statistics = self.statistics
        self.constant = [i for i in range(len(self.model_spec.non_trainable))
                         if i not in self.statistics]
        self.statistics_aggregator = None
        if self.statistics:
            from tffre.definition import WeightedStructMean
            self.statistics_aggregator = WeightedStructMean(
                [self.model_spec.non_trainable[i] for i in self.statistics])
            self.trainer.statistics_upload = self.statistics_aggregator.client
        self.shared = [i for i in range(len(self.model_spec.trainable)) if i not in self.personal]
        self.aggregator = self.make_aggregator(
            [self.model_spec.trainable[i].shape for i in self.shared])
        self.trainer.client_upload = self.aggregator.client
        x_spec = self.input_spec[0] if isinstance(self.input_spec, (tuple, list)) \
            else self.input_spec["x"]
        probe_x = tf.nest.map_structure(
            lambda s: tf.zeros([1 if d is None else d for d in s.shape], s.dtype), x_spec)
        traced = tf.function(lambda x: slot.model.outputs(x, training=False))
        outputs = traced.get_concrete_function(spec_of(probe_x)).structured_outputs
        self.trainer.num_classes = int(slot.model.main_output(outputs).shape[-1])
        self.extras_spec = spec_of(definition.initial_extras(slot.model))
        client_state = definition.initial_client_state(slot.model)
        self.client_state_spec = None if client_state is None else spec_of(client_state)
        # The extra uploads' types, traced (not run) on a context of zeros.
        zeros = lambda spec: tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), spec)
        probe = tf.data.Dataset.from_tensors(zeros(spec_of(
            tf.nest.map_structure(lambda s: tf.TensorSpec([1] + s.shape[1:], s.dtype),
                                  self.input_spec))))

        def upload_of():
            return definition.client_upload(ObjectiveContext(
                model=slot.model, dataset=probe, extras=zeros(self.extras_spec),
                label_counts=tf.zeros([self.trainer.num_classes]),
                client_state=None if client_state is None else zeros(self.client_state_spec),
                initial_weights=zeros(self.model_spec.trainable), hparams=definition.hparams))
        extra_spec = spec_of(tf.function(upload_of).get_concrete_function().structured_outputs)
        self.extra_aggregator = definition.upload_aggregator(extra_spec) \
            if tf.nest.flatten(extra_spec) else None
        if self.extra_aggregator is not None:
            self.trainer.extra_upload = self.extra_aggregator.client
        self.state_spec = collections.OrderedDict(model=self.model_spec,
                                                  optimizer_state=self.optimizer_state_spec,
                                                  extras=self.extras_spec)
        if self.decays:
            self.state_spec["round"] = tf.TensorSpec([], tf.int32)
        return self

    def constant_broadcast_bytes(self):
        """Bytes of the broadcast that never change (non-trainable weights other than
        normalisation statistics: a frozen embedding, FedCB's classifier): a client needs
        them once, so they are counted at a client's first round only."""
        from tffre.types_util import spec_nbytes
        return spec_nbytes([self.model_spec.non_trainable[i] for i in self.constant])

    def with_model(self, state, weights):
        """``state`` with its model weights replaced (the same structure)."""
        return collections.OrderedDict((k, weights if k == "model" else state[k])
                                       for k in self.state_spec)

    @property
    def stateful(self):
        """True when clients keep state between rounds (no MapReduceForm then)."""
        return self.trainer.definition.stateful

    # --- server ---

    def prepare(self, state):
        """What each client receives: the global model, the kept optimizer state, the extras."""
        broadcast = self._prepare_without_decay(state)
        if self.decays:
            broadcast["learning_rate"] = self.learning_rate * tf.pow(
                tf.constant(self.lr_decay, tf.float32), tf.cast(state["round"], tf.float32))
        return broadcast

    def broadcast_spec(self):
        """The TensorSpecs of :meth:`prepare`'s result."""
        spec = collections.OrderedDict(self.state_spec)
        round_spec = spec.pop("round", None)
        broadcast = self.prepare(spec) if round_spec is None else \
            self._prepare_without_decay(spec)
        if round_spec is not None:
            broadcast["learning_rate"] = tf.TensorSpec([], tf.float32)
        return broadcast

    @staticmethod
    def _prepare_without_decay(state):
        return collections.OrderedDict(model=state["model"],
                                       optimizer_state=list(state["optimizer_state"]),
                                       extras=state["extras"])

    def _parts(self):
        """(key, aggregator) of the upload parts with their own aggregation."""
        parts = []
        if self.definition.uploads_model:
            parts.append(("model", self.aggregator))
        if self.extra_aggregator is not None:
            parts.append(("extra", self.extra_aggregator))
        if self.statistics_aggregator is not None:
            parts.append(("statistics", self.statistics_aggregator))
        return parts

    def zero(self):
        """The empty accumulator."""
        acc = collections.OrderedDict((key, agg.zero()) for key, agg in self._parts())
        acc.update(
            optimizer_state=collections.OrderedDict(
                total=[tf.zeros(s.shape, tf.float32) for s in self.optimizer_state_spec],
                weight=tf.constant(0.0)),
            metrics=tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), self.metrics_spec),
            excluded=tf.constant(0, tf.int32))
        return acc

    def accumulate(self, acc, upload):
        """Adds one client's upload."""
        new = collections.OrderedDict(
            (key, agg.accumulate(acc[key], upload[key], upload.get("model"))
             if getattr(agg, "reads_model_upload", False) and key == "extra"
             else agg.accumulate(acc[key], upload[key]))
            for key, agg in self._parts())
        # The kept optimizer state goes with the model (checked when the trainer is built).
        state_weight = upload["model"]["weight"] if "model" in upload else tf.constant(0.0)
        new.update(
            optimizer_state=collections.OrderedDict(
                total=[t + s for t, s in zip(acc["optimizer_state"]["total"],
                                             upload["optimizer_state"])],
                weight=acc["optimizer_state"]["weight"] + state_weight),
            metrics=tf.nest.map_structure(tf.add, acc["metrics"], upload["metrics"]),
            excluded=acc["excluded"] + upload["excluded"])
        return new

    def merge(self, a, b):
        """Combines two partial accumulators."""
        new = collections.OrderedDict((key, agg.merge(a[key], b[key]))
                                      for key, agg in self._parts())
        new.update(
            optimizer_state=tf.nest.map_structure(tf.add, a["optimizer_state"],
                                                  b["optimizer_state"]),
            metrics=tf.nest.map_structure(tf.add, a["metrics"], b["metrics"]),
            excluded=a["excluded"] + b["excluded"])
        return new

    def report(self, acc):
        """The aggregate: the model delta, the extra uploads' report, the kept state's mean, the
        summed metrics."""
        state = acc["optimizer_state"]
        out = collections.OrderedDict()
        if self.definition.uploads_model:
            out["update"] = self.aggregator.report(acc["model"])
        if self.extra_aggregator is not None:
            out["extra"] = self.extra_aggregator.report(acc["extra"])
        if self.statistics_aggregator is not None:
            out["statistics"] = self.statistics_aggregator.report(acc["statistics"])
            out["statistics_weight"] = acc["statistics"]["weight"]
        out.update(
            optimizer_state=[tf.math.divide_no_nan(t, state["weight"]) for t in state["total"]],
            state_weight=state["weight"],
            metric_sums=acc["metrics"],
            excluded=acc["excluded"])
        return out

    def metric_objects(self):
        """Fresh Keras metrics to finalize summed values with (creates their variables)."""
        return [kind.from_config(config) for _, kind, config in self.metric_kinds]

    def server_objects(self):
        """What :meth:`update` builds variables for: the metrics to finalize and the definition's
        server objects (:meth:`~tffre.definition.Definition.server_objects`)."""
        return collections.OrderedDict(
            metrics=self.metric_objects(),
            definition=self.definition.server_objects(self.trainer.model_fn,
                                                      self.trainer.optimizer_fn))

    def finalize_metrics(self, sums, metrics):
        """Keras ``result()`` of each metric whose variables hold the clients' summed values."""
        out = collections.OrderedDict()
        for (name, _, _), metric in zip(self.metric_kinds, metrics):
            assigns = [var.assign(tf.cast(value, var.dtype))
                       for var, value in zip(metric.variables, sums[name])]
            with tf.control_dependencies(assigns):   # TFF traces in a graph: order by hand
                out[name] = tf.identity(metric.result())
        return out

    def update(self, state, aggregate, objects=None):
        """The server step theta - lr * aggregate (Eq. 6 / Eq. 14), the definition's server work,
        and the round's metrics.

        A non-finite aggregate is not applied (as TFF's optimizer finalizer);
        the kept optimizer state is replaced only if some client counted.
        ``objects``: :meth:`server_objects` (built here if None: the TFF executor
        builds them inside its server computation).
        """
        objects = objects or self.server_objects()
        model = state["model"]
        finite = tf.constant(True)
        trainable = list(model.trainable)
        if self.definition.uploads_model:
            update = aggregate["update"]
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(u)) for u in update])
            lr = tf.constant(self.server_learning_rate, tf.float32)
            for i, u in zip(self.shared, update):
                w = trainable[i]
                trainable[i] = tf.where(finite, w - tf.cast(lr, w.dtype) * u, w)
        counted = aggregate["state_weight"] > 0
        optimizer_state = [tf.where(counted, new, old) for new, old in
                           zip(aggregate["optimizer_state"], state["optimizer_state"])]
        non_trainable = list(model.non_trainable)
        if self.statistics_aggregator is not None:
            counted_stats = aggregate["statistics_weight"] > 0
            for i, value in zip(self.statistics, aggregate["statistics"]):
                non_trainable[i] = tf.where(counted_stats, value, non_trainable[i])
        weights, extras = self.definition.server_update(
            ModelWeights(trainable=trainable, non_trainable=non_trainable),
            state["extras"], aggregate.get("extra"), model, objects=objects["definition"])
        new_state = collections.OrderedDict(model=weights, optimizer_state=optimizer_state,
                                            extras=extras)
        if self.decays:
            new_state["round"] = state["round"] + 1
        metrics = collections.OrderedDict(
            distributor=collections.OrderedDict(),
            client_work=collections.OrderedDict(
                train=self.finalize_metrics(aggregate["metric_sums"],
                                            objects["metrics"]),
                num_excluded_clients=aggregate["excluded"]),
            aggregator=collections.OrderedDict(),
            finalizer=collections.OrderedDict(update_non_finite=tf.cast(
                tf.logical_not(finite), tf.int32)))
        return new_state, metrics

    # --- state ---

    def initial_state(self, model_weights, extras):
        """The server state for ``model_weights`` and ``extras`` (and a zero kept optimizer
        state)."""
        state = collections.OrderedDict(
            model=model_weights,
            optimizer_state=[np.zeros(s.shape, np.float32) for s in self.optimizer_state_spec],
            extras=extras)
        if self.decays:
            state["round"] = np.int32(0)
        return state


def make_round(trainer, make_aggregator, server_learning_rate, hparams):
    """The :class:`Round` of a registry row's resolved hyperparameters."""
    return Round(trainer, make_aggregator, server_learning_rate,
                 learning_rate=hparams.get("learning_rate"),
                 lr_decay=hparams.get("lr_decay", 1.0))


def make_trainer(model_fn, optimizer_fn, hparams, definition=None):
    """The :class:`ClientTrainer` of a registry row's resolved hyperparameters."""
    return ClientTrainer(model_fn, optimizer_fn, num_epochs=hparams["num_epochs"],
                         num_iters=hparams["num_iters"],
                         client_weighting=hparams["client_weighting"],
                         keep_optimizer_state=hparams["keep_optimizer_state"],
                         definition=definition)
