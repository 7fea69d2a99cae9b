"""LSTM and mean-vector logistic models: shapes, masking, initialisation."""

import numpy as np
import pytest
import tensorflow as tf

from tffre.models import LSTMConfig, lstm_classifier, mean_embedding_logistic

MATRIX = np.random.RandomState(0).randn(30, 8).astype(np.float32)
MATRIX[0] = 0
MAKERS = [
    lambda: lstm_classifier(LSTMConfig(3, 10, lstm_units=4), MATRIX),
    lambda: lstm_classifier(LSTMConfig(3, 10, lstm_units=4, bidirectional=True), MATRIX),
    lambda: mean_embedding_logistic(3, 10, embedding_matrix=MATRIX),
]


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_shapes_and_softmax(bidirectional):
    model = lstm_classifier(LSTMConfig(5, 12, lstm_units=6, bidirectional=bidirectional), MATRIX)
    out = model(np.random.RandomState(1).randint(1, 30, (4, 12)).astype(np.int32)).numpy()
    assert out.shape == (4, 5)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("make", MAKERS)
def test_padding_is_masked(make):
    model = make()
    if len(model.trainable_variables) and "logistic" in model.name:
        model.layers[-1].kernel.assign(np.random.RandomState(2).randn(8, 3).astype(np.float32))
    short = np.array([[5, 7, 9, 0, 0, 0, 0, 0, 0, 0]], np.int32)
    # Same tokens; the padded tail's embedding rows changed: a masked model must not notice.
    model.get_layer("embedding").embeddings.assign(
        np.vstack([np.full((1, 8), 9.0, np.float32), MATRIX[1:]]))
    a = model(short).numpy()
    model.get_layer("embedding").embeddings.assign(MATRIX)
    b = model(short).numpy()
    np.testing.assert_allclose(a, b, rtol=1e-5)
    unmasked = np.array([[5, 7, 9, 3, 3, 3, 3, 3, 3, 3]], np.int32)
    assert not np.allclose(model(unmasked).numpy(), b)


def test_embedding_initialised_from_word2vec_and_freezable():
    model = lstm_classifier(LSTMConfig(2, 6, trainable_embedding=False, lstm_units=3), MATRIX)
    emb = model.get_layer("embedding")
    np.testing.assert_array_equal(emb.embeddings.numpy(), MATRIX)
    assert emb.embeddings.ref() not in {v.ref() for v in model.trainable_variables}
    logreg = mean_embedding_logistic(2, 6, embedding_matrix=MATRIX)
    assert len(logreg.trainable_variables) == 2   # only W and b learn


def test_same_seed_same_weights():
    config = LSTMConfig(2, 6, vocab_size=20, embedding_dim=4, lstm_units=3, seed=5)
    a = lstm_classifier(config).get_weights()
    b = lstm_classifier(config).get_weights()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_lstm_trains_with_fit_and_our_optimizer():
    from optimizers import PAdam
    rng = np.random.RandomState(0)
    x = rng.randint(1, 30, (64, 6)).astype(np.int32)
    y = (x[:, 0] > 15).astype(np.int32)
    model = lstm_classifier(LSTMConfig(2, 6, lstm_units=8), MATRIX)
    opt = PAdam(0.01, mu=0.01)
    opt.set_anchor([v.numpy() for v in model.trainable_variables])
    model.compile(opt, "sparse_categorical_crossentropy", metrics=["accuracy"])
    hist = model.fit(x, y, epochs=20, batch_size=16, verbose=0).history
    assert hist["accuracy"][-1] > 0.8


@pytest.mark.parametrize("make", MAKERS)
def test_config_holds_the_shape_not_the_vectors(make):
    import json
    model = make()
    np.testing.assert_array_equal(model.get_layer("embedding").embeddings.numpy(), MATRIX)
    init = model.get_layer("embedding").get_config()["embeddings_initializer"]
    assert init["config"] == {"shape": [30, 8]}
    assert len(json.dumps(model.get_config())) < 5000   # Constant(matrix) stored every value


def test_saved_keras_file_round_trip(tmp_path):
    model = lstm_classifier(LSTMConfig(3, 10, lstm_units=4), MATRIX)
    model.set_weights([w + 0.1 for w in model.get_weights()])
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = tf.keras.models.load_model(path)
    x = np.random.RandomState(3).randint(0, 30, (5, 10)).astype(np.int32)
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), atol=1e-6)


def test_initializer_from_config_and_shape_check():
    from tffre.models.text import WordVectors
    init = WordVectors(MATRIX)
    np.testing.assert_array_equal(init((30, 8)).numpy(), MATRIX)
    rebuilt = WordVectors.from_config(init.get_config())
    np.testing.assert_array_equal(rebuilt((30, 8)).numpy(), np.zeros((30, 8)))
    with pytest.raises(ValueError, match="does not match"):
        init((31, 8))


def test_builds_in_a_graph_like_tff_tracing():
    # TFF calls model_fn while tracing a graph: the initializer must not need eager values.
    with tf.Graph().as_default():
        model = lstm_classifier(LSTMConfig(2, 6, lstm_units=3), MATRIX)
        emb = model.get_layer("embedding").embeddings
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(emb), MATRIX)


def lstm_layers(model):
    """The model's LSTM layers, a Bidirectional's two included."""
    found = []
    for layer in model.layers:
        found += [layer.forward_layer, layer.backward_layer] if hasattr(
            layer, "forward_layer") else [layer] if isinstance(layer, tf.keras.layers.LSTM) else []
    return found


def train_in_a_function(model, steps=4):
    """Weights after ``steps`` SGD steps in one tf.function (as a client's loop runs them) on
    padded batches, and the names of the functions the trace defined."""
    rng = np.random.RandomState(7)
    x = rng.randint(1, 30, (6, 10)).astype(np.int32)
    x[:, 6:] = 0
    x[2, 3:] = 0
    y = rng.randint(0, 3, 6)
    opt = tf.keras.optimizers.SGD(0.5)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x)))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))

    functions = [f.signature.name for f in step.get_concrete_function(
        tf.TensorSpec([None, 10], tf.int32), tf.TensorSpec([None], tf.int64)
    ).graph.as_graph_def().library.function]
    for _ in range(steps):
        step(x, y)
    return [w.numpy() for w in model.weights], functions


@pytest.mark.parametrize("bidirectional", [False, True])
def test_without_a_gpu_the_lstm_traces_one_implementation_with_keras_numbers(bidirectional):
    """Without a GPU, tffre's LSTM takes Keras's cell step in a tf.function, not the backend
    selection (which traces cuDNN's implementation as well as the standard one). The
    reference is Keras's own selection on the same weights and batches: the same numbers."""
    if tf.config.list_logical_devices("GPU"):
        pytest.skip("with a GPU the backend selection stays")
    make = lambda: lstm_classifier(  # noqa: E731
        LSTMConfig(3, 10, lstm_units=4, bidirectional=bidirectional, seed=5), MATRIX)
    ours = make()
    initial = [w.numpy() for w in ours.weights]
    keras_own = make()
    for layer in lstm_layers(keras_own):
        layer._could_use_gpu_kernel = True   # what Keras sets from these arguments
    got, got_functions = train_in_a_function(ours)
    want, want_functions = train_in_a_function(keras_own)
    # The reference traced both implementations; ours neither, only the cell's loop.
    for name in ("gpu_lstm_with_fallback", "standard_lstm"):
        assert any(name in f for f in want_functions), want_functions
        assert not any(name in f for f in got_functions), got_functions
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    assert max(np.abs(g - b).max() for g, b in zip(got, initial)) > 1e-3   # the steps trained
