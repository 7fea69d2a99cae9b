"""build_algorithm: the registry, FedAvg vs TFF, FedProx vs Eq. 22, and bad input."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

import reference
from tffre import build_algorithm, registry
from tffre.models import logistic_regression
from tffre.process import ClientDataError
from tiny import (INPUT_SPEC, NUM_CLASSES, NUM_FEATURES, client_arrays, initial_weights, poisoned,
                  tiny_model, to_datasets)


def test_registry_has_the_nine_flcmc_algorithms():
    assert registry.valid_algorithm_names()[:9] == [
        "FedAvg", "FedProx", "FedAtt", "FedPA", "FedAvgS", "FedAvgT", "FedProxP", "FedAttS",
        "FedPAP"]
    # The nine are plain rows: the default definition (FedAvg's parts).
    assert all(registry.ALGORITHMS[n.lower()].definition is None
               for n in registry.valid_algorithm_names()[:9])
    rows = {n: (s.client_optimizer, s.aggregator) for n, s in registry.ALGORITHMS.items()}
    assert rows["fedpap"] == ("padam", "attention")   # Table 6
    assert rows["fedpa"] == ("pgd", "attention")      # Table 5
    assert rows["fedproxp"] == ("padam", "mean")
    assert rows["fedavgt"] == ("tf_adam", "mean")


def test_unknown_algorithm_lists_valid_names(loss):
    with pytest.raises(ValueError, match="unknown algorithm 'fedfoo'.*FedAvg.*FedPAP"):
        build_algorithm("fedfoo", tiny_model, loss=loss, input_spec=INPUT_SPEC)


def test_unknown_hparam_lists_valid_ones(loss):
    with pytest.raises(ValueError, match="FedAvg: unknown setting 'mu'; valid: learning_rate"):
        build_algorithm("FEDAVG", tiny_model, loss=loss, input_spec=INPUT_SPEC, mu=0.1)


def test_model_data_shape_mismatch(loss):
    wrong_spec = (tf.TensorSpec((None, NUM_FEATURES + 2), tf.float32), INPUT_SPEC[1])
    with pytest.raises(ValueError, match="cannot take inputs"):
        build_algorithm("fedavg", tiny_model, loss=loss, input_spec=wrong_spec)


def test_client_dataset_errors(loss):
    process = build_algorithm("fedavg", tiny_model, loss=loss, input_spec=INPUT_SPEC)
    state = process.initialize()
    good = to_datasets(client_arrays([8]))[0]
    empty = good.take(0)
    with pytest.raises(ClientDataError, match="client 1: the dataset is empty"):
        process.next(state, [good, empty])
    wide = tf.data.Dataset.from_tensor_slices(
        (np.zeros((4, NUM_FEATURES + 1), np.float32), np.zeros(4, np.int32))).batch(2)
    with pytest.raises(ClientDataError, match="client 0: batches of type"):
        process.next(state, [wide])


def set_weights(process, state, weights):
    return process.set_model_weights(
        state, tff.learning.models.ModelWeights(trainable=weights, non_trainable=[]))


def test_fedavg_equals_tff_weighted_fed_avg(loss):
    datasets = to_datasets(client_arrays([9, 16, 5], seed=2))
    ours = build_algorithm("fedavg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                           learning_rate=0.1, num_epochs=2, num_iters=None)
    theirs = tff.learning.algorithms.build_weighted_fed_avg(
        lambda: tff.learning.models.from_keras_model(tiny_model(), loss=loss, input_spec=INPUT_SPEC),
        client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.1),
        server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0))
    w0 = initial_weights()
    s_ours = set_weights(ours, ours.initialize(), w0)
    s_theirs = set_weights(theirs, theirs.initialize(), w0)
    # TFF's client work does one pass over the dataset; repeat it for 2 epochs.
    twice = [ds.repeat(2) for ds in datasets]
    for _ in range(2):
        s_ours = ours.next(s_ours, datasets).state
        s_theirs = theirs.next(s_theirs, twice).state
    got = ours.get_model_weights(s_ours).trainable
    want = theirs.get_model_weights(s_theirs).trainable
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert not np.allclose(got[0], w0[0])


def test_fedprox_matches_numpy_eq_22(loss):
    arrays = client_arrays([12, 7], seed=4)
    datasets = to_datasets(arrays, batch_size=5)
    model_fn = lambda: logistic_regression(NUM_FEATURES, NUM_CLASSES)  # noqa: E731
    process = build_algorithm("fedprox", model_fn, loss=loss, input_spec=INPUT_SPEC,
                              learning_rate=0.2, mu=0.5, num_epochs=3, num_iters=None)
    rng = np.random.RandomState(0)
    w0 = [rng.randn(NUM_FEATURES, NUM_CLASSES).astype(np.float32), rng.randn(NUM_CLASSES).astype(np.float32)]
    state = process.next(set_weights(process, process.initialize(), w0), datasets).state
    got = process.get_model_weights(state).trainable

    # numpy: each client runs SGD on grad F_k + mu (theta - theta_global) (Eq. 22);
    # the server takes the n_k-weighted mean (Eq. 6).
    finals, counts = [], []
    for x, y in arrays:
        w, b = w0[0].astype(np.float64), w0[1].astype(np.float64)
        for _ in range(3):
            for start in range(0, len(y), 5):
                gw, gb = reference.softmax_regression_grads(w, b, x[start:start + 5], y[start:start + 5], NUM_CLASSES)
                w, b = w - 0.2 * (gw + 0.5 * (w - w0[0])), b - 0.2 * (gb + 0.5 * (b - w0[1]))
        finals.append((w, b))
        counts.append(len(y))   # Eq. 6: n_k, the client's number of training examples
    want_w = sum(c * f[0] for c, f in zip(counts, finals)) / sum(counts)
    want_b = sum(c * f[1] for c, f in zip(counts, finals)) / sum(counts)
    np.testing.assert_allclose(got[0], want_w, atol=1e-5)
    np.testing.assert_allclose(got[1], want_b, atol=1e-5)


class LinearLoss(tf.keras.losses.Loss):
    """loss = mean(prediction): its gradient w.r.t. the kernel is the batch's mean x."""

    def call(self, y_true, y_pred):
        return tf.reduce_mean(y_pred, axis=-1)


