"""Federated algorithms: :func:`build_algorithm` and each algorithm's definition.

* :mod:`tffre.definition`: the :class:`Definition` interface (the
  six parts of an algorithm) and its defaults, which are FedAvg's;
* :mod:`tffre.builder`: :func:`build_algorithm`, a registry row
  (:mod:`tffre.registry`) as a learning process on an executor;
* one module per algorithm that needs more than a registry row (e.g.
  :mod:`tffre.algorithms.fedproto`, the worked example of
  ``docs/adding-an-algorithm.md``).

Names load on first use (PEP 562), so ``tffre.definition`` can be
imported by the client work without a cycle.
"""

import importlib

_LAZY = {"build_algorithm": "tffre.builder",
         "keras_model_fn_to_tff": "tffre.builder",
         "check_model_accepts": "tffre.builder",
         "Definition": "tffre.definition",
         "ObjectiveContext": "tffre.definition",
         **{name: "tffre.registry" for name in (
             "ALGORITHMS", "COMMON_HPARAMS", "DEFAULT_HPARAMS", "LOCAL_OPTIMIZERS",
             "SERVER_AGGREGATORS", "get_spec", "resolve_hparams", "valid_algorithm_names",
             "valid_hparams")}}
__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tffre.algorithms' has no attribute {name!r}")
