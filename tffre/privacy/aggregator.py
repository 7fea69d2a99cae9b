"""DP-FedAvg's aggregation (McMahan et al., ICLR 2018), from TensorFlow Privacy's DP queries.

Each client's upload is clipped to L2 norm C over all its tensors, the server
adds N(0, sigma^2 C^2) to the *sum* and divides by a fixed denominator (the
expected number of clients per round), so no client's weight depends on its
data (McMahan et al., Algorithm 1, the fixed-denominator estimator f~_f). With
``adaptive_clip`` C follows a target quantile of the update norms, estimated
privately (Andrew et al., NeurIPS 2021, Algorithm 1, geometric update).

The maths is TF Privacy's: ``GaussianSumQuery`` (fixed clip) or
``QuantileAdaptiveClipSumQuery`` (adaptive), under ``NormalizedQuery`` (the
fixed denominator), as TFF's ``DifferentiallyPrivateFactory.gaussian_fixed`` /
``gaussian_adaptive`` build them. The query's steps map onto a mergeable
aggregator, with the server state around it:

    initial_state()              the query's global state (flattened) and the noise seed
    client_params(state)         derive_sample_params: the clip (and quantile estimate) broadcast
    client(value, weight, p)     preprocess_record: the clipped record (and below-clip bit)
    zero/accumulate/merge        initial_sample_state / accumulate_preprocessed_record /
                                 merge_sample_states: the plain sum
    report(acc)                  the sum, unchanged (it has no state: no noise yet)
    finalize(state, reported)    get_noised_result: + noise, / denominator, the next clip

Every structure crossing a function boundary is a flat list or an OrderedDict
of tensors (the query's namedtuples are packed and unpacked inside), so TFF
types and ``tffre.types_util.to_py`` carry them unchanged.

A client of weight 0 (excluded: its update was not finite) uploads zeros and is
not counted; its weight is otherwise ignored (client weighting by dataset size
would leak n_k). A record whose clipped value is not finite (a norm that
overflows float32) is excluded the same way. Records are float32 whatever the
value's dtype: rounding after the clip could exceed C.

**Reproducible noise.** TF Privacy's ``GaussianSumQuery`` draws with an
unseeded ``tf.random_normal_initializer``: a fresh stream per graph, so neither
reproducible nor, in a TFF computation rebuilt every round with a fixed graph
seed, guaranteed to differ between rounds. Here its two Gaussian queries (the
sum, and adaptive clipping's clipped count) are TF Privacy's with one change:
the draw comes from TF Privacy's seeded ``tree_aggregation.GaussianNoiseGenerator``
(``tf.random.stateless_normal``), seeded from the server state
``seed = [dp_seed, round]``, which ``finalize`` advances by one round. The
k-th noised tensor of round r uses the Philox stream [dp_seed + i, r * 2^20 + k]
(the generator adds the tensor's index i to both words), so no two tensors of
a run share a stream, a round's noise is a function of (dp_seed, round) only,
and a resumed run replays it. The seed is a secret of the server: whoever
knows it and the models can subtract the noise and void the guarantee. Keep
it (and checkpoints of the server state) out of released bundles;
``seed=None`` draws one from the OS (``secrets``).

Metrics of :meth:`DPStructMean.finalize` (float32 scalars): ``dp_clip`` (the C
applied this round), ``dp_noise_stddev`` (the stddev of the noise in the
aggregate, sigma C / denominator; for adaptive clipping z_value C / denominator)
and ``dp_clients`` (the clients counted; exact, not noised: it is what the
server sees, and is not covered by epsilon).
"""

import collections
import contextlib
import dataclasses
import numbers
import secrets
from typing import Optional

import dp_accounting
import tensorflow as tf
import tensorflow_privacy as tfp
from tensorflow_privacy.privacy.dp_query import tree_aggregation

from tffre.privacy.accounting import adaptive_clip_noise, check_noise_multiplier

#: Noise streams reserved per round: the round's noised tensors (and one count) must be fewer.
STREAMS_PER_ROUND = 2 ** 20