def test_tff_fed_prox_pushes_away_from_global_model_ours_contracts():
    """Documents an upstream sign issue (TFF 0.87 proximal_client_work.py).

    The first batch (x = 1) moves w from w0 = 0 to -lr; the remaining batches
    (x = 0) have zero data gradient, so only the proximal term acts. Eq. 22's
    term mu (w - w0) pulls w back toward w0; TFF adds mu (w0 - w) instead.
    """
    lr, mu, zeros = 0.1, 2.0, 4
    x = np.array([[1.0]] + [[0.0]] * zeros, np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, np.zeros((len(x), 1), np.float32))).batch(1)
    spec = ds.element_spec

    def model_fn():
        return tf.keras.Sequential([tf.keras.Input((1,)),
                                    tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")])

    ours = build_algorithm("fedprox", model_fn, loss=LinearLoss(), input_spec=spec,
                           learning_rate=lr, mu=mu, num_epochs=1, num_iters=None)
    theirs = tff.learning.algorithms.build_weighted_fed_prox(
        lambda: tff.learning.models.from_keras_model(model_fn(), loss=LinearLoss(), input_spec=spec),
        proximal_strength=mu, client_optimizer_fn=tff.learning.optimizers.build_sgdm(lr),
        server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0))
    w_ours = ours.get_model_weights(ours.next(ours.initialize(), [ds]).state).trainable[0].item()
    w_theirs = theirs.get_model_weights(theirs.next(theirs.initialize(), [ds]).state).trainable[0].item()

    after_first = -lr
    want_ours = after_first * (1 - lr * mu) ** zeros      # w <- w - lr mu (w - 0)
    want_theirs = after_first * (1 + lr * mu) ** zeros    # w <- w - lr mu (0 - w)
    assert w_ours == pytest.approx(want_ours, rel=1e-5)
    assert w_theirs == pytest.approx(want_theirs, rel=1e-5)
    assert abs(w_ours) < lr < abs(w_theirs)


@pytest.mark.parametrize("name", ["fedavg", "fedatts"])
def test_nan_client_is_excluded_and_reported(name, loss):
    arrays = client_arrays([8, 10, 6], seed=7)
    kwargs = dict(loss=loss, input_spec=INPUT_SPEC, learning_rate=0.05, num_epochs=1)
    process = build_algorithm(name, tiny_model, **kwargs)
    w0 = initial_weights()
    out = process.next(set_weights(process, process.initialize(), w0),
                       to_datasets(poisoned(arrays, {1})))
    assert out.metrics["client_work"]["num_excluded_clients"] == 1
    clean = process.next(set_weights(process, process.initialize(), w0),
                         to_datasets([arrays[0], arrays[2]]))
    got = process.get_model_weights(out.state).trainable
    want = process.get_model_weights(clean.state).trainable
    for a, b in zip(got, want):
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert out.metrics["client_work"]["train"]["num_examples"] == 14


# Hand count for tiny_model (Dense 6->5, Dense 5->3), float32: kernels 30 and 15, biases 5
# and 3 = 53 numbers = 212 bytes, in 4 tensors.
TINY_WEIGHT_BYTES, TINY_TENSORS = 212, 4


# The rest of a client's upload, by hand: the Keras metrics' sums (loss total and count, 2
# float32; num_examples and num_batches, 2 int64) = 24 bytes, and the excluded flag (int32) = 4.
METRIC_BYTES, EXCLUDED_BYTES = 24, 4


@pytest.mark.parametrize("executor", ["tff", "local"])
def test_round_metrics_report_time_and_bytes(executor, loss):
    process = build_algorithm("fedpap", tiny_model, loss=loss, input_spec=INPUT_SPEC, mu=0.1,
                              stepsize=2.0, executor=executor)
    out = process.next(process.initialize(), to_datasets(client_arrays([5, 6])))
    rnd = out.metrics["round"]
    # Down: only the weights (212); one-pass attention broadcasts nothing else.
    assert rnd["bytes_broadcast"] == 2 * 212
    # Up: the update (212), its weight (4), 4 per-layer distances (16), metrics and flag (28).
    assert rnd["bytes_uploaded"] == 2 * (212 + 4 + 16 + METRIC_BYTES + EXCLUDED_BYTES)
    assert rnd["wall_seconds"] > 0
    assert out.metrics["client_work"]["train"]["loss"] > 0
    assert process.hparams.prox_mu == 0.1 and process.hparams.learning_rate == 0.001


def test_fedavg_bytes_by_hand():
    process = build_algorithm("fedavg", lambda: logistic_regression(2, 3),
                              loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                              input_spec=(tf.TensorSpec((None, 2), tf.float32),
                                          tf.TensorSpec((None,), tf.int32)), executor="tff")
    # Logistic 2 -> 3: kernel 6 + bias 3 = 9 float32 = 36 bytes down; up also the 4-byte
    # weight, the metrics (24) and the excluded flag (4): 68.
    assert process.broadcast_bytes_per_client == 36
    assert process.upload_bytes_per_client == 68


def test_keep_optimizer_state_option_adds_state_traffic(loss):
    kept = build_algorithm("fedavgs", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                           keep_optimizer_state=True, executor="tff")
    reset = build_algorithm("fedavgs", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                            executor="tff")
    # The step count (1) and m and v (53 each), sent as float32: 4 * 107 = 428 bytes each way.
    assert kept.broadcast_bytes_per_client - reset.broadcast_bytes_per_client == 428
    assert kept.upload_bytes_per_client - reset.upload_bytes_per_client == 428
    assert reset.broadcast_bytes_per_client == TINY_WEIGHT_BYTES
    out = kept.next(kept.initialize(), to_datasets(client_arrays([5, 9])))
    assert out.metrics["round"]["bytes_uploaded"] == 2 * kept.upload_bytes_per_client


def test_fedavg_weighs_clients_by_dataset_size_not_steps(loss):
    """Eq. 6 under a step cap: one SGD step each, but the mean weighs 4 : 40, not 4 : 4."""
    arrays = client_arrays([4, 40], seed=8)
    model_fn = lambda: logistic_regression(NUM_FEATURES, NUM_CLASSES)  # noqa: E731
    kwargs = dict(loss=loss, input_spec=INPUT_SPEC, learning_rate=0.5, num_epochs=5, num_iters=1)
    rng = np.random.RandomState(1)
    w0 = [rng.randn(NUM_FEATURES, NUM_CLASSES).astype(np.float32),
          rng.randn(NUM_CLASSES).astype(np.float32)]
    finals = []
    for x, y in arrays:   # one step on each client's first batch of 4
        gw, gb = reference.softmax_regression_grads(w0[0].astype(np.float64), w0[1], x[:4], y[:4],
                                                    NUM_CLASSES)
        finals.append((w0[0] - 0.5 * gw, w0[1] - 0.5 * gb))
    for weighting, counts in (("dataset_size", [4, 40]), ("processed", [4, 4])):
        process = build_algorithm("fedavg", model_fn, client_weighting=weighting, **kwargs)
        state = set_weights(process, process.initialize(), w0)
        got = process.get_model_weights(process.next(state, to_datasets(arrays)).state).trainable
        want_w = sum(c * f[0] for c, f in zip(counts, finals)) / sum(counts)
        want_b = sum(c * f[1] for c, f in zip(counts, finals)) / sum(counts)
        np.testing.assert_allclose(got[0], want_w, atol=1e-5)
        np.testing.assert_allclose(got[1], want_b, atol=1e-5)


def test_nan_client_does_not_poison_the_kept_optimizer_state(loss):
    arrays = client_arrays([8, 10, 6], seed=7)
    process = build_algorithm("fedavgs", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                              keep_optimizer_state=True, num_epochs=1)
    w0 = initial_weights()
    bad = process.next(set_weights(process, process.initialize(), w0),
                       to_datasets(poisoned(arrays, {1})))
    clean = process.next(set_weights(process, process.initialize(), w0),
                         to_datasets([arrays[0], arrays[2]]))
    assert bad.metrics["client_work"]["num_excluded_clients"] == 1
    got, want = bad.state["optimizer_state"], clean.state["optimizer_state"]
    assert len(got) == 1 + 2 * TINY_TENSORS   # step count, m and v per tensor
    for a, b in zip(got, want):
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    # A second round starts from finite moments and trains.
    again = process.next(bad.state, to_datasets([arrays[0]]))
    assert all(np.all(np.isfinite(w)) for w in process.get_model_weights(again.state).trainable)


@pytest.mark.parametrize("name", ["fedavg", "fedatt"])
def test_round_with_every_client_excluded_keeps_the_model(name, loss):
    arrays = client_arrays([8, 10], seed=3)
    process = build_algorithm(name, tiny_model, loss=loss, input_spec=INPUT_SPEC, num_epochs=1)
    w0 = initial_weights()
    out = process.next(set_weights(process, process.initialize(), w0),
                       to_datasets(poisoned(arrays, {0, 1})))
    assert out.metrics["client_work"]["num_excluded_clients"] == 2
    assert out.metrics["client_work"]["train"]["num_examples"] == 0
    for got, want in zip(process.get_model_weights(out.state).trainable, w0):
        np.testing.assert_array_equal(got, want)


def test_weighted_mean_of_all_zero_weights_is_zero_not_nan():
    """The aggregator itself, not TFF's finalizer, keeps an empty round NaN-free."""
    from tffre.aggregators import weighted_mean_factory
    value_type = tff.TensorType(np.float32, [2])
    process = weighted_mean_factory().create(value_type, tff.TensorType(np.float32))
    out = process.next(process.initialize(), [np.array([1.0, 2.0], np.float32)] * 2,
                       [np.float32(0.0)] * 2)
    np.testing.assert_array_equal(out.result, [0.0, 0.0])


def test_shuffled_client_data_gives_the_same_round_twice(loss):
    """The seeded shuffle survives TFF's serialization: a round replays exactly (resume)."""
    from tffre.data.synthetic_sets import make_synthetic
    data = make_synthetic(0.5, 0.5, num_clients=4, seed=3)
    model_fn = lambda: logistic_regression(60, 10)  # noqa: E731

    def one_round():
        process = build_algorithm("fedavg", model_fn, loss=loss, input_spec=data.element_spec(),
                                  num_epochs=2, num_iters=None)
        datasets = [data.client_dataset(c, seed=17) for c in data.client_ids[:3]]
        return process.get_model_weights(process.next(process.initialize(), datasets).state)

    for a, b in zip(one_round().trainable, one_round().trainable):
        np.testing.assert_array_equal(a, b)


def test_clip_norm_bounds_each_local_step_by_the_global_norm(loss):
    """clip_norm (the FedLCC authors' 1.0): one SGD step of a client moves the weights by
    lr * min(||g||, clip) in global L2 norm, in the gradient's direction."""
    with pytest.raises(ValueError, match="clip_norm: expected a finite number > 0"):
        registry.resolve_hparams("FedAvg", clip_norm=-1.0)
    arrays = client_arrays([4], seed=3)
    model_fn = lambda: logistic_regression(NUM_FEATURES, NUM_CLASSES)  # noqa: E731
    rng = np.random.RandomState(2)
    w0 = [rng.randn(NUM_FEATURES, NUM_CLASSES).astype(np.float32),
          rng.randn(NUM_CLASSES).astype(np.float32)]
    gw, gb = reference.softmax_regression_grads(w0[0].astype(np.float64), w0[1], *arrays[0],
                                                NUM_CLASSES)
    norm = np.sqrt((gw ** 2).sum() + (gb ** 2).sum())
    for clip in (None, norm / 10):
        process = build_algorithm("fedavg", model_fn, loss=loss, input_spec=INPUT_SPEC,
                                  learning_rate=0.5, num_epochs=1, num_iters=1, clip_norm=clip,
                                  executor="local")
        state = set_weights(process, process.initialize(), w0)
        got = process.get_model_weights(process.next(state, to_datasets(arrays)).state).trainable
        scale = 1.0 if clip is None else clip / norm
        np.testing.assert_allclose(got[0], w0[0] - 0.5 * scale * gw, atol=1e-5)
        np.testing.assert_allclose(got[1], w0[1] - 0.5 * scale * gb, atol=1e-5)


def test_a_dataset_over_tffs_cap_is_refused_with_what_to_do():
    """TFF's runtime refuses a client dataset over 100 MB (a large client's cached encoder
    activations): the process says so in one line and names --executor local."""
    from tffre.process import (AlgorithmInfo, ClientDataError, MeasuredLearningProcess,
                               ProcessFunctions, RoundFacts)

    def next_fn(state, data):
        raise RuntimeError("INVALID_ARGUMENT: Serialized size of Dataset (261040836 bytes) "
                           "exceeds maximum allowed (104857600 bytes)")
    spec = (tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None], tf.int32))
    process = MeasuredLearningProcess(
        ProcessFunctions(lambda: None, next_fn, None, None),
        algorithm=AlgorithmInfo(name="FedAvgT", hparams=None), executor="tff",
        facts=RoundFacts(input_spec=spec, broadcast_bytes_per_client=0,
                         upload_bytes_per_client=0))
    data = tf.data.Dataset.from_tensor_slices(
        (np.zeros((3, 2), np.float32), np.zeros(3, np.int32))).batch(2)
    with pytest.raises(ClientDataError, match=r"261040836 bytes.*--executor local") as err:
        process.next(None, [data])
    assert "\n" not in str(err.value)


def test_typed_hyperparameters_pass_through_unchanged(loss):
    # The run's resolved Hparams object reaches the client as it is (issue 30: typed from the
    # command line to the client), and builds the same process as the names it holds.
    hp = registry.resolve_hparams("FedProx", mu=0.3, learning_rate=0.05, num_epochs=1)
    assert registry.resolve_hparams("FedProx", hp) is hp
    typed = build_algorithm("fedprox", tiny_model, loss=loss, input_spec=INPUT_SPEC, hparams=hp)
    named = build_algorithm("fedprox", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                            mu=0.3, learning_rate=0.05, num_epochs=1)
    assert typed.hparams == named.hparams == hp
    datasets = to_datasets(client_arrays([6, 4], seed=5))
    w0 = initial_weights()
    a = typed.next(set_weights(typed, typed.initialize(), w0), datasets).state
    b = named.next(set_weights(named, named.initialize(), w0), datasets).state
    for x, y in zip(typed.get_model_weights(a).trainable, named.get_model_weights(b).trainable):
        np.testing.assert_allclose(x, y, atol=1e-7)
