"""DP-FedAvg aggregation (tffre.privacy.aggregator) against numpy and Andrew et al.'s update."""

import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tffre import aggregators
from tffre.privacy.aggregator import AdaptiveClip, DPMean, DPStructMean
from tffre.types_util import to_py

SHAPES = [(4, 3), (5,), (2, 2)]


def numpy_clip(delta, clip):
    """clip_C(v) = v min(1, C / ||v||), the norm over all the delta's tensors (float64)."""
    norm = math.sqrt(sum(float(np.sum(np.square(np.asarray(t, np.float64)))) for t in delta))
    scale = min(1.0, clip / norm) if norm > 0 else 1.0
    return [np.asarray(t, np.float64) * scale for t in delta]


def deltas(num_clients, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    return [[(scale * rng.normal(size=s) * rng.uniform(0.1, 2)).astype(np.float32)
             for s in SHAPES] for _ in range(num_clients)]


def tf_round(agg):
    """One round in a tf.function: params, clients, zero/accumulate/merge/report, finalize."""
    @tf.function
    def run(state, values, weights):
        params = agg.client_params(state)
        uploads = [agg.client(v, w, params) for v, w in zip(values, weights)]
        half = len(uploads) // 2   # two partial sums, merged: as TFF may
        a, b = agg.zero(), agg.zero()
        for u in uploads[:half]:
            a = agg.accumulate(a, u)
        for u in uploads[half:]:
            b = agg.accumulate(b, u)
        return agg.finalize(state, agg.report(agg.merge(a, b)))

    def call(state, values, weights):
        values = tf.nest.map_structure(tf.constant, values)
        return run(state, values, [tf.constant(w, tf.float32) for w in weights])
    return call


def tff_round(agg, value_type):
    """The same round as TFF computations: one broadcast and one federated_aggregate."""
    @tff.tensorflow.computation
    def init():
        return agg.initial_state()

    state_type = init.type_signature.result

    @tff.tensorflow.computation(state_type)
    def params(state):
        return agg.client_params(to_py(state))

    @tff.tensorflow.computation(value_type, np.float32, params.type_signature.result)
    def client(value, weight, p):
        return agg.client(to_py(value), weight, to_py(p))

    zero, accumulate, merge, report = aggregators.aggregate_computations(
        agg, client.type_signature.result)

    @tff.tensorflow.computation(state_type, report.type_signature.result)
    def finalize(state, reported):
        return agg.finalize(to_py(state), to_py(reported))

    @tff.federated_computation(tff.FederatedType(state_type, tff.SERVER),
                               tff.FederatedType(value_type, tff.CLIENTS),
                               tff.FederatedType(np.float32, tff.CLIENTS))
    def run(state, values, weights):
        broadcast = tff.federated_broadcast(tff.federated_map(params, state))
        uploads = tff.federated_map(client, (values, weights, broadcast))
        reported = tff.federated_aggregate(uploads, zero(), accumulate, merge, report)
        return tff.federated_map(finalize, (state, reported))
    return init, run


def test_client_upload_is_the_numpy_clip_over_the_whole_delta():
    clip = 1.5
    agg = DPMean(SHAPES, noise_multiplier=1.0, clip=clip, expected_clients=3, seed=1)
    params = agg.client_params(agg.initial_state())
    clients = deltas(2, scale=1.0) + deltas(1, scale=0.01, seed=3)   # two clipped, one not
    norms = [np.sqrt(sum(np.sum(np.square(t.astype(np.float64))) for t in d)) for d in clients]
    assert norms[0] > clip and norms[1] > clip and norms[2] < clip
    for delta in clients:
        upload = agg.client([tf.constant(t) for t in delta], tf.constant(1.0), params)
        for got, want in zip(upload["record"], numpy_clip(delta, clip)):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-7)
        assert float(upload["weight"]) == 1.0
    # Each tensor alone is under C, the whole delta is not: the norm is over all of them.
    delta = [np.full(s, 0.9 / math.sqrt(np.prod(s)), np.float32) for s in SHAPES]
    upload = agg.client([tf.constant(t) for t in delta], tf.constant(1.0), params)
    for got, want in zip(upload["record"], numpy_clip(delta, clip)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    assert np.linalg.norm(want) < 0.9   # it was scaled down


def noise_free_case():
    clip, denominator = 1.0, 8.0
    clients = deltas(5, scale=0.5)
    clients.append([np.full(s, np.nan, np.float32) for s in SHAPES])   # excluded, weight 0
    weights = [3.0, 1.0, 10.0, 0.5, 7.0, 0.0]                           # otherwise ignored
    want = [sum(numpy_clip(d, clip)[i] for d in clients[:5]) / denominator
            for i in range(len(SHAPES))]
    return clip, denominator, clients, weights, want


def test_noise_free_aggregate_is_the_clipped_sum_over_the_fixed_denominator():
    clip, denominator, clients, weights, want = noise_free_case()
    agg = DPMean(SHAPES, noise_multiplier=0.0, clip=clip, expected_clients=denominator, seed=3)
    aggregate, state, metrics = tf_round(agg)(agg.initial_state(), clients, weights)
    for got, w in zip(aggregate, want):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-5, atol=1e-7)
    assert float(metrics["dp_clients"]) == 5.0
    assert float(metrics["dp_clip"]) == pytest.approx(clip)
    assert float(metrics["dp_noise_stddev"]) == 0.0
    assert state["seed"].numpy().tolist() == [3, 1]