class _NoiseSeeds:
    """Hands the seeded queries of one aggregator their stateless seeds during ``finalize``."""

    def __init__(self):
        self._seed = None
        self._taken = 0

    @contextlib.contextmanager
    def round(self, seed):
        """Seeds for the draws traced inside: ``seed`` is the int64 pair (dp_seed, round)."""
        self._seed, self._taken = seed, 0
        try:
            yield
        finally:
            self._seed = None

    def take(self, n):
        """The [2] int64 seed of the next ``n`` noised tensors (the generator adds 0..n-1)."""
        if self._seed is None:
            raise RuntimeError("a DP noise draw outside finalize() has no seed")
        if self._taken + n > STREAMS_PER_ROUND:
            raise ValueError(f"more than {STREAMS_PER_ROUND} noised tensors in one round")
        seed = tf.cast(self._seed, tf.int64)
        stream = seed[1] * STREAMS_PER_ROUND + self._taken
        self._taken += n
        return tf.stack([seed[0], stream])


class SeededGaussianSumQuery(tfp.GaussianSumQuery):
    """TF Privacy's ``GaussianSumQuery`` whose noise is TF Privacy's seeded
    ``GaussianNoiseGenerator`` draw instead of an unseeded initializer.

    Clipping, the noise's stddev and the DP event are the parent's; only
    :meth:`get_noised_result`'s draw differs (see the module docstring).
    """

    def __init__(self, l2_norm_clip, stddev, seeds):
        super().__init__(l2_norm_clip, stddev)
        self._seeds = seeds

    def get_noised_result(self, sample_state, global_state):
        """The sum plus N(0, stddev^2) per element, drawn from this round's seeds."""
        specs = tf.nest.map_structure(lambda v: tf.TensorSpec(v.shape, tf.float32), sample_state)
        generator = tree_aggregation.GaussianNoiseGenerator(0.0, specs)
        noise, _ = generator.next(generator.make_state(
            self._seeds.take(len(tf.nest.flatten(specs))), global_state.stddev))
        result = tf.nest.map_structure(lambda v, z: v + tf.cast(z, v.dtype), sample_state, noise)
        event = dp_accounting.GaussianDpEvent(global_state.stddev / global_state.l2_norm_clip)
        return result, global_state, event


class _SeededQuantileEstimatorQuery(tfp.QuantileEstimatorQuery):
    """TF Privacy's quantile estimator with its below-estimate count noised by a
    :class:`SeededGaussianSumQuery` (the extension point TF Privacy's own variants override)."""

    def __init__(self, *args, seeds, **kwargs):
        self._seeds = seeds
        super().__init__(*args, **kwargs)

    def _construct_below_estimate_query(self, below_estimate_stddev, expected_num_records):
        # As the parent: +-0.5 per record (sensitivity 0.5), over the expected count.
        return tfp.NormalizedQuery(
            SeededGaussianSumQuery(0.5, below_estimate_stddev, self._seeds),
            denominator=expected_num_records)


class SeededQuantileAdaptiveClipSumQuery(tfp.QuantileAdaptiveClipSumQuery):
    """TF Privacy's ``QuantileAdaptiveClipSumQuery`` (geometric update) with both of its
    Gaussian queries seeded: the parent's two sub-queries, rebuilt with the same arguments."""

    def __init__(self, initial_l2_norm_clip, noise_multiplier, target_unclipped_quantile,
                 learning_rate, clipped_count_stddev, expected_num_records, seeds):
        super().__init__(initial_l2_norm_clip, noise_multiplier, target_unclipped_quantile,
                         learning_rate, clipped_count_stddev, expected_num_records,
                         geometric_update=True)
        self._sum_query = SeededGaussianSumQuery(
            initial_l2_norm_clip, noise_multiplier * initial_l2_norm_clip, seeds)
        self._quantile_estimator_query = _SeededQuantileEstimatorQuery(
            initial_l2_norm_clip, target_unclipped_quantile, learning_rate,
            clipped_count_stddev, expected_num_records, True, seeds=seeds)


def _specs(structure):
    return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), structure)


def _positive(value, name):
    if not isinstance(value, numbers.Real) or not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class AdaptiveClip:
    """Adaptive clipping (Andrew et al.): C follows the ``target_quantile`` of the update
    norms at ``clip_learning_rate`` (C changes by at most a factor exp(rate) per round), the
    clipped count noised with stddev ``clipped_count_stddev`` (None: ``expected_clients`` /
    20)."""
    target_quantile: float = 0.5
    clip_learning_rate: float = 0.2
    clipped_count_stddev: Optional[float] = None


