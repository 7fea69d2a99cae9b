""":func:`build_algorithm`: a registry row (:mod:`tffre.registry`) as a learning process.

Every algorithm is one row: a local optimizer, a server aggregator (FLCMC
Tables 5 and 6) and its :class:`~tffre.definition.Definition`.
:func:`build_algorithm` composes them into one MapReduce-shaped round
(:mod:`tffre.mapreduce`): distributor (prepare), client work, aggregator
(zero, accumulate, merge, report) and finalizer (update), and hands it to an
executor (:mod:`tffre.execution`).
"""

from tffre import execution
from tffre.client_model import ClientModel
from tffre.client_work import ClientTrainer
from tffre.mapreduce import RoundFactory
from tffre.registry import (CLIENT_OPTIMIZERS, SERVER_AGGREGATORS, get_spec, client_optimizer_of,
                            resolve_hparams)


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


def round_factory(name, model_fn, *, loss, input_spec, metrics=None, context=None,
                  hparams=None, **values):
    """(:class:`tffre.mapreduce.RoundFactory`, definition, model_fn) of registry algorithm
    ``name``: what an executor needs to make its round (see :func:`build_algorithm`)."""
    spec = get_spec(name)
    hp = resolve_hparams(name, hparams, **values)
    definition = spec.load_definition()(hp, context)
    model_fn = definition.model_fn(model_fn)   # the algorithm's own model parts, if any
    make_model = client_model_fn(model_fn, loss=loss, input_spec=input_spec, metrics=metrics)
    local = CLIENT_OPTIMIZERS[client_optimizer_of(spec, hp)]
    server = SERVER_AGGREGATORS[spec.aggregator]
    trainer = ClientTrainer.from_hparams(make_model, lambda: local.make(hp), hp, definition)
    make_aggregator = server.factory(hp)
    if hp.dp_on:   # DP-FedAvg: the clipped, noised mean over the expected clients (tffre.privacy)
        from tffre.privacy.aggregator import DPMean
        dp = definition.dp_settings()
        make_aggregator = lambda shapes: DPMean(shapes, **dp)   # noqa: E731
    factory = RoundFactory(trainer, make_aggregator, server.server_learning_rate(hp),
                           learning_rate=hp.learning_rate, lr_decay=hp.lr_decay)
    return factory, definition, model_fn


def build_round(name, model_fn, *, loss, input_spec, metrics=None, context=None, hparams=None,
                **values):
    """The :class:`tffre.mapreduce.Round` of registry algorithm ``name``, read off an eager
    slot (for executors of your own, e.g. a deployment: :mod:`tffre.deploy`); the arguments
    are :func:`build_algorithm`'s."""
    factory, _, _ = round_factory(name, model_fn, loss=loss, input_spec=input_spec,
                                  metrics=metrics, context=context, hparams=hparams, **values)
    return factory.build(factory.probe())


def build_algorithm(name, model_fn, *, loss, input_spec, metrics=None, context=None,
                    executor="auto", max_parallel_clients=1, loop="while",
                    client_workers="threads", hparams=None, **values):
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
      context: the task's :class:`tffre.definition.TaskContext` (the number of
        clients, FedCB's class concepts, FedED's server set), for the algorithms
        that read it.
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
      hparams: the algorithm's resolved hyperparameters (its registry row's ``Hparams``
        object, :func:`tffre.registry.resolve_hparams`), used as they are; or
      **values: the algorithm's hyperparameters, by their declared names or
        aliases (``python -m tffre run --help`` lists them; e.g. learning_rate,
        num_epochs, num_iters, prox_mu or mu, stepsize, granularity,
        client_weighting, keep_optimizer_state); unset ones take the row's
        defaults. Unknown names raise an error listing the valid ones.

    Returns:
      A :class:`tffre.process.MeasuredLearningProcess`: ``initialize``,
      ``next``, ``get_model_weights``, ``set_model_weights``, with the round's
      wall seconds and bytes broadcast/uploaded in ``next``'s metrics; and
      ``model_fn`` (the model the algorithm trains: the task's, or the
      definition's around it), ``personal_indices``, ``evaluation`` and the
      resolved ``hparams``.
    """
    factory, definition, model_fn = round_factory(
        name, model_fn, loss=loss, input_spec=input_spec, metrics=metrics, context=context,
        hparams=hparams, **values)
    return execution.build_process(factory, executor=executor,
                                   max_parallel_clients=max_parallel_clients, loop=loop,
                                   client_workers=client_workers, name=get_spec(name).name,
                                   hparams=definition.hparams, model_fn=model_fn,
                                   evaluation=definition.evaluation,
                                   wrap_model_fn=definition.model_fn)
