"""Server aggregators as mergeable accumulators: weighted mean (FLCMC Eq. 6) and attention (Eq. 11-13).

Both aggregate *model deltas* u_k = theta_t - theta_k (TFF's convention: the
client update is initial minus trained weights). The server then applies
theta_{t+1} = theta_t - lr * aggregate, with lr = 1 for the weighted mean
(Eq. 6) and lr = lambda ("stepsize") for attention (Eq. 14).

An aggregator is five plain TensorFlow functions over the delta's list of
tensors, the shape of ``tff.federated_aggregate``:

* ``client(update, weight)``: what the client uploads for it;
* ``zero()``, ``accumulate(acc, upload)``, ``merge(acc, acc)`` and
  ``report(acc)`` on the server side.

Both executors run these same functions: TFF through one
``tff.federated_aggregate`` (so every round lowers to MapReduceForm, and what
leaves a client is exactly its upload), the local executor in Python.

Attention (Ji et al.'s FedAtt, FLCMC Eq. 11-14), per layer l:
    s_k = ||theta_t - theta_k||_2                      (Eq. 11)
    alpha_k = softmax_k(s_k)                           (Eq. 12)
    theta_{t+1} = theta_t - lambda sum_k alpha_k (theta_t - theta_k)   (Eq. 14)

Notes:
* ||.||_2 is the L2 norm over all elements (Frobenius for a matrix), as Eq. 11
  says. The FedAtt reference code calls ``scipy.linalg.norm(..., ord=2)``,
  which for a 2-D array is the *spectral* norm (largest singular value); we
  deliberately do not follow it.
* The softmax is computed in one pass, as an online softmax: the accumulator
  is (m, S, W) = (running max of s_k, sum exp(s_k - m), sum exp(s_k - m) u_k)
  per layer, and merging rescales each side by exp(m_side - m). Nothing
  overflows however large the distances (exp of a value <= 0), and no max has
  to be broadcast back to the clients before they send their scores.
* A client whose weight is 0 (an update rejected as non-finite) is left out of
  the softmax and of the mean.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tffre import runtime
from tffre.types_util import to_py

runtime.install_worker_death_signal()

#: Attention's granularities (the registry's ``granularity`` hyperparameter offers these).
GRANULARITIES = ("layer", "model")


def has_state(aggregator):
    """True for an aggregator with server state (differential privacy's clipping norm and
    noise, :mod:`tffre.privacy`): besides the five functions it has ``initial_state()``,
    ``client_params(state)`` (broadcast each round; its ``client`` takes them as a third
    argument) and ``finalize(state, report) -> (aggregate, new state, metrics)``, which the
    server's update applies (see :class:`tffre.mapreduce.Round`)."""
    return callable(getattr(aggregator, "initial_state", None))


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


def scale_layers(update, layer_weights):
    """Multiplies each tensor of ``update`` by its layer's weight (one weight for "model")."""
    n = tf.shape(layer_weights)[0]
    return [u * tf.cast(tf.gather(layer_weights, tf.minimum(i, n - 1)), u.dtype)
            for i, u in enumerate(update)]


def normalise(weighted_sum, score_sum):
    """Divides the score-weighted sum of updates by the sum of scores; 0 where no client counted."""
    return scale_layers(weighted_sum, tf.math.divide_no_nan(tf.ones_like(score_sum), score_sum))


def _rescale(old_max, new_max):
    """exp(old_max - new_max), and 0 where nothing was accumulated yet (old_max = -inf)."""
    finite = tf.math.is_finite(old_max)
    return tf.where(finite, tf.exp(tf.where(finite, old_max - new_max, 0.0)), 0.0)


