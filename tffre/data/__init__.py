"""Datasets as :class:`FederatedData`: per-client numpy splits that convert to ``tf.data``."""

from tffre.data.federated import FederatedData

__all__ = ["FederatedData"]
