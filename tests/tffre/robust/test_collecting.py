"""RobustAggregator (tffre.robust.collecting) through its five functions, in TFF's
``federated_aggregate``, and against the rules applied directly (tffre.robust.rules)."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from accumulating import accumulate_all
from tffre import aggregators
from tffre.federation.split_round import is_sum
from tffre.robust import rules
from tffre.robust.collecting import (NormBoundedMean, RobustAggregator, mean_memory_bytes,
                                     memory_bytes, robust_aggregator)
from tffre.robust.robust_settings import RobustHparams

SHAPES = [(3, 4), (5,), (2, 2, 2), ()]
TOL = dict(rtol=1e-6, atol=1e-6)

CASES = [("median", {}), ("trimmed-mean", {"beta": 0.2}),
         ("trimmed-mean", {"beta": 0.1, "rounding": "floor"}), ("krum", {"f": 1}),
         ("multi-krum", {"f": 1, "m": 3}),
         ("multi-krum", {"f": 1, "m": 3, "weighting": "examples"}), ("bulyan", {"f": 1}),
         ("norm-bound", {"bound": 2.0})]
IDS = [f"{rule}-{'-'.join(map(str, params.values()))}" for rule, params in CASES]


def round_uploads(n=8, seed=0):
    """n updates (two far off) with example counts, and one excluded client (weight 0, NaN)
    put in the middle: (all updates, all weights, the kept updates, their weights)."""
    rng = np.random.RandomState(seed)
    ups = [[np.asarray(rng.randn(*s), np.float32) for s in SHAPES] for _ in range(n)]
    for i in (0, 1):
        ups[i] = [(10 * u + 5).astype(np.float32) for u in ups[i]]
    weights = [float(c) for c in rng.randint(1, 50, n)]
    nan = [np.full(s, np.nan, np.float32) for s in SHAPES]
    return (ups[:3] + [nan] + ups[3:], weights[:3] + [0.0] + weights[3:], ups, weights)


def direct(rule, ups, weights, **params):
    """The rule's public function on the kept updates."""
    return rules.aggregate(rule, ups, weights, **params)


def assert_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(np.shape(w))
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), **TOL)


def canonical(ups, weights):
    """The updates and weights sorted by (L2 norm, sum of the values), in numpy float64."""
    def key(i):
        flat = np.concatenate([np.asarray(u, np.float64).ravel() for u in ups[i]])
        return (float(np.sum(flat ** 2)), float(np.sum(flat)))
    order = sorted(range(len(ups)), key=key)
    return [ups[i] for i in order], [weights[i] for i in order]


@pytest.mark.parametrize("rule, params", CASES, ids=IDS)
def test_accumulated_and_merged_rounds_equal_the_rule(rule, params):
    """The five functions, accumulated or merged in any order, give the rule on the counted
    updates in canonical order, and the same bits whatever the order."""
    ups, weights, kept, kept_weights = round_uploads()
    want = direct(rule, *canonical(kept, kept_weights), **params)
    agg = RobustAggregator(SHAPES, rule, capacity=len(ups), **params)
    first = accumulate_all(agg, ups, weights)
    assert_close(first, want)
    order = [5, 0, 8, 3, 2, 7, 1, 6, 4]
    for got in (accumulate_all(agg, ups, weights, split=4),   # the excluded client in the left half
                accumulate_all(agg, ups, weights, split=0),   # all in the right
                accumulate_all(agg, [ups[i] for i in order], [weights[i] for i in order]),
                accumulate_all(agg, [ups[i] for i in order], [weights[i] for i in order], split=5)):
        for g, f in zip(got, first):
            np.testing.assert_array_equal(g.numpy(), f.numpy())


