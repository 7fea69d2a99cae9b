"""Client work with a Keras optimizer equals a plain Keras training loop, in both loop forms."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tiny import INPUT_SPEC, client_arrays, tiny_model, to_datasets
from optimizers import PAdam, PGD, SelfAdam
from tffre import build_algorithm
from tffre.builder import ModelRecipe
from tffre.client_work import ClientTrainer

ModelWeights = tff.learning.models.ModelWeights


def plain_keras_update(optimizer, initial, dataset, loss, num_epochs, num_iters, model_fn=tiny_model):
    """The compute floor: Keras model, GradientTape, optimizer.apply_gradients."""
    model = model_fn()
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


def train_one(make_opt, initial, dataset, loss, loop, model_fn=tiny_model, spec=INPUT_SPEC, **kw):
    """One client's upload from an eager slot, in the given loop form."""
    trainer = ClientTrainer(ModelRecipe(model_fn, loss, spec).client_model_fn(), make_opt,
                            **kw)
    slot = trainer.slot()
    broadcast = collections.OrderedDict(model=ModelWeights(trainable=initial, non_trainable=[]),
                                        optimizer_state=[])
    run = {"steps": slot.train_steps, "while": tf.function(slot.train_while),
           "reduce": tf.function(slot.train)}[loop]
    return run(broadcast, dataset)


@pytest.mark.parametrize("make_opt,num_epochs,num_iters", [
    (lambda: SelfAdam(0.01), 2, None),
    (lambda: PAdam(0.01, mu=0.5), 2, 5),
    (lambda: PGD(0.1, mu=0.5), 1, None),
    (lambda: tf.keras.optimizers.Adam(0.01), 3, 7),
])
@pytest.mark.parametrize("loop", ["while", "steps", "reduce"])
def test_client_update_equals_plain_keras_loop(make_opt, num_epochs, num_iters, loop, loss):
    rng = np.random.RandomState(3)
    # Start away from the model's initialisation, so the anchor is a real input.
    initial = [w + 0.1 * rng.randn(*w.shape).astype(np.float32) for w in tiny_model().get_weights()]
    for (x, y), ds in zip(client_arrays([10, 7]), to_datasets(client_arrays([10, 7]))):
        up = train_one(make_opt, initial, ds, loss, loop, num_epochs=num_epochs,
                       num_iters=num_iters)
        want = plain_keras_update(make_opt(), initial, ds, loss, num_epochs, num_iters)
        for got, exp in zip(up["model"]["update"], want):
            np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-6)
        assert up["model"]["weight"] == len(y)   # Eq. 6: n_k, the client's dataset size
        assert up["excluded"] == 0


@pytest.mark.parametrize("client_weighting", ["dataset_size", "processed", "uniform"])
def test_client_weighting_options(client_weighting, loss):
    """Eq. 6's n_k by default; TFF's examples-processed count and uniform as options."""
    initial = tiny_model().get_weights()
    # Sizes 6 and 30 in batches of 4: 3 capped steps process 4+2+4 = 10 and 4+4+4 = 12.
    got = [train_one(lambda: tf.keras.optimizers.SGD(0.1), initial, ds, loss, "while",
                     num_epochs=10, num_iters=3, client_weighting=client_weighting)
           for ds in to_datasets(client_arrays([6, 30]))]
    want = {"dataset_size": [6, 30], "processed": [10, 12], "uniform": [1, 1]}[client_weighting]
    assert [float(u["model"]["weight"]) for u in got] == want
    assert [int(u["metrics"]["num_examples"][0]) for u in got] == [10, 12]


