"""Server aggregators: weighted mean (FLCMC Eq. 6) and the attention step (Eq. 11-14).

Both aggregate *model deltas* u_k = theta_t - theta_k (TFF's convention: the
client update is initial minus trained weights). The server then applies
theta_{t+1} = theta_t - lr * aggregate in the finalizer, with lr = 1 for the
weighted mean (Eq. 6) and lr = lambda ("stepsize") for attention (Eq. 14).

Attention (Ji et al.'s FedAtt, FLCMC Eq. 11-14), per layer l:
    s_k = ||theta_t - theta_k||_2                      (Eq. 11)
    alpha_k = softmax_k(s_k)                           (Eq. 12)
    theta_{t+1} = theta_t - lambda sum_k alpha_k (theta_t - theta_k)   (Eq. 14)

Notes:
* ||.||_2 is the L2 norm over all elements (Frobenius for a matrix), as Eq. 11
  says. The FedAtt reference code calls ``scipy.linalg.norm(..., ord=2)``,
  which for a 2-D array is the *spectral* norm (largest singular value); we
  deliberately do not follow it.
* The softmax is evaluated as exp(s_k - max_j s_j) / sum_j exp(s_j - max_j s_j),
  so huge distances cannot overflow. In the federated version the clients
  upload s_k, the server broadcasts max_j s_j back, and the clients upload
  exp(s_k - max) and exp(s_k - max) u_k for two federated sums.
* A client whose weight is 0 (an update rejected as non-finite) is left out of
  the softmax.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tffre import runtime

runtime.install_worker_death_signal()

from tffre.registry import GRANULARITIES


def _check_granularity(granularity):
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")


def distances(update, granularity="layer"):
    """Eq. 11: the L2 (Frobenius) norm of each layer of ``update``, or one norm for the model.

    Args:
      update: a list of tensors theta_t - theta_k.
      granularity: "layer" for one distance per tensor, "model" for one
        distance over all tensors.

    Returns:
      A float32 vector, one entry per layer (or of length 1).
    """
    _check_granularity(granularity)
    # Scale by the largest magnitude before squaring, so that elements near
    # 1e19 (whose squares overflow float32) still give a finite norm.
    flat = [tf.reshape(tf.cast(u, tf.float32), [-1]) for u in update]
    if granularity == "model":
        flat = [tf.concat(flat, axis=0)]
    norms = []
    for u in flat:
        scale = tf.reduce_max(tf.abs(u)) if u.shape.num_elements() else tf.constant(0.0)
        norms.append(scale * tf.sqrt(tf.reduce_sum(tf.square(tf.math.divide_no_nan(u, scale)))))
    return tf.stack(norms)


def shifted_scores(dist, max_dist, include):
    """The un-normalised softmax weights of Eq. 12, exp(s_k - max_j s_j), or 0 if excluded."""
    return tf.where(include, tf.exp(dist - max_dist), tf.zeros_like(dist))


def scale_layers(update, layer_weights):
    """Multiplies each tensor of ``update`` by its layer's weight (one weight for "model")."""
    n = tf.shape(layer_weights)[0]
    return [u * tf.cast(tf.gather(layer_weights, tf.minimum(i, n - 1)), u.dtype)
            for i, u in enumerate(update)]


def normalise(weighted_sum, score_sum):
    """Divides the score-weighted sum of updates by the sum of scores; 0 where no client counted."""
    return scale_layers(weighted_sum, tf.math.divide_no_nan(tf.ones_like(score_sum), score_sum))


def attention_step(global_weights, client_weights, stepsize, granularity="layer"):
    """Applies the FedAtt server update (FLCMC Eq. 11-14) to plain tensors.

    Args:
      global_weights: list of tensors theta_t.
      client_weights: list (one entry per client) of lists of tensors theta_k,
        in the same layer order.
      stepsize: lambda in Eq. 14.
      granularity: "layer" (per-tensor attention, as the FedAtt reference) or
        "model" (one distance over the whole model).

    Returns:
      The list of tensors theta_{t+1}.
    """
    _check_granularity(granularity)
    if not client_weights:
        raise ValueError("attention_step needs at least one client")
    global_weights = [tf.convert_to_tensor(g, tf.float32) for g in global_weights]
    updates = [[g - tf.cast(c, tf.float32) for g, c in zip(global_weights, client)]
               for client in client_weights]
    dists = [distances(u, granularity) for u in updates]
    max_dist = tf.reduce_max(tf.stack(dists), axis=0)
    scores = [shifted_scores(d, max_dist, True) for d in dists]
    weighted = [scale_layers(u, s) for u, s in zip(updates, scores)]
    weighted_sum = [tf.add_n(list(layer)) for layer in zip(*weighted)]
    aggregate = normalise(weighted_sum, tf.add_n(scores))
    return [g - stepsize * a for g, a in zip(global_weights, aggregate)]


