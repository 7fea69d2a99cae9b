"""Text classifiers over token ids (index 0 = padding, masked).

Both are ordinary Keras models: use them with ``model.fit`` or as the
``model_fn`` of :func:`tffre.build_algorithm`.
"""

import numpy as np
import tensorflow as tf


def _embedding(embedding_matrix, vocab_size, embedding_dim, trainable, seed, name):
    if embedding_matrix is not None:
        embedding_matrix = np.asarray(embedding_matrix, np.float32)
        vocab_size, embedding_dim = embedding_matrix.shape
        init = tf.keras.initializers.Constant(embedding_matrix)
    else:
        if vocab_size is None or embedding_dim is None:
            raise ValueError("give embedding_matrix, or vocab_size and embedding_dim")
        init = tf.keras.initializers.RandomUniform(-0.05, 0.05, seed=seed)
    return tf.keras.layers.Embedding(vocab_size, embedding_dim, embeddings_initializer=init,
                                     mask_zero=True, trainable=trainable, name=name)


def lstm_classifier(num_classes, max_len, *, embedding_matrix=None, vocab_size=None,
                    embedding_dim=None, trainable_embedding=True, lstm_units=64,
                    bidirectional=False, unroll=False, seed=0, name="lstm_classifier"):
    """Embedding (Word2Vec-initialised) -> LSTM (optionally bidirectional) -> dense softmax.

    Args:
      num_classes: output classes.
      max_len: padded sequence length.
      embedding_matrix: [vocab, dim] initial vectors (e.g. from
        :meth:`tffre.text.Vocabulary.embedding_matrix`); else random with
        ``vocab_size`` x ``embedding_dim``.
      trainable_embedding: fine-tune the embedding (True) or freeze it.
      lstm_units: LSTM width.
      bidirectional: wrap the LSTM in ``Bidirectional``.
      unroll: unroll the time loop. Faster in plain Keras for short inputs,
        but slower under TFF, whose worker instantiates the (larger) graph for
        every client call.
      seed: seeds the initialisers, so every call builds the same weights.
    """
    inputs = tf.keras.Input((max_len,), dtype=tf.int32, name="tokens")
    x = _embedding(embedding_matrix, vocab_size, embedding_dim, trainable_embedding, seed,
                   "embedding")(inputs)
    lstm = tf.keras.layers.LSTM(
        lstm_units, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed + 1),
        recurrent_initializer=tf.keras.initializers.Orthogonal(seed=seed + 2),
        unroll=unroll, name="lstm")
    x = tf.keras.layers.Bidirectional(lstm, name="bilstm")(x) if bidirectional else lstm(x)
    outputs = tf.keras.layers.Dense(
        num_classes, activation="softmax",
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed + 3), name="softmax")(x)
    return tf.keras.Model(inputs, outputs, name=name)


def mean_embedding_logistic(num_classes, max_len, *, embedding_matrix, trainable_embedding=False,
                            name="mean_vector_logistic"):
    """Logistic regression over the mean word vector of the sentence (FLCMC Table 9's model).

    The padded positions are masked out of the mean; the embedding is frozen
    by default, so only the softmax layer learns.
    """
    inputs = tf.keras.Input((max_len,), dtype=tf.int32, name="tokens")
    x = _embedding(embedding_matrix, None, None, trainable_embedding, 0, "embedding")(inputs)
    x = tf.keras.layers.GlobalAveragePooling1D(name="mean_vector")(x)
    outputs = tf.keras.layers.Dense(num_classes, activation="softmax", kernel_initializer="zeros",
                                    name="softmax")(x)
    return tf.keras.Model(inputs, outputs, name=name)
