"""Keras models. Each is an ordinary ``tf.keras.Model`` usable with or without TFF."""

from tffre.models.logistic import logistic_regression

__all__ = ["logistic_regression"]
