"""PGD against a numpy transcription of SGD on Eq. 22."""

import numpy as np
import tensorflow as tf

import reference
from optimizers import PGD


def test_pgd_matches_eq_22_sgd():
    a = np.array([[2.0, -1.0], [0.5, 1.0]])
    b = np.array([1.0, -1.0])
    anchor = np.array([0.5, 0.25])
    var = tf.Variable(np.array([0.1, -0.3]))
    opt = PGD(learning_rate=0.1, mu=0.4)
    opt.set_anchor([anchor])
    for _ in range(6):
        with tf.GradientTape() as tape:
            r = tf.linalg.matvec(tf.constant(a), var) - b
            loss = 0.5 * tf.reduce_sum(r * r)
        opt.apply_gradients([(tape.gradient(loss, var), var)])
    want = reference.pgd_steps([0.1, -0.3], lambda t: a.T @ (a @ t - b), 6, lr=0.1, mu=0.4,
                               anchor=anchor)
    np.testing.assert_allclose(var.numpy(), want[-1], rtol=1e-6)  # float32 hyperparameters


def test_pgd_with_mu_zero_is_sgd():
    var_pgd, var_sgd = tf.Variable([1.0, -2.0]), tf.Variable([1.0, -2.0])
    pgd = PGD(learning_rate=0.2, mu=0.0)
    pgd.set_anchor([np.zeros(2, np.float32)])
    sgd = tf.keras.optimizers.SGD(0.2)
    for _ in range(3):
        for opt, var in ((pgd, var_pgd), (sgd, var_sgd)):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(var ** 2)
            opt.apply_gradients([(tape.gradient(loss, var), var)])
    np.testing.assert_allclose(var_pgd.numpy(), var_sgd.numpy(), rtol=1e-6)
