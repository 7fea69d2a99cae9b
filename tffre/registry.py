"""The algorithm registry: what each algorithm is, one line each, without importing TensorFlow.

An algorithm is a row: a client optimizer (the paper's "local optimizer") and a
server aggregator (FLCMC Tables 5 and 6) and, for algorithms that change more than those two, a
:class:`tffre.definition.Definition` subclass (client objective, uploads,
server extras and work, per-client state). Its hyperparameters are declared
where they belong, once: FedAvg's in :class:`tffre.definition.Hparams`, the
proximal optimizers' and attention's below, an algorithm's own in its
definition's ``Hparams``. A row composes them (:meth:`AlgorithmSpec.hparams_class`)
and may change their defaults; :func:`resolve_hparams` validates the values
given. The command line builds its flags from the same declarations
(:mod:`tffre.config`), so adding an algorithm is one module and one line here.

The factories import TensorFlow only when they are called; definition
modules import it lazily (:mod:`tffre.lazy`), so ``--help`` stays instant.
:func:`tffre.builder.build_algorithm` turns a row into a learning process.
"""

import dataclasses
import functools
import importlib
from typing import Callable, Mapping, Optional, Tuple

from tffre.hparams import (Params, ParamsError, choice, compose, non_negative_float, param)
from tffre.privacy.dp_settings import DPHparams
from tffre.robust.robust_settings import RobustHparams
from tffre.server_optimizers import ServerOptimizerHparams

GRANULARITIES = ("layer", "model")


@dataclasses.dataclass(frozen=True)
class NoHparams(Params):
    """A part without hyperparameters of its own."""


@dataclasses.dataclass(frozen=True)
class ProximalHparams(Params):
    """The proximal optimizers' (PGD, PAdam) hyperparameter."""
    prox_mu: float = param(1.0, non_negative_float, "proximal coefficient mu of the local "
                           "objective (FedProx, FedPA and their Adam forms)", aliases=("mu",),
                           paper="FLCMC Eq. 21-22")


@dataclasses.dataclass(frozen=True)
class AttentionHparams(Params):
    """The attention aggregator's hyperparameters."""
    stepsize: float = param(1.2, non_negative_float, "attention server step lambda",
                            paper="FLCMC Eq. 14")
    granularity: str = param("layer", choice(*GRANULARITIES), "attention per layer (the FedAtt "
                             "reference) or over the whole model", paper="FLCMC Eq. 11")


#: A client optimizer's ``kind``: the kind of step, which keys a task's own default learning
#: rates (:attr:`tffre.tasks.Task.learning_rates`).
OPTIMIZER_KINDS = ("sgd", "adam")


@dataclasses.dataclass(frozen=True)
class ClientOptimizer:
    """How a client optimizes: a Keras optimizer factory (hparams -> optimizer).

    Attributes:
      kind: one of :data:`OPTIMIZER_KINDS` ("sgd" or "adam"): which of a task's own default
        learning rates it takes.
      forms: {family: key of :data:`CLIENT_OPTIMIZERS`}: the optimizer that replaces this one
        when the ``local_optimizer`` hyperparameter (``--local-optimizer``) names that family
        (one of :data:`tffre.definition.OPTIMIZER_FAMILIES`); a family it lacks is refused.
    """
    description: str
    factory: Callable
    default_learning_rate: float
    hparams: type = NoHparams
    kind: str = "sgd"
    forms: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    def make(self, hp):
        """A fresh optimizer of ``factory(hp)``; with the common ``clip_norm``, each step's
        gradients are first scaled to that global L2 norm at most (Keras ``global_clipnorm``,
        as PyTorch's ``clip_grad_norm_`` in the FedLCC authors' code)."""
        optimizer = self.factory(hp)
        if hp.clip_norm:
            optimizer.global_clipnorm = float(hp.clip_norm)   # read when a step is traced
        return optimizer


@dataclasses.dataclass(frozen=True)
class ServerAggregator:
    """How the server combines client deltas and its step (Eq. 6 or 14).

    ``factory(hparams)`` returns ``make(shapes)``, which builds a mergeable
    aggregator (:mod:`tffre.aggregators`) for deltas of those shapes.
    """
    description: str
    factory: Callable
    server_learning_rate: Callable
    hparams: type = NoHparams
    #: Why client-level DP is not sound for it (None: DP replaces it by the clipped, noised
    #: mean of :mod:`tffre.privacy`).
    dp_refusal: Optional[str] = None