class WeightedMean:
    """Eq. 6: sum_k n_k u_k / sum_k n_k, as a mergeable accumulator.

    A round whose clients were all excluded (every weight 0) gives a zero
    delta, not 0/0 = NaN, so the model is kept as it was.

    Args:
      shapes: the shapes of the delta's tensors.
    """

    def __init__(self, shapes):
        self.shapes = [tuple(s) for s in shapes]

    def client(self, update, weight):
        """The client uploads its delta and its weight n_k."""
        return collections.OrderedDict(update=list(update), weight=weight)

    def zero(self):
        """sum_k n_k u_k = 0, sum_k n_k = 0."""
        return collections.OrderedDict(total=[tf.zeros(s, tf.float32) for s in self.shapes],
                                       weight=tf.constant(0.0))

    def accumulate(self, acc, upload):
        """Adds n_k u_k and n_k."""
        w = upload["weight"]
        return collections.OrderedDict(
            total=[t + w * u for t, u in zip(acc["total"], upload["update"])],
            weight=acc["weight"] + w)

    def merge(self, a, b):
        """Adds two partial sums."""
        return collections.OrderedDict(total=[x + y for x, y in zip(a["total"], b["total"])],
                                       weight=a["weight"] + b["weight"])

    def report(self, acc):
        """The weighted mean delta (zero if no client counted)."""
        return [tf.math.divide_no_nan(t, acc["weight"]) for t in acc["total"]]


class Attention:
    """Eq. 11-13, sum_k alpha_k u_k with alpha = softmax(s), as a one-pass mergeable accumulator.

    Args:
      shapes: the shapes of the delta's tensors.
      granularity: "layer" (one softmax per tensor, as the FedAtt reference)
        or "model" (one distance over the whole model).
    """

    def __init__(self, shapes, granularity="layer"):
        _check_granularity(granularity)
        self.shapes = [tuple(s) for s in shapes]
        self.granularity = granularity
        self.num_scores = 1 if granularity == "model" else len(self.shapes)

    def client(self, update, weight):
        """The client uploads its delta, its weight (0 = excluded) and its distances s_k (Eq. 11)."""
        return collections.OrderedDict(update=list(update), weight=weight,
                                       distance=distances(update, self.granularity))

    def zero(self):
        """(m, S, W) = (-inf, 0, 0) per layer."""
        return collections.OrderedDict(
            max=tf.fill([self.num_scores], tf.constant(-np.inf, tf.float32)),
            score_sum=tf.zeros([self.num_scores], tf.float32),
            weighted=[tf.zeros(s, tf.float32) for s in self.shapes])

    def accumulate(self, acc, upload):
        """Online softmax step: raise the running max, rescale, add exp(s_k - m) u_k."""
        include = tf.fill([self.num_scores], upload["weight"] > 0)
        s = upload["distance"]
        new_max = tf.where(include, tf.maximum(acc["max"], s), acc["max"])
        old = _rescale(acc["max"], new_max)
        score = tf.where(include, tf.exp(tf.where(include, s - new_max, 0.0)), 0.0)
        return collections.OrderedDict(
            max=new_max, score_sum=acc["score_sum"] * old + score,
            weighted=[a + b for a, b in zip(scale_layers(acc["weighted"], old),
                                            scale_layers(upload["update"], score))])

    def merge(self, a, b):
        """Combines two partial accumulators, each rescaled to the common max."""
        new_max = tf.maximum(a["max"], b["max"])
        sa, sb = _rescale(a["max"], new_max), _rescale(b["max"], new_max)
        return collections.OrderedDict(
            max=new_max, score_sum=a["score_sum"] * sa + b["score_sum"] * sb,
            weighted=[x + y for x, y in zip(scale_layers(a["weighted"], sa),
                                            scale_layers(b["weighted"], sb))])

    def report(self, acc):
        """W / S: the attention-weighted delta (zero if no client counted)."""
        return normalise(acc["weighted"], acc["score_sum"])


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
    attention = Attention([g.shape for g in global_weights], granularity)
    acc = attention.zero()
    for client in client_weights:
        update = [g - tf.cast(c, tf.float32) for g, c in zip(global_weights, client)]
        acc = attention.accumulate(acc, attention.client(update, tf.constant(1.0)))
    return [g - stepsize * a for g, a in zip(global_weights, attention.report(acc))]


def _leaf_shapes(type_spec):
    if isinstance(type_spec, tff.StructType):
        return [s for child in type_spec.children() for s in _leaf_shapes(child)]
    return [tuple(type_spec.shape)]


def _flatten(value):
    # Values of an unnamed StructType arrive as ``tff.structure.Struct``.
    if isinstance(value, tff.structure.Struct):
        return tff.structure.flatten(value)
    return tf.nest.flatten(value)


