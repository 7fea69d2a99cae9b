"""LSTM and mean-vector logistic models: shapes, masking, initialisation."""

import numpy as np
import pytest
import tensorflow as tf

from tffre.models import lstm_classifier, mean_embedding_logistic

MATRIX = np.random.RandomState(0).randn(30, 8).astype(np.float32)
MATRIX[0] = 0
MAKERS = [
    lambda: lstm_classifier(3, 10, embedding_matrix=MATRIX, lstm_units=4),
    lambda: lstm_classifier(3, 10, embedding_matrix=MATRIX, lstm_units=4, bidirectional=True),
    lambda: mean_embedding_logistic(3, 10, embedding_matrix=MATRIX),
]


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_shapes_and_softmax(bidirectional):
    model = lstm_classifier(5, 12, embedding_matrix=MATRIX, lstm_units=6, bidirectional=bidirectional)
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
    model = lstm_classifier(2, 6, embedding_matrix=MATRIX, trainable_embedding=False, lstm_units=3)
    emb = model.get_layer("embedding")
    np.testing.assert_array_equal(emb.embeddings.numpy(), MATRIX)
    assert emb.embeddings.ref() not in {v.ref() for v in model.trainable_variables}
    logreg = mean_embedding_logistic(2, 6, embedding_matrix=MATRIX)
    assert len(logreg.trainable_variables) == 2   # only W and b learn


def test_same_seed_same_weights():
    a = lstm_classifier(2, 6, vocab_size=20, embedding_dim=4, lstm_units=3, seed=5).get_weights()
    b = lstm_classifier(2, 6, vocab_size=20, embedding_dim=4, lstm_units=3, seed=5).get_weights()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_lstm_trains_with_fit_and_our_optimizer():
    from optimizers import PAdam
    rng = np.random.RandomState(0)
    x = rng.randint(1, 30, (64, 6)).astype(np.int32)
    y = (x[:, 0] > 15).astype(np.int32)
    model = lstm_classifier(2, 6, embedding_matrix=MATRIX, lstm_units=8)
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
    model = lstm_classifier(3, 10, embedding_matrix=MATRIX, lstm_units=4)
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
        model = lstm_classifier(2, 6, embedding_matrix=MATRIX, lstm_units=3)
        emb = model.get_layer("embedding").embeddings
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(emb), MATRIX)
