"""docs/adding-an-algorithm.md's walk-through works as written: its module and registry line,
taken from the file, give an algorithm with a command-line flag whose round equals one SGD step
computed in numpy, on both executors; its client optimizer's factory, entry and row give a flag,
a family form and two decayed rounds equal to Nesterov's update computed in numpy."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from doc_blocks import guide_block



def block(marker):
    """The python code block after ``<!-- marker -->`` in the guide."""
    return guide_block("adding-an-algorithm.md", marker)


@pytest.fixture
def fedavgls(tmp_path, monkeypatch):
    """The guide's module written where Python finds it, and its registry line in place."""
    from tffre import config, registry
    (tmp_path / "guide_fedavgls.py").write_text(block("module"))
    monkeypatch.syspath_prepend(str(tmp_path))
    row = eval(block("row").replace("tffre.algorithms.fedavgls", "guide_fedavgls"),  # noqa: S307
               {"AlgorithmSpec": registry.AlgorithmSpec})
    monkeypatch.setitem(registry.ALGORITHMS, row.name.lower(), row)
    config.vocabulary.cache_clear()
    yield row
    config.vocabulary.cache_clear()
    sys.modules.pop("guide_fedavgls", None)


def linear_model():
    inputs = tf.keras.Input((3,))
    logits = tf.keras.layers.Dense(4, kernel_initializer="zeros", name="classifier")(inputs)
    return tf.keras.Model(inputs, {"logits": logits})


def test_the_guides_algorithm_builds_runs_and_has_a_flag(fedavgls):
    from tffre import build_algorithm, config, registry
    hp = registry.resolve_hparams("FedAvgLS", smoothing=0.2)
    assert hp.smoothing == 0.2 and hp.learning_rate == 0.01        # SGD's default rate
    assert "smoothing" in config.vocabulary()                      # --smoothing exists
    with pytest.raises(ValueError, match="smoothing: expected a number in"):
        registry.resolve_hparams("FedAvgLS", smoothing=1.5)
    rng = np.random.RandomState(0)
    x = rng.randn(6, 3).astype(np.float32)
    y = np.array([0, 1, 2, 3, 1, 1], np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(6)
    # One step of SGD from zero weights on the smoothed cross-entropy, by hand:
    # logits 0 -> p = 1/C; dL/dz = (p - q) / B with q = (1 - eps) onehot + eps / C.
    eps, lr, classes = 0.2, 0.5, 4
    q = (1 - eps) * np.eye(classes)[y] + eps / classes
    grad_z = (np.full((6, classes), 1 / classes) - q) / 6
    want_w, want_b = -lr * x.T @ grad_z, -lr * grad_z.sum(0)
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for executor in ("local", "tff"):
        process = build_algorithm("FedAvgLS", linear_model, loss=loss,
                                  input_spec=dataset.element_spec, executor=executor,
                                  smoothing=eps, learning_rate=lr, num_epochs=1)
        state = process.next(process.initialize(), [dataset]).state
        w, b = process.get_model_weights(state).trainable
        np.testing.assert_allclose(w, want_w, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(b, want_b, rtol=1e-5, atol=1e-7)


@pytest.fixture
def nesterov(monkeypatch):
    """The guide's client optimizer in place: its factory and hyperparameters run in the
    registry's namespace (as they would in tffre/registry.py), its entry in CLIENT_OPTIMIZERS
    and its row in ALGORITHMS."""
    from tffre import config, registry
    namespace = dict(vars(registry))
    exec(compile(block("optimizer"), "adding-an-algorithm.md", "exec"), namespace)  # noqa: S102
    entry = eval("{" + block("optimizer-entry") + "}", namespace)  # noqa: S307
    row = eval(block("optimizer-row"), namespace)  # noqa: S307
    for key, optimizer in entry.items():
        monkeypatch.setitem(registry.CLIENT_OPTIMIZERS, key, optimizer)
    monkeypatch.setitem(registry.ALGORITHMS, row.name.lower(), row)
    config.vocabulary.cache_clear()
    yield row
    config.vocabulary.cache_clear()


def softmax_gradients(w, b, x, y):
    """The mean cross-entropy's gradients of a linear softmax model, by hand."""
    z = x @ w + b
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    return x.T @ p / len(y), p.mean(0)


def test_the_guides_client_optimizer_trains_its_row_and_has_a_flag(nesterov):
    from tffre import build_algorithm, config, registry
    hp = registry.resolve_hparams("FedAvgN")
    assert hp.nesterov_momentum == 0.9 and hp.learning_rate == 0.01   # the entry's rate
    assert "nesterov_momentum" in config.vocabulary()                 # --nesterov-momentum
    adam = registry.resolve_hparams("FedAvgN", local_optimizer="adam")
    assert registry.client_optimizer_of(nesterov, adam) == "tf_adam"   # its adam form
    with pytest.raises(ValueError, match="FedAvgN: its nesterov optimizer has no sgdm form"):
        registry.resolve_hparams("FedAvgN", local_optimizer="sgdm")
    rng = np.random.RandomState(1)
    x = rng.randn(5, 3).astype(np.float32)
    y = np.array([0, 1, 2, 3, 1], np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(5)
    # Two rounds of two local steps (two epochs of one batch) from zero weights, by hand:
    # Nesterov's update as Bengio et al. 2013 (Eq. 7) write it, v <- mu v - lr g(w) and
    # w <- w + mu v - lr g(w); the momentum starts from zero each round, and round 2's rate is
    # decayed once (lr_decay: the client's own rate, decayed by the broadcast round).
    mu, lr, decay = 0.5, 0.3, 0.5
    w, b = np.zeros((3, 4)), np.zeros(4)
    for rnd in range(2):
        rate, vw, vb = lr * decay ** rnd, np.zeros_like(w), np.zeros_like(b)
        for _ in range(2):
            gw, gb = softmax_gradients(w, b, x.astype(np.float64), y)
            vw, vb = mu * vw - rate * gw, mu * vb - rate * gb
            w, b = w + mu * vw - rate * gw, b + mu * vb - rate * gb
    model = lambda: tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(  # noqa
        4, kernel_initializer="zeros")])
    process = build_algorithm(
        "FedAvgN", model, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        input_spec=dataset.element_spec, executor="local", nesterov_momentum=mu,
        learning_rate=lr, lr_decay=decay, num_epochs=2)
    state = process.initialize()
    for _ in range(2):
        state = process.next(state, [dataset]).state
    got_w, got_b = process.get_model_weights(state).trainable
    np.testing.assert_allclose(got_w, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, b, rtol=1e-5, atol=1e-6)