def aggregate_computations(agg, upload_type, post_report=None):
    """(zero, accumulate, merge, report) as TFF computations, for ``tff.federated_aggregate``.

    Args:
      agg: anything with zero, accumulate, merge and report (an aggregator, or
        a whole :class:`tffre.mapreduce.Round`).
      upload_type: the TFF type of one client's upload.
      post_report: optional function applied to ``report``'s result.
    """
    @tff.tensorflow.computation
    def zero():
        return agg.zero()

    acc_type = zero.type_signature.result

    @tff.tensorflow.computation(acc_type, upload_type)
    def accumulate(acc, upload):
        return agg.accumulate(to_py(acc), to_py(upload))

    @tff.tensorflow.computation(acc_type, acc_type)
    def merge(a, b):
        return agg.merge(to_py(a), to_py(b))

    @tff.tensorflow.computation(acc_type)
    def report(acc):
        out = agg.report(to_py(acc))
        return out if post_report is None else post_report(out)

    return zero, accumulate, merge, report


class MergeableFactory(tff.aggregators.WeightedAggregationFactory):
    """A TFF weighted aggregation factory from a mergeable aggregator: one ``federated_aggregate``.

    Use it in your own TFF code where a ``tff.aggregators`` factory is
    expected. The update weight masks clients (weight 0 = excluded).

    Args:
      make_aggregator: callable(shapes) -> an aggregator with client, zero,
        accumulate, merge and report (e.g. :class:`WeightedMean`).
    """

    def __init__(self, make_aggregator):
        self._make = make_aggregator

    def create(self, value_type, weight_type):
        """Builds the ``tff.templates.AggregationProcess`` for ``value_type`` updates."""
        agg = self._make(_leaf_shapes(value_type))

        @tff.tensorflow.computation(value_type, weight_type)
        def client(update, weight):
            return agg.client(_flatten(update), tf.cast(weight, tf.float32))

        upload_type = client.type_signature.result

        def report_as_value(flat):
            if not isinstance(value_type, tff.StructType):
                return flat[0]
            # Back in the caller's container (list, OrderedDict, ...): TFF's learning
            # algorithms require the result's type to equal value_type, container included.
            return tff.types.type_to_py_container(
                tff.structure.pack_sequence_as(value_type, flat), value_type)

        zero, accumulate, merge, report = aggregate_computations(agg, upload_type,
                                                                 report_as_value)

        @tff.federated_computation()
        def init_fn():
            return tff.federated_value((), tff.SERVER)

        @tff.federated_computation(init_fn.type_signature.result,
                                   tff.FederatedType(value_type, tff.CLIENTS),
                                   tff.FederatedType(weight_type, tff.CLIENTS))
        def next_fn(state, value, weight):
            uploads = tff.federated_map(client, (value, weight))
            result = tff.federated_aggregate(uploads, zero(), accumulate, merge, report)
            return tff.templates.MeasuredProcessOutput(
                state, result, tff.federated_value(collections.OrderedDict(), tff.SERVER))

        return tff.templates.AggregationProcess(init_fn, next_fn)


class AttentionFactory(MergeableFactory):
    """TFF factory for the one-pass attention aggregate sum_k alpha_k u_k (Eq. 11-13).

    The step lambda of Eq. 14 is the server's to apply.

    Args:
      granularity: "layer" or "model", see :func:`attention_step`.
    """

    def __init__(self, granularity="layer"):
        _check_granularity(granularity)
        self.granularity = granularity
        super().__init__(lambda shapes: Attention(shapes, granularity))


def weighted_mean_factory():
    """Eq. 6: theta_{t+1} = sum_k n_k theta_k / sum_k n_k, as TFF's ``MeanFactory``.

    Applied to model deltas with weights n_k and a server step of 1, this is
    exactly Eq. 6. Divides with ``no_nan_division``: a round whose clients
    were all excluded gives a zero delta, not NaN. (tffre's own rounds use
    :class:`WeightedMean`, the same arithmetic as a mergeable accumulator that
    both executors run.)
    """
    return tff.aggregators.MeanFactory(no_nan_division=True)
