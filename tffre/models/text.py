"""Text classifiers over token ids (index 0 = padding, masked).

Both are ordinary Keras models: use them with ``model.fit`` or as the
``model_fn`` of :func:`tffre.build_algorithm`.
"""

import dataclasses
from typing import Optional

import numpy as np
import tensorflow as tf


@tf.keras.utils.register_keras_serializable(package="tffre")
class WordVectors(tf.keras.initializers.Initializer):
    """Initialises an embedding with a given [vocab, dim] matrix (e.g. Word2Vec vectors).

    Unlike ``tf.keras.initializers.Constant(matrix)``, its config holds only
    the shape, not the values, so a saved ``.keras`` model config stays small:
    the saved weights carry the values. Rebuilt from a config it has no values
    and gives zeros, which loading the weights then overwrites.

    Args:
      matrix: the [vocab, dim] values; None only when rebuilt from a config.
      shape: the matrix shape, when ``matrix`` is None.
    """

    def __init__(self, matrix=None, shape=None):
        if matrix is not None:
            matrix = np.asarray(matrix, np.float32)
            if matrix.ndim != 2:
                raise ValueError(f"embedding matrix must be 2-D, got shape {matrix.shape}")
            shape = matrix.shape
        if shape is None:
            raise ValueError("give the embedding matrix or its shape")
        self.matrix = matrix
        self.shape = tuple(int(d) for d in shape)

    def __call__(self, shape, dtype=None, **kwargs):
        if tuple(shape) != self.shape:
            raise ValueError(f"embedding shape {tuple(shape)} does not match the word vector "
                             f"matrix {self.shape}")
        dtype = tf.as_dtype(dtype or tf.float32)
        if self.matrix is None:
            return tf.zeros(self.shape, dtype)
        # A constant tensor (no variable, no py_function), so it also works while TFF traces
        # model_fn in a graph.
        return tf.constant(self.matrix, dtype=dtype)

    def get_config(self):
        return {"shape": list(self.shape)}


def _embedding(embedding_matrix, vocab_size, embedding_dim, trainable, seed, name):
    if embedding_matrix is not None:
        init = WordVectors(embedding_matrix)
        vocab_size, embedding_dim = init.shape
    else:
        if vocab_size is None or embedding_dim is None:
            raise ValueError("give embedding_matrix, or vocab_size and embedding_dim")
        init = tf.keras.initializers.RandomUniform(-0.05, 0.05, seed=seed)
    return tf.keras.layers.Embedding(vocab_size, embedding_dim, embeddings_initializer=init,
                                     mask_zero=True, trainable=trainable, name=name)


def _cpu_kernel_only(*layers):
    """Without a GPU, the LSTM layers run Keras's own step (``LSTMCell``) instead of its
    backend selection.

    Inside a ``tf.function``, Keras 2.14's LSTM traces two implementations, the standard
    one and cuDNN's, and registers both (with their gradients) for Grappler to pick at run
    time. Without a GPU, Grappler always picks the standard one, the same matmuls and
    activations as the cell's step (and, without dropout, the same numbers: see
    tests/tffre/models/test_text_models.py). Tracing only the step halves the trace of a
    client's training, which every run, site and worker process pays. TFF's executor traces
    ``model_fn`` in a graph, where Keras already takes the cell's step. With a GPU, the
    selection stays: cuDNN is what makes the LSTM fast there."""
    if tf.config.list_logical_devices("GPU"):
        return
    for layer in layers:
        # Keras's own switch (keras/src/layers/rnn/lstm.py), set in its __init__ from the
        # layer's arguments; there is no public option for it.
        layer._could_use_gpu_kernel = False


