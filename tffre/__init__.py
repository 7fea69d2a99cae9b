"""tffre: federated learning for medical NLP on TensorFlow Federated.

The FLCMC algorithm family (FedAvg, FedProx, FedAtt, FedPA and their Adam
variants) is built from one registry by :func:`build_algorithm`.

``import tffre`` is cheap: TensorFlow and TensorFlow Federated are imported
when a name that needs them is first used. Importing tffre registers the exit
hook that stops TFF's ``worker_binary`` (see :mod:`tffre.runtime`).
"""

import importlib

from tffre import runtime as _runtime  # noqa: F401  (registers the worker exit hook)

__version__ = "0.1.0"
__all__ = ["ALGORITHMS", "build_algorithm", "valid_algorithm_names"]

_LAZY = {"ALGORITHMS": "tffre.registry", "build_algorithm": "tffre.builder",
         "valid_algorithm_names": "tffre.registry"}


def __getattr__(name):
    # PEP 562: load the TFF-backed API on first use.
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tffre' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