@pytest.mark.parametrize("loop", ["while", "steps", "reduce"])
def test_one_pass_counts_in_every_loop_form(loop, loss):
    """n_k and the label counts over one pass: tuple and dict batches, a short last batch, and
    an empty dataset (hand-counted)."""
    y = np.array([0, 2, 2, 1, 2, 0, 2], np.int32)
    x = np.zeros((7, 3), np.float32)
    trainer = ClientTrainer(ModelRecipe(tiny_model, loss, INPUT_SPEC).client_model_fn(),
                            lambda: tf.keras.optimizers.SGD(0.1))
    slot = trainer.slot()
    assert slot.layout.num_classes == 3   # tiny_model's; label 3 is still counted (maxlength)
    size = tf.function(lambda ds: slot.dataset_size(ds, loop))
    counts = tf.function(lambda ds: slot.label_counts(ds, loop))
    for ds in (tf.data.Dataset.from_tensor_slices((x, y)).batch(3),
               tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(3)):
        assert int(size(ds)) == 7
        np.testing.assert_array_equal(counts(ds).numpy(), [2, 1, 4])
        empty = ds.take(0)
        assert int(size(empty)) == 0
        np.testing.assert_array_equal(counts(empty).numpy(), [0, 0, 0])


def test_unknown_client_weighting(loss):
    with pytest.raises(ValueError, match="client_weighting must be one of dataset_size"):
        ClientTrainer(ModelRecipe(tiny_model, loss, INPUT_SPEC).client_model_fn(),
                      lambda: tf.keras.optimizers.SGD(0.1), client_weighting="examples")


@pytest.mark.parametrize("executor", ["tff", "local"])
def test_kept_optimizer_state_continues_adam_across_rounds(executor, loss):
    """With one client, keeping the state makes two rounds equal one long Keras run."""
    initial = tiny_model().get_weights()
    ds = to_datasets(client_arrays([12]))[0]

    def two_rounds(keep):
        process = build_algorithm("fedavgs", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                                  learning_rate=0.05, num_epochs=1, keep_optimizer_state=keep,
                                  executor=executor)
        state = process.set_model_weights(process.initialize(), ModelWeights(initial, []))
        for _ in range(2):
            state = process.next(state, [ds]).state
        return process.get_model_weights(state).trainable, state

    weights, state = two_rounds(True)
    # The same 6 steps without a reset, in plain Keras.
    want = plain_keras_update(SelfAdam(0.05), initial, ds, loss, num_epochs=2, num_iters=None)
    for w0, w, u in zip(initial, weights, want):
        np.testing.assert_allclose(w0 - w, u, rtol=1e-4, atol=1e-5)
    assert state["optimizer_state"][0] == 6  # the step count survived both rounds
    reset, _ = two_rounds(False)
    assert not np.allclose(reset[0], weights[0], atol=1e-5)


def embedding_model():
    return tf.keras.Sequential([
        tf.keras.Input((4,), dtype=tf.int32),
        tf.keras.layers.Embedding(20, 3, embeddings_initializer=tf.keras.initializers.RandomUniform(seed=3)),
        tf.keras.layers.GlobalAveragePooling1D(),
        tf.keras.layers.Dense(2, activation="softmax",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(seed=4))])


@pytest.mark.parametrize("make_opt", [lambda: SelfAdam(0.05), lambda: PAdam(0.05, mu=0.2)])
@pytest.mark.parametrize("loop", ["while", "steps", "reduce"])
def test_embedding_gradients_in_client_work(make_opt, loop, loss):
    """Embedding layers give tf.IndexedSlices gradients; the client update still equals Keras."""
    rng = np.random.RandomState(0)
    x = rng.randint(0, 20, (9, 4)).astype(np.int32)
    y = (x[:, 0] > 9).astype(np.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(3)
    initial = embedding_model().get_weights()
    up = train_one(make_opt, initial, ds, loss, loop, model_fn=embedding_model,
                   spec=ds.element_spec, num_epochs=2)

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
    for got, w0, w in zip(up["model"]["update"], initial, model.trainable_variables):
        np.testing.assert_allclose(got, w0 - w.numpy(), rtol=1e-5, atol=1e-6)
