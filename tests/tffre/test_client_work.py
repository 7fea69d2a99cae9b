"""Our Keras-optimizer client work equals a plain Keras training loop."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tiny import INPUT_SPEC, client_arrays, tiny_model, to_datasets
from optimizers import PAdam, PGD, SelfAdam
from tffre.algorithms import keras_model_fn_to_tff
from tffre.client_work import build_keras_optimizer_client_work


def plain_keras_update(optimizer, initial, dataset, loss, num_epochs, num_iters):
    """The compute floor: Keras model, GradientTape, optimizer.apply_gradients."""
    model = tiny_model()
    model.set_weights(initial)
    if hasattr(optimizer, "set_anchor"):
        optimizer.set_anchor(initial)
    steps = 0
    for _ in range(num_epochs):
        for x, y in dataset:
            if num_iters is not None and steps >= num_iters:
                break
            with tf.GradientTape() as tape:
                batch_loss = loss(y, model(x, training=True))
            grads = tape.gradient(batch_loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            steps += 1
    return [a - b.numpy() for a, b in zip(initial, model.trainable_variables)]


@pytest.mark.parametrize("make_opt,num_epochs,num_iters", [
    (lambda: SelfAdam(0.01), 2, None),
    (lambda: PAdam(0.01, mu=0.5), 2, 5),
    (lambda: PGD(0.1, mu=0.5), 1, None),
    (lambda: tf.keras.optimizers.Adam(0.01), 3, 7),
])
def test_client_update_equals_plain_keras_loop(make_opt, num_epochs, num_iters, loss):
    tff_model_fn = keras_model_fn_to_tff(tiny_model, loss=loss, input_spec=INPUT_SPEC)
    work = build_keras_optimizer_client_work(tff_model_fn, make_opt, num_epochs=num_epochs,
                                             num_iters=num_iters)
    rng = np.random.RandomState(3)
    # Start away from the model's initialisation, so the anchor is a real input.
    initial = [w + 0.1 * rng.randn(*w.shape).astype(np.float32) for w in tiny_model().get_weights()]
    weights = tff.learning.models.ModelWeights(trainable=initial, non_trainable=[])
    arrays = client_arrays([10, 7])
    datasets = to_datasets(arrays)
    out = work.next(work.initialize(), [weights, weights], datasets)
    for result, (x, y), ds in zip(out.result, arrays, datasets):
        want = plain_keras_update(make_opt(), initial, ds, loss, num_epochs, num_iters)
        for got, exp in zip(result.update, want):
            np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-6)
        assert result.update_weight == len(y)   # Eq. 6: n_k, the client's dataset size
    assert out.measurements["num_excluded_clients"] == 0


@pytest.mark.parametrize("client_weighting", ["dataset_size", "processed", "uniform"])
def test_client_weighting_options(client_weighting, loss):
    """Eq. 6's n_k by default; TFF's examples-processed count and uniform as options."""
    tff_model_fn = keras_model_fn_to_tff(tiny_model, loss=loss, input_spec=INPUT_SPEC)
    work = build_keras_optimizer_client_work(
        tff_model_fn, lambda: tf.keras.optimizers.SGD(0.1), num_epochs=10, num_iters=3,
        client_weighting=client_weighting)
    weights = tff.learning.models.ModelWeights(trainable=tiny_model().get_weights(),
                                               non_trainable=[])
    # Sizes 6 and 30 in batches of 4: 3 capped steps process 4+2+4 = 10 and 4+4+4 = 12.
    out = work.next(work.initialize(), [weights, weights], to_datasets(client_arrays([6, 30])))
    want = {"dataset_size": [6, 30], "processed": [10, 12], "uniform": [1, 1]}[client_weighting]
    assert [float(r.update_weight) for r in out.result] == want
    assert out.measurements["train"]["num_examples"] == 22


def test_unknown_client_weighting(loss):
    tff_model_fn = keras_model_fn_to_tff(tiny_model, loss=loss, input_spec=INPUT_SPEC)
    with pytest.raises(ValueError, match="client_weighting must be one of dataset_size"):
        build_keras_optimizer_client_work(tff_model_fn, lambda: tf.keras.optimizers.SGD(0.1),
                                          client_weighting="examples")


def test_kept_optimizer_state_continues_adam_across_rounds(loss):
    """With one client, keeping the state makes two rounds equal one long Keras run."""
    tff_model_fn = keras_model_fn_to_tff(tiny_model, loss=loss, input_spec=INPUT_SPEC)
    work = build_keras_optimizer_client_work(tff_model_fn, lambda: SelfAdam(0.05), num_epochs=1,
                                             keep_optimizer_state=True)
    initial = tiny_model().get_weights()
    ds = to_datasets(client_arrays([12]))[0]
    state = work.initialize()
    weights = initial
    for _ in range(2):
        out = work.next(state, [tff.learning.models.ModelWeights(weights, [])], [ds])
        state = out.state
        weights = [w - u for w, u in zip(weights, out.result[0].update)]
    # The same 6 steps without a reset, in plain Keras.
    want = plain_keras_update(SelfAdam(0.05), initial, ds, loss, num_epochs=2, num_iters=None)
    for w0, w, u in zip(initial, weights, want):
        np.testing.assert_allclose(w0 - w, u, rtol=1e-4, atol=1e-5)
    assert state[0] == 6  # the step count survived both rounds
    reset = build_keras_optimizer_client_work(tff_model_fn, lambda: SelfAdam(0.05), num_epochs=1)
    s = reset.initialize()
    w_reset = initial
    for _ in range(2):
        u = reset.next(s, [tff.learning.models.ModelWeights(w_reset, [])], [ds]).result[0].update
        w_reset = [w - d for w, d in zip(w_reset, u)]
    assert not np.allclose(w_reset[0], weights[0], atol=1e-5)


def embedding_model():
    return tf.keras.Sequential([
        tf.keras.Input((4,), dtype=tf.int32),
        tf.keras.layers.Embedding(20, 3, embeddings_initializer=tf.keras.initializers.RandomUniform(seed=3)),
        tf.keras.layers.GlobalAveragePooling1D(),
        tf.keras.layers.Dense(2, activation="softmax",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(seed=4))])


@pytest.mark.parametrize("make_opt", [lambda: SelfAdam(0.05), lambda: PAdam(0.05, mu=0.2)])
def test_embedding_gradients_in_client_work(make_opt, loss):
    """Embedding layers give tf.IndexedSlices gradients; the TFF client update still equals Keras."""
    rng = np.random.RandomState(0)
    x = rng.randint(0, 20, (9, 4)).astype(np.int32)
    y = (x[:, 0] > 9).astype(np.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(3)
    spec = ds.element_spec
    tff_model_fn = keras_model_fn_to_tff(embedding_model, loss=loss, input_spec=spec)
    work = build_keras_optimizer_client_work(tff_model_fn, make_opt, num_epochs=2)
    initial = embedding_model().get_weights()
    out = work.next(work.initialize(), [tff.learning.models.ModelWeights(initial, [])], [ds])

    model = embedding_model()
    model.set_weights(initial)
    opt = make_opt()
    if hasattr(opt, "set_anchor"):
        opt.set_anchor(initial)
    for xb, yb in ds.repeat(2):
        with tf.GradientTape() as tape:
            batch_loss = loss(yb, model(xb, training=True))
        grads = tape.gradient(batch_loss, model.trainable_variables)
        assert isinstance(grads[0], tf.IndexedSlices)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    for got, w0, w in zip(out.result[0].update, initial, model.trainable_variables):
        np.testing.assert_allclose(got, w0 - w.numpy(), rtol=1e-5, atol=1e-6)
