"""The proximal optimizers' state (anchors, step count) through checkpoints and set_weights."""

import numpy as np
import pytest
import tensorflow as tf

from optimizers import PAdam, PGD

MAKERS = {"pgd": lambda: PGD(learning_rate=0.1, mu=0.5),
          "padam": lambda: PAdam(learning_rate=0.05, mu=0.5)}
SHAPES = [(2, 3), (4,)]


def problem(seed=0):
    """Two variables of different shapes, their anchors and quadratic targets."""
    rng = np.random.RandomState(seed)
    variables = [tf.Variable(rng.normal(size=s)) for s in SHAPES]
    anchors = [rng.normal(size=s) for s in SHAPES]
    targets = [rng.normal(size=s) for s in SHAPES]
    return variables, anchors, targets


def step(opt, variables, targets):
    """One step on sum 0.5 ||v - target||^2."""
    opt.apply_gradients([(v - t, v) for v, t in zip(variables, targets)])


def values(variables):
    return [v.numpy().copy() for v in variables]


def continue_training(opt, variables, targets):
    """Two more steps; returns the variables' values."""
    step(opt, variables, targets)
    step(opt, variables, targets)
    return values(variables)


@pytest.mark.parametrize("restore_first", [False, True], ids=["build-then-restore",
                                                               "restore-then-build"])
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_checkpoint_restores_anchors_and_iterations(kind, restore_first, tmp_path):
    variables, anchors, targets = problem()
    opt = MAKERS[kind]()
    opt.set_anchor(anchors)
    for _ in range(3):
        step(opt, variables, targets)
    path = tf.train.Checkpoint(optimizer=opt, var=variables).save(str(tmp_path / "ckpt"))
    saved = values(variables)
    want = continue_training(opt, variables, targets)

    fresh = MAKERS[kind]()
    for v in variables:  # the restore must bring the saved values back
        v.assign(tf.zeros_like(v))
    if restore_first:  # deferred: the anchors are restored when build creates them
        status = tf.train.Checkpoint(optimizer=fresh, var=variables).restore(path)
        fresh.build(variables)
    else:
        fresh.build(variables)
        status = tf.train.Checkpoint(optimizer=fresh, var=variables).restore(path)
    status.assert_consumed()
    assert fresh.iterations.numpy() == 3
    for got, anchor in zip(fresh._anchors, anchors):
        np.testing.assert_allclose(got.numpy(), anchor)
    np.testing.assert_allclose(values(variables)[0], saved[0])
    # The restored anchor counts as set: training resumes exactly, no set_anchor.
    got = continue_training(fresh, variables, targets)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_set_weights_copies_the_whole_state(kind):
    variables, anchors, targets = problem()
    opt = MAKERS[kind]()
    opt.set_anchor(anchors)
    for _ in range(3):
        step(opt, variables, targets)
    copies = [tf.Variable(v) for v in variables]
    other = MAKERS[kind]()
    other.build(copies)
    other.set_weights([v.numpy() for v in opt.variables])  # Keras 2.14 has no get_weights
    assert other.iterations.numpy() == 3
    for got, anchor in zip(other._anchors, anchors):
        np.testing.assert_allclose(got.numpy(), anchor)
    want = continue_training(opt, variables, targets)
    got = continue_training(other, copies, targets)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_keras_file_round_trip_keeps_the_anchor(kind, tmp_path):
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
    opt = MAKERS[kind]()
    opt.set_anchor([np.full(v.shape, 0.5, np.float32) for v in model.trainable_variables])
    model.compile(opt, "mse")
    rng = np.random.RandomState(0)
    x, y = rng.rand(8, 3).astype(np.float32), rng.rand(8, 2).astype(np.float32)
    model.fit(x, y, epochs=1, verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = tf.keras.models.load_model(tmp_path / "model.keras")
    assert loaded.optimizer.iterations.numpy() == opt.iterations.numpy()
    for got, want in zip(loaded.optimizer._anchors, opt._anchors):
        np.testing.assert_allclose(got.numpy(), want.numpy())
    loaded.fit(x, y, epochs=1, verbose=0)  # steps without a new set_anchor
    model.fit(x, y, epochs=1, verbose=0)
    for got, want in zip(loaded.trainable_variables, model.trainable_variables):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