@pytest.mark.parametrize("noise_multiplier", [0.0, 0.8])
def test_tff_computation_equals_the_tf_function(noise_multiplier):
    clip, denominator, clients, weights, want = noise_free_case()
    make = lambda: DPMean(SHAPES, noise_multiplier=noise_multiplier, clip=clip,  # noqa: E731
                          expected_clients=denominator, seed=11)
    agg = make()
    local, local_state, local_metrics = tf_round(agg)(agg.initial_state(), clients, weights)
    value_type = tff.StructWithPythonType([tff.TensorType(np.float32, s) for s in SHAPES], list)
    init, run = tff_round(make(), value_type)
    federated, state, metrics = to_py(run(init(), clients, weights))
    for got, w in zip(federated, local):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-5, atol=1e-6)
    if noise_multiplier == 0:
        for got, w in zip(federated, want):
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-7)
    assert metrics["dp_clients"] == 5.0
    assert list(state["seed"]) == [11, 1]


def zero_round(agg, rounds=1, state=None):
    """The aggregates of ``rounds`` rounds whose clients' updates are all 0: the noise alone."""
    run = tf_round(agg)
    state = agg.initial_state() if state is None else state
    zeros = [[np.zeros(s, np.float32) for s in SHAPES]] * 2
    out = []
    for _ in range(rounds):
        aggregate, state, metrics = run(state, zeros, [1.0, 1.0])
        out.append([a.numpy() for a in aggregate])
    return out, state, metrics


@pytest.mark.parametrize("adaptive", [False, True])
def test_one_seed_gives_the_same_noise_and_each_round_other_noise(adaptive):
    make = lambda seed: DPMean(SHAPES, noise_multiplier=0.5, clip=1.0,  # noqa: E731
                               expected_clients=40, seed=seed, adaptive_clip=adaptive)
    first, state, _ = zero_round(make(5), rounds=2)
    again, again_state, _ = zero_round(make(5), rounds=2)   # a new aggregator, a new trace
    other_seed, _, _ = zero_round(make(6), rounds=1)
    for a, b in zip(first[0] + first[1], again[0] + again[1]):
        np.testing.assert_array_equal(a, b)
    assert all(np.any(a != b) for a, b in zip(first[0], first[1]))        # round 2 differs
    assert all(np.any(a != b) for a, b in zip(first[0], other_seed[0]))   # the seed matters
    assert np.all(first[0][0] != 0)
    # Adaptive clipping's noised count is seeded too: the next clip replays exactly.
    np.testing.assert_array_equal(np.concatenate([np.ravel(t) for t in state["query"]]),
                                  np.concatenate([np.ravel(t) for t in again_state["query"]]))
    if adaptive:   # the clip of round 2 depends on round 1's noised count, hence on the seed
        clips = [float(zero_round(make(seed), rounds=2)[2]["dp_clip"]) for seed in (5, 6)]
        assert clips[0] != clips[1]


