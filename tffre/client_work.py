"""Client work: local training with a *Keras* optimizer, as plain TensorFlow both executors run.

A :class:`ClientTrainer` holds what a client does in a round; a
:class:`TrainerSlot` is one model and one optimizer to do it with. The TFF
executor builds a fresh slot inside each client computation; the local
executor keeps one slot per parallel worker and resets it for each client.
Either way the same methods run: :meth:`TrainerSlot.begin` (load the
broadcast weights and optimizer state, set the proximal anchor),
:meth:`TrainerSlot.step` (one batch: loss, gradients, Keras
``apply_gradients``) and :meth:`TrainerSlot.finish` (the upload).

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

import tensorflow as tf
import tensorflow_federated as tff

from tffre import runtime
from tffre.registry import CLIENT_WEIGHTINGS, check_client_weighting  # noqa: F401

runtime.install_worker_death_signal()

ModelWeights = tff.learning.models.ModelWeights
LOOPS = ("while", "steps", "reduce")


def carried_optimizer_variables(optimizer):
    """The optimizer variables that make up its state (moments, step count), without anchors."""
    anchors = {id(a) for a in (getattr(optimizer, "_anchors", None) or [])}
    return [v for v in optimizer.variables if id(v) not in anchors]


def _batch_size(batch):
    return tf.cast(tf.shape(tf.nest.flatten(batch)[0])[0], tf.int64)


class ClientTrainer:
    """What a client does in a round: local epochs with a Keras optimizer, then its upload.

    Args:
      model_fn: no-arg callable returning a fresh ``tff.learning.models.VariableModel``.
      optimizer_fn: no-arg callable returning a fresh Keras optimizer.
      num_epochs: passes over the client dataset.
      num_iters: cap on local steps (batches) across all epochs; None = no cap.
      client_weighting: the update weight, one of :data:`CLIENT_WEIGHTINGS`.
      keep_optimizer_state: start from the server-kept optimizer state and
        upload the final one (see the module docstring).
      extra_loss: optional callable (model, batch, output, initial_weights)
        -> scalar, added to the model loss.
      client_upload: callable(update, weight) -> the aggregator's part of the
        upload (see :mod:`tffre.aggregators`).
    """

    def __init__(self, model_fn, optimizer_fn, *, num_epochs=1, num_iters=None,
                 client_weighting="dataset_size", keep_optimizer_state=False, extra_loss=None,
                 client_upload=None):
        check_client_weighting(client_weighting)
        self.model_fn = model_fn
        self.optimizer_fn = optimizer_fn
        self.num_epochs = num_epochs
        self.num_iters = num_iters
        self.client_weighting = client_weighting
        self.keep_optimizer_state = keep_optimizer_state
        self.extra_loss = extra_loss
        self.client_upload = client_upload or (
            lambda update, weight: collections.OrderedDict(update=list(update), weight=weight))

    def slot(self):
        """A model and a built optimizer to train clients with (in the current graph or eagerly)."""
        return TrainerSlot(self)

    def local_data(self, dataset):
        """The batches one round trains on: ``num_epochs`` passes, capped at ``num_iters`` steps."""
        data = dataset.repeat(self.num_epochs)
        return data if self.num_iters is None else data.take(self.num_iters)


class TrainerSlot:
    """One model and one optimizer; trains one client at a time (see :class:`ClientTrainer`)."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.model = trainer.model_fn()
        self.optimizer = trainer.optimizer_fn()
        self.optimizer.build(self.model.trainable_variables)
        self.weights = ModelWeights.from_model(self.model)
        self.carried = carried_optimizer_variables(self.optimizer)
        self._step = None

    def optimizer_state_spec(self):
        """The kept optimizer state's float32 specs ([] unless ``keep_optimizer_state``)."""
        if not self.trainer.keep_optimizer_state:
            return []
        return [tf.TensorSpec(v.shape, tf.float32) for v in self.carried]

    def begin(self, broadcast):
        """Loads the broadcast weights and optimizer state; resets metrics; sets the anchor."""
        tf.nest.map_structure(lambda v, t: v.assign(t), self.weights, broadcast["model"])
        state = broadcast["optimizer_state"]
        for i, var in enumerate(self.carried):
            # A fresh optimizer (the default) starts from zero: step 0, zero moments.
            var.assign(tf.cast(state[i], var.dtype) if state else tf.zeros_like(var))
        if hasattr(self.optimizer, "set_anchor"):
            self.optimizer.set_anchor(tf.nest.flatten(broadcast["model"].trainable))
        self.model.reset_metrics()

    def step(self, batch, initial_weights=None):
        """One local step on ``batch``; returns its number of examples (int64)."""
        with tf.GradientTape() as tape:
            output = self.model.forward_pass(batch, training=True)
            loss = output.loss
            if self.trainer.extra_loss is not None:
                loss += self.trainer.extra_loss(self.model, batch, output, initial_weights)
        trainable = tf.nest.flatten(self.weights.trainable)
        grads = tape.gradient(loss, trainable)
        self.optimizer.apply_gradients(zip(grads, trainable))
        return tf.cast(output.num_examples, tf.int64)

    @staticmethod
    def dataset_size(dataset, loop="reduce"):
        """n_k of Eq. 6: examples in one pass over ``dataset`` (whatever the epochs and cap).

        "reduce" counts with ``dataset.reduce`` (cheap in TFF's worker); in the
        Python process one reduce op costs ~20 ms, so the other forms count
        with a while loop over the iterator (inside a ``tf.function``).
        """
        if loop == "reduce":
            return dataset.reduce(tf.constant(0, tf.int64), lambda n, b: n + _batch_size(b))
        n = tf.constant(0, tf.int64)
        for batch in iter(dataset):
            n += _batch_size(batch)
        return n

    def finish(self, broadcast, dataset, num_processed, loop="reduce"):
        """The client's upload after training: update, weight, metrics, exclusion, state."""
        initial = broadcast["model"].trainable
        update = tf.nest.map_structure(tf.subtract, initial, self.weights.trainable)
        flat = tf.nest.flatten(update)
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(u)) for u in flat])
        weighting = self.trainer.client_weighting
        if weighting == "dataset_size":
            n_k = self.dataset_size(dataset, loop)
        elif weighting == "processed":
            n_k = num_processed
        else:
            n_k = tf.constant(1, tf.int64)
        weight = tf.where(finite, tf.cast(n_k, tf.float32), 0.0)
        flat = [tf.where(finite, u, tf.zeros_like(u)) for u in flat]
        metrics = self.model.report_local_unfinalized_metrics()
        # An excluded client's metrics and state may be NaN, and 0 * NaN is NaN: zero them.
        metrics = tf.nest.map_structure(lambda m: tf.where(finite, m, tf.zeros_like(m)), metrics)
        state = [weight * tf.where(finite, tf.cast(v, tf.float32), tf.zeros(v.shape, tf.float32))
                 for v in self.carried] if self.trainer.keep_optimizer_state else []
        return collections.OrderedDict(
            model=self.trainer.client_upload(flat, weight),
            optimizer_state=state,
            metrics=metrics,
            excluded=tf.cast(tf.logical_not(finite), tf.int32))

    def train(self, broadcast, dataset):
        """Trains one client with a ``dataset.reduce`` loop, as one graph (TFF's form)."""
        self.begin(broadcast)
        initial = broadcast["model"].trainable
        num = self.trainer.local_data(dataset).reduce(
            tf.constant(0, tf.int64), lambda n, batch: n + self.step(batch, initial))
        return self.finish(broadcast, dataset, num)

    def train_while(self, broadcast, dataset):
        """Trains one client with a while loop over the dataset's iterator, as one graph.

        The local executor's default: in the Python process it is the fastest
        form (no Python between steps), where ``dataset.reduce`` is slow.
        """
        self.begin(broadcast)
        initial = broadcast["model"].trainable
        num = tf.constant(0, tf.int64)
        for batch in iter(self.trainer.local_data(dataset)):
            num += self.step(batch, initial)
        return self.finish(broadcast, dataset, num, loop="while")

    def train_steps(self, broadcast, dataset):
        """Trains one client with a Python loop of compiled per-batch steps (eager callers).

        In the Python process a ``dataset.reduce`` loop can run several times
        slower than per-batch ``tf.function`` steps (an LSTM: 3.3x), so the
        local executor offers this form. It runs the same :meth:`step`.
        """
        if self._step is None:
            self._begin = tf.function(self.begin)
            self._step = tf.function(self.step, reduce_retracing=True)
            self._finish = tf.function(lambda b, d, n: self.finish(b, d, n, loop="steps"))
        self._begin(broadcast)
        # Only an extra loss reads the initial weights; passing them to every step
        # call would add the cost of flattening them to each step.
        initial = broadcast["model"].trainable if self.trainer.extra_loss is not None else None
        num = 0
        for batch in self.trainer.local_data(dataset):
            num += self._step(batch, initial)
        return self._finish(broadcast, dataset, tf.cast(num, tf.int64))
