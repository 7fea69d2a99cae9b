"""Client work that trains with a *Keras* optimizer inside a TFF computation.

TFF 0.87's own client works take ``tff.learning.optimizers``; ours builds a
fresh Keras optimizer (SGD, Adam, SelfAdam, PAdam, PGD, ...) in every client
computation. By default the optimizer state (Adam moments, step count) starts
from zero at each round: the sampled clients change from round to round and
no client keeps state between rounds. With ``keep_optimizer_state=True`` the
state is kept *at the server* instead: each client starts from it, sends its
final state back, and the server stores the example-weighted mean (so the
moments survive rounds without any client holding state; the upload grows by
the size of the optimizer state). Proximal optimizers get the round's global
weights through ``set_anchor``.

The client update follows TFF's convention, ``initial - trained`` trainable
weights. Its weight is n_k, the client's number of training examples (one pass
over its dataset), as FLCMC Eq. 6 says; ``client_weighting="processed"`` weighs
by the examples processed in local training (epochs and the step cap
included, what TFF's ``ClientWeighting.NUM_EXAMPLES`` counts) and
``"uniform"`` gives every client 1. An update with a NaN or Inf is zeroed,
its weight set to 0, its kept optimizer state zeroed and its training
metrics dropped, and the round's measurements count it in
``num_excluded_clients``: it is never averaged in.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tffre import runtime
from tffre.registry import CLIENT_WEIGHTINGS, check_client_weighting  # noqa: F401

runtime.install_worker_death_signal()

ModelWeights = tff.learning.models.ModelWeights

def _batch_size(batch):
    return tf.cast(tf.shape(tf.nest.flatten(batch)[0])[0], tf.int64)


def carried_optimizer_variables(optimizer):
    """The optimizer variables that make up its state (moments, step count), without anchors."""
    anchors = {id(a) for a in (getattr(optimizer, "_anchors", None) or [])}
    return [v for v in optimizer.variables if id(v) not in anchors]


def build_local_training(model, optimizer, *, num_epochs=1, num_iters=None, extra_loss=None,
                         client_weighting="dataset_size"):
    """Returns a ``tf.function`` (initial_weights, dataset, optimizer_state=None) ->
    (update, weight, metrics, excluded, final_optimizer_state).

    ``optimizer_state`` is a list of float32 tensors matching
    :func:`carried_optimizer_variables`; when given, the optimizer starts from it.

    Everything that reads the trained variables (the update, the model's
    metrics) happens inside the ``tf.function``: its automatic control
    dependencies are what order those reads after training in TFF's graph.

    Args:
      model: a ``tff.learning.models.VariableModel``.
      optimizer: a built Keras optimizer over ``model.trainable_variables``.
      num_epochs: passes over the client dataset.
      num_iters: cap on local steps (batches) across all epochs; None = no cap.
      extra_loss: optional callable (model, batch, output, initial_weights)
        -> scalar, added to the model loss (room for FedCMC-style terms).
      client_weighting: the update weight, one of :data:`CLIENT_WEIGHTINGS`
        (see the module docstring).
    """
    check_client_weighting(client_weighting)
    weights = ModelWeights.from_model(model)
    carried = carried_optimizer_variables(optimizer)

    @tf.function
    def train(initial_weights, dataset, optimizer_state=None):
        tf.nest.map_structure(lambda v, t: v.assign(t), weights, initial_weights)
        if optimizer_state is not None:
            for var, value in zip(carried, optimizer_state):
                var.assign(tf.cast(value, var.dtype))
        if hasattr(optimizer, "set_anchor"):
            optimizer.set_anchor(tf.nest.flatten(initial_weights.trainable))
        data = dataset.repeat(num_epochs)
        if num_iters is not None:
            data = data.take(num_iters)

        def step(num_examples, batch):
            with tf.GradientTape() as tape:
                output = model.forward_pass(batch, training=True)
                loss = output.loss
                if extra_loss is not None:
                    loss += extra_loss(model, batch, output, initial_weights)
            grads = tape.gradient(loss, weights.trainable)
            optimizer.apply_gradients(zip(tf.nest.flatten(grads), tf.nest.flatten(weights.trainable)))
            return num_examples + tf.cast(output.num_examples, tf.int64)

        # dataset.reduce, not an autograph for-loop: the loop runs as one
        # dataset op, which halves the round time (benchmarks/round_time.py).
        num_examples = data.reduce(tf.constant(0, tf.int64), step)
        update = tf.nest.map_structure(tf.subtract, initial_weights.trainable, weights.trainable)
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(u)) for u in tf.nest.flatten(update)])
        if not finite:
            model.reset_metrics()
        update = tf.nest.map_structure(
            lambda u: tf.where(finite, u, tf.zeros_like(u)), update)
        if client_weighting == "dataset_size":
            # n_k of Eq. 6: one pass over the data, whatever the epochs and step cap.
            n_k = dataset.reduce(tf.constant(0, tf.int64), lambda n, b: n + _batch_size(b))
        elif client_weighting == "processed":
            n_k = num_examples
        else:
            n_k = tf.constant(1, tf.int64)
        weight = tf.where(finite, tf.cast(n_k, tf.float32), 0.0)
        excluded = tf.cast(tf.logical_not(finite), tf.int32)
        # Only a kept state travels back; otherwise don't copy the moments out.
        # An excluded client's state may be NaN, and 0 * NaN is NaN: zero it.
        final_state = [] if optimizer_state is None else [
            tf.where(finite, tf.cast(v, tf.float32), tf.zeros(v.shape, tf.float32))
            for v in carried]
        return update, weight, model.report_local_unfinalized_metrics(), excluded, final_state

    return train


def build_keras_optimizer_client_work(model_fn, optimizer_fn, *, num_epochs=1, num_iters=None,
                                      extra_loss=None, keep_optimizer_state=False,
                                      client_weighting="dataset_size"):
    """Builds a ``tff.learning.templates.ClientWorkProcess`` using a Keras optimizer.

    Args:
      model_fn: no-arg callable returning a fresh ``tff.learning.models.VariableModel``.
      optimizer_fn: no-arg callable returning a fresh Keras optimizer.
      num_epochs, num_iters, extra_loss, client_weighting: see
        :func:`build_local_training`.
      keep_optimizer_state: keep the optimizer state across rounds at the
        server (see the module docstring); otherwise it is reset every round.

    Returns:
      A ``ClientWorkProcess`` whose state is empty (or the kept optimizer
      state) and whose measurements are ``train`` (the model's aggregated
      training metrics, including ``loss`` and ``num_examples``) and
      ``num_excluded_clients``.
    """
    check_client_weighting(client_weighting)
    with tf.Graph().as_default():
        model = model_fn()
        metrics_aggregation_fn = tff.learning.metrics.sum_then_finalize(model.metric_finalizers())
        state_shapes = []
        if keep_optimizer_state:
            optimizer = optimizer_fn()
            optimizer.build(model.trainable_variables)
            state_shapes = [v.shape for v in carried_optimizer_variables(optimizer)]
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model.input_spec))
    weights_type = tff.learning.models.weights_type_from_model(model)
    opt_state_type = tff.StructWithPythonType(
        [tff.TensorType(np.float32, s) for s in state_shapes], list)

    def local_update(initial_weights, dataset, optimizer_state):
        model = model_fn()
        optimizer = optimizer_fn()
        optimizer.build(model.trainable_variables)
        train = build_local_training(model, optimizer, num_epochs=num_epochs,
                                     num_iters=num_iters, extra_loss=extra_loss,
                                     client_weighting=client_weighting)
        update, weight, metrics, excluded, final_state = train(initial_weights, dataset,
                                                               optimizer_state)
        result = tff.learning.templates.ClientResult(update=update, update_weight=weight)
        return result, metrics, excluded, [weight * s for s in final_state], weight

    if keep_optimizer_state:
        @tff.tensorflow.computation(weights_type, data_type, opt_state_type)
        def client_update(initial_weights, dataset, optimizer_state):
            return local_update(initial_weights, dataset, list(optimizer_state))

        @tff.tensorflow.computation
        def zero_state():
            return [tf.zeros(s, tf.float32) for s in state_shapes]

        @tff.tensorflow.computation(opt_state_type, tff.TensorType(np.float32), opt_state_type)
        def mean_state(weighted_sum, total_weight, old_state):
            # Example-weighted mean; if every client was excluded, keep the old state.
            return [tf.where(total_weight > 0, tf.math.divide_no_nan(s, total_weight), old)
                    for s, old in zip(weighted_sum, old_state)]

        @tff.federated_computation()
        def init_fn():
            return tff.federated_eval(zero_state, tff.SERVER)
    else:
        @tff.tensorflow.computation(weights_type, data_type)
        def client_update(initial_weights, dataset):
            return local_update(initial_weights, dataset, None)[:3]

        @tff.federated_computation()
        def init_fn():
            return tff.federated_value((), tff.SERVER)

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(weights_type, tff.CLIENTS),
        tff.FederatedType(data_type, tff.CLIENTS))
    def next_fn(state, weights, client_data):
        if keep_optimizer_state:
            args = (weights, client_data, tff.federated_broadcast(state))
        else:
            args = (weights, client_data)
        outputs = tff.federated_map(client_update, args)
        result, model_outputs, excluded = outputs[0], outputs[1], outputs[2]
        if keep_optimizer_state:
            weighted_state, weight = outputs[3], outputs[4]
            state = tff.federated_map(mean_state, (tff.federated_sum(weighted_state),
                                                   tff.federated_sum(weight), state))
        measurements = tff.federated_zip(collections.OrderedDict(
            train=metrics_aggregation_fn(model_outputs),
            num_excluded_clients=tff.federated_sum(excluded)))
        return tff.templates.MeasuredProcessOutput(state, result, measurements)

    return tff.learning.templates.ClientWorkProcess(init_fn, next_fn)
