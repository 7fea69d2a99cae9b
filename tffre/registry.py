"""The algorithm registry: what each algorithm is, without importing TensorFlow.

Every algorithm is one row: a local optimizer, a server aggregator (FLCMC
Tables 5 and 6) and, for algorithms that change more than those two, the
:class:`tffre.definition.Definition` subclass that says what else
(client objective, uploads, server extras and work, per-client state) with
its own hyperparameters and defaults. This module holds the rows,
their hyperparameters and defaults, and validates hyperparameters, so that the
command line can check its arguments in well under a second.
:func:`tffre.algorithms.build_algorithm` turns a row into a TFF process; the
factories below import TensorFlow only when they are called.
"""

import dataclasses
import importlib
import math
from typing import Callable, Optional

# client_weighting: the weight of a client's update (see tffre.client_work).
# "dataset_size" is n_k of FLCMC Eq. 6.
CLIENT_WEIGHTINGS = ("dataset_size", "processed", "uniform")
GRANULARITIES = ("layer", "model")


@dataclasses.dataclass(frozen=True)
class LocalOptimizer:
    """How a client optimizes: a Keras optimizer factory (hparams -> optimizer) and its hyperparameters."""
    description: str
    factory: Callable
    hparams: tuple
    default_learning_rate: float

    def make(self, hp):
        """A fresh optimizer of ``factory(hp)``; with the common ``clip_norm``, each step's
        gradients are first scaled to that global L2 norm at most (Keras ``global_clipnorm``,
        as PyTorch's ``clip_grad_norm_`` in the FedLCC authors' code)."""
        optimizer = self.factory(hp)
        if hp.get("clip_norm"):
            optimizer.global_clipnorm = float(hp["clip_norm"])   # read when a step is traced
        return optimizer


@dataclasses.dataclass(frozen=True)
class ServerAggregator:
    """How the server combines client deltas and its step (Eq. 6 or 14).

    ``factory(hparams)`` returns ``make(shapes)``, which builds a mergeable
    aggregator (:mod:`tffre.aggregators`) for deltas of those shapes.
    """
    description: str
    factory: Callable
    server_learning_rate: Callable[[dict], float]
    hparams: tuple


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """One registry row.

    Attributes:
      name: the display name (lookups are case-insensitive).
      local_optimizer: a key of :data:`LOCAL_OPTIMIZERS`.
      aggregator: a key of :data:`SERVER_AGGREGATORS` (how model deltas are combined).
      definition: "module:Class" of the algorithm's
        :class:`~tffre.definition.Definition` subclass, imported
        when the algorithm is built; None for the default (FedAvg's parts).
      hparams: ((name, default), ...) the definition's own hyperparameters.
    """
    name: str
    local_optimizer: str
    aggregator: str
    definition: Optional[str] = None
    hparams: tuple = ()

    def load_definition(self):
        """The definition class (imports its module, and TensorFlow)."""
        if self.definition is None:
            from tffre.definition import Definition
            return Definition
        module, _, attr = self.definition.partition(":")
        return getattr(importlib.import_module(module), attr)


def _sgd(hp):
    import tensorflow as tf
    return tf.keras.optimizers.SGD(hp["learning_rate"], jit_compile=False)


def _pgd(hp):
    import optimizers
    return optimizers.PGD(hp["learning_rate"], mu=hp["mu"], jit_compile=False)


def _self_adam(hp):
    import optimizers
    return optimizers.SelfAdam(hp["learning_rate"], jit_compile=False)


def _tf_adam(hp):
    import tensorflow as tf
    return tf.keras.optimizers.Adam(hp["learning_rate"], jit_compile=False)


def _sgdm(hp):
    import tensorflow as tf
    # The FedCB authors' scripts: SGD, momentum 0.9, weight decay 5e-4 (decoupled, as Keras does).
    return tf.keras.optimizers.SGD(hp["learning_rate"], momentum=0.9, weight_decay=5e-4,
                                   jit_compile=False)


def _padam(hp):
    import optimizers
    return optimizers.PAdam(hp["learning_rate"], mu=hp["mu"], jit_compile=False)


def _mean(hp):
    from tffre import aggregators
    return aggregators.WeightedMean


