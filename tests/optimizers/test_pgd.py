"""PGD against a numpy transcription of SGD on Eq. 22."""

import numpy as np
import pytest
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


@pytest.mark.parametrize("shapes", [((2, 3), (4,)), ((3,), (3,))],
                         ids=["shapes-differ", "same-shape"])
@pytest.mark.parametrize("first_step_on_all", [False, True], ids=["build", "first-step-on-all"])
def test_pgd_on_a_subset_of_variables_uses_each_variables_anchor(shapes, first_step_on_all):
    # Keras rebuilt the variable -> slot index from each call's variables while
    # the optimizer was not marked built, so a subset step read another
    # variable's anchor (a shape error, or a silently wrong pull).
    rng = np.random.RandomState(0)
    starts = [rng.normal(size=s) for s in shapes]
    anchors = [rng.normal(size=s) for s in shapes]
    targets = [rng.normal(size=s) for s in shapes]
    variables = [tf.Variable(s) for s in starts]
    opt = PGD(learning_rate=0.1, mu=0.7)
    opt.set_anchor(anchors)
    steps = [0, 0]

    def step(which):
        opt.apply_gradients([(variables[i] - targets[i], variables[i]) for i in which])
        for i in which:
            steps[i] += 1

    if first_step_on_all:
        step([0, 1])
    else:
        opt.build(variables)
    for which in ([1], [1], [0], [1], [0, 1]):
        step(which)
    for i, start in enumerate(starts):
        want = reference.pgd_steps(start, lambda t, i=i: t - targets[i], steps[i], lr=0.1,
                                   mu=0.7, anchor=anchors[i])
        np.testing.assert_allclose(variables[i].numpy(), want[-1], rtol=1e-6)


def test_pgd_step_on_a_variable_it_was_not_built_for_fails():
    var, other = tf.Variable([1.0, 2.0]), tf.Variable([3.0, 4.0])
    opt = PGD()
    opt.set_anchor([np.zeros(2, np.float32)])
    opt.apply_gradients([(tf.ones(2), var)])
    with pytest.raises(KeyError, match="cannot recognize variable"):
        opt.apply_gradients([(tf.ones(2), other)])
