"""docs/adding-an-algorithm.md's walk-through works as written: its module and registry line,
taken from the file, give an algorithm with a command-line flag whose round equals one SGD step
computed in numpy, on both executors."""

import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "adding-an-algorithm.md")


def block(marker):
    """The python code block after ``<!-- marker -->`` in the guide."""
    text = open(DOC, encoding="utf-8").read()
    return re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.S).group(1)


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
