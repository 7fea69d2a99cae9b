"""A robust rule as a round's aggregator: the round's uploads kept in a buffer, the rule at report.

A robust rule (:mod:`tffre.robust.rules`) needs every client's update, not a sum, so its
accumulator is a buffer of ``capacity`` rows, the round's clients, with their weights and
a count. It has the five functions of :mod:`tffre.aggregators` (``client``, ``zero``,
``accumulate``, ``merge``, ``report``) and a fixed type (``capacity`` rows whatever the number
of clients), so the round stays one ``tff.federated_aggregate``:

* ``accumulate`` writes the upload at row ``count`` (a client of weight 0, excluded because
  its update was not finite, is not written and not counted; nor is an update holding NaN or
  Inf sent with a positive weight, by a broken site);
* ``merge`` writes b's ``count`` rows after a's;
* ``report`` applies the rule to the first ``count`` rows (none: a zero delta, as
  :class:`tffre.aggregators.WeightedMean` gives), put in a canonical order first.

**The order the uploads came in does not matter, bit for bit.** Krum and Bulyan break ties
by client order (the lower index wins, as Flower's): where one neighbour counts, two updates
that are each other's nearest tie exactly, which happens in Bulyan's last picks for f = 1
or 2 (the paper's own recursion for f = 2). And a sum's rounding, and a Gram matrix's,
follow the rows' order. Which client is accumulated first is an accident of the executor (a
thread pool, TFF's runtime, the order deployed sites answer), so ``report`` sorts the rows by
their L2 norm, then by the sum of their values (float64; rows equal in both keep their
order), before applying the rule: the rule sees the same rows in the same order whatever
the order of ``accumulate`` and ``merge``. The rules themselves
(:mod:`tffre.robust.rules`) keep their input's order, as Flower's do.

Rows beyond ``count`` stay zero. More clients of weight > 0 than ``capacity`` fail the round
(``tf.errors.InvalidArgumentError`` from ``accumulate`` or ``merge``, naming the capacity):
size it to the clients per round.

**What it costs.** The server holds ``capacity`` models for the round where the mean holds one
(:func:`memory_bytes` against :func:`mean_memory_bytes`): for a model of 1M float32
parameters, 40 MB at 10 clients and 400 MB at 100, against 4 MB. The report's working copies
come on top: the rows in canonical order (one more buffer), a sorted copy of each layer's
rows (median, trimmed mean, Bulyan) or a float64 copy of one layer's rows at a time (Krum's
distances); a merge holds two buffers at once.
Norm bounding needs no buffer: :class:`NormBoundedMean` scales each upload as it arrives and
sums, one model like the mean (:func:`robust_aggregator` picks it for ``norm-bound``).

**Secure aggregation and DP.** The server reads each upload (``additive = False``), so
``tffre.federation.split_round.is_sum`` is False and SecAgg+, which only reveals a sum,
refuses these aggregators; :class:`NormBoundedMean` too, since the bound is applied by the
server to each upload, where a client cannot skip it.
"""

import collections

import numpy as np
import tensorflow as tf

from tffre.robust import rules
from tffre.robust.robust_settings import NORM_BOUND

_FLOAT32_BYTES = 4


def _parameters(shapes):
    return sum(int(np.prod(s, dtype=np.int64)) for s in shapes)


def _finite(update):
    """True when every value of ``update`` is finite. A broken or Byzantine site may send NaN
    with a positive weight (an honest site's work excludes itself, weight 0): the robust
    aggregators leave such an upload out, where the mean would turn NaN."""
    return tf.reduce_all([tf.reduce_all(tf.math.is_finite(u)) for u in update])


def memory_bytes(shapes, capacity):
    """Bytes of :class:`RobustAggregator`'s accumulator: ``capacity`` float32 rows of the
    model (shapes ``shapes``), their float32 weights and an int32 count."""
    return _FLOAT32_BYTES * (capacity * _parameters(shapes) + capacity + 1)


