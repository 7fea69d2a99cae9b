"""The optimizers in model.compile/model.fit, and through get_config/from_config."""

import numpy as np
import pytest
import tensorflow as tf

from optimizers import PAdam, PGD, SelfAdam


def small_model():
    return tf.keras.Sequential([
        tf.keras.Input((5,), dtype=tf.int32),
        tf.keras.layers.Embedding(30, 4),
        tf.keras.layers.GlobalAveragePooling1D(),
        tf.keras.layers.Dense(3, activation="softmax")])


def data():
    rng = np.random.RandomState(0)
    x = rng.randint(0, 30, (64, 5))
    y = (x[:, 0] % 3).astype(np.int32)
    return x, y


@pytest.mark.parametrize("make", [lambda: SelfAdam(0.05), lambda: PAdam(0.05, mu=0.01),
                                  lambda: PGD(0.5, mu=0.01)])
def test_fit_reduces_loss(make):
    model = small_model()
    opt = make()
    if hasattr(opt, "set_anchor"):
        opt.set_anchor([v.numpy() for v in model.trainable_variables])
    model.compile(opt, "sparse_categorical_crossentropy")
    x, y = data()
    hist = model.fit(x, y, epochs=15, batch_size=16, verbose=0).history["loss"]
    assert hist[-1] < hist[0] - 0.05


def test_padam_in_fit_without_anchor_names_the_fix():
    model = small_model()
    model.compile(PAdam(), "sparse_categorical_crossentropy")
    with pytest.raises(Exception, match="set_anchor"):
        model.fit(*data(), epochs=1, verbose=0)


@pytest.mark.parametrize("opt", [SelfAdam(0.003, beta_1=0.8, beta_2=0.95, epsilon=1e-7),
                                 PAdam(0.002, mu=0.3, beta_1=0.85), PGD(0.2, mu=0.05)])
def test_config_round_trip(opt):
    config = opt.get_config()
    clone = type(opt).from_config(config)
    assert clone.get_config() == config
    restored = tf.keras.optimizers.deserialize(tf.keras.optimizers.serialize(opt))
    assert type(restored) is type(opt)
    assert restored.get_config() == config
