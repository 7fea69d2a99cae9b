"""Byzantine-robust aggregation rules as plain TensorFlow functions of the clients' updates.

Each public rule takes a list of client updates (each a list of numpy arrays or tensors, one per
layer, all clients alike) and, where the rule uses them, the clients' weights, and returns the
aggregate as a list of float32 tensors in the layers' shapes. They run eagerly on numpy input
and inside a traced function (a ``tf.function``, TFF's graphs); :func:`aggregate_rows` is the
same on *stacked* updates, one ``[n, *shape]`` tensor per layer with n known only when the
graph runs, which is what :class:`tffre.robust.collecting.RobustAggregator`'s report calls.

The rules, with n the clients and f the Byzantine clients assumed:

* ``coordinate_median``: per coordinate, the median of the n values (the mean of the two middle
  values for even n), Yin et al. 2018 ("Byzantine-Robust Distributed Learning: Towards Optimal
  Statistical Rates", ICML), Definition 1.
* ``trimmed_mean``: per coordinate, the mean after cutting the k largest and the k smallest
  values, k = beta n (Yin et al. 2018, Definition 2).
* ``krum``: the update of least score s(i) = sum of ||V_i - V_j||^2 over the n - f - 2 updates
  j != i nearest V_i, distances over the whole update flattened (Blanchard et al. 2017,
  "Machine Learning with Adversaries: Byzantine Tolerant Gradient Descent", NeurIPS, Section 4).
  ``multi_krum``: the average of the m updates of least score (the same paper, Multi-Krum).
* ``bulyan``: theta = n - 2f updates chosen by Krum applied again and again to those not yet
  chosen; then per coordinate the beta = theta - 2f chosen values closest to their median,
  averaged (El Mhamdi et al. 2018, "The Hidden Vulnerability of Distributed Learning in
  Byzantium", ICML, Section 4).
* ``norm_bound``: each update scaled to L2 norm at most M over all its layers,
  u / max(1, ||u||_2 / M), then the weighted mean (Sun et al. 2019, "Can You Really Backdoor
  Federated Learning?", norm thresholding; TFF's ``clipping_factory`` over ``MeanFactory``).

Where Flower's ``flwr.server.strategy.aggregate`` (1.23) differs from the papers, the default
follows the paper and Flower's form is a keyword (and a :class:`RobustHparams` setting):

* **Multi-Krum's average.** Blanchard et al. average the m selected updates uniformly, 1/m sum;
  Flower's ``aggregate_krum(..., to_keep=m)`` weights them by their clients' example counts.
  ``multi_krum(weighting="examples")`` (``--robust-multikrum-weighting examples``) is Flower's.
* **The trimmed mean's rounding.** Yin et al. take beta n whole. Where it is not, tffre cuts
  k = ceil(beta n) at each end, so that at least a beta fraction goes, as their guarantee for
  a Byzantine fraction alpha <= beta needs; Flower (like ``scipy.stats.trim_mean``) cuts
  int(beta n) = floor(beta n): at n = 7 and beta = 0.1 it cuts nothing and is the plain mean.
  ``trimmed_mean(rounding="floor")`` (``--robust-trim-rounding floor``) is Flower's.
* **Krum and Bulyan agree with Flower** wherever the papers define them: Flower's Krum sums the
  n - f - 2 nearest squared distances and picks the least score, and its Bulyan applies that
  Krum to the remaining updates theta times, then averages the beta values nearest the median.
  The papers leave a case open that Flower settles by clamping the neighbours to at least one,
  max(1, n - f - 2): Bulyan's last picks for f = 1 run Krum on 2f + 1 = 3 updates, where
  n - f - 2 = 0. tffre clamps alike. Flower's Krum also runs where n <= 2f + 2, outside
  Blanchard et al.'s condition; tffre's functions refuse it (ValueError, one line), and so
  does Bulyan n < 4f + 3, as Flower's does.

Inside a round (:func:`aggregate_rows`, n known only when the graph runs) nothing is refused:
clients excluded mid-round can leave fewer rows than the configuration planned for, and the
rules then degrade rather than fail the round. Krum's neighbours are clamped to
[1, n - 1], multi-Krum's m to [1, n], Bulyan's theta and beta to at least 1, and the trimmed
mean keeps at least one value per coordinate. :func:`tffre.robust.robust_settings.requirement`
checks the planned number of clients beforehand.

Numerics: values are cast to float32. Krum's squared distances are computed in float64, from a
Gram matrix of the updates centred on their mean, so that updates far from zero but close
to each other keep their distances; norm bounding's norms are float64 too (a finite update
whose squares overflow float32 is still scaled, not zeroed). Ties go to the lower client
index (Krum's pick, multi-Krum's m, Bulyan's closest values), as Flower's do, so Krum and
Bulyan can depend on the clients' order: where one neighbour counts (Bulyan's last picks for
f = 1 or 2), two updates that are each other's nearest tie exactly. The round's aggregator
puts its rows in a canonical order first (:mod:`tffre.robust.collecting`).
"""