def _sgd(hp):
    import tensorflow as tf
    return tf.keras.optimizers.SGD(hp.learning_rate, jit_compile=False)


def _pgd(hp):
    import optimizers
    return optimizers.PGD(hp.learning_rate, mu=hp.prox_mu, jit_compile=False)


def _self_adam(hp):
    import optimizers
    return optimizers.SelfAdam(hp.learning_rate, jit_compile=False)


def _tf_adam(hp):
    import tensorflow as tf
    return tf.keras.optimizers.Adam(hp.learning_rate, jit_compile=False)


def _sgdm(hp):
    import tensorflow as tf
    # The FedCB authors' scripts: SGD, momentum 0.9, weight decay 5e-4 (decoupled, as Keras does).
    return tf.keras.optimizers.SGD(hp.learning_rate, momentum=0.9, weight_decay=5e-4,
                                   jit_compile=False)


def _padam(hp):
    import optimizers
    return optimizers.PAdam(hp.learning_rate, mu=hp.prox_mu, jit_compile=False)


def _mean(hp):
    from tffre import aggregators
    return aggregators.WeightedMean


def _attention(hp):
    from tffre import aggregators
    return lambda shapes: aggregators.Attention(shapes, hp.granularity)


# ``forms``: the common ``local_optimizer`` hyperparameter replaces a row's optimizer by the same
# kind of step in another family (FedCB trains every method with Adam; its authors' scripts
# with SGD and momentum). A proximal row keeps its proximal term (PGD -> PAdam); there is no
# proximal SGD with momentum.
CLIENT_OPTIMIZERS = {
    "sgd": ClientOptimizer("SGD", _sgd, 0.01, forms={"adam": "tf_adam", "sgdm": "sgdm"}),
    "pgd": ClientOptimizer("PGD (SGD on Eq. 22)", _pgd, 0.01, ProximalHparams,
                           forms={"adam": "padam"}),
    "self_adam": ClientOptimizer("Self-Adam (Eq. 15-20)", _self_adam, 0.001, kind="adam",
                                 forms={"adam": "self_adam", "sgdm": "sgdm"}),
    "tf_adam": ClientOptimizer("tf.keras Adam", _tf_adam, 0.001, kind="adam",
                               forms={"adam": "tf_adam", "sgdm": "sgdm"}),
    "padam": ClientOptimizer("PAdam (Eq. 21-27)", _padam, 0.001, ProximalHparams, kind="adam",
                             forms={"adam": "padam"}),
    "sgdm": ClientOptimizer("SGD, momentum 0.9, weight decay 5e-4", _sgdm, 0.01,
                            forms={"sgdm": "sgdm"}),
}

SERVER_AGGREGATORS = {
    "mean": ServerAggregator("weighted mean (Eq. 6)", _mean, lambda hp: 1.0),
    "attention": ServerAggregator(
        "attention step (Eq. 11-14)", _attention, lambda hp: hp.stepsize, AttentionHparams,
        dp_refusal="its attention weights are a softmax over every client's distance to the "
        "global model, so one client's update moves every other's weight: no clip bounds "
        "its influence"),
}


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """One registry row.

    Attributes:
      name: the display name (lookups are case-insensitive).
      client_optimizer: a key of :data:`CLIENT_OPTIMIZERS` (the paper's local optimizer; the
        ``local_optimizer`` hyperparameter may replace it by another family's,
        :func:`client_optimizer_of`).
      aggregator: a key of :data:`SERVER_AGGREGATORS` (how model deltas are combined).
      definition: "module:Class" of the algorithm's
        :class:`~tffre.definition.Definition` subclass; None for the default
        (FedAvg's parts).
      defaults: ((name, value), ...): this row's defaults where they differ from the
        declarations' (e.g. FedCMC-minor's ``vectors``).
    """
    name: str
    client_optimizer: str
    aggregator: str
    definition: Optional[str] = None
    defaults: Tuple[Tuple[str, object], ...] = ()

    def load_definition(self):
        """The definition class (imports its module; TensorFlow is imported lazily)."""
        if self.definition is None:
            from tffre.definition import Definition
            return Definition
        module, _, attr = self.definition.partition(":")
        return getattr(importlib.import_module(module), attr)

    def hparams_class(self):
        """The row's hyperparameters: its definition's, its optimizer's and its aggregator's."""
        return _composed(self)


