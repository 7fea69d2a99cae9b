"""FedRep: the personal head never leaves the client, persists across rounds and sampling
gaps, and the body is FedAvg's mean of the clients' bodies."""

import numpy as np
import tensorflow as tf

from tffre import build_algorithm
from tffre.mapreduce import ModelWeights
from tiny import INPUT_SPEC, NAMED_LOSS, NUM_CLASSES, client_arrays, initial_weights, \
    tiny_named_model, to_datasets

LR = 0.1


def sgd_by_hand(weights, x, y):
    """One client's local epoch (batches of 4) with plain SGD on the cross-entropy."""
    model = tiny_named_model()
    model.set_weights(weights)
    for i in range(0, len(y), 4):
        with tf.GradientTape() as tape:
            loss = NAMED_LOSS(y[i:i + 4], model(x[i:i + 4], training=True)["logits"])
        for v, g in zip(model.trainable_variables,
                        tape.gradient(loss, model.trainable_variables)):
            v.assign_sub(LR * g)
    return [v.numpy() for v in model.trainable_variables]


def build(executor="local"):
    return build_algorithm("FedRep", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                           executor=executor, learning_rate=LR, num_epochs=1, num_iters=None,
                           client_weighting="uniform")


def test_personal_head_stays_and_body_is_averaged():
    data = client_arrays([8, 6, 7], seed=5)
    process = build()
    w0 = initial_weights()     # [body kernel, body bias, head kernel, head bias]
    state = process.set_model_weights(process.initialize(), ModelWeights(w0, []))
    # Round 1: clients 0 and 1, both from the broadcast model.
    out = process.next(state, to_datasets(data[:2]), client_ids=["a", "b"])
    a1, b1 = sgd_by_hand(w0, *data[0]), sgd_by_hand(w0, *data[1])
    for i in (0, 1):
        np.testing.assert_allclose(out.state["model"].trainable[i], (a1[i] + b1[i]) / 2,
                                   rtol=1e-5, atol=1e-6)
    for i in (2, 3):   # the server's head is untouched
        np.testing.assert_array_equal(out.state["model"].trainable[i], w0[i])
    np.testing.assert_allclose(process.client_states["a"]["personal"][0], a1[2], rtol=1e-5)
    # Round 2: client c (first time: the broadcast head) and a (its own head, after a gap).
    body = [np.asarray(t) for t in out.state["model"].trainable[:2]]
    out2 = process.next(out.state, to_datasets([data[2], data[0]]), client_ids=["c", "a"])
    c2 = sgd_by_hand(body + w0[2:], *data[2])
    a2 = sgd_by_hand(body + a1[2:], *data[0])
    for i in (0, 1):
        np.testing.assert_allclose(out2.state["model"].trainable[i], (c2[i] + a2[i]) / 2,
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(process.client_states["a"]["personal"][1], a2[3], rtol=1e-5)
    np.testing.assert_allclose(process.client_states["b"]["personal"][0], b1[2], rtol=1e-5)


def test_the_head_is_not_in_the_upload():
    process = build("tff")
    # Bytes from the traced upload type: FedAvg's minus exactly the head's weights.
    n_body = 6 * 5 + 5
    n_head = 5 * NUM_CLASSES + NUM_CLASSES
    avg = build_algorithm("FedAvg", tiny_named_model, loss=NAMED_LOSS, input_spec=INPUT_SPEC,
                          executor="tff", learning_rate=LR, num_epochs=1, num_iters=None)
    assert avg.upload_bytes_per_client - process.upload_bytes_per_client == 4 * n_head
    assert process.upload_bytes_per_client >= 4 * n_body
    assert process.broadcast_bytes_per_client == avg.broadcast_bytes_per_client
    assert process.stateful and process.tff_process is None
