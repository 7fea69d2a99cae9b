"""The algorithm registry and :func:`build_algorithm`.

Every algorithm is one row: a local optimizer, an optional extra client loss
and a server aggregator (FLCMC Tables 5 and 6). :func:`build_algorithm`
composes the row into a TFF ``LearningProcess`` (distributor, client work,
aggregator, finalizer) with ``tff.learning.templates.compose_learning_process``.
"""

import dataclasses

from typing import Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

import optimizers as tffre_optimizers
from tffre import aggregators
from tffre.client_work import build_keras_optimizer_client_work, check_client_weighting
from tffre.process import MeasuredLearningProcess


@dataclasses.dataclass(frozen=True)
class LocalOptimizer:
    """How a client optimizes: a Keras optimizer factory and the hyperparameters it reads."""
    description: str
    factory: Callable[..., tf.keras.optimizers.Optimizer]
    hparams: tuple
    default_learning_rate: float


@dataclasses.dataclass(frozen=True)
class ServerAggregator:
    """How the server combines client deltas, and the server step it takes (Eq. 6 or Eq. 14)."""
    description: str
    factory: Callable[..., tff.aggregators.WeightedAggregationFactory]
    server_learning_rate: Callable[[dict], float]
    hparams: tuple


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """One registry row."""
    name: str
    local_optimizer: str
    aggregator: str
    extra_loss: Optional[Callable] = None


LOCAL_OPTIMIZERS = {
    "sgd": LocalOptimizer(
        "SGD", lambda hp: tf.keras.optimizers.SGD(hp["learning_rate"], jit_compile=False),
        ("learning_rate",), 0.01),
    "pgd": LocalOptimizer(
        "PGD (SGD on Eq. 22)",
        lambda hp: tffre_optimizers.PGD(hp["learning_rate"], mu=hp["mu"], jit_compile=False),
        ("learning_rate", "mu"), 0.01),
    "self_adam": LocalOptimizer(
        "Self-Adam (Eq. 15-20)",
        lambda hp: tffre_optimizers.SelfAdam(hp["learning_rate"], jit_compile=False),
        ("learning_rate",), 0.001),
    "tf_adam": LocalOptimizer(
        "tf.keras Adam",
        lambda hp: tf.keras.optimizers.Adam(hp["learning_rate"], jit_compile=False),
        ("learning_rate",), 0.001),
    "padam": LocalOptimizer(
        "PAdam (Eq. 21-27)",
        lambda hp: tffre_optimizers.PAdam(hp["learning_rate"], mu=hp["mu"], jit_compile=False),
        ("learning_rate", "mu"), 0.001),
}

SERVER_AGGREGATORS = {
    "mean": ServerAggregator(
        "weighted mean (Eq. 6)", lambda hp: aggregators.weighted_mean_factory(),
        lambda hp: 1.0, ()),
    "attention": ServerAggregator(
        "attention step (Eq. 11-14)",
        lambda hp: aggregators.AttentionFactory(hp["granularity"]),
        lambda hp: hp["stepsize"], ("stepsize", "granularity")),
}

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
)}

# Defaults from FLCMC Table 7; learning_rate defaults per optimizer (0.01 SGD, 0.001 Adam).
# client_weighting "dataset_size" is Eq. 6's n_k (see tffre.client_work).
DEFAULT_HPARAMS = {"num_epochs": 10, "num_iters": 20, "mu": 1.0, "stepsize": 1.2,
                   "granularity": "layer", "keep_optimizer_state": False,
                   "client_weighting": "dataset_size"}
COMMON_HPARAMS = ("learning_rate", "num_epochs", "num_iters", "keep_optimizer_state",
                  "client_weighting")


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
        + SERVER_AGGREGATORS[spec.aggregator].hparams
    return tuple(dict.fromkeys(names))


def resolve_hparams(name, **hparams):
    """Fills defaults and validates ``hparams`` for algorithm ``name``.

    Raises ValueError naming the unknown hyperparameters and the valid ones.
    """
    spec = get_spec(name)
    valid = valid_hparams(name)
    unknown = sorted(set(hparams) - set(valid))
    if unknown:
        raise ValueError(f"{spec.name} does not take hyperparameter(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(valid)}")
    resolved = {k: DEFAULT_HPARAMS[k] for k in valid if k in DEFAULT_HPARAMS}
    resolved["learning_rate"] = LOCAL_OPTIMIZERS[spec.local_optimizer].default_learning_rate
    resolved.update({k: v for k, v in hparams.items() if v is not None or k == "num_iters"})
    for key in ("learning_rate", "mu", "stepsize"):
        if key in resolved and not 0 <= resolved[key] < float("inf"):
            raise ValueError(f"{spec.name}: {key} must be a finite number >= 0, "
                             f"got {resolved[key]}")
    if resolved["num_epochs"] < 1:
        raise ValueError(f"{spec.name}: num_epochs must be >= 1, got {resolved['num_epochs']}")
    if resolved["num_iters"] is not None and resolved["num_iters"] < 1:
        raise ValueError(f"{spec.name}: num_iters must be >= 1 or None, got {resolved['num_iters']}")
    check_client_weighting(resolved["client_weighting"])
    return resolved


