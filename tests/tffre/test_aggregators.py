"""The attention step (FLCMC Eq. 11-14) and the weighted mean (Eq. 6) against numpy."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

import reference
from accumulating import accumulate_all
from tffre import aggregators

SHAPES = [(3, 2), (2,), (4, 1)]


def make_clients(scales, seed=0):
    rng = np.random.RandomState(seed)
    g = [rng.randn(*s).astype(np.float32) for s in SHAPES]
    clients = [[(x + s * rng.randn(*x.shape)).astype(np.float32) for x in g] for s in scales]
    return g, clients


@pytest.mark.parametrize("granularity", ["layer", "model"])
def test_attention_step_matches_numpy(granularity):
    g, clients = make_clients([0.1, 0.5, 1.0, 2.0])
    got = aggregators.attention_step(g, clients, stepsize=1.2, granularity=granularity)
    want = reference.attention_step(g, clients, 1.2, granularity)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-5, atol=1e-6)


def test_layer_and_model_granularity_differ():
    g, clients = make_clients([0.1, 0.5, 3.0])
    by_layer = aggregators.attention_step(g, clients, 1.0, "layer")
    by_model = aggregators.attention_step(g, clients, 1.0, "model")
    assert not np.allclose(by_layer[0].numpy(), by_model[0].numpy())


def test_huge_distances_stay_finite_and_correct():
    # exp(1e4) overflows any float; squares of 1e20 overflow float32.
    g, clients = make_clients([1e3, 1e4, 1e20], seed=1)
    got = aggregators.attention_step(g, clients, stepsize=0.5)
    want = reference.attention_step(g, clients, 0.5)
    for a, b in zip(got, want):
        assert np.all(np.isfinite(a.numpy()))
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-5)


def test_distance_is_frobenius_not_spectral():
    m = np.array([[3.0, 0.0], [0.0, 4.0]], np.float32)
    d = aggregators.distances([m]).numpy()
    np.testing.assert_allclose(d, [5.0])           # sqrt(9 + 16)
    assert not np.isclose(d[0], np.linalg.norm(m, 2))  # spectral norm would be 4


def test_bad_granularity():
    with pytest.raises(ValueError, match="granularity"):
        aggregators.AttentionFactory("neuron")


def federated_attention(updates, weights, granularity="layer"):
    value_type = tff.StructWithPythonType(
        [tff.TensorType(np.float32, s) for s in SHAPES], list)
    process = aggregators.AttentionFactory(granularity).create(value_type, tff.TensorType(np.float32))
    return process.next(process.initialize(), updates, weights).result


@pytest.mark.parametrize("granularity", ["layer", "model"])
def test_federated_attention_equals_plain_step(granularity):
    g, clients = make_clients([0.2, 1.0, 5e4])
    updates = [[gl - c for gl, c in zip(g, client)] for client in clients]
    aggregate = federated_attention(updates, [1.0, 7.0, 3.0], granularity)
    # theta_{t+1} = theta_t - lambda * aggregate (Eq. 14), with lambda = 2
    want = reference.attention_step(g, clients, 2.0, granularity)
    for gl, a, w in zip(g, aggregate, want):
        np.testing.assert_allclose(gl - 2.0 * a, w, rtol=1e-4, atol=1e-3)


def test_federated_attention_leaves_out_zero_weight_clients():
    g, clients = make_clients([0.2, 1.0, 3.0])
    updates = [[gl - c for gl, c in zip(g, client)] for client in clients]
    zeroed = [np.zeros_like(u) for u in updates[2]]
    aggregate = federated_attention(updates[:2] + [zeroed], [1.0, 1.0, 0.0])
    want = reference.attention_step(g, clients[:2], 1.0)
    for gl, a, w in zip(g, aggregate, want):
        np.testing.assert_allclose(gl - a, w, rtol=1e-5, atol=1e-6)


def test_weighted_mean_is_eq_6():
    value_type = tff.TensorType(np.float32, [3])
    process = aggregators.weighted_mean_factory().create(value_type, tff.TensorType(np.float32))
    values = [np.array([1.0, 2.0, 3.0], np.float32), np.array([-1.0, 0.0, 5.0], np.float32)]
    out = process.next(process.initialize(), values, [30.0, 10.0]).result
    np.testing.assert_allclose(out, (30 * values[0] + 10 * values[1]) / 40, rtol=1e-6)


@pytest.mark.parametrize("granularity", ["layer", "model"])
@pytest.mark.parametrize("scales", [[0.1, 0.5, 1.0, 2.0], [3e3, 1e4, 9e3, 2e2]])
def test_one_pass_attention_equals_the_two_phase_softmax(granularity, scales):
    """(m, S, W) in one pass equals numpy's softmax with the global max (Eq. 11-13), to 1e-6.

    The second case has distances near 1e4, where exp(s) overflows without the shift.
    """
    g, clients = make_clients(scales, seed=4)
    updates = [[gl - c for gl, c in zip(g, client)] for client in clients]
    agg = aggregators.Attention(SHAPES, granularity)
    got = accumulate_all(agg, updates, [1.0] * len(updates))
    want = reference.attention_step(g, clients, 1.0, granularity)   # g - aggregate
    for gl, a, w in zip(g, got, want):
        aggregate = gl.astype(np.float64) - w
        assert np.all(np.isfinite(a.numpy()))
        np.testing.assert_allclose(a.numpy(), aggregate, rtol=1e-6,
                                   atol=1e-6 * np.max(np.abs(aggregate)))


def test_attention_merge_is_order_independent():
    g, clients = make_clients([0.3, 40.0, 2.0, 7e3, 1.5], seed=6)
    updates = [[gl - c for gl, c in zip(g, client)] for client in clients]
    agg = aggregators.Attention(SHAPES)
    weights = [1.0, 2.0, 0.0, 1.0, 3.0]   # client 2 excluded
    base = accumulate_all(agg, updates, weights)
    for order, split in (([4, 3, 2, 1, 0], None), ([1, 3, 0, 4, 2], 2), ([2, 0, 1, 3, 4], 1),
                         ([0, 1, 2, 3, 4], 0)):
        other = accumulate_all(agg, updates, weights, order, split)
        for a, b in zip(base, other):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)
    kept = [u for u, w in zip(updates, weights) if w > 0]
    want = accumulate_all(agg, kept, [1.0] * len(kept))
    for a, b in zip(base, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)


def test_merging_with_an_empty_accumulator_keeps_it_finite():
    agg = aggregators.Attention(SHAPES)
    got = agg.report(agg.merge(agg.zero(), agg.zero()))
    assert all(np.all(a.numpy() == 0) for a in got)
    g, clients = make_clients([1.0], seed=2)
    up = agg.client([tf.constant(gl - c) for gl, c in zip(g, clients[0])], tf.constant(1.0))
    one = agg.report(agg.merge(agg.zero(), agg.accumulate(agg.zero(), up)))
    for a, gl, c in zip(one, g, clients[0]):
        np.testing.assert_allclose(a.numpy(), gl - c, rtol=1e-6)


def test_weighted_mean_accumulator_is_eq_6_and_nan_free():
    agg = aggregators.WeightedMean([(3,)])
    values = [np.array([1.0, 2.0, 3.0], np.float32), np.array([-1.0, 0.0, 5.0], np.float32)]
    got = accumulate_all(agg, [[v] for v in values], [30.0, 10.0], split=1)[0]
    np.testing.assert_allclose(got.numpy(), (30 * values[0] + 10 * values[1]) / 40, rtol=1e-6)
    empty = accumulate_all(agg, [[v] for v in values], [0.0, 0.0])[0]
    np.testing.assert_array_equal(empty.numpy(), [0.0, 0.0, 0.0])


def test_attention_factory_in_tff_fed_avg():
    """AttentionFactory plugs into TFF's own ``build_weighted_fed_avg`` (whose server SGD at
    rate 1 makes Eq. 14's lambda 1): one round of one SGD step per client equals numpy's
    clients (softmax regression's gradient) and the numpy attention step."""
    features, classes, lr = 5, 3, 0.5
    spec = (tf.TensorSpec([None, features], tf.float32), tf.TensorSpec([None], tf.int32))

    def model_fn():
        keras = tf.keras.Sequential([tf.keras.layers.Input((features,)),
                                     tf.keras.layers.Dense(classes, kernel_initializer="zeros")])
        return tff.learning.models.from_keras_model(
            keras, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            input_spec=spec)

    process = tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, client_optimizer_fn=tff.learning.optimizers.build_sgdm(lr),
        model_aggregator=aggregators.AttentionFactory())
    state = process.initialize()
    rng = np.random.RandomState(0)
    shards = [(rng.randn(6, features).astype(np.float32) * scale,
               rng.randint(0, classes, 6).astype(np.int32)) for scale in (0.5, 1.0, 3.0)]
    state = process.next(state, [tf.data.Dataset.from_tensor_slices(s).batch(6)
                                 for s in shards]).state
    got = process.get_model_weights(state).trainable
    w, b = np.zeros((features, classes)), np.zeros(classes)
    clients = []
    for x, y in shards:
        gw, gb = reference.softmax_regression_grads(w, b, x.astype(np.float64), y, classes)
        clients.append([w - lr * gw, b - lr * gb])
    want = reference.attention_step([w, b], clients, 1.0)
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