def mean_memory_bytes(shapes):
    """Bytes of :class:`tffre.aggregators.WeightedMean`'s accumulator (and
    :class:`NormBoundedMean`'s): one float32 model and its float32 total weight."""
    return _FLOAT32_BYTES * (_parameters(shapes) + 1)


def _check_capacity(capacity):
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ValueError(f"capacity must be a whole number >= 1 (the round's clients), "
                         f"got {capacity!r}")
    return int(capacity)


class RobustAggregator:
    """A robust rule over a fixed buffer of the round's uploads, as a mergeable accumulator.

    Args:
      shapes: the shapes of the delta's tensors.
      rule: one of :data:`tffre.robust.robust_settings.RULES`.
      capacity: the buffer's rows: the most clients of one round.
      **params: the rule's parameters, as :func:`tffre.robust.rules.aggregate_rows` takes
        them (``beta``, ``rounding``, ``f``, ``m``, ``weighting``, ``bound``).
    """

    #: Not a sum of the uploads: secure aggregation refuses it (split_round.is_sum).
    additive = False

    def __init__(self, shapes, rule, capacity, **params):
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self.params = rules.check_params(rule, params)
        self.rule = rule
        self.capacity = _check_capacity(capacity)

    def client(self, update, weight):
        """The client uploads its delta and its weight n_k (0: excluded)."""
        return collections.OrderedDict(update=[tf.cast(u, tf.float32) for u in update],
                                       weight=tf.cast(weight, tf.float32))

    def zero(self):
        """An empty buffer: ``capacity`` zero rows per tensor, zero weights, count 0."""
        return collections.OrderedDict(
            rows=[tf.zeros((self.capacity,) + s, tf.float32) for s in self.shapes],
            weights=tf.zeros([self.capacity], tf.float32),
            count=tf.constant(0, tf.int32))

    def _full(self):
        return (f"RobustAggregator: more than capacity = {self.capacity} clients of weight > 0 "
                f"in one round; give it the round's number of clients")

    def accumulate(self, acc, upload):
        """Writes the upload at row ``count`` and counts it, unless its weight is 0."""
        count, weight = acc["count"], upload["weight"]
        include = tf.logical_and(weight > 0, _finite(upload["update"]))
        at = tf.minimum(count, self.capacity - 1)
        room = tf.debugging.assert_less(tf.where(include, count, 0), self.capacity,
                                        message=self._full())
        # TFF traces in v1 graphs, with no automatic control dependencies: tie the check on.
        with tf.control_dependencies([room]):
            # Excluded: row `at` is written back unchanged (its update may be NaN).
            rows = [tf.tensor_scatter_nd_update(r, [[at]], tf.where(include, u, r[at])[None])
                    for r, u in zip(acc["rows"], upload["update"])]
            weights = tf.tensor_scatter_nd_update(
                acc["weights"], [[at]], tf.where(include, weight, acc["weights"][at])[None])
            count = count + tf.cast(include, tf.int32)
        return collections.OrderedDict(rows=rows, weights=weights, count=count)

    def merge(self, a, b):
        """Writes b's first ``count`` rows (and weights) after a's."""
        na, nb = a["count"], b["count"]
        room = tf.debugging.assert_less_equal(na + nb, self.capacity, message=self._full())
        with tf.control_dependencies([room]):
            at = (na + tf.range(nb))[:, None]
            rows = [tf.tensor_scatter_nd_update(x, at, y[:nb])
                    for x, y in zip(a["rows"], b["rows"])]
            weights = tf.tensor_scatter_nd_update(a["weights"], at, b["weights"][:nb])
            count = na + nb
        return collections.OrderedDict(rows=rows, weights=weights, count=count)

    def report(self, acc):
        """The rule on the first ``count`` rows (zero if no client counted)."""
        # With no client counted, the rule sees one zero row of weight 0, and every rule
        # gives zero there: no branch needed.
        n = tf.maximum(acc["count"], 1)
        rows = [r[:n] for r in acc["rows"]]
        order = canonical_order(rows)
        out = rules.aggregate_rows(self.rule, [tf.gather(r, order) for r in rows],
                                   tf.gather(acc["weights"][:n], order), **self.params)
        return [tf.reshape(o, s) for o, s in zip(out, self.shapes)]


