"""The round's shared parts: normalisation statistics averaged like the model, the local
learning rate's decay per round, and the common local_optimizer override."""

import numpy as np
import pytest
import tensorflow as tf

from tffre import build_algorithm, registry
from tffre.mapreduce import ModelWeights
from tiny import INPUT_SPEC, NUM_CLASSES, NUM_FEATURES, client_arrays, to_datasets

LOSS = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def bn_model():
    """Input -> BatchNormalization -> Dense "classifier" (logits)."""
    inputs = tf.keras.Input((NUM_FEATURES,))
    normal = tf.keras.layers.BatchNormalization(momentum=0.9, name="bn")(inputs)
    logits = tf.keras.layers.Dense(NUM_CLASSES, name="classifier",
                                   kernel_initializer="zeros")(normal)
    return tf.keras.Model(inputs, logits)


def moving_stats_by_hand(x, batch=4, momentum=0.9):
    """Keras BatchNormalization's moving mean and variance after one pass (start 0 and 1)."""
    mean, var = np.zeros(NUM_FEATURES), np.ones(NUM_FEATURES)
    for i in range(0, len(x), batch):
        b = x[i:i + batch].astype(np.float64)
        # Keras updates the moving variance with the batch's biased variance (torch: unbiased).
        mean = momentum * mean + (1 - momentum) * b.mean(0)
        var = momentum * var + (1 - momentum) * b.var(0)
    return mean, var


@pytest.mark.parametrize("executor", ["local", "tff"])
def test_batch_norm_statistics_are_averaged_like_the_model(executor):
    data = client_arrays([8, 12], seed=3)
    # learning rate 0: only the statistics move, so they can be computed by hand.
    process = build_algorithm("FedAvg", bn_model, loss=LOSS, input_spec=INPUT_SPEC,
                              executor=executor, learning_rate=0.0, num_epochs=1,
                              num_iters=None)
    state = process.next(process.initialize(), to_datasets(data)).state
    (ma, va), (mb, vb) = (moving_stats_by_hand(x) for x, _ in data)
    names = [v.name for v in bn_model().non_trainable_weights]
    got = dict(zip(names, state["model"].non_trainable))
    mean_key = next(n for n in names if "moving_mean" in n)
    var_key = next(n for n in names if "moving_variance" in n)
    # Weighted by the clients' dataset sizes (8 and 12), as the model's deltas.
    np.testing.assert_allclose(got[mean_key], (8 * ma + 12 * mb) / 20, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[var_key], (8 * va + 12 * vb) / 20, rtol=1e-5, atol=1e-6)
    # They leave the client (the upload has them), and count in its bytes.
    plain = build_algorithm("FedAvg", lambda: tf.keras.Sequential([
        tf.keras.Input((NUM_FEATURES,)), tf.keras.layers.Dense(NUM_CLASSES)]), loss=LOSS,
        input_spec=INPUT_SPEC, executor="local", learning_rate=0.0, num_epochs=1)
    # BN's gamma and beta (2 x 6) and the two statistics (2 x 6), plus the weight.
    assert process.upload_bytes_per_client - plain.upload_bytes_per_client == 4 * (24 + 1)
    assert process.constant_bytes_per_client == 0


def softmax_grad(w, b, x, y):
    """The mean cross-entropy's gradient of a linear softmax model, by hand."""
    z = x @ w + b
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    return x.T @ p / len(y), p.mean(0)


def linear_model():
    return tf.keras.Sequential([tf.keras.Input((NUM_FEATURES,)),
                                tf.keras.layers.Dense(NUM_CLASSES, kernel_initializer="zeros")])


@pytest.mark.parametrize("executor", ["local", "tff"])
def test_learning_rate_decays_per_round(executor):
    (x, y), = client_arrays([4], seed=1)
    process = build_algorithm("FedAvg", linear_model, loss=LOSS, input_spec=INPUT_SPEC,
                              executor=executor, learning_rate=0.5, lr_decay=0.5,
                              num_epochs=1, num_iters=None)
    state = process.initialize()
    w, b = np.zeros((NUM_FEATURES, NUM_CLASSES)), np.zeros(NUM_CLASSES)
    for rnd in range(3):   # one step per round, at 0.5, 0.25, 0.125
        state = process.next(state, to_datasets([(x, y)])).state
        gw, gb = softmax_grad(w, b, x.astype(np.float64), y)
        lr = 0.5 * 0.5 ** rnd
        w, b = w - lr * gw, b - lr * gb
        np.testing.assert_allclose(state["model"].trainable[0], w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(state["model"].trainable[1], b, rtol=1e-5, atol=1e-6)
    assert int(state["round"]) == 3
    # set_model_weights keeps the round counter.
    kept = process.set_model_weights(
        state, ModelWeights([w.astype(np.float32), b.astype(np.float32)], []))
    assert int(kept["round"]) == 3


def test_local_optimizer_override():
    spec = registry.get_spec
    def of(name, **hp):
        return registry.client_optimizer_of(spec(name), registry.resolve_hparams(name, **hp))
    assert of("FedAvg", local_optimizer="adam") == "tf_adam"
    assert of("FedProx", local_optimizer="adam") == "padam"
    assert of("FedRep", local_optimizer="sgdm") == "sgdm"
    assert of("FedProx") == "pgd"
    with pytest.raises(ValueError, match="FedProx: its pgd optimizer has no sgdm form"):
        registry.resolve_hparams("FedProx", local_optimizer="sgdm")
    assert registry.resolve_hparams("FedAvg", local_optimizer="adam").learning_rate == 0.001
    with pytest.raises(ValueError, match="lr_decay: expected a number in"):
        registry.resolve_hparams("FedAvg", lr_decay=1.5)
    import optimizers
    hp = registry.resolve_hparams("FedProx", local_optimizer="adam", mu=0.1)
    optimizer = registry.CLIENT_OPTIMIZERS[registry.client_optimizer_of(spec("FedProx"), hp)] \
        .factory(hp)
    assert isinstance(optimizer, optimizers.PAdam) and float(optimizer.mu) == pytest.approx(0.1)