import tensorflow as tf

from tffre.hparams import non_negative_int, positive_float, positive_int
from tffre.robust.robust_settings import (BULYAN, KRUM, MEDIAN, MULTI_KRUM, NORM_BOUND,
                                          ROUNDINGS, RULE_PARAMS, RULES, TRIMMED_MEAN,
                                          WEIGHTINGS, requirement, trim_fraction)

_INF64 = float("inf")


# --- parameters ---

def _one_of(options, what):
    def parse(value):
        if value not in options:
            raise ValueError(f"{what} must be one of {', '.join(options)}, got {value!r}")
        return value
    return parse


_PARSERS = {"beta": trim_fraction, "f": non_negative_int, "m": positive_int,
            "bound": positive_float, "rounding": _one_of(ROUNDINGS, "rounding"),
            "weighting": _one_of(WEIGHTINGS, "weighting")}


def check_params(rule, params):
    """``params`` checked for ``rule`` (a name of :data:`RULES`): the keyword parameters it
    takes, parsed, None values dropped; ValueError (one line) for an unknown rule, a parameter
    it does not take, a missing one or a bad value."""
    if rule not in RULES:
        raise ValueError(f"unknown robust rule {rule!r}; valid: {', '.join(RULES)}")
    takes = RULE_PARAMS[rule]
    out = {}
    for key, value in params.items():
        if key not in takes:
            raise ValueError(f"{rule} takes {', '.join(takes) or 'no parameters'}, not {key!r}")
        if value is None:
            continue
        try:
            out[key] = _PARSERS[key](value)
        except ValueError as err:
            raise ValueError(f"{rule}: {key}: {err}") from None
    missing = [key for key, (_, needed) in takes.items() if needed and key not in out]
    if missing:
        raise ValueError(f"{rule} needs {missing[0]}")
    return out


# --- stacked updates ---

def _stack(updates):
    """(one [n, *shape] float32 tensor per layer, n) from a list of n clients' layer lists."""
    clients = [list(u) for u in updates]
    if not clients:
        raise ValueError("a robust rule needs at least one client's update")
    layers = len(clients[0])
    if layers == 0 or any(len(c) != layers for c in clients):
        raise ValueError("every client's update must hold the same number (>= 1) of tensors")
    rows = []
    for i in range(layers):
        tensors = [tf.cast(tf.convert_to_tensor(c[i]), tf.float32) for c in clients]
        shapes = {tuple(t.shape.as_list()) for t in tensors}
        if len(shapes) != 1:
            raise ValueError(f"the clients' tensors {i} differ in shape: {sorted(shapes)}")
        rows.append(tf.stack(tensors))
    return rows, len(clients)


def _weights(weights, n):
    if weights is None:
        return None
    out = tf.reshape(tf.cast(tf.convert_to_tensor(weights), tf.float32), [-1])
    if out.shape.num_elements() is not None and out.shape.num_elements() != n:
        raise ValueError(f"got {out.shape.num_elements()} weights for {n} updates")
    return out


def _num_rows(rows):
    return tf.shape(rows[0])[0]


def _inner_shape(row):
    """A layer's shape without the client axis: static where known (TFF needs fixed types)."""
    inner = row.shape[1:]
    return inner.as_list() if inner.is_fully_defined() else tf.shape(row)[1:]


def _matrix(row):
    """[n, *shape] -> [n, d]."""
    inner = row.shape[1:]
    d = inner.num_elements() if inner.is_fully_defined() else -1
    return tf.reshape(row, [tf.shape(row)[0], d])


