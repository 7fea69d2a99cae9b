""":func:`build_algorithm`: a registry row (:mod:`tffre.registry`) as a TFF learning process.

Every algorithm is one row: a local optimizer, an optional extra client loss
and a server aggregator (FLCMC Tables 5 and 6). :func:`build_algorithm`
composes the row into a TFF ``LearningProcess`` (distributor, client work,
aggregator, finalizer) with ``tff.learning.templates.compose_learning_process``.
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tffre import aggregators
from tffre.client_work import build_keras_optimizer_client_work
from tffre.process import MeasuredLearningProcess
from tffre.registry import (  # noqa: F401  (re-exported: the registry's public API)
    ALGORITHMS, COMMON_HPARAMS, DEFAULT_HPARAMS, LOCAL_OPTIMIZERS, SERVER_AGGREGATORS,
    get_spec, resolve_hparams, valid_algorithm_names, valid_hparams)


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
