"""Byzantine-robust aggregation: rules that replace the mean of the clients' updates.

:mod:`tffre.robust.robust_settings` declares the settings (:class:`RobustHparams`: ``--robust``
and its parameters) and says when a number of clients cannot support a rule
(:func:`robust_requirement`); it imports no TensorFlow.
:mod:`tffre.robust.rules` holds the rules as plain TensorFlow functions of lists of updates,
usable outside tffre (numpy in, tensors out): coordinate-wise median and trimmed mean (Yin et
al. 2018), Krum and multi-Krum (Blanchard et al. 2017), Bulyan (El Mhamdi et al. 2018) and
norm bounding (Sun et al. 2019), with where Flower's forms differ from the papers.
:mod:`tffre.robust.collecting` makes them a round's aggregator (:class:`RobustAggregator`, the
five functions of :mod:`tffre.aggregators`, over a buffer of the round's uploads) and says
what that buffer costs (:func:`memory_bytes`).

The settings' names are imported here at once; the TensorFlow ones on first use.
"""

import importlib

from tffre.robust.robust_settings import (RULES, RobustHparams, requirement,  # noqa: F401
                                          robust_requirement)

_LAZY = {name: "tffre.robust.rules" for name in (
    "coordinate_median", "trimmed_mean", "krum", "multi_krum", "bulyan", "norm_bound",
    "aggregate", "aggregate_rows")}
_LAZY.update({name: "tffre.robust.collecting" for name in (
    "RobustAggregator", "NormBoundedMean", "memory_bytes", "mean_memory_bytes",
    "robust_aggregator")})

__all__ = ["RULES", "RobustHparams", "requirement", "robust_requirement", *_LAZY]


def __getattr__(name):
    # PEP 562: TensorFlow only when a rule or the aggregator is first used.
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tffre.robust' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