@pytest.mark.parametrize("adaptive", [False, True])
def test_noise_stddev_is_sigma_clip_over_the_denominator(adaptive):
    shape, sigma, clip, m = (500, 400), 1.3, 0.7, 64   # 200,000 draws
    agg = DPMean([shape], noise_multiplier=sigma, clip=clip, expected_clients=m, seed=21,
                 adaptive_clip=adaptive)
    run = tf.function(lambda state, reported: agg.finalize(state, reported))
    aggregate, state, metrics = run(agg.initial_state(), agg.report(agg.zero()))
    noise = aggregate[0].numpy().astype(np.float64)
    next_noise = run(state, agg.report(agg.zero()))[0][0].numpy().astype(np.float64)
    assert abs(np.corrcoef(noise.ravel(), next_noise.ravel())[0, 1]) < 0.02   # 9 SE: independent
    # Adaptive clipping noises the sum with z_value = (sigma^-2 - (2 m/20)^-2)^-1/2 (its count
    # takes the rest of the budget).
    z = (sigma ** -2 - (2 * m / 20) ** -2) ** -0.5 if adaptive else sigma
    # Within 5% (the bound); the seeded draw is deterministic and 200,000 draws put
    # the standard error of the std at 0.16%, so 1% also holds, and tells z from sigma (2%).
    assert noise.std() == pytest.approx(z * clip / m, rel=0.01)
    assert abs(noise.mean()) < 5 * z * clip / m / math.sqrt(noise.size)
    assert float(metrics["dp_noise_stddev"]) == pytest.approx(z * clip / m, rel=1e-6)


@pytest.mark.parametrize("sigma", [0.0, 1.0])
def test_one_huge_client_moves_the_aggregate_by_at_most_clip_over_the_denominator(sigma):
    clip, m = 0.5, 10
    clients = deltas(m, scale=1e-3)
    huge = [t * 1e6 for t in clients[0]]
    agg = DPMean(SHAPES, noise_multiplier=sigma, clip=clip, expected_clients=m, seed=2)
    run = tf_round(agg)
    state = agg.initial_state()
    with_huge, _, _ = run(state, [huge] + clients[1:], [1.0] * m)
    without, _, _ = run(state, clients, [0.0] + [1.0] * (m - 1))   # the same seed: same noise
    moved = math.sqrt(sum(float(np.sum(np.square(a.numpy().astype(np.float64) - b.numpy())))
                          for a, b in zip(with_huge, without)))
    assert moved <= clip / m * (1 + 1e-5)
    assert moved > 0.99 * clip / m   # it was clipped to C, not dropped
    if sigma == 0:
        mean = [sum(numpy_clip(d, clip)[i] for d in clients[1:]) / m for i in range(len(SHAPES))]
        for got, want in zip(without, mean):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-8)