def test_bulyan_on_the_rules_own_order_depends_on_it_and_the_aggregator_does_not():
    """Bulyan at f = 1 ends on Krum with one neighbour, where a mutual nearest pair ties and
    the lower index wins: the order matters to the rule (as to Flower's), not to the round."""
    ups, weights, kept, kept_weights = round_uploads()
    order = [4, 0, 7, 3, 2, 6, 1, 5]
    assert max(float(np.max(np.abs(a.numpy() - b.numpy()))) for a, b in zip(
        rules.bulyan(kept, 1), rules.bulyan([kept[i] for i in order], 1))) > 1e-3
    agg = RobustAggregator(SHAPES, "bulyan", capacity=8, f=1)
    shuffled = [kept[i] for i in order], [kept_weights[i] for i in order]
    for a, b in zip(accumulate_all(agg, kept, kept_weights), accumulate_all(agg, *shuffled)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("rule, params", CASES, ids=IDS)
def test_a_round_with_no_client_counted_gives_a_zero_delta(rule, params):
    agg = RobustAggregator(SHAPES, rule, capacity=4, **params)
    ups, weights, _, _ = round_uploads(3)
    for out in (agg.report(agg.zero()), agg.report(agg.merge(agg.zero(), agg.zero())),
                accumulate_all(agg, ups[3:4], [0.0])):   # only the excluded (NaN) client
        for o, s in zip(out, SHAPES):
            assert tuple(o.shape) == s
            np.testing.assert_array_equal(o.numpy(), np.zeros(s))


def test_the_buffer_holds_the_counted_uploads_in_order():
    ups, weights, kept, kept_weights = round_uploads()
    agg = RobustAggregator(SHAPES, "median", capacity=10)
    acc = agg.zero()
    for up, w in zip(ups, weights):
        acc = agg.accumulate(acc, agg.client(up, w))
    assert int(acc["count"]) == 8
    np.testing.assert_array_equal(acc["weights"].numpy(), kept_weights + [0.0, 0.0])
    for layer, rows in enumerate(acc["rows"]):
        np.testing.assert_array_equal(rows.numpy()[:8], np.stack([k[layer] for k in kept]))
        np.testing.assert_array_equal(rows.numpy()[8:], 0.0)   # no NaN written


def test_more_clients_than_capacity_fail_the_round():
    ups, weights, kept, kept_weights = round_uploads()
    agg = RobustAggregator(SHAPES, "krum", capacity=8, f=1)
    # 8 counted
    assert_close(accumulate_all(agg, ups, weights), direct("krum", kept, kept_weights, f=1))
    with pytest.raises(tf.errors.InvalidArgumentError, match="capacity = 8"):
        accumulate_all(agg, ups + [kept[2]], weights + [1.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="capacity = 8"):
        accumulate_all(agg, ups + [kept[2]], weights + [1.0], split=5)   # the merge overflows

    @tf.function
    def traced(acc, upload):
        return agg.accumulate(acc, upload)
    acc = agg.zero()
    for up in kept:
        acc = traced(acc, agg.client(up, 1.0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="capacity = 8"):
        traced(acc, agg.client(kept[0], 1.0))


def test_lowers_to_one_federated_aggregate():
    """Through tffre.aggregators.MergeableFactory (client, then one tff.federated_aggregate of
    aggregate_computations' zero/accumulate/merge/report): the accumulator's type is fixed
    and the result is the rule's."""
    ups, weights, kept, kept_weights = round_uploads()
    value_type = tff.StructWithPythonType([tff.TensorType(np.float32, s) for s in SHAPES], list)
    for rule, params in (("bulyan", {"f": 1}), ("multi-krum", {"f": 1, "m": 3,
                                                               "weighting": "examples"})):
        factory = aggregators.MergeableFactory(
            lambda shapes, rule=rule, params=params: RobustAggregator(shapes, rule, len(ups),
                                                                      **params))
        process = factory.create(value_type, tff.TensorType(np.float32))
        got = process.next(process.initialize(), ups, weights).result
        assert_close(got, direct(rule, *canonical(kept, kept_weights), **params))
    agg = RobustAggregator(SHAPES, "krum", capacity=9, f=1)
    upload_type = tff.tensorflow.computation(
        lambda: agg.client([tf.zeros(s) for s in SHAPES], 1.0)).type_signature.result
    zero, accumulate, merge, report = aggregators.aggregate_computations(agg, upload_type)
    rows = zero.type_signature.result.rows
    assert [tuple(t.shape) for t in rows] == [(9,) + s for s in SHAPES]
    assert [tuple(t.shape) for t in report.type_signature.result] == SHAPES


def test_not_a_sum_so_secure_aggregation_refuses_it():
    assert not is_sum(RobustAggregator(SHAPES, "median", capacity=3))
    assert not is_sum(NormBoundedMean(SHAPES, 1.0))
    assert is_sum(aggregators.WeightedMean(SHAPES))


def test_norm_bounded_mean_needs_no_buffer_and_equals_the_rule():
    ups, weights, kept, kept_weights = round_uploads(seed=3)
    for bound in (0.5, 3.0, 1e3):
        want = rules.norm_bound(kept, bound, kept_weights)
        agg = NormBoundedMean(SHAPES, bound)
        assert_close(accumulate_all(agg, ups, weights), want)
        assert_close(accumulate_all(agg, ups, weights, split=4), want)
    empty = NormBoundedMean(SHAPES, 1.0)
    assert all(np.all(o.numpy() == 0) for o in empty.report(empty.zero()))


def test_robust_aggregator_from_the_settings():
    assert robust_aggregator(RobustHparams(), SHAPES, 10) is None
    agg = robust_aggregator(RobustHparams.resolve(robust="multi-krum", robust_f=2), SHAPES, 10)
    assert isinstance(agg, RobustAggregator) and agg.params == {"f": 2, "weighting": "uniform"}
    assert agg.capacity == 10 and agg.rule == "multi-krum"
    bounded = robust_aggregator(RobustHparams.resolve(robust="norm-bound",
                                                      robust_norm_bound=1.5), SHAPES, 10)
    assert isinstance(bounded, NormBoundedMean) and bounded.bound == 1.5


def test_bad_arguments_are_refused():
    for call, match in ((lambda: RobustAggregator(SHAPES, "mean", 3), "unknown robust rule"),
                        (lambda: RobustAggregator(SHAPES, "krum", 3), "needs f"),
                        (lambda: RobustAggregator(SHAPES, "krum", 0, f=1), "capacity"),
                        (lambda: RobustAggregator(SHAPES, "krum", 2.5, f=1), "capacity"),
                        (lambda: NormBoundedMean(SHAPES, -1.0), "bound")):
        with pytest.raises(ValueError, match=match):
            call()


def nbytes(structure):
    return sum(t.numpy().nbytes for t in tf.nest.flatten(structure))


def test_memory_is_what_the_accumulators_hold():
    """memory_bytes and mean_memory_bytes against the bytes of the zero() accumulators."""
    for capacity in (1, 10, 37):
        agg = RobustAggregator(SHAPES, "median", capacity)
        assert memory_bytes(SHAPES, capacity) == nbytes(agg.zero())
    assert mean_memory_bytes(SHAPES) == nbytes(aggregators.WeightedMean(SHAPES).zero())
    assert mean_memory_bytes(SHAPES) == nbytes(NormBoundedMean(SHAPES, 1.0).zero())
    # A 1M-parameter model (the closing note's figures): capacity times the mean's model.
    model = [(1000, 1000)]
    assert memory_bytes(model, 10) == 40_000_044
    assert memory_bytes(model, 100) == 400_000_404
    assert mean_memory_bytes(model) == 4_000_004


@pytest.mark.parametrize("rule, params", CASES, ids=IDS)
def test_a_nan_upload_with_a_positive_weight_is_left_out(rule, params):
    """A broken site's NaN (or Inf) sent with its weight: the robust aggregators drop it, the
    rule runs on the others (the mean would turn NaN)."""
    ups, weights, kept, kept_weights = round_uploads()
    weights = list(weights)
    weights[3] = 7.0   # the NaN upload now claims a weight
    ups = ups + [[np.full(s, np.inf, np.float32) for s in SHAPES]]
    weights = weights + [4.0]
    agg = robust_aggregator(RobustHparams(robust=rule, **{
        {"beta": "robust_beta", "f": "robust_f", "m": "robust_m", "bound": "robust_norm_bound",
         "rounding": "robust_trim_rounding", "weighting": "robust_multikrum_weighting"}[k]: v
        for k, v in params.items()}), SHAPES, capacity=len(ups))
    assert_close(accumulate_all(agg, ups, weights),
                 direct(rule, *canonical(kept, kept_weights), **params))