def _attention(hp):
    from tffre import aggregators
    return lambda shapes: aggregators.Attention(shapes, hp["granularity"])


LOCAL_OPTIMIZERS = {
    "sgd": LocalOptimizer("SGD", _sgd, ("learning_rate",), 0.01),
    "pgd": LocalOptimizer("PGD (SGD on Eq. 22)", _pgd, ("learning_rate", "mu"), 0.01),
    "self_adam": LocalOptimizer("Self-Adam (Eq. 15-20)", _self_adam, ("learning_rate",), 0.001),
    "tf_adam": LocalOptimizer("tf.keras Adam", _tf_adam, ("learning_rate",), 0.001),
    "padam": LocalOptimizer("PAdam (Eq. 21-27)", _padam, ("learning_rate", "mu"), 0.001),
    "sgdm": LocalOptimizer("SGD, momentum 0.9, weight decay 5e-4", _sgdm, ("learning_rate",),
                           0.01),
}

# The common ``local_optimizer`` hyperparameter replaces a row's optimizer by the same kind of
# step in another family (FedCB trains every method with Adam; its authors' scripts with SGD
# and momentum): {family: {row's optimizer: replacement}}. A proximal row keeps its proximal
# term (PGD -> PAdam); there is no proximal SGD with momentum.
OPTIMIZER_FAMILIES = {
    "adam": {"sgd": "tf_adam", "pgd": "padam", "tf_adam": "tf_adam", "padam": "padam",
             "self_adam": "self_adam"},
    "sgdm": {"sgd": "sgdm", "tf_adam": "sgdm", "self_adam": "sgdm", "sgdm": "sgdm"},
}


def local_optimizer_of(spec, hparams):
    """The key of :data:`LOCAL_OPTIMIZERS` a row trains with, given its ``local_optimizer``."""
    family = hparams.get("local_optimizer")
    if family is None:
        return spec.local_optimizer
    if family not in OPTIMIZER_FAMILIES:
        raise ValueError(f"local_optimizer must be one of {', '.join(OPTIMIZER_FAMILIES)}, "
                         f"got {family!r}")
    replaced = OPTIMIZER_FAMILIES[family].get(spec.local_optimizer)
    if replaced is None:
        raise ValueError(f"{spec.name}: its {spec.local_optimizer} optimizer has no "
                         f"{family} form")
    return replaced

SERVER_AGGREGATORS = {
    "mean": ServerAggregator("weighted mean (Eq. 6)", _mean, lambda hp: 1.0, ()),
    "attention": ServerAggregator("attention step (Eq. 11-14)", _attention,
                                  lambda hp: hp["stepsize"], ("stepsize", "granularity")),
}

# FedCB's hyperparameters: tau (the authors' README: 17.5 for OCT-C8, 12.5 for Kvasir-v2),
# the classifier's form, the prompts and the class concepts (the runner passes the task's).
_FEDCB = (("temperature", 12.5), ("use_variance", True), ("covariance", "diagonal"),
          ("prompts", "image"), ("prompt_fraction", 1.0), ("concepts", None),
          ("concept_encoder", None))

