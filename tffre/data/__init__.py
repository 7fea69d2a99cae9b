"""Datasets as :class:`FederatedData`: per-client numpy splits that convert to ``tf.data``.

``FederatedData`` (TensorFlow) is imported on first use, so the loaders and
``tffre.data.check`` run without TensorFlow.
"""

__all__ = ["FederatedData"]


def __getattr__(name):
    # PEP 562: importing tffre.data.<loader> must not import TensorFlow.
    if name == "FederatedData":
        from tffre.data.federated import FederatedData
        globals()[name] = FederatedData
        return FederatedData
    raise AttributeError(f"module 'tffre.data' has no attribute {name!r}")
