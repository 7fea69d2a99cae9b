"""Multinomial logistic regression, the FLCMC paper's synthetic-data model (section 5.1)."""

import tensorflow as tf


def logistic_regression(num_features, num_classes, *, kernel_initializer="zeros", name="logistic"):
    """Returns an uncompiled Keras model: softmax(x W + b).

    Args:
      num_features: input dimension.
      num_classes: number of classes.
      kernel_initializer: initializer for W (zeros, as in the FedProx reference).
      name: model name.
    """
    inputs = tf.keras.Input(shape=(num_features,), dtype=tf.float32, name="x")
    outputs = tf.keras.layers.Dense(num_classes, activation="softmax",
                                    kernel_initializer=kernel_initializer,
                                    bias_initializer="zeros", name="softmax")(inputs)
    return tf.keras.Model(inputs, outputs, name=name)
