"""FedDyn against a hand-written loop of its Algorithm 1 (objective, linear term, server h)."""

import numpy as np
import pytest
import tensorflow as tf

from tffre import build_algorithm
from tffre.definition import TaskContext
from tiny import INPUT_SPEC, client_arrays, initial_weights, poisoned, tiny_model, to_datasets

ALPHA, LR, M = 0.3, 0.1, 3


def by_hand(rounds):
    """Algorithm 1 by hand: each client SGD on L - <g, w> + a/2 |w - w0|^2, then
    g <- g - a (w - w0); the server h <- h - a/m sum (w_k - w0), w <- mean w_k - h/a."""
    ce = tf.keras.losses.SparseCategoricalCrossentropy()
    theta = [w.astype(np.float64) for w in initial_weights()]
    h = [np.zeros_like(w) for w in theta]
    grads = {}
    for data in rounds:
        trained = []
        for k, (x, y) in enumerate(data):
            g = grads.get(k, [np.zeros_like(w) for w in theta])
            model = tiny_model()
            model.set_weights([w.astype(np.float32) for w in theta])
            for i in range(0, len(y), 4):
                with tf.GradientTape() as tape:
                    ws = model.trainable_variables
                    loss = ce(y[i:i + 4], model(x[i:i + 4], training=True)) \
                        - tf.add_n([tf.reduce_sum(tf.cast(gi, tf.float32) * w)
                                    for gi, w in zip(g, ws)]) \
                        + 0.5 * ALPHA * tf.add_n([tf.reduce_sum(tf.square(w - w0.astype(np.float32)))
                                                  for w, w0 in zip(ws, theta)])
                for w, d in zip(ws, tape.gradient(loss, ws)):
                    w.assign_sub(LR * d)
            w_k = [w.numpy().astype(np.float64) for w in model.trainable_variables]
            grads[k] = [gi - ALPHA * (w - w0) for gi, w, w0 in zip(g, w_k, theta)]
            trained.append(w_k)
        mean = [np.mean(ws, axis=0) for ws in zip(*trained)]
        h = [hi - ALPHA * len(trained) / M * (w - w0) for hi, w, w0 in zip(h, mean, theta)]
        theta = [w - hi / ALPHA for w, hi in zip(mean, h)]
    return theta


def run(rounds, executor="local"):
    process = build_algorithm("FedDyn", tiny_model, loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                              input_spec=INPUT_SPEC, executor=executor, learning_rate=LR,
                              num_epochs=1, num_iters=None, dyn_alpha=ALPHA,
                              context=TaskContext(num_clients=M))
    from tffre.mapreduce import ModelWeights
    state = process.set_model_weights(process.initialize(), ModelWeights(initial_weights(), []))
    outs = []
    for data in rounds:
        out = process.next(state, to_datasets(data), client_ids=[f"c{k}" for k in range(len(data))])
        state = out.state
        outs.append(out)
    return state, outs


def test_two_rounds_equal_algorithm_1_by_hand():
    rounds = [client_arrays([8, 6], seed=11), client_arrays([8, 6], seed=12)]
    state, _ = run(rounds)
    for got, want in zip(state["model"].trainable, by_hand(rounds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # Not FedAvg: the correction moved the model away from the plain mean.
    avg = build_algorithm("FedAvg", tiny_model, loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                          input_spec=INPUT_SPEC, executor="local", learning_rate=LR,
                          num_epochs=1, num_iters=None, client_weighting="uniform")
    from tffre.mapreduce import ModelWeights
    s = avg.set_model_weights(avg.initialize(), ModelWeights(initial_weights(), []))
    for data in rounds:
        s = avg.next(s, to_datasets(data)).state
    assert not np.allclose(s["model"].trainable[0], state["model"].trainable[0], atol=1e-4)


def test_a_nan_client_is_excluded_and_keeps_its_term():
    rounds = [poisoned(client_arrays([8, 6], seed=11), {1})]
    state, outs = run(rounds)
    assert outs[0].metrics["client_work"]["num_excluded_clients"] == 1
    want = by_hand([rounds[0][:1]])
    for got, w in zip(state["model"].trainable, want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)
    assert all(np.isfinite(np.asarray(t)).all() for t in tf.nest.flatten(state["extras"]))


def test_dyn_alpha_must_be_positive():
    with pytest.raises(ValueError, match="dyn_alpha"):
        build_algorithm("FedDyn", tiny_model, loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                        input_spec=INPUT_SPEC, executor="local", dyn_alpha=0.0)