def canonical_order(rows):
    """The rows' indices sorted by L2 norm, then by the sum of their values (float64), over
    all layers; rows equal in both keep their order. Stacked rows: one [n, *shape] tensor per
    layer, as :func:`tffre.robust.rules.aggregate_rows` takes them."""
    flat = [tf.reshape(tf.cast(r, tf.float64), [tf.shape(r)[0], -1]) for r in rows]
    squares = tf.add_n([tf.reduce_sum(tf.square(x), axis=1) for x in flat])
    sums = tf.add_n([tf.reduce_sum(x, axis=1) for x in flat])
    # Lexicographic by two stable sorts: the second key first.
    by_sum = tf.argsort(sums, stable=True)
    return tf.gather(by_sum, tf.argsort(tf.gather(squares, by_sum), stable=True))


class NormBoundedMean:
    """Norm bounding (Sun et al. 2019) without a buffer: each upload scaled by the server to L2
    norm at most ``bound`` as it arrives, then the weighted mean, as a mergeable sum.

    The same arithmetic as ``rules.norm_bound`` and ``RobustAggregator(shapes, "norm-bound",
    ...)``, holding one model like :class:`tffre.aggregators.WeightedMean`. Not ``additive``:
    the bound is the server's to apply to each upload, which secure aggregation hides.

    Args:
      shapes: the shapes of the delta's tensors.
      bound: M > 0.
    """

    additive = False

    def __init__(self, shapes, bound):
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self.bound = rules.check_params(NORM_BOUND, {"bound": bound})["bound"]

    def client(self, update, weight):
        """The client uploads its delta and its weight n_k (0: excluded)."""
        return collections.OrderedDict(update=[tf.cast(u, tf.float32) for u in update],
                                       weight=tf.cast(weight, tf.float32))

    def zero(self):
        """sum_k n_k u_k / max(1, ||u_k|| / M) = 0, sum_k n_k = 0."""
        return collections.OrderedDict(total=[tf.zeros(s, tf.float32) for s in self.shapes],
                                       weight=tf.constant(0.0))

    def accumulate(self, acc, upload):
        """Adds n_k u_k / max(1, ||u_k|| / M) and n_k (nothing for weight 0)."""
        w = upload["weight"]
        include = tf.logical_and(w > 0, _finite(upload["update"]))
        squares = tf.add_n([tf.reduce_sum(tf.square(tf.cast(u, tf.float64)))
                            for u in upload["update"]])
        divisor = tf.cast(tf.maximum(tf.sqrt(squares) / self.bound, 1.0), tf.float32)
        return collections.OrderedDict(
            total=[t + tf.where(include, w * (u / divisor), 0.0)
                   for t, u in zip(acc["total"], upload["update"])],
            weight=acc["weight"] + tf.where(include, w, 0.0))

    def merge(self, a, b):
        """Adds two partial sums."""
        return collections.OrderedDict(total=[x + y for x, y in zip(a["total"], b["total"])],
                                       weight=a["weight"] + b["weight"])

    def report(self, acc):
        """The weighted mean of the bounded updates (zero if no client counted)."""
        return [tf.math.divide_no_nan(t, acc["weight"]) for t in acc["total"]]


def robust_aggregator(hp, shapes, capacity):
    """The aggregator for ``hp``'s robust rule (a :class:`RobustHparams`), or None for none.

    ``norm-bound`` gives a :class:`NormBoundedMean` (no buffer); the others a
    :class:`RobustAggregator` of ``capacity`` rows.
    """
    if hp.robust is None:
        return None
    params = hp.rule_params()
    if hp.robust == NORM_BOUND:
        return NormBoundedMean(shapes, **params)
    return RobustAggregator(shapes, hp.robust, capacity, **params)
