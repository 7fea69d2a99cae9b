"""SelfAdam and PAdam against numpy transcriptions of FLCMC Eq. 15-27."""

import numpy as np
import pytest
import tensorflow as tf

import reference
from optimizers import MissingAnchorError, PAdam, SelfAdam

A = np.array([[1.0, 2.0, -1.0], [0.5, -1.5, 2.0], [3.0, 0.2, 0.7], [-1.0, 1.0, 1.0]])
B = np.array([1.0, -2.0, 0.5, 3.0])


def quad_grad(theta):
    return A.T @ (A @ theta - B)


def run_tf(opt, theta0, steps, anchor=None):
    var = tf.Variable(np.array(theta0, np.float64))
    if anchor is not None:
        opt.set_anchor([anchor])
    path = []
    for _ in range(steps):
        with tf.GradientTape() as tape:
            r = tf.linalg.matvec(tf.constant(A), var) - B
            loss = 0.5 * tf.reduce_sum(r * r)
        opt.apply_gradients([(tape.gradient(loss, var), var)])
        path.append(var.numpy().copy())
    return path


THETA0 = [0.3, -0.2, 0.1]


# Keras keeps hyperparameters as float32 variables, hence rtol 1e-6 in float64.
# A large epsilon makes the test see where epsilon is added (Eq. 20: to sqrt(v_hat)).
TOL = dict(rtol=1e-6, atol=1e-7)


def test_self_adam_matches_eq_15_20():
    got = run_tf(SelfAdam(learning_rate=0.05, beta_1=0.8, beta_2=0.99, epsilon=1e-2), THETA0, 8)
    want = reference.adam_steps(THETA0, quad_grad, 8, lr=0.05, b1=0.8, b2=0.99, eps=1e-2)
    np.testing.assert_allclose(got, want, **TOL)
    keras = run_tf(tf.keras.optimizers.Adam(0.05, beta_1=0.8, beta_2=0.99, epsilon=1e-2), THETA0, 8)
    assert np.max(np.abs(np.array(keras) - np.array(want))) > 1e-4  # the test can tell them apart


def test_self_adam_close_to_keras_adam():
    ours = run_tf(SelfAdam(learning_rate=0.01), THETA0, 10)
    keras = run_tf(tf.keras.optimizers.Adam(learning_rate=0.01, epsilon=1e-8), THETA0, 10)
    np.testing.assert_allclose(ours, keras, atol=1e-6)
    assert not np.allclose(ours[-1], THETA0)


def test_padam_matches_eq_21_27_including_anchor_pull():
    anchor = np.array([1.0, 1.0, -1.0])
    got = run_tf(PAdam(learning_rate=0.05, mu=0.7), THETA0, 8, anchor=anchor)
    want = reference.adam_steps(THETA0, quad_grad, 8, lr=0.05, mu=0.7, anchor=anchor)
    np.testing.assert_allclose(got, want, **TOL)
    plain = reference.adam_steps(THETA0, quad_grad, 8, lr=0.05)
    assert not np.allclose(want[-1], plain[-1])  # the anchor term really acts


def test_padam_with_zero_data_gradient_moves_toward_anchor():
    anchor = np.array([2.0, -2.0, 0.0])
    var = tf.Variable(np.array(THETA0, np.float64))
    opt = PAdam(learning_rate=0.1, mu=1.0)
    opt.set_anchor([anchor])
    for _ in range(5):
        opt.apply_gradients([(tf.zeros(3, tf.float64), var)])
    want = reference.adam_steps(THETA0, lambda t: np.zeros(3), 5, lr=0.1, mu=1.0, anchor=anchor)
    np.testing.assert_allclose(var.numpy(), want[-1], **TOL)
    assert np.linalg.norm(var.numpy() - anchor) < np.linalg.norm(np.array(THETA0) - anchor)


def test_padam_without_anchor_fails_clearly():
    var = tf.Variable([1.0, 2.0])
    with pytest.raises(MissingAnchorError, match="set_anchor"):
        PAdam().apply_gradients([(tf.ones(2), var)])


def test_set_anchor_rejects_wrong_length():
    var = tf.Variable([1.0, 2.0])
    opt = PAdam()
    opt.set_anchor([np.zeros(2, np.float32)])
    opt.apply_gradients([(tf.ones(2), var)])
    with pytest.raises(ValueError, match="got 2 tensors for 1"):
        opt.set_anchor([np.zeros(2), np.zeros(2)])


def embedding_sparse_grad():
    """An embedding gradient arrives as tf.IndexedSlices (with a repeated row)."""
    emb = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2) / 10)
    with tf.GradientTape() as tape:
        rows = tf.gather(emb, [1, 4, 1])
        loss = tf.reduce_sum(rows * tf.constant([[1.0, -2.0], [0.5, 0.5], [3.0, 1.0]]))
    grad = tape.gradient(loss, emb)
    assert isinstance(grad, tf.IndexedSlices)
    return emb, grad


@pytest.mark.parametrize("make", [lambda: SelfAdam(learning_rate=0.1),
                                  lambda: PAdam(learning_rate=0.1, mu=0.5)])
def test_indexed_slices_equal_dense_path(make):
    emb, grad = embedding_sparse_grad()
    dense_var = tf.Variable(emb.numpy())
    sparse_opt, dense_opt = make(), make()
    for opt, var in ((sparse_opt, emb), (dense_opt, dense_var)):
        if isinstance(opt, PAdam):
            opt.set_anchor([np.ones((6, 2), np.float32)])
    dense_grad = tf.convert_to_tensor(grad)
    for _ in range(3):
        sparse_opt.apply_gradients([(grad, emb)])
        dense_opt.apply_gradients([(dense_grad, dense_var)])
    np.testing.assert_allclose(emb.numpy(), dense_var.numpy(), rtol=1e-6, atol=1e-7)
    untouched = [0, 2, 3, 5]
    if isinstance(sparse_opt, SelfAdam) and not isinstance(sparse_opt, PAdam):
        # Rows without gradient stay put under Self-Adam (g = 0, m = 0).
        np.testing.assert_allclose(emb.numpy()[untouched],
                                   np.arange(12, dtype=np.float32).reshape(6, 2)[untouched] / 10)
