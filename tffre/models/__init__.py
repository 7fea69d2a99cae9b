"""Keras models. Each is an ordinary ``tf.keras.Model`` usable with or without TFF."""

from tffre.models.logistic import logistic_regression
from tffre.models.text import LSTMConfig, lstm_classifier, mean_embedding_logistic

# Relation extraction (tffre.models.relation_model) is exported lazily: its module is only imported
# when one of these names is first used.
_LAZY = {name: "tffre.models.relation_model" for name in (
    "EncoderFolderError", "REModelConfig", "build_re_model", "check_encoder_folder",
    "default_encoder_dir", "load_pretrained_encoder")}
_LAZY["resnet18"] = "tffre.models.resnet"

__all__ = ["LSTMConfig", "logistic_regression", "lstm_classifier", "mean_embedding_logistic", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
