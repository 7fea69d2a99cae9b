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
the extras are the algorithm's, see :mod:`tffre.definition`; a stateful server optimizer
adds ``server_optimizer``, its slots: :mod:`tffre.server_optimizers`). For
an algorithm with per-client state, ``work`` also takes the client's state
and returns ``(upload, next_state)``; the next state stays at the client.
"""

import collections
import dataclasses
from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tffre.aggregators import has_state
from tffre.client_work import ClientTrainer, read_layout, spec_of  # noqa: F401  (re-export)
from tffre.server_optimizers import ServerOptimizer
from tffre.types_util import to_py  # noqa: F401  (re-exported for the executors)

ModelWeights = tff.learning.models.ModelWeights


class Round:
    """The MapReduce-shaped definition of an algorithm's round (see the module docstring).

    Made by a :class:`RoundFactory` from a built slot (the round reads its
    types off it, :func:`tffre.client_work.read_layout`).

    Args:
      trainer: the :class:`tffre.client_work.ClientTrainer`, bound to the round's layout
        (``trainer.layout``).
      server_learning_rate: the server step: 1 for the mean (Eq. 6), lambda
        for attention (Eq. 14).
      server_optimizer: a :class:`tffre.server_optimizers.ServerOptimizer` (FedAdam, FedYogi,
        FedAvgM: Reddi et al. 2021); None for the plain step ``theta - lr * delta``.

    The local learning rate is the trainer's (its hyperparameters' ``learning_rate``, decayed
    by ``lr_decay`` each round): the server keeps and broadcasts only the round counter, and
    only when the rate decays (:meth:`tffre.client_work.ClientTrainer.learning_rate_at`).
    """

    def __init__(self, trainer, server_learning_rate, server_optimizer=None):
        if trainer.layout is None:
            raise ValueError("a Round needs a trainer bound to its layout (make_round)")
        self.trainer = trainer
        self.definition = trainer.definition
        layout = self.layout = trainer.layout
        self.server_learning_rate = float(server_learning_rate)
        # The server step (tffre.server_optimizers): the plain theta - lr * delta by default.
        self.server_optimizer = server_optimizer or ServerOptimizer("sgd", server_learning_rate)
        # Local learning rate decay per round (FedCB: 0.99): the server keeps a round counter
        # and broadcasts it; the client decays its own rate by it. Without decay neither exists.
        self.decays = trainer.decays
        if self.decays and trainer.definition.hparams.learning_rate is None:
            raise ValueError("lr_decay needs the local learning_rate")
        self.input_spec = layout.input_spec
        self.model_spec = layout.model_spec
        self.optimizer_state_spec = layout.optimizer_state_spec
        self.metrics_spec = layout.metrics_spec
        self.extras_spec = layout.extras_spec
        self.client_state_spec = layout.client_state_spec
        self.personal, self.shared = layout.personal, layout.shared
        self.statistics, self.constant = layout.statistics, layout.constant
        self.aggregators = layout.aggregators
        # Aggregators with server state (differential privacy's clip and noise): their state
        # is kept in the server state and their per-round parameters broadcast.
        self.stateful_aggregators = [k for k, agg in self.aggregators.items() if has_state(agg)]
        if self.stateful_aggregators and self.statistics:
            raise ValueError("differential privacy does not cover the model's normalisation "
                             "statistics (BatchNorm's moving mean and variance), which are "
                             "averaged without noise: use a model without them")
        self.state_spec = collections.OrderedDict(model=self.model_spec,
                                                  optimizer_state=self.optimizer_state_spec,
                                                  extras=self.extras_spec)
        if self.stateful_aggregators:
            self.state_spec["aggregators"] = collections.OrderedDict(
                (k, spec_of(self.aggregators[k].initial_state())) for k in self.stateful_aggregators)
        if self.decays:
            self.state_spec["round"] = tf.TensorSpec([], tf.int32)
        # A stateful server optimizer's slots (FedAdam's moments) are server state too, so
        # checkpoints, resume and a deployment's server carry them; the plain step adds none.
        self.server_optimizer_shapes = [self.model_spec.trainable[i].shape for i in self.shared]
        if self.server_optimizer.stateful:
            if not self.definition.uploads_model:
                raise ValueError(f"--server-optimizer {self.server_optimizer.kind}: this "
                                 "algorithm uploads no model delta for the server to step on")
            self.state_spec["server_optimizer"] = self.server_optimizer.state_spec(
                self.server_optimizer_shapes)

    def constant_broadcast_bytes(self):
        """Bytes of the broadcast that never change: non-trainable weights other than
        normalisation statistics (a frozen embedding, FedCB's classifier) and the
        definition's ``constant_extras`` (FedED's D_v inputs, which its server_update returns
        unchanged). A client needs them once, so they are counted at its first round only,
        as a deployment sends them (:func:`tffre.federation.split_round.constant_extras`)."""
        from tffre.types_util import spec_nbytes
        extras = self.trainer.definition.constant_extras
        return spec_nbytes([self.model_spec.non_trainable[i] for i in self.constant]
                           + [self.extras_spec[k] for k in extras])

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
        """What each client receives: the global model, the kept optimizer state, the extras,
        the stateful aggregators' parameters of the round and, when the local learning rate
        decays, the round (the client decays its own rate by it)."""
        broadcast = collections.OrderedDict(model=state["model"],
                                            optimizer_state=list(state["optimizer_state"]),
                                            extras=state["extras"])
        if self.stateful_aggregators:
            broadcast["aggregator_params"] = collections.OrderedDict(
                (k, self.aggregators[k].client_params(state["aggregators"][k]))
                for k in self.stateful_aggregators)
        if self.decays:
            broadcast["round"] = state["round"]
        return broadcast

    def broadcast_spec(self):
        """The TensorSpecs of :meth:`prepare`'s result (traced, not run)."""
        return spec_of(tf.function(self.prepare).get_concrete_function(
            self.state_spec).structured_outputs)

    def _aggregators(self):
        """(key, aggregator) of the upload's pieces, each with its own aggregation."""
        return list(self.aggregators.items())

    def zero(self):
        """The empty accumulator."""
        acc = collections.OrderedDict((key, agg.zero()) for key, agg in self._aggregators())
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
            for key, agg in self._aggregators())
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
                                      for key, agg in self._aggregators())
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
        if "model" in self.aggregators:
            out["update"] = self.aggregators["model"].report(acc["model"])
        if "extra" in self.aggregators:
            out["extra"] = self.aggregators["extra"].report(acc["extra"])
        if "statistics" in self.aggregators:
            out["statistics"] = self.aggregators["statistics"].report(acc["statistics"])
            out["statistics_weight"] = acc["statistics"]["weight"]
        out.update(
            optimizer_state=[tf.math.divide_no_nan(t, state["weight"]) for t in state["total"]],
            state_weight=state["weight"],
            metric_sums=acc["metrics"],
            excluded=acc["excluded"])
        return out

    def metric_objects(self):
        """Fresh Keras metrics to finalize summed values with (creates their variables)."""
        return [kind.from_config(config) for _, kind, config in self.layout.metric_kinds]

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
        for (name, _, _), metric in zip(self.layout.metric_kinds, metrics):
            assigns = [var.assign(tf.cast(value, var.dtype))
                       for var, value in zip(metric.variables, sums[name])]
            with tf.control_dependencies(assigns):   # TFF traces in a graph: order by hand
                out[name] = tf.identity(metric.result())
        return out

    def update(self, state, aggregate, objects=None):
        """The server step (theta - lr * aggregate, Eq. 6 / Eq. 14, or the server optimizer's),
        the definition's server work, and the round's metrics.

        A non-finite aggregate is not applied (as TFF's optimizer finalizer);
        the kept optimizer state is replaced only if some client counted.
        ``objects``: :meth:`server_objects` (built here if None: the TFF executor
        builds them inside its server computation).
        """
        objects = objects or self.server_objects()
        model = state["model"]
        # Stateful aggregators (differential privacy) finish their aggregate at the server:
        # e.g. the noise is added to the clipped sum here, with the aggregator's state.
        aggregate = collections.OrderedDict(aggregate)
        aggregator_states, aggregator_metrics = collections.OrderedDict(), \
            collections.OrderedDict()
        for key in self.stateful_aggregators:
            name = REPORT_NAMES[key]
            aggregate[name], aggregator_states[key], aggregator_metrics[key] = \
                self.aggregators[key].finalize(state["aggregators"][key], aggregate[name])
        finite = tf.constant(True)
        trainable = list(model.trainable)
        server_optimizer_state = (state["server_optimizer"]
                                  if "server_optimizer" in self.state_spec else None)
        if self.definition.uploads_model:
            update = aggregate["update"]
            finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(u)) for u in update])
            # The server optimizer's step on the shared weights (the plain step: Eq. 6 / 14).
            old = [trainable[i] for i in self.shared]
            stepped, new_optimizer_state = self.server_optimizer.update_step(
                server_optimizer_state, old, list(update))
            for i, w, new in zip(self.shared, old, stepped):
                trainable[i] = tf.where(finite, new, w)
            if server_optimizer_state is not None:   # a non-finite round moves nothing
                server_optimizer_state = tf.nest.map_structure(
                    lambda n, o: tf.where(finite, n, o), new_optimizer_state,
                    server_optimizer_state)
        counted = aggregate["state_weight"] > 0
        optimizer_state = [tf.where(counted, new, old) for new, old in
                           zip(aggregate["optimizer_state"], state["optimizer_state"])]
        non_trainable = list(model.non_trainable)
        if "statistics" in self.aggregators:
            counted_stats = aggregate["statistics_weight"] > 0
            for i, value in zip(self.statistics, aggregate["statistics"]):
                non_trainable[i] = tf.where(counted_stats, value, non_trainable[i])
        weights, extras = self.definition.server_update(
            ModelWeights(trainable=trainable, non_trainable=non_trainable),
            state["extras"], aggregate.get("extra"), model, objects=objects["definition"])
        new_state = collections.OrderedDict(model=weights, optimizer_state=optimizer_state,
                                            extras=extras)
        if self.stateful_aggregators:
            new_state["aggregators"] = aggregator_states
        if self.decays:
            new_state["round"] = state["round"] + 1
        if "server_optimizer" in self.state_spec:
            new_state["server_optimizer"] = server_optimizer_state
        metrics = collections.OrderedDict(
            distributor=collections.OrderedDict(),
            client_work=collections.OrderedDict(
                train=self.finalize_metrics(aggregate["metric_sums"],
                                            objects["metrics"]),
                num_excluded_clients=aggregate["excluded"]),
            aggregator=aggregator_metrics,
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
        if self.stateful_aggregators:
            state["aggregators"] = collections.OrderedDict(
                (k, self.aggregators[k].initial_state()) for k in self.stateful_aggregators)
        if self.decays:
            state["round"] = np.int32(0)
        if "server_optimizer" in self.state_spec:
            state["server_optimizer"] = self.server_optimizer.build(self.server_optimizer_shapes)
        return state


#: The name each upload part's aggregate has in :meth:`Round.report`'s result.
REPORT_NAMES = {"model": "update", "extra": "extra", "statistics": "statistics"}


@dataclasses.dataclass(frozen=True)
class RoundFactory:
    """Makes an algorithm's :class:`Round` once a slot of its trainer is built.

    The round reads its types off the slot's model (:func:`read_layout`); the
    executor decides where that slot is built (an eager one it keeps, or one in a
    throwaway graph: see :mod:`tffre.execution`).

    Attributes:
      trainer: the (unbound) :class:`tffre.client_work.ClientTrainer`.
      make_aggregator: callable(shapes) -> the model delta's mergeable aggregator.
      server_learning_rate: as :class:`Round`'s.
      server_optimizer: the :class:`tffre.server_optimizers.ServerOptimizer` (None: the plain
        step with ``server_learning_rate``).
    """
    trainer: ClientTrainer
    make_aggregator: Callable
    server_learning_rate: float
    server_optimizer: Optional[ServerOptimizer] = None

    def probe(self):
        """A slot of the trainer to read the round's types off (builds a model, and raises
        ValueError if that model cannot take the round's input_spec)."""
        slot = self.trainer.slot()
        slot.model.check_input_spec()
        return slot

    def build(self, slot):
        """The :class:`Round`, its types read off ``slot`` (a :meth:`probe`)."""
        layout = read_layout(slot, self.make_aggregator)
        return Round(self.trainer.with_layout(layout), self.server_learning_rate,
                     self.server_optimizer)
