"""Heads the algorithms put on a task model's ``features``: FedCB's frozen Gaussian classifier.

A task model with named outputs (``features``, ``logits``) can be given another
head: FedCB and FedETF replace its classifier by a frozen one
(:func:`frozen_classifier_model`, :class:`GaussianClassifier`; FedCB Eq. 5),
FedRoD adds a personal head (:mod:`tffre.algorithms.fedrod`). The Keras layers
live here, with the models; what the algorithms do with them lives in
:mod:`tffre.algorithms`.
"""

import numpy as np
import tensorflow as tf


def quadratic(h, var):
    """hᵀΣ_k h for every k: [b, K]; ``var`` [K, D] (diagonal) or [K, D, D]."""
    if len(var.shape) == 2:
        return tf.matmul(tf.square(h), var, transpose_b=True)
    return tf.einsum("bd,kde,be->bk", h, var, h)


def fedcb_logits(h, mu, var, tau):
    """τ·F(h, k) = τ·(h·μ_k + ½·τ·hᵀΣ_k h) (Eq. 5) for a batch of normalised h: [b, K]."""
    h = tf.convert_to_tensor(h, tf.float32)
    mu = tf.convert_to_tensor(mu, tf.float32)
    var = tf.convert_to_tensor(var, tf.float32)
    return tau * (tf.matmul(h, mu, transpose_b=True) + 0.5 * tau * quadratic(h, var))


@tf.keras.utils.register_keras_serializable(package="tffre")
class GaussianClassifier(tf.keras.layers.Layer):
    """The frozen FedCB classifier: logits τ·F(h, k) from fixed μ and Σ (non-trainable).

    Built from the arrays (``mu`` [K, D], ``var`` [K, D] or [K, D, D]); they are
    weights of the layer, not trainable, so they get no gradient and are never
    in a client's upload. ``use_variance=False``: the embedding-average ablation.
    """

    def __init__(self, mu, var, tau, use_variance=True, **kwargs):
        super().__init__(**kwargs)
        self.trainable = False
        self._mu_init = np.asarray(mu, np.float32)
        self._var_init = np.asarray(var, np.float32)
        self.tau = float(tau)
        self.use_variance = bool(use_variance)

    def build(self, input_shape):
        self.mu = self.add_weight("mu", shape=self._mu_init.shape, trainable=False,
                                  initializer=tf.constant_initializer(self._mu_init))
        self.var = self.add_weight("var", shape=self._var_init.shape, trainable=False,
                                   initializer=tf.constant_initializer(self._var_init))
        super().build(input_shape)

    def effective_var(self):
        """Σ as the classifier uses it (zeros in the embedding-average ablation)."""
        return self.var if self.use_variance else tf.zeros_like(self.var)

    def call(self, h):
        return fedcb_logits(h, self.mu, self.effective_var(), self.tau)

    def get_config(self):
        return {**super().get_config(), "mu": self._mu_init.tolist(),
                "var": self._var_init.tolist(), "tau": self.tau,
                "use_variance": self.use_variance}


def frozen_classifier_model(inputs, features, mu, var, tau, use_variance=True, name="fedcb"):
    """A model from ``inputs``: ``features`` → Dense(D) projection → L2 normalisation (h) →
    the frozen :class:`GaussianClassifier`; outputs ``{"features": h, "logits": τ·F(h, ·)}``.

    ``features`` is a Keras tensor computed from ``inputs`` (the task model's
    ``features`` output): the new model shares the task model's layers up to
    it, flat (so e.g. its "encoder" layer keeps its name for pretrained
    weights), and drops the task model's own classifier.
    """
    dim = int(np.asarray(mu).shape[-1])
    projected = tf.keras.layers.Dense(dim, name="projection")(features)
    h = tf.keras.layers.UnitNormalization(name="normalized_features")(projected)
    logits = GaussianClassifier(mu, var, tau, use_variance, name="classifier")(h)
    return tf.keras.Model(inputs, {"features": h, "logits": logits}, name=name)


def build_fedcb_model(extractor, mu, var, tau, use_variance=True, name="fedcb"):
    """extractor → Dense(D) projection → L2 normalisation ("features", h) → frozen classifier.

    ``extractor``: a Keras model from the input to a feature vector (e.g.
    :func:`tffre.models.resnet.resnet18` without its head). Returns a model with
    outputs ``{"features": h, "logits": τ·F(h, ·)}``.
    """
    inputs = tf.keras.Input(extractor.input_shape[1:], dtype=extractor.input.dtype)
    return frozen_classifier_model(inputs, extractor(inputs), mu, var, tau, use_variance, name)


def task_features(model):
    """(inputs, the ``features`` Keras tensor) of a task model with named outputs."""
    outputs = model.output
    if not isinstance(outputs, dict) or "features" not in outputs:
        raise ValueError(f"the task model {model.name!r} has no 'features' output, which a "
                         f"frozen classifier (FedCB, FedETF) or a personal head (FedRoD) "
                         f"is built on")
    return model.inputs if len(model.inputs) > 1 else model.inputs[0], outputs["features"]


def task_num_classes(model):
    """The number of classes of a task model (its ``logits`` width)."""
    outputs = model.output
    main = outputs.get("logits") if isinstance(outputs, dict) else outputs
    return int(main.shape[-1])
