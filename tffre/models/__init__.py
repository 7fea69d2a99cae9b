"""Keras models. Each is an ordinary ``tf.keras.Model`` usable with or without TFF."""

from tffre.models.logistic import logistic_regression
from tffre.models.text import lstm_classifier, mean_embedding_logistic

__all__ = ["logistic_regression", "lstm_classifier", "mean_embedding_logistic"]