def keras_model_fn_to_tff(model_fn, *, loss, input_spec, metrics=None):
    """Wraps a Keras ``model_fn`` as a TFF ``VariableModel`` factory, like ``from_keras_model``.

    Args:
      model_fn: no-arg callable returning a fresh, uncompiled ``tf.keras.Model``.
      loss: a Keras loss (instance or no-arg callable returning one).
      input_spec: the (x, y) element spec of one batch.
      metrics: optional list of no-arg callables returning Keras metrics.
    """
    def tff_model_fn():
        loss_obj = loss() if isinstance(loss, type) else loss
        return tff.learning.models.from_keras_model(
            model_fn(), loss=loss_obj, input_spec=input_spec,
            metrics=[m() for m in (metrics or [])])
    return tff_model_fn


def check_model_accepts(model_fn, input_spec):
    """Raises ValueError if the Keras model cannot consume ``input_spec`` batches."""
    x_spec = input_spec[0] if isinstance(input_spec, (tuple, list)) else input_spec["x"]
    with tf.Graph().as_default():
        model = model_fn()
        shape = [1 if d is None else d for d in x_spec.shape]
        try:
            model(tf.zeros(shape, x_spec.dtype))
        except Exception as err:  # Keras raises several types for shape mismatches.
            raise ValueError(f"the model from model_fn cannot take inputs of input_spec "
                             f"x={x_spec}: {str(err).splitlines()[0]}") from err


def build_algorithm(name, model_fn, *, loss, input_spec, metrics=None, **hparams):
    """Builds the FLCMC algorithm ``name`` as a TFF learning process.

    Args:
      name: one of fedavg, fedprox, fedatt, fedpa, fedavgs, fedavgt, fedproxp,
        fedatts, fedpap (case-insensitive).
      model_fn: no-arg callable returning a fresh, uncompiled ``tf.keras.Model``.
      loss: a Keras loss, as for ``tff.learning.models.from_keras_model``.
      input_spec: the element spec (x, y) of the client datasets' batches.
      metrics: optional list of no-arg callables returning Keras metrics.
      **hparams: FLCMC Table 7 hyperparameters: learning_rate, num_epochs,
        num_iters (cap on local steps), mu (proximal optimizers), stepsize
        (attention), granularity ("layer" or "model", attention),
        keep_optimizer_state (default False: optimizer state such as Adam
        moments is reset each round; True keeps its example-weighted mean at
        the server, see :mod:`tffre.client_work`), client_weighting
        ("dataset_size", Eq. 6's n_k, by default; "processed" or "uniform").

    Returns:
      A :class:`tffre.process.MeasuredLearningProcess` (a
      ``tff.learning.templates.LearningProcess``) whose ``next`` metrics also
      carry the round's wall seconds and bytes broadcast/uploaded.
    """
    spec = get_spec(name)
    hp = resolve_hparams(name, **hparams)
    check_model_accepts(model_fn, input_spec)
    tff_model_fn = keras_model_fn_to_tff(model_fn, loss=loss, input_spec=input_spec, metrics=metrics)
    local = LOCAL_OPTIMIZERS[spec.local_optimizer]
    server = SERVER_AGGREGATORS[spec.aggregator]

    @tff.tensorflow.computation()
    def initial_model_weights_fn():
        return tff.learning.models.ModelWeights.from_model(tff_model_fn())

    weights_type = initial_model_weights_fn.type_signature.result
    distributor = tff.learning.templates.build_broadcast_process(weights_type)
    client_work = build_keras_optimizer_client_work(
        tff_model_fn, lambda: local.factory(hp), num_epochs=hp["num_epochs"],
        num_iters=hp["num_iters"], extra_loss=spec.extra_loss,
        keep_optimizer_state=hp["keep_optimizer_state"],
        client_weighting=hp["client_weighting"])
    update_type = weights_type.trainable
    factory = server.factory(hp)
    aggregator = factory.create(update_type, tff.TensorType(np.float32))
    finalizer = tff.learning.templates.build_apply_optimizer_finalizer(
        tff.learning.optimizers.build_sgdm(learning_rate=server.server_learning_rate(hp)),
        weights_type)
    process = tff.learning.templates.compose_learning_process(
        initial_model_weights_fn, distributor, client_work, aggregator, finalizer)

    broadcast_types = [weights_type]
    upload_types = [client_work.next.type_signature.result.result.member]
    extra_broadcast, extra_upload = aggregators.extra_traffic_types(factory, update_type)
    if extra_broadcast is not None:
        broadcast_types.append(extra_broadcast)
        upload_types.append(extra_upload)
    if hp["keep_optimizer_state"]:
        # The kept optimizer state goes down, and comes back weighted.
        opt_state_type = client_work.initialize.type_signature.result.member
        broadcast_types.append(opt_state_type)
        upload_types.append(opt_state_type)
    return MeasuredLearningProcess(process, name=spec.name, hparams=hp,
                                   broadcast_types=broadcast_types, upload_types=upload_types)