@functools.lru_cache(maxsize=None)
def _composed(spec):
    return compose(f"{spec.name.replace('-', '_')}Hparams", spec.load_definition().Hparams,
                   CLIENT_OPTIMIZERS[spec.client_optimizer].hparams,
                   SERVER_AGGREGATORS[spec.aggregator].hparams, ServerOptimizerHparams,
                   RobustHparams, DPHparams, defaults=dict(spec.defaults))


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
    AlgorithmSpec("FedProtoAvg", "sgd", "mean", "tffre.algorithms.fedproto:FedProtoAvg"),
    # FedCMC and its label-skew baselines (FedCMC Table 2). FedCMC trains every method at
    # learning rate 5e-5, an Adam rate: these rows use tf.keras Adam; compare with FedAvgT.
    AlgorithmSpec("FedCMC", "tf_adam", "mean", "tffre.algorithms.fedcmc:FedCMC"),
    # The FedCMC ablation (section 4.3, Fig. 4): minor vectors (argmax, Eq. 18) and random ones.
    AlgorithmSpec("FedCMC-minor", "tf_adam", "mean", "tffre.algorithms.fedcmc:FedCMC",
                  (("vectors", "minor"),)),
    AlgorithmSpec("FedCMC-random", "tf_adam", "mean", "tffre.algorithms.fedcmc:FedCMC",
                  (("vectors", "random"),)),
    AlgorithmSpec("MOON", "tf_adam", "mean", "tffre.algorithms.moon:MOON"),
    # FedLCC (document-level RE): MOON's mechanism on the localized context (Eq. 12-13),
    # Adam as the paper trains every method.
    AlgorithmSpec("FedLCC", "tf_adam", "mean", "tffre.algorithms.fedlcc:FedLCC"),
    AlgorithmSpec("FedRS", "tf_adam", "mean", "tffre.algorithms.fedrs:FedRS"),
    AlgorithmSpec("FedLC", "tf_adam", "mean", "tffre.algorithms.fedlc:FedLC"),
    # FedAtt with tf.keras Adam: FedED's baseline beside FedAvgT (FedED Tables 3-5).
    AlgorithmSpec("FedAttT", "tf_adam", "attention"),
    # FedCB: a frozen classifier from text embeddings of the class concepts.
    AlgorithmSpec("FedCB", "tf_adam", "mean", "tffre.algorithms.fedcb:FedCB"),
    # FedCB Table 5's "embedding average": the class means only (Σ = 0).
    AlgorithmSpec("FedCB-avg", "tf_adam", "mean", "tffre.algorithms.fedcb:FedCB",
                  (("use_variance", False),)),
    # FedETF (a FedCB Table 2 baseline): a frozen simplex-ETF classifier.
    AlgorithmSpec("FedETF", "tf_adam", "mean", "tffre.algorithms.fedcb:FedETF"),
    # FedRoD (a FedCB Table 2 baseline): generic head with the balanced softmax, personal head.
    AlgorithmSpec("FedRoD", "sgd", "mean", "tffre.algorithms.fedrod:FedRoD"),
    # FedRep (a FedCB Table 2 baseline): the "classifier" layer stays with each client.
    AlgorithmSpec("FedRep", "sgd", "mean", "tffre.algorithms.fedrep:FedRep"),
    # FedDyn (a FedCB Table 2 baseline): per-client linear term, server correction h.
    AlgorithmSpec("FedDyn", "sgd", "mean", "tffre.algorithms.feddyn:FedDyn"),
    # FedED: clients upload predictions on the server's set D_v; the server distils.
    AlgorithmSpec("FedED", "tf_adam", "mean", "tffre.algorithms.feded:FedED"),
    # Adaptive federated optimization (Reddi et al., ICLR 2021, Algorithm 2): client SGD, the
    # server's optimizer on the mean delta (tffre.server_optimizers); FedAvgM: Hsu et al. 2019.
    AlgorithmSpec("FedAvgM", "sgd", "mean", defaults=(("server_optimizer", "sgdm"),)),
    AlgorithmSpec("FedAdam", "sgd", "mean", defaults=(("server_optimizer", "adam"),)),
    AlgorithmSpec("FedYogi", "sgd", "mean", defaults=(("server_optimizer", "yogi"),)),
    AlgorithmSpec("FedAdagrad", "sgd", "mean", defaults=(("server_optimizer", "adagrad"),)),
    AlgorithmSpec("SCAFFOLD", "sgd", "mean", "tffre.algorithms.scaffold:SCAFFOLD"),
)}


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
    return get_spec(name).hparams_class().names()