class AttentionFactory(tff.aggregators.WeightedAggregationFactory):
    """A TFF weighted aggregator computing sum_k alpha_k u_k (FLCMC Eq. 11-13).

    The update weight only masks clients (weight 0 = excluded); the attention
    weights alpha_k come from the distances. The step lambda of Eq. 14 is
    applied by the server finalizer.

    Args:
      granularity: "layer" or "model", see :func:`attention_step`.
    """

    def __init__(self, granularity="layer"):
        _check_granularity(granularity)
        self.granularity = granularity

    def num_scores(self, value_type):
        """Number of attention scores per client for updates of ``value_type``."""
        return 1 if self.granularity == "model" else len(list(_leaves(value_type)))

    def extra_traffic_types(self, value_type):
        """(broadcast, upload) types this aggregator sends besides the update itself.

        Clients upload their distances and their scores; the server broadcasts
        the maximum distance.
        """
        vec = tff.TensorType(np.float32, [self.num_scores(value_type)])
        return vec, tff.StructType([vec, vec])

    def create(self, value_type, weight_type):
        """Builds the ``tff.templates.AggregationProcess`` for ``value_type`` updates."""
        granularity = self.granularity
        vec_type = tff.TensorType(np.float32, [self.num_scores(value_type)])

        @tff.tensorflow.computation(value_type)
        def client_distances(update):
            return distances(_flatten(update), granularity)

        @tff.tensorflow.computation(value_type, weight_type, vec_type, vec_type)
        def client_scores(update, weight, dist, max_dist):
            include = tf.fill(tf.shape(dist), weight > 0)
            score = shifted_scores(dist, max_dist, include)
            scaled = _pack_as(update, scale_layers(_flatten(update), score))
            return scaled, score

        @tff.tensorflow.computation(value_type, vec_type)
        def server_normalise(weighted_sum, score_sum):
            return _pack_as(weighted_sum, normalise(_flatten(weighted_sum), score_sum))

        @tff.federated_computation()
        def init_fn():
            return tff.federated_value((), tff.SERVER)

        @tff.federated_computation(
            init_fn.type_signature.result,
            tff.FederatedType(value_type, tff.CLIENTS),
            tff.FederatedType(weight_type, tff.CLIENTS))
        def next_fn(state, value, weight):
            dist = tff.federated_map(client_distances, value)
            max_dist = tff.federated_broadcast(tff.federated_max(dist))
            scaled, score = tff.federated_map(client_scores, (value, weight, dist, max_dist))
            result = tff.federated_map(
                server_normalise, (tff.federated_sum(scaled), tff.federated_sum(score)))
            return tff.templates.MeasuredProcessOutput(
                state, result, tff.federated_value(collections.OrderedDict(), tff.SERVER))

        return tff.templates.AggregationProcess(init_fn, next_fn)


def _flatten(value):
    # Values of an unnamed StructType arrive as ``tff.structure.Struct``.
    if isinstance(value, tff.structure.Struct):
        return tff.structure.flatten(value)
    return tf.nest.flatten(value)


def _pack_as(template, flat):
    if isinstance(template, tff.structure.Struct):
        return tff.structure.pack_sequence_as(template, flat)
    return tf.nest.pack_sequence_as(template, flat)


def _leaves(type_spec):
    if isinstance(type_spec, tff.StructType):
        for child in type_spec.children():
            yield from _leaves(child)
    else:
        yield type_spec


def weighted_mean_factory():
    """Eq. 6: theta_{t+1} = sum_k n_k theta_k / sum_k n_k, as TFF's ``MeanFactory``.

    Applied to model deltas with weights n_k and a server step of 1, this is
    exactly Eq. 6. A round whose clients were all excluded (every weight 0)
    gives a zero delta, not 0/0 = NaN, so the model is kept as it was.
    """
    return tff.aggregators.MeanFactory(no_nan_division=True)


def extra_traffic_types(factory, value_type):
    """(broadcast, upload) TFF types an aggregator exchanges besides the updates; None if none."""
    if hasattr(factory, "extra_traffic_types"):
        return factory.extra_traffic_types(value_type)
    return None, None