def test_adaptive_clip_follows_the_geometric_quantile_update():
    # Andrew et al. (NeurIPS 2021), Algorithm 1 with geometric update and no noise:
    #   b = fraction of the m updates with norm <= C,  C <- C exp(-eta (b - gamma)).
    m, eta, gamma, clip = 10, 0.2, 0.5, 1.0
    norms = np.array([0.1, 0.3, 0.5, 0.8, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0])
    directions = deltas(m, seed=9)
    clients = []
    for d, n in zip(directions, norms):
        scale = n / math.sqrt(sum(float(np.sum(np.square(t.astype(np.float64)))) for t in d))
        clients.append([(t * scale).astype(np.float32) for t in d])
    agg = DPMean(SHAPES, noise_multiplier=0.0, clip=clip, expected_clients=m, seed=0,
                 adaptive_clip=AdaptiveClip(target_quantile=gamma, clip_learning_rate=eta))
    run = tf_round(agg)
    state, want = agg.initial_state(), clip
    for _ in range(4):
        aggregate, state, metrics = run(state, clients, [1.0] * m)
        assert float(metrics["dp_clip"]) == pytest.approx(want, rel=1e-5)
        mean = [sum(numpy_clip(d, want)[i] for d in clients) / m for i in range(len(SHAPES))]
        for got, w in zip(aggregate, mean):
            np.testing.assert_allclose(got.numpy(), w, rtol=1e-4, atol=1e-7)
        want = want * math.exp(-eta * (np.mean(norms <= want) - gamma))
    assert want > clip   # 4 of 10 norms were below C: it rose towards the median (1.35)


def test_struct_mean_clips_a_whole_structure_and_sums_it():
    spec = {"scores": tf.TensorSpec([6, 3], tf.float16), "extra": tf.TensorSpec([2], tf.float16)}
    clip = 2.0
    agg = DPStructMean(spec, noise_multiplier=0.0, clip=clip, expected_clients=4, denominator=1)
    rng = np.random.default_rng(4)
    values = [{"scores": rng.normal(size=(6, 3)).astype(np.float16),
               "extra": rng.normal(size=2).astype(np.float16)} for _ in range(4)]
    run = tf_round(agg)
    aggregate, _, metrics = run(agg.initial_state(), values, [1.0, 1.0, 1.0, 0.0])
    want = {"extra": 0.0, "scores": 0.0}
    for v in values[:3]:
        clipped = numpy_clip([v["extra"], v["scores"]], clip)   # tf.nest's sorted key order
        want = {"extra": want["extra"] + clipped[0], "scores": want["scores"] + clipped[1]}
    assert sorted(aggregate) == ["extra", "scores"] and aggregate["scores"].dtype == tf.float32
    for key in want:
        np.testing.assert_allclose(aggregate[key].numpy(), want[key], rtol=1e-5, atol=1e-6)
    assert float(metrics["dp_clients"]) == 3.0


def test_an_overflowing_update_is_excluded_not_nan():
    agg = DPMean(SHAPES, noise_multiplier=0.0, clip=1.0, expected_clients=2, seed=0)
    clients = deltas(2)
    clients[1] = [np.full(s, 3e38, np.float32) for s in SHAPES]   # its norm overflows float32
    aggregate, _, metrics = tf_round(agg)(agg.initial_state(), clients, [1.0, 1.0])
    assert all(np.all(np.isfinite(a.numpy())) for a in aggregate)
    assert float(metrics["dp_clients"]) == 1.0


@pytest.mark.parametrize("kwargs, message", [
    (dict(noise_multiplier=-1.0), "noise multiplier must be a finite number >= 0"),
    (dict(clip=0.0), "dp clip must be a finite number > 0"),
    (dict(expected_clients=0), "expected clients per round must be a finite number > 0"),
    (dict(seed=-3), "dp seed must be an integer"),
    (dict(adaptive_clip=AdaptiveClip(target_quantile=1.5)), "dp target quantile must be in [0, 1]"),
    (dict(adaptive_clip=True, noise_multiplier=2.0, expected_clients=10),
     "adaptive clipping cannot reach noise multiplier 2"),
])
def test_bad_arguments_are_refused_in_one_line(kwargs, message):
    args = dict(noise_multiplier=1.0, clip=1.0, expected_clients=10, seed=0)
    args.update(kwargs)
    with pytest.raises(ValueError) as err:
        DPMean(SHAPES, **args)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_random_seed_is_drawn_when_none_is_given():
    a = DPMean(SHAPES, noise_multiplier=1.0, clip=1.0, expected_clients=4)
    b = DPMean(SHAPES, noise_multiplier=1.0, clip=1.0, expected_clients=4)
    assert a.seed != b.seed and 0 <= a.seed < 2 ** 63