class DPStructMean:
    """DP-FedAvg's clipped, noised sum over a fixed denominator, of any structure of tensors.

    The aggregate is (sum_k clip_C(v_k) + N(0, sigma^2 C^2)) / denominator,
    clipped over all the structure's tensors at once. The protocol (all plain
    TensorFlow, see the module docstring): :meth:`initial_state`,
    :meth:`client_params`, :meth:`client`, :meth:`zero`, :meth:`accumulate`,
    :meth:`merge`, :meth:`report`, :meth:`finalize`.

    Args:
      spec: the structure of ``tf.TensorSpec`` (or tensors) of one client's value.
      noise_multiplier: sigma >= 0; with ``adaptive_clip``, the effective one
        that is accounted (:func:`tffre.privacy.accounting.adaptive_clip_noise`
        derives the sum's larger z_value).
      clip: C > 0 (the initial C with ``adaptive_clip``).
      expected_clients: the expected number of clients per round (m, or q N).
      denominator: what the noised sum is divided by; default ``expected_clients``
        (1 gives the noised sum).
      adaptive_clip: an :class:`AdaptiveClip` to adapt C (True: its defaults), or None or
        False for a fixed C.
      seed: the secret noise seed, an int in [0, 2^63); None draws one.
    """

    def __init__(self, spec, *, noise_multiplier, clip, expected_clients, denominator=None,
                 adaptive_clip=None, seed=None):
        adaptive = AdaptiveClip() if adaptive_clip is True else adaptive_clip or None
        self.noise_multiplier = check_noise_multiplier(noise_multiplier)
        self.clip = _positive(clip, "dp clip")
        self.expected_clients = _positive(expected_clients, "expected clients per round")
        self.denominator = _positive(self.expected_clients if denominator is None
                                     else denominator, "dp denominator")
        self.adaptive_clip = adaptive is not None
        if seed is None:
            seed = secrets.randbits(63)
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) \
                or not 0 <= seed < 2 ** 63:
            raise ValueError(f"dp seed must be an integer in [0, 2^63), got {seed!r}")
        self.seed = int(seed)
        self._seeds = _NoiseSeeds()
        if self.adaptive_clip:
            target_quantile = adaptive.target_quantile
            clip_learning_rate = adaptive.clip_learning_rate
            if not 0 <= target_quantile <= 1:
                raise ValueError(f"dp target quantile must be in [0, 1], got {target_quantile!r}")
            if not clip_learning_rate >= 0:
                raise ValueError(f"dp clip learning rate must be >= 0, "
                                 f"got {clip_learning_rate!r}")
            self.value_noise_multiplier, self.clipped_count_stddev = adaptive_clip_noise(
                self.noise_multiplier, self.expected_clients, adaptive.clipped_count_stddev)
            query = SeededQuantileAdaptiveClipSumQuery(
                self.clip, self.value_noise_multiplier, float(target_quantile),
                float(clip_learning_rate), self.clipped_count_stddev, self.expected_clients,
                self._seeds)
        else:
            self.value_noise_multiplier, self.clipped_count_stddev = self.noise_multiplier, None
            query = SeededGaussianSumQuery(self.clip, self.noise_multiplier * self.clip,
                                           self._seeds)
        self.query = tfp.NormalizedQuery(query, denominator=self.denominator)
        self.record_spec = tf.nest.map_structure(
            lambda s: tf.TensorSpec(s.shape, tf.float32), spec)
        # The query's structures (namedtuples), traced in a throwaway graph: no memory used.
        with tf.Graph().as_default():
            state = self.query.initial_global_state()
            self._state_spec = _specs(state)
            self._params_spec = _specs(self.query.derive_sample_params(state))
            self._sample_spec = _specs(self.query.initial_sample_state(self.record_spec))

    # --- server state and broadcast ---

    def initial_state(self):
        """OrderedDict(query=the query's global state, flattened; seed=int64 [dp_seed, round 0])."""
        return collections.OrderedDict(
            query=tf.nest.flatten(self.query.initial_global_state()),
            seed=tf.constant([self.seed, 0], tf.int64))

    def client_params(self, state):
        """What every client needs this round: the clip (and, adaptive, the quantile estimate),
        a flat list of float32 scalars."""
        return tf.nest.flatten(self.query.derive_sample_params(self._global_state(state)))

    def _global_state(self, state):
        return tf.nest.pack_sequence_as(self._state_spec, list(state["query"]))

    # --- client ---

    def client(self, value, weight, params):
        """{record: the clipped record (float32), weight: 1 if it counts, else 0 (and the record
        zeros)}: the client's ``weight`` only says whether it is excluded (0)."""
        value = tf.nest.map_structure(lambda v: tf.cast(v, tf.float32), value)
        params = tf.nest.pack_sequence_as(self._params_spec, tf.nest.flatten(params))
        record = tf.nest.flatten(self.query.preprocess_record(params, value))
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(t)) for t in record])
        counted = tf.logical_and(weight > 0, finite)
        return collections.OrderedDict(
            record=[tf.where(counted, t, tf.zeros_like(t)) for t in record],
            weight=tf.cast(counted, tf.float32))

    # --- aggregation: plain sums ---

    def zero(self):
        """The query's empty sample state, and no client counted."""
        return collections.OrderedDict(
            record=tf.nest.flatten(self.query.initial_sample_state(self.record_spec)),
            weight=tf.constant(0.0))

    def _pack(self, flat):
        return tf.nest.pack_sequence_as(self._sample_spec, list(flat))

    def accumulate(self, acc, upload):
        """Adds one client's preprocessed record (the query's accumulate)."""
        return collections.OrderedDict(
            record=tf.nest.flatten(self.query.accumulate_preprocessed_record(
                self._pack(acc["record"]), self._pack(upload["record"]))),
            weight=acc["weight"] + upload["weight"])

    def merge(self, a, b):
        """Adds two partial sums (the query's merge)."""
        return collections.OrderedDict(
            record=tf.nest.flatten(self.query.merge_sample_states(
                self._pack(a["record"]), self._pack(b["record"]))),
            weight=a["weight"] + b["weight"])

    def report(self, acc):
        """The sums as they are: the noise needs the server state (:meth:`finalize`)."""
        return collections.OrderedDict(record=list(acc["record"]), weight=acc["weight"])

    # --- server ---

    def finalize(self, state, reported):
        """(aggregate, new_state, metrics): the noised sum over the denominator (the value's
        structure, float32), the state of the next round, and the round's DP metrics."""
        global_state = self._global_state(state)
        with self._seeds.round(state["seed"]):
            result, new_global_state, _ = self.query.get_noised_result(
                self._pack(reported["record"]), global_state)
        sum_state = global_state.numerator_state
        if self.adaptive_clip:
            sum_state = sum_state.sum_state
        metrics = collections.OrderedDict(
            dp_clip=tf.identity(sum_state.l2_norm_clip),
            dp_noise_stddev=sum_state.stddev / tf.constant(self.denominator, tf.float32),
            dp_clients=tf.identity(reported["weight"]))
        new_state = collections.OrderedDict(
            query=tf.nest.flatten(new_global_state),
            seed=state["seed"] + tf.constant([0, 1], tf.int64))
        return self._result(result), new_state, metrics

    def _result(self, result):
        return result


class DPMean(DPStructMean):
    """:class:`DPStructMean` of a model delta: a list of float32 tensors of ``shapes``.

    ``client(update, weight, params)`` takes the delta's list of tensors and
    ``finalize`` returns the aggregate as a list. Use it as a round's
    ``make_aggregator``: ``functools.partial(DPMean, noise_multiplier=..., clip=...,
    expected_clients=..., seed=...)``.
    """

    def __init__(self, shapes, **kwargs):
        self.shapes = [tuple(s) for s in shapes]
        super().__init__([tf.TensorSpec(s, tf.float32) for s in self.shapes], **kwargs)

    def client(self, update, weight, params):
        """The clipped delta (zeros if ``weight`` is 0) and whether it counts."""
        return super().client(list(update), weight, params)

    def _result(self, result):
        return list(result)