ALGORITHMS = {spec.name.lower(): spec for spec in (
    AlgorithmSpec("FedAvg", "sgd", "mean"),
    AlgorithmSpec("FedProx", "pgd", "mean"),
    AlgorithmSpec("FedAtt", "sgd", "attention"),
    AlgorithmSpec("FedPA", "pgd", "attention"),
    AlgorithmSpec("FedAvgS", "self_adam", "mean"),
    AlgorithmSpec("FedAvgT", "tf_adam", "mean"),
    AlgorithmSpec("FedProxP", "padam", "mean"),
    AlgorithmSpec("FedAttS", "self_adam", "attention"),
    AlgorithmSpec("FedPAP", "padam", "attention"),
    # The worked example of docs/adding-an-algorithm.md: FedAvg plus FedProto's prototype term.
    AlgorithmSpec("FedProtoAvg", "sgd", "mean", "tffre.algorithms.fedproto:FedProtoAvg",
                  (("proto_weight", 1.0),)),
    # FedCMC and its label-skew baselines (FedCMC Table 2). FedCMC trains every method at
    # learning rate 5e-5, an Adam rate: these rows use tf.keras Adam; compare with FedAvgT.
    AlgorithmSpec("FedCMC", "tf_adam", "mean", "tffre.algorithms.fedcmc:FedCMC",
                  (("mu", 1.0), ("temperature", 1.0), ("con_reduction", "mean"),
                   ("vectors", "major"))),
    # The FedCMC ablation (section 4.3, Fig. 4): minor vectors (argmax, Eq. 18) and random ones.
    AlgorithmSpec("FedCMC-minor", "tf_adam", "mean", "tffre.algorithms.fedcmc:FedCMC",
                  (("mu", 1.0), ("temperature", 1.0), ("con_reduction", "mean"),
                   ("vectors", "minor"))),
    AlgorithmSpec("FedCMC-random", "tf_adam", "mean", "tffre.algorithms.fedcmc:FedCMC",
                  (("mu", 1.0), ("temperature", 1.0), ("con_reduction", "mean"),
                   ("vectors", "random"))),
    AlgorithmSpec("MOON", "tf_adam", "mean", "tffre.algorithms.moon:MOON",
                  (("mu", 1.0), ("temperature", 0.5), ("projection_head", False))),
    # FedLCC (document-level RE): MOON's mechanism on the localized context (Eq. 12-13),
    # mu 0.1 and tau 0.5 (FedLCC Table 2), Adam as the paper trains every method.
    AlgorithmSpec("FedLCC", "tf_adam", "mean", "tffre.algorithms.fedlcc:FedLCC",
                  (("mu", 0.1), ("temperature", 0.5))),
    AlgorithmSpec("FedRS", "tf_adam", "mean", "tffre.algorithms.fedrs:FedRS",
                  (("restriction", 0.5), ("fedrs_form", "binary"))),
    AlgorithmSpec("FedLC", "tf_adam", "mean", "tffre.algorithms.fedlc:FedLC",
                  (("calibration", 1.0),)),
    # FedED (ensemble distillation; clients upload predictions on the server's set D_v) and
    # FedAtt with the same tf.keras Adam, its baseline beside FedAvgT (FedED Tables 3-5).
    AlgorithmSpec("FedAttT", "tf_adam", "attention"),
    # FedCB: a frozen classifier from text embeddings of the class concepts (a model of
    # tffre.algorithms.fedcb.build_fedcb_model); FedAvg of the extractor and projection.
    AlgorithmSpec("FedCB", "tf_adam", "mean", "tffre.algorithms.fedcb:FedCB", _FEDCB),
    # FedCB Table 5's "embedding average": the class means only (Σ = 0).
    AlgorithmSpec("FedCB-avg", "tf_adam", "mean", "tffre.algorithms.fedcb:FedCB",
                  tuple((k, False if k == "use_variance" else v) for k, v in _FEDCB)),
    # FedETF (a FedCB Table 2 baseline): a frozen simplex-ETF classifier.
    AlgorithmSpec("FedETF", "tf_adam", "mean", "tffre.algorithms.fedcb:FedETF",
                  (("temperature", 12.5), ("etf_dim", 128), ("etf_seed", 0))),
    # FedRoD (a FedCB Table 2 baseline): generic head with the balanced softmax, personal head.
    AlgorithmSpec("FedRoD", "sgd", "mean", "tffre.algorithms.fedrod:FedRoD",
                  (("personal_layer", "personal_head"),)),
    # FedRep (a FedCB Table 2 baseline): the "classifier" layer stays with each client.
    AlgorithmSpec("FedRep", "sgd", "mean", "tffre.algorithms.fedrep:FedRep",
                  (("personal_layer", "classifier"),)),
    # FedDyn (a FedCB Table 2 baseline): per-client linear term, server correction h.
    AlgorithmSpec("FedDyn", "sgd", "mean", "tffre.algorithms.feddyn:FedDyn",
                  (("dyn_alpha", 0.01), ("num_clients", None), ("client_weighting", "uniform"))),
    AlgorithmSpec("FedED", "tf_adam", "mean", "tffre.algorithms.feded:FedED",
                  (("temperature", 0.25), ("kl_weight", 1.0), ("teacher", "probabilities"),
                   ("upload_precision", "float32"), ("server_data", None))),
)}