def _per_coordinate(rows, fn):
    """``fn`` ([n, d] -> [d]) applied to each layer, back in the layer's shape."""
    return [tf.reshape(fn(_matrix(r)), _inner_shape(r)) for r in rows]


def _first_min(scores):
    """The lowest index among the least scores (tf.argmin leaves ties unspecified)."""
    n = tf.shape(scores)[0]
    least = tf.reduce_min(scores)
    return tf.reduce_min(tf.where(scores <= least, tf.range(n), n))


# --- coordinate-wise rules (Yin et al. 2018) ---

def _median_columns(x):
    """The median of each column of [n, d] (the mean of the two middle values for even n)."""
    n = tf.shape(x)[0]
    ordered = tf.sort(x, axis=0)
    return 0.5 * (tf.gather(ordered, (n - 1) // 2) + tf.gather(ordered, n // 2))


def _trim_count(n, beta, rounding):
    """robust_settings.trim_count in TensorFlow (the same float64 operations), at most
    (n - 1) // 2 so that one value is kept."""
    nf, b = tf.cast(n, tf.float64), tf.constant(beta, tf.float64)
    if rounding == "floor":
        k = tf.floor(b * nf)
    else:
        k = tf.math.ceil(tf.round(b * nf * 1e9) / 1e9)
    return tf.minimum(tf.cast(k, tf.int32), (n - 1) // 2)


def _median_rows(rows):
    return _per_coordinate(rows, _median_columns)


def _trimmed_rows(rows, beta, rounding="ceil"):
    n = _num_rows(rows)
    k = _trim_count(n, beta, rounding)

    def trimmed(x):
        # Yin et al. 2018, Definition 2: g_k = 1 / ((1 - 2 beta) n) sum of the values kept.
        return tf.reduce_mean(tf.sort(x, axis=0)[k:n - k], axis=0)
    return _per_coordinate(rows, trimmed)


# --- Krum, multi-Krum, Bulyan ---

def _squared_distances(rows):
    """[n, n] float64: ||V_i - V_j||^2 over all layers flattened (Blanchard et al. 2017)."""
    n = _num_rows(rows)
    total = tf.zeros([n, n], tf.float64)
    for r in rows:
        x = tf.cast(_matrix(r), tf.float64)
        # Centred first: distances do not change, and the Gram matrix's cancellation
        # |x_i|^2 + |x_j|^2 - 2 x_i.x_j then loses nothing to a common offset.
        x = x - tf.reduce_mean(x, axis=0, keepdims=True)
        sq = tf.reduce_sum(tf.square(x), axis=1)
        total += sq[:, None] + sq[None, :] - 2.0 * tf.matmul(x, x, transpose_b=True)
    # Exactly symmetric (a matmul's G_ij and G_ji may round apart): where one neighbour counts,
    # two updates that are each other's nearest tie, and the lower index must win (as Flower).
    total = 0.5 * (total + tf.transpose(total))
    return tf.linalg.set_diag(tf.maximum(total, 0.0), tf.zeros([n], tf.float64))


def _krum_scores(distances, f, active=None):
    """Krum's score of each active update: the sum of its squared distances to the
    n_a - f - 2 nearest other active updates (Blanchard et al. 2017, Section 4), n_a the
    active count; at least one neighbour as Flower (and at most n_a - 1); inactive: +inf."""
    n = tf.shape(distances)[0]
    if active is None:
        active = tf.ones([n], tf.bool)
    n_active = tf.reduce_sum(tf.cast(active, tf.int32))
    k = tf.minimum(tf.maximum(n_active - f - 2, 1), n_active - 1)
    index = tf.range(n)
    others = active[None, :] & (index[:, None] != index[None, :])
    nearest = tf.sort(tf.where(others, distances, _INF64), axis=1)
    scores = tf.reduce_sum(tf.where(index[None, :] < k, nearest, 0.0), axis=1)
    return tf.where(active, scores, _INF64)


def _krum_rows(rows, f):
    best = _first_min(_krum_scores(_squared_distances(rows), f))
    return [tf.gather(r, best) for r in rows]


def _multi_krum_rows(rows, f, m=None, weights=None, weighting="uniform"):
    n = _num_rows(rows)
    scores = _krum_scores(_squared_distances(rows), f)
    m = n - f if m is None else tf.constant(m, tf.int32)   # default: all but the f assumed
    m = tf.clip_by_value(m, 1, n)
    chosen = tf.argsort(scores, stable=True)[:m]
    if weighting == "examples":   # Flower's: weighted by the clients' example counts
        w = tf.gather(tf.ones([n], tf.float32) if weights is None else weights, chosen)
        share = tf.math.divide_no_nan(w, tf.reduce_sum(w))
        return [tf.tensordot(share, tf.gather(r, chosen), axes=1) for r in rows]
    return [tf.reduce_mean(tf.gather(r, chosen), axis=0) for r in rows]   # 1/m sum (the paper)


def _bulyan_rows(rows, f):
    n = _num_rows(rows)
    distances = _squared_distances(rows)
    theta = tf.maximum(n - 2 * f, 1)          # El Mhamdi et al. 2018: theta = n - 2f chosen
    beta = tf.maximum(theta - 2 * f, 1)       # ... and beta = theta - 2f values per coordinate

    def pick(i, active, chosen):
        # Krum on the updates not chosen yet, with the same f (Flower's aggregate_bulyan too).
        hit = tf.equal(tf.range(n), _first_min(_krum_scores(distances, f, active)))
        return i + 1, active & ~hit, chosen | hit

    _, _, chosen = tf.while_loop(lambda i, active, chosen: i < theta, pick,
                                 (tf.constant(0), tf.ones([n], tf.bool), tf.zeros([n], tf.bool)))

    def around_median(x):
        s = tf.boolean_mask(x, chosen)                       # [theta, d]
        gap = tf.transpose(tf.abs(s - _median_columns(s)))   # [d, theta]
        _, nearest = tf.math.top_k(-gap, k=beta)             # ties: the lower index
        return tf.reduce_mean(tf.gather(tf.transpose(s), nearest, batch_dims=1), axis=1)
    return _per_coordinate(rows, around_median)


# --- norm bounding (Sun et al. 2019) ---

def _norm_bound_rows(rows, bound, weights=None):
    n = _num_rows(rows)
    squares = tf.zeros([n], tf.float64)
    for r in rows:
        squares += tf.reduce_sum(tf.square(tf.cast(_matrix(r), tf.float64)), axis=1)
    # u / max(1, ||u||_2 / M), as TFF's clipping_factory divides (Sun et al. 2019).
    divisor = tf.cast(tf.maximum(tf.sqrt(squares) / bound, 1.0), tf.float32)
    w = tf.ones([n], tf.float32) if weights is None else weights
    total = tf.reduce_sum(w)
    out = []
    for r in rows:
        clipped = r / tf.reshape(divisor, [-1] + [1] * (r.shape.rank - 1))
        out.append(tf.math.divide_no_nan(tf.tensordot(w, clipped, axes=1), total))
    return out


# --- the public functions ---

def aggregate_rows(rule, rows, weights=None, **params):
    """``rule`` on stacked updates: one ``[n, *shape]`` tensor per layer, n dynamic.

    This is the form a graph holds (a round's buffer of uploads); nothing is refused for too
    few rows, the rules degrade instead (see the module docstring).

    Args:
      rule: one of :data:`RULES` ("median", "trimmed-mean", "krum", "multi-krum", "bulyan",
        "norm-bound").
      rows: a list of tensors, layer l of shape [n, *shape_l], row i client i's.
      weights: [n] client weights, used by multi-Krum's "examples" weighting and norm
        bounding's weighted mean (None: all 1); the other rules ignore them, as Flower's do.
      **params: the rule's parameters, as the functions below take them.

    Returns:
      The aggregate: a list of float32 tensors, one per layer, in the layers' shapes.
    """
    params = check_params(rule, params)
    rows = [tf.cast(r, tf.float32) for r in rows]
    if weights is not None:
        weights = tf.reshape(tf.cast(weights, tf.float32), [-1])
    if rule == MEDIAN:
        return _median_rows(rows)
    if rule == TRIMMED_MEAN:
        return _trimmed_rows(rows, **params)
    if rule == KRUM:
        return _krum_rows(rows, **params)
    if rule == MULTI_KRUM:
        return _multi_krum_rows(rows, weights=weights, **params)
    if rule == BULYAN:
        return _bulyan_rows(rows, **params)
    return _norm_bound_rows(rows, weights=weights, **params)


def aggregate(rule, updates, weights=None, **params):
    """The aggregate of ``updates`` (a list of updates, each a list of tensors) by ``rule``
    (one of :data:`tffre.robust.robust_settings.RULES`) with its ``params``; ``weights``
    (the clients' example counts) for the rules that weigh (multi-Krum's ``examples``
    weighting, norm bounding's mean). Raises ValueError when the updates are too few."""
    params = check_params(rule, params)
    rows, n = _stack(updates)
    why = requirement(rule, n, **params)
    if why is not None:
        raise ValueError(why)
    return aggregate_rows(rule, rows, _weights(weights, n), **params)


def coordinate_median(updates):
    """The coordinate-wise median of the updates (Yin et al. 2018, Definition 1).

    Args:
      updates: a list of client updates, each a list of arrays or tensors (one per layer).

    Returns:
      A list of float32 tensors: per coordinate, the median of the clients' values (for an
      even number of clients, the mean of the two middle values, as ``np.median``).
    """
    return aggregate(MEDIAN, updates)


def trimmed_mean(updates, beta, rounding="ceil"):
    """The coordinate-wise beta-trimmed mean (Yin et al. 2018, Definition 2).

    Args:
      updates: a list of client updates, each a list of arrays or tensors (one per layer).
      beta: the fraction cut at each end of every coordinate, in [0, 0.5).
      rounding: "ceil" cuts ceil(beta n) (at least a beta fraction; the default), "floor"
        int(beta n) as Flower's ``aggregate_trimmed_avg``. Equal where beta n is whole.

    Returns:
      A list of float32 tensors: per coordinate, the mean of the values left.

    Raises:
      ValueError: when nothing would be left (n - 2k < 1).
    """
    return aggregate(TRIMMED_MEAN, updates, beta=beta, rounding=rounding)


def krum(updates, f):
    """Krum (Blanchard et al. 2017): the update whose n - f - 2 nearest others are nearest.

    Args:
      updates: a list of client updates, each a list of arrays or tensors (one per layer).
      f: the number of Byzantine clients assumed.

    Returns:
      The chosen client's update (a list of float32 tensors).

    Raises:
      ValueError: unless n > 2f + 2 (the paper's condition).
    """
    return aggregate(KRUM, updates, f=f)


def multi_krum(updates, f, m=None, weights=None, weighting="uniform"):
    """Multi-Krum (Blanchard et al. 2017): the average of the m updates of least Krum score.

    Args:
      updates: a list of client updates, each a list of arrays or tensors (one per layer).
      f: the number of Byzantine clients assumed.
      m: how many updates are averaged (default n - f).
      weights: the clients' example counts, used by ``weighting="examples"`` only.
      weighting: "uniform" (1/m each, the paper's) or "examples" (Flower's: weighted by
        ``weights``).

    Returns:
      A list of float32 tensors.

    Raises:
      ValueError: unless n > 2f + 2 and m <= n.
    """
    return aggregate(MULTI_KRUM, updates, weights, f=f, m=m, weighting=weighting)


def bulyan(updates, f):
    """Bulyan over Krum (El Mhamdi et al. 2018, Section 4).

    theta = n - 2f updates are chosen by Krum, each time among those not chosen yet; then per
    coordinate the beta = theta - 2f chosen values closest to their median are averaged.

    Args:
      updates: a list of client updates, each a list of arrays or tensors (one per layer).
      f: the number of Byzantine clients assumed.

    Returns:
      A list of float32 tensors.

    Raises:
      ValueError: unless n >= 4f + 3 (the paper's condition, and Flower's).
    """
    return aggregate(BULYAN, updates, f=f)


def norm_bound(updates, bound, weights=None):
    """Norm bounding (Sun et al. 2019): each update scaled to L2 norm at most ``bound``, then
    the weighted mean.

    Args:
      updates: a list of client updates, each a list of arrays or tensors (one per layer).
      bound: M, the largest L2 norm of an update over all its layers.
      weights: the clients' weights n_k (None: all 1).

    Returns:
      sum_k n_k u_k / max(1, ||u_k|| / M) / sum_k n_k, a list of float32 tensors (zero where
      every weight is 0).
    """
    return aggregate(NORM_BOUND, updates, weights, bound=bound)
