"""FedRoD: the balanced softmax against numpy, a round against hand-written training, and the
personal head never leaves the client."""

import numpy as np
import tensorflow as tf

from tffre import build_algorithm
from tffre.algorithms.fedrod import balanced_softmax_loss
from tffre.mapreduce import ModelWeights
from tiny import INPUT_SPEC, NAMED_LOSS, NUM_CLASSES, client_arrays, initial_weights, \
    tiny_named_model, to_datasets

LR = 0.1


def numpy_bsm(y, logits, counts):
    """Balanced softmax by hand: -log softmax(z + log n)_y, a missing class at log 1e-8."""
    z = logits + np.log(np.maximum(counts, 1e-8))
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return -logp[np.arange(len(y)), y].mean()


def test_balanced_softmax_against_numpy():
    rng = np.random.RandomState(0)
    logits = rng.randn(5, 4).astype(np.float32)
    y = np.array([0, 1, 1, 3, 0])
    counts = np.array([3.0, 7.0, 0.0, 2.0], np.float32)   # class 2 missing on this client
    np.testing.assert_allclose(balanced_softmax_loss(y, logits, counts), numpy_bsm(
        y, logits.astype(np.float64), counts), rtol=1e-5)
    # Equal counts shift every logit alike: the plain cross-entropy.
    np.testing.assert_allclose(balanced_softmax_loss(y, logits, np.full(4, 5.0)),
                               NAMED_LOSS(y, logits), rtol=1e-5)


def rod_by_hand(w_generic, w_personal, x, y):
    """One local epoch (batches of 4), SGD: body and generic head on the balanced softmax,
    the personal head on CE(g(h) + p(h)) with h and g(h) held fixed."""
    model = tiny_named_model()
    model.set_weights(w_generic)
    kernel, bias = [tf.Variable(w) for w in w_personal]
    counts = np.bincount(y, minlength=NUM_CLASSES).astype(np.float32)
    for i in range(0, len(y), 4):
        xb, yb = x[i:i + 4], y[i:i + 4]
        with tf.GradientTape(persistent=True) as tape:
            out = model(xb, training=True)
            generic = balanced_softmax_loss(yb, out["logits"], counts)
            personal_logits = tf.stop_gradient(out["logits"]) + \
                tf.stop_gradient(out["features"]) @ kernel + bias
            personal = NAMED_LOSS(yb, personal_logits)
        for v, g in zip(model.trainable_variables,
                        tape.gradient(generic, model.trainable_variables)):
            v.assign_sub(LR * g)
        for v, g in zip((kernel, bias), tape.gradient(personal, [kernel, bias])):
            v.assign_sub(LR * g)
    return [v.numpy() for v in model.trainable_variables], [kernel.numpy(), bias.numpy()]


def build(executor="local"):
    return build_algorithm("FedRoD", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                           executor=executor, learning_rate=LR, num_epochs=1, num_iters=None,
                           client_weighting="uniform", local_optimizer=None)


def test_round_matches_hand_training_and_the_personal_head_stays():
    data = client_arrays([8, 6], seed=2)
    process = build()
    w0 = initial_weights()                       # body kernel, body bias, head kernel, head bias
    rng = np.random.RandomState(4)
    p0 = [0.2 * rng.randn(5, NUM_CLASSES).astype(np.float32),
          np.zeros(NUM_CLASSES, np.float32)]     # the personal head's starting values
    state = process.set_model_weights(process.initialize(), ModelWeights(w0 + p0, []))
    out = process.next(state, to_datasets(data), client_ids=["a", "b"])
    (ga, pa), (gb, pb) = rod_by_hand(w0, p0, *data[0]), rod_by_hand(w0, p0, *data[1])
    for i in range(4):        # body and generic head: the mean of the clients'
        np.testing.assert_allclose(out.state["model"].trainable[i], (ga[i] + gb[i]) / 2,
                                   rtol=1e-4, atol=1e-5)
    for i in (4, 5):          # the server's personal head is never updated
        np.testing.assert_array_equal(out.state["model"].trainable[i], p0[i - 4])
    for j in (0, 1):          # each client keeps its own
        np.testing.assert_allclose(process.client_states["a"]["personal"][j], pa[j], rtol=1e-4,
                                   atol=1e-6)
        np.testing.assert_allclose(process.client_states["b"]["personal"][j], pb[j], rtol=1e-4,
                                   atol=1e-6)


def test_the_personal_head_is_not_in_the_upload():
    process = build("tff")
    avg = build_algorithm("FedAvg", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                          executor="tff", learning_rate=LR, num_epochs=1, num_iters=None)
    # The same upload as FedAvg's (body and generic head): no personal-head tensor.
    assert process.upload_bytes_per_client == avg.upload_bytes_per_client
    n_personal = 5 * NUM_CLASSES + NUM_CLASSES
    assert process.broadcast_bytes_per_client - avg.broadcast_bytes_per_client == 4 * n_personal
    assert process.personal_indices == (4, 5) and process.stateful