# Defaults from FLCMC Table 7; learning_rate defaults per optimizer (0.01 SGD, 0.001 Adam).
DEFAULT_HPARAMS = {"num_epochs": 10, "num_iters": 20, "mu": 1.0, "stepsize": 1.2,
                   "granularity": "layer", "keep_optimizer_state": False,
                   "client_weighting": "dataset_size", "lr_decay": 1.0,
                   "local_optimizer": None, "clip_norm": None}
COMMON_HPARAMS = ("learning_rate", "num_epochs", "num_iters", "keep_optimizer_state",
                  "client_weighting", "lr_decay", "local_optimizer", "clip_norm")


def get_spec(name):
    """Returns the registry row for ``name`` (case-insensitive) or raises listing the valid names."""
    key = str(name).lower()
    if key not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; valid: {', '.join(valid_algorithm_names())}")
    return ALGORITHMS[key]


def valid_algorithm_names():
    """The registry's algorithm names, in Table 5/6 order."""
    return [spec.name for spec in ALGORITHMS.values()]


def valid_hparams(name):
    """The hyperparameter names ``name`` accepts."""
    spec = get_spec(name)
    names = COMMON_HPARAMS + LOCAL_OPTIMIZERS[spec.local_optimizer].hparams \
        + SERVER_AGGREGATORS[spec.aggregator].hparams + tuple(n for n, _ in spec.hparams)
    return tuple(dict.fromkeys(names))


def algorithm_hparams(name, hparams):
    """The subset of ``hparams`` that algorithm ``name`` takes.

    None values are dropped (left to the defaults), except ``num_iters``,
    where None means "no cap".
    """
    valid = valid_hparams(name)
    return {k: v for k, v in hparams.items() if k in valid and (v is not None or k == "num_iters")}


def check_choice(name, value, choices):
    """Raises ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def check_client_weighting(client_weighting):
    """Raises ValueError unless ``client_weighting`` is one of :data:`CLIENT_WEIGHTINGS`."""
    check_choice("client_weighting", client_weighting, CLIENT_WEIGHTINGS)


def resolve_hparams(name, **hparams):
    """Fills defaults and validates ``hparams`` for algorithm ``name``.

    ``num_iters=None`` means no cap on local steps. Raises ValueError naming
    the unknown hyperparameters and the valid ones, or the invalid value.
    """
    spec = get_spec(name)
    valid = valid_hparams(name)
    unknown = sorted(set(hparams) - set(valid))
    if unknown:
        raise ValueError(f"{spec.name} does not take hyperparameter(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(valid)}")
    resolved = {k: DEFAULT_HPARAMS[k] for k in valid if k in DEFAULT_HPARAMS}
    resolved.update(spec.hparams)
    resolved.update({k: v for k, v in hparams.items() if v is not None or k == "num_iters"})
    if hparams.get("learning_rate") is None:
        resolved["learning_rate"] = LOCAL_OPTIMIZERS[
            local_optimizer_of(spec, resolved)].default_learning_rate
    clip = resolved["clip_norm"]
    if clip is not None and not (math.isfinite(clip) and clip > 0):
        raise ValueError(f"{spec.name}: clip_norm must be a number > 0 or None, got {clip}")
    if not (math.isfinite(resolved["lr_decay"]) and 0 < resolved["lr_decay"] <= 1):
        raise ValueError(f"{spec.name}: lr_decay must be in (0, 1], got {resolved['lr_decay']}")
    for key in ("learning_rate", "mu", "stepsize"):
        if key in resolved and not (math.isfinite(resolved[key]) and resolved[key] >= 0):
            raise ValueError(f"{spec.name}: {key} must be a finite number >= 0, "
                             f"got {resolved[key]}")
    if resolved["num_epochs"] < 1:
        raise ValueError(f"{spec.name}: num_epochs must be >= 1, got {resolved['num_epochs']}")
    if resolved["num_iters"] is not None and resolved["num_iters"] < 1:
        raise ValueError(f"{spec.name}: num_iters must be >= 1 or None, got {resolved['num_iters']}")
    check_client_weighting(resolved["client_weighting"])
    if "granularity" in resolved:
        check_choice("granularity", resolved["granularity"], GRANULARITIES)
    return resolved
