""":func:`build_algorithm`: a registry row (:mod:`tffre.registry`) as a learning process.

Every algorithm is one row: a local optimizer, a server aggregator (FLCMC
Tables 5 and 6) and its :class:`~tffre.definition.Definition`.
:func:`build_algorithm` composes them into one MapReduce-shaped round
(:mod:`tffre.mapreduce`): distributor (prepare), client work, aggregator
(zero, accumulate, merge, report) and finalizer (update), and hands it to an
executor.
"""

import tensorflow as tf

from tffre import execution
from tffre.client_model import ClientModel
from tffre.mapreduce import make_round, make_trainer
from tffre.registry import (  # noqa: F401  (re-exported: the registry's public API)
    ALGORITHMS, COMMON_HPARAMS, DEFAULT_HPARAMS, LOCAL_OPTIMIZERS, SERVER_AGGREGATORS,
    get_spec, local_optimizer_of, resolve_hparams, valid_algorithm_names, valid_hparams)


def client_model_fn(model_fn, *, loss, input_spec, metrics=None):
    """Wraps a Keras ``model_fn`` as a :class:`~tffre.client_model.ClientModel` factory.

    Args:
      model_fn: no-arg callable returning a fresh, uncompiled ``tf.keras.Model``
        (one output, or a dict of named outputs such as ``features`` and ``logits``).
      loss: a Keras loss on the main output (instance or no-arg class).
      input_spec: the (x, y) element spec of one batch.
      metrics: optional list of no-arg callables returning Keras metrics.
    """
    def make():
        return ClientModel(model_fn(), loss=loss, input_spec=input_spec, metrics=metrics or ())
    return make


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
                    max_parallel_clients=1, loop="while", client_workers="threads", **hparams):
    """Builds the registry algorithm ``name`` as a learning process on an executor.

    The registry row becomes one :class:`tffre.mapreduce.Round` (client
    training with the row's Keras optimizer and its definition's objective,
    the row's mergeable aggregator, the server step and work); the executor
    runs it.

    Args:
      name: a registry name (case-insensitive): fedavg, fedprox, fedatt, fedpa,
        fedavgs, fedavgt, fedproxp, fedatts, fedpap, or a later algorithm's.
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
      client_workers: local executor: parallel clients run in "threads" of
        this process (the default) or in "processes", each its own
        TensorFlow runtime (faster for small models on a CPU; see
        :mod:`tffre.execution.workers`).
      loop: local executor: "while" (the default: one graph per client, a
        while loop over the batches), "steps" (per-batch compiled steps) or
        "reduce" (``dataset.reduce``, TFF's form; slow in-process for LSTMs).
      **hparams: the definition's own hyperparameters and FLCMC Table 7's: learning_rate, num_epochs,
        num_iters (cap on local steps; None = no cap), mu (proximal
        optimizers), stepsize (attention), granularity ("layer" or "model",
        attention), keep_optimizer_state (default False: optimizer state such
        as Adam moments is reset each round; True keeps its client-weighted
        mean at the server, see :mod:`tffre.client_work`), client_weighting
        ("dataset_size", Eq. 6's n_k, by default; "processed" or "uniform").

    Returns:
      A :class:`tffre.process.MeasuredLearningProcess`: ``initialize``,
      ``next``, ``get_model_weights``, ``set_model_weights``, with the round's
      wall seconds and bytes broadcast/uploaded in ``next``'s metrics; and
      ``model_fn`` (the model the algorithm trains: the task's, or the
      definition's around it), ``personal_indices`` and ``evaluation``.
    """
    spec = get_spec(name)
    hp = resolve_hparams(name, **hparams)
    definition = spec.load_definition()(hp)
    model_fn = definition.model_fn(model_fn)   # the algorithm's own model parts, if any
    check_model_accepts(model_fn, input_spec)
    make_model = client_model_fn(model_fn, loss=loss, input_spec=input_spec, metrics=metrics)
    local = LOCAL_OPTIMIZERS[local_optimizer_of(spec, hp)]
    server = SERVER_AGGREGATORS[spec.aggregator]
    trainer = make_trainer(make_model, lambda: local.make(hp), hp, definition)
    round_ = make_round(trainer, server.factory(hp), server.server_learning_rate(hp), hp)
    process = execution.build_process(round_, executor=executor,
                                      max_parallel_clients=max_parallel_clients, loop=loop,
                                      client_workers=client_workers,
                                      name=spec.name, hparams=hp)
    # What the runner evaluates and saves: the algorithm's model, and its personal weights.
    process.model_fn = model_fn
    process.personal_indices = tuple(round_.personal)
    process.evaluation = definition.evaluation
    return process