@dataclasses.dataclass(frozen=True)
class LSTMConfig:
    """The architecture of :func:`lstm_classifier` (a model driven by its config).

    Attributes:
      num_classes: output classes.
      max_len: padded sequence length.
      vocab_size, embedding_dim: the random embedding's shape, when no embedding matrix is
        given to :func:`lstm_classifier` (its matrix's shape wins otherwise).
      trainable_embedding: fine-tune the embedding (True) or freeze it.
      lstm_units: LSTM width.
      bidirectional: wrap the LSTM in ``Bidirectional``.
      unroll: unroll the time loop. Faster in plain Keras for short inputs,
        but slower under TFF, whose worker instantiates the (larger) graph for
        every client call.
      seed: seeds the initialisers, so every call builds the same weights.
      named_outputs: return ``{"features": the LSTM state, "logits": Dense "classifier"}``
        (no softmax; train with ``from_logits=True``) for the algorithms that read
        the features or replace the head (FedCB, FedETF, FedRoD); else the softmax
        probabilities.
      name: the Keras model's name.
    """
    num_classes: int
    max_len: int
    vocab_size: Optional[int] = None
    embedding_dim: Optional[int] = None
    trainable_embedding: bool = True
    lstm_units: int = 64
    bidirectional: bool = False
    unroll: bool = False
    seed: int = 0
    named_outputs: bool = False
    name: str = "lstm_classifier"


def lstm_classifier(config, embedding_matrix=None):
    """Embedding (Word2Vec-initialised) -> LSTM (optionally bidirectional) -> dense softmax.

    Args:
      config: the :class:`LSTMConfig`.
      embedding_matrix: [vocab, dim] initial vectors (e.g. from
        :meth:`tffre.text.Vocabulary.embedding_matrix`); else random with the config's
        ``vocab_size`` x ``embedding_dim``.
    """
    c, seed = config, config.seed
    inputs = tf.keras.Input((c.max_len,), dtype=tf.int32, name="tokens")
    x = _embedding(embedding_matrix, c.vocab_size, c.embedding_dim, c.trainable_embedding,
                   seed, "embedding")(inputs)
    lstm = tf.keras.layers.LSTM(
        c.lstm_units, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed + 1),
        recurrent_initializer=tf.keras.initializers.Orthogonal(seed=seed + 2),
        unroll=c.unroll, name="lstm")
    if c.bidirectional:
        lstm = tf.keras.layers.Bidirectional(lstm, name="bilstm")
        _cpu_kernel_only(lstm.forward_layer, lstm.backward_layer)
    else:
        _cpu_kernel_only(lstm)
    x = lstm(x)
    if c.named_outputs:
        logits = tf.keras.layers.Dense(
            c.num_classes, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed + 3),
            name="classifier")(x)
        return tf.keras.Model(inputs, {"features": x, "logits": logits}, name=c.name)
    outputs = tf.keras.layers.Dense(
        c.num_classes, activation="softmax",
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed + 3), name="softmax")(x)
    return tf.keras.Model(inputs, outputs, name=c.name)


def mean_embedding_logistic(num_classes, max_len, *, embedding_matrix=None, vocab_size=None,
                            embedding_dim=None, trainable_embedding=False,
                            name="mean_vector_logistic"):
    """Logistic regression over the mean word vector of the sentence (FLCMC Table 9's model).

    The padded positions are masked out of the mean; the embedding is frozen
    by default, so only the softmax layer learns. Give ``embedding_matrix``,
    or ``vocab_size`` and ``embedding_dim`` and set the "embedding" layer's
    weights afterwards (how federated runs load pretrained vectors).
    """
    inputs = tf.keras.Input((max_len,), dtype=tf.int32, name="tokens")
    x = _embedding(embedding_matrix, vocab_size, embedding_dim, trainable_embedding, 0,
                   "embedding")(inputs)
    x = tf.keras.layers.GlobalAveragePooling1D(name="mean_vector")(x)
    outputs = tf.keras.layers.Dense(num_classes, activation="softmax", kernel_initializer="zeros",
                                    name="softmax")(x)
    return tf.keras.Model(inputs, outputs, name=name)
