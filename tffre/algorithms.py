""":func:`build_algorithm`: a registry row (:mod:`tffre.registry`) as a TFF learning process.

Every algorithm is one row: a local optimizer, an optional extra client loss
and a server aggregator (FLCMC Tables 5 and 6). :func:`build_algorithm`
composes the row into one MapReduce-shaped round (:mod:`tffre.mapreduce`):
distributor (prepare), client work, aggregator (zero, accumulate, merge,
report) and finalizer (update), and hands it to an executor.
"""

import tensorflow as tf
import tensorflow_federated as tff

from tffre import execution
from tffre.mapreduce import Round, make_trainer
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
        zeros = tf.nest.map_structure(
            lambda spec: tf.zeros([1 if d is None else d for d in spec.shape], spec.dtype), x_spec)
        try:
            model(zeros)
        except Exception as err:  # Keras raises several types for shape mismatches.
            raise ValueError(f"the model from model_fn cannot take inputs of input_spec "
                             f"x={x_spec}: {str(err).splitlines()[0]}") from err


def build_algorithm(name, model_fn, *, loss, input_spec, metrics=None, executor="auto",
                    max_parallel_clients=1, loop="while", **hparams):
    """Builds the FLCMC algorithm ``name`` as a learning process on an executor.

    The registry row becomes one :class:`tffre.mapreduce.Round` (client
    training with the row's Keras optimizer, the row's mergeable aggregator,
    the server step); the executor runs it.

    Args:
      name: one of fedavg, fedprox, fedatt, fedpa, fedavgs, fedavgt, fedproxp,
        fedatts, fedpap (case-insensitive).
      model_fn: no-arg callable returning a fresh, uncompiled ``tf.keras.Model``.
        Pretrained weights go in after ``initialize``, with
        ``set_model_weights``: loading them inside ``model_fn`` embeds them in
        every traced graph (TFF issue #2313).
      loss: a Keras loss, as for ``tff.learning.models.from_keras_model``.
      input_spec: the element spec (x, y) of the client datasets' batches.
      metrics: optional list of no-arg callables returning Keras metrics.
      executor: "tff" (TFF's runtime, CPU only), "local" (this process, GPU
        when present) or "auto" (local when a GPU is visible); see
        :mod:`tffre.execution`.
      max_parallel_clients: local executor: clients trained at once.
      loop: local executor: "while" (the default: one graph per client, a
        while loop over the batches), "steps" (per-batch compiled steps) or
        "reduce" (``dataset.reduce``, TFF's form; slow in-process for LSTMs).
      **hparams: FLCMC Table 7 hyperparameters: learning_rate, num_epochs,
        num_iters (cap on local steps; None = no cap), mu (proximal
        optimizers), stepsize (attention), granularity ("layer" or "model",
        attention), keep_optimizer_state (default False: optimizer state such
        as Adam moments is reset each round; True keeps its client-weighted
        mean at the server, see :mod:`tffre.client_work`), client_weighting
        ("dataset_size", Eq. 6's n_k, by default; "processed" or "uniform").

    Returns:
      A :class:`tffre.process.MeasuredLearningProcess`: ``initialize``,
      ``next``, ``get_model_weights``, ``set_model_weights``, with the round's
      wall seconds and bytes broadcast/uploaded in ``next``'s metrics.
    """
    spec = get_spec(name)
    hp = resolve_hparams(name, **hparams)
    check_model_accepts(model_fn, input_spec)
    tff_model_fn = keras_model_fn_to_tff(model_fn, loss=loss, input_spec=input_spec, metrics=metrics)
    local = LOCAL_OPTIMIZERS[spec.local_optimizer]
    server = SERVER_AGGREGATORS[spec.aggregator]
    trainer = make_trainer(tff_model_fn, lambda: local.factory(hp), hp, spec.extra_loss)
    round_ = Round(trainer, server.factory(hp), server.server_learning_rate(hp))
    return execution.build_process(round_, executor=executor,
                                   max_parallel_clients=max_parallel_clients, loop=loop,
                                   name=spec.name, hparams=hp)