def algorithm_hparams(name, values):
    """The items of ``values`` (names or aliases) that algorithm ``name`` takes."""
    return get_spec(name).hparams_class().subset(values)


def client_optimizer_of(spec, hparams):
    """The key of :data:`CLIENT_OPTIMIZERS` row ``spec`` trains with under ``hparams``: its own,
    or its form in the family ``hparams.local_optimizer`` names (``--local-optimizer``)."""
    family = hparams.local_optimizer
    if family is None:
        return spec.client_optimizer
    replaced = CLIENT_OPTIMIZERS[spec.client_optimizer].forms.get(family)
    if replaced is None:
        raise ValueError(f"{spec.name}: its {spec.client_optimizer} optimizer has no "
                         f"{family} form")
    return replaced


def resolve_hparams(name, values=None, *, learning_rates=None, **kwargs):
    """The validated hyperparameters of algorithm ``name`` (its ``Hparams`` object).

    ``values`` is the row's ``Hparams`` object (returned as it is: the run's hyperparameters
    stay typed from the command line to the client) or a mapping; it and keyword arguments
    may use the declared names or their aliases (``mu``, ``temperature``); unset or None values take the row's
    defaults; ``learning_rate`` defaults to ``learning_rates[kind]`` of the client
    optimizer's kind ("adam", "sgd": a task's own rates, e.g. a transformer's), else to
    the optimizer's. Raises :class:`tffre.hparams.ParamsError` (a ValueError) naming the
    algorithm and the setting.
    """
    spec = get_spec(name)
    if isinstance(values, spec.hparams_class()) and not kwargs:
        return values   # already resolved (the run's typed hyperparameters, passed through)
    given = dict(values or {}, **kwargs)
    hp = spec.hparams_class().resolve(given, owner=spec.name)
    try:
        client = CLIENT_OPTIMIZERS[client_optimizer_of(spec, hp)]
    except ValueError as err:
        raise ParamsError(str(err)) from None
    if hp.learning_rate is None:
        rate = (learning_rates or {}).get(client.kind, client.default_learning_rate)
        hp = dataclasses.replace(hp, learning_rate=rate)
    if hp.robust is not None:
        reason = robust_refusal(spec, hp)
        if reason:
            raise ParamsError(f"{spec.name}: --robust {hp.robust}: {reason}")
    if hp.dp_on:
        reason = dp_refusal(spec, hp, weighting_given=given.get("client_weighting"))
        if reason:
            raise ParamsError(f"{spec.name}: differential privacy is not sound here: {reason}")
        # No client's weight may depend on its data: DP-FedAvg's fixed denominator.
        hp = dataclasses.replace(hp, client_weighting="uniform")
    return hp


def robust_refusal(spec, hp):
    """Why a robust rule (``--robust``, :mod:`tffre.robust`) cannot replace row ``spec``'s
    mean of model deltas under ``hp``, or None."""
    if spec.aggregator != "mean":
        return (f"its {spec.aggregator} aggregator is its own rule; --robust replaces the "
                f"weighted mean of the model deltas")
    if not spec.load_definition().uploads_model:
        return "it uploads no model delta"
    if hp.dp_on:
        return ("client-level DP's noise and accounting assume a sum of clipped updates; a "
                "robust rule reads each update (use --dp-* without --robust)")
    return None


def dp_refusal(spec, hp, weighting_given=None):
    """Why client-level DP is not sound for row ``spec`` with ``hp``, or None (issue 21's table:
    docs/explanations/privacy.md)."""
    reason = SERVER_AGGREGATORS[spec.aggregator].dp_refusal or \
        spec.load_definition().dp_refusal(hp)
    if reason:
        return reason
    if hp.keep_optimizer_state:
        return ("keep_optimizer_state uploads the optimizer's moments, which the clip does not "
                "bound")
    if weighting_given not in (None, "uniform"):
        return (f"--client-weighting {weighting_given} weighs each update by a count of the "
                f"client's data (n_k), which the guarantee would leak; DP averages uniformly")
    return None
