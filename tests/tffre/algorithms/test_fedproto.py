"""FedProtoAvg, the guide's worked example: prototypes against a numpy transcription."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tffre import build_algorithm
from tffre.mapreduce import ModelWeights
from tiny import INPUT_SPEC, NUM_CLASSES, client_arrays, initial_weights, tiny_model, to_datasets

HP = dict(learning_rate=0.1, num_epochs=1, num_iters=None, proto_weight=0.5)


def model_with(weights):
    model = tiny_model()
    model.set_weights(weights)
    return model


def class_sums(weights, arrays):
    """Per-class sums and counts of the model's outputs (the features of a one-output model)."""
    sums, counts = np.zeros((NUM_CLASSES, NUM_CLASSES)), np.zeros(NUM_CLASSES)
    for x, y in arrays:
        f = model_with(weights)(x).numpy()
        for c in range(NUM_CLASSES):
            sums[c] += f[y == c].sum(axis=0)
            counts[c] += (y == c).sum()
    return sums, counts


def sgd_with_prototypes(weights, x_batches, prototypes, present, lr, lam):
    """One client's SGD on CE + lam * mean_i present[y_i] ||f(x_i) - C_{y_i}||^2, by hand."""
    model = model_with(weights)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()
    for x, y in x_batches:
        with tf.GradientTape() as tape:
            f = model(x, training=True)
            d = tf.reduce_sum(tf.square(f - prototypes[y]), -1)
            loss = loss_fn(y, f) + lam * tf.reduce_mean(present[y] * d)
        grads = tape.gradient(loss, model.trainable_variables)
        for v, g in zip(model.trainable_variables, grads):
            v.assign_sub(lr * g)
    return [v.numpy() for v in model.trainable_variables]


def test_prototypes_and_objective_match_the_formulas(loss):
    data = client_arrays([9], seed=7)
    process = build_algorithm("FedProtoAvg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                              executor="local", **HP)
    state = process.set_model_weights(process.initialize(), ModelWeights(initial_weights(), []))
    # Round 1: no prototype yet, so the objective is the cross-entropy alone.
    batches = [(x, y) for x, y in to_datasets(data)[0].as_numpy_iterator()]
    want1 = sgd_with_prototypes(initial_weights(), batches, np.zeros((3, 3), np.float32),
                                np.zeros(3, np.float32), 0.1, 0.5)
    state = process.next(state, to_datasets(data)).state
    for got, want in zip(state["model"].trainable, want1):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    sums, counts = class_sums(want1, data)
    seen = counts > 0
    np.testing.assert_allclose(state["extras"]["prototypes"][seen],
                               sums[seen] / counts[seen, None], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(state["extras"]["present"], seen.astype(np.float32))
    # Round 2: the prototype term pulls the features towards them.
    want2 = sgd_with_prototypes(want1, batches, state["extras"]["prototypes"].astype(np.float32),
                                state["extras"]["present"].astype(np.float32), 0.1, 0.5)
    state = process.next(state, to_datasets(data)).state
    for got, want in zip(state["model"].trainable, want2):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_upload_and_broadcast_bytes_come_from_the_types(loss):
    process = build_algorithm("FedProtoAvg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                              executor="tff", **HP)
    n_weights = sum(w.size for w in tiny_model().get_weights())
    extras = 4 * (NUM_CLASSES * NUM_CLASSES + NUM_CLASSES)   # prototypes [3, 3] + present [3]
    assert process.broadcast_bytes_per_client == 4 * n_weights + extras
    # delta + weight, the sums [3, 3] and counts [3], the metrics (loss: 2 floats;
    # num_examples, num_batches: int64), the excluded flag.
    assert process.upload_bytes_per_client == 4 * n_weights + 4 + extras + 8 + 16 + 4
    form = tff.backends.mapreduce.get_map_reduce_form_for_computation(process.tff_process.next)
    assert form is not None
