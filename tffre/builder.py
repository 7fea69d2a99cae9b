""":func:`build`: a registry row (:mod:`tffre.registry`) as one round, the one build path.

Every algorithm is one row: a local optimizer, a server aggregator (FLCMC
Tables 5 and 6) and its :class:`~tffre.definition.Definition`. :func:`build`
composes them, with the row's typed hyperparameters, a task's
:class:`ModelRecipe` and its :class:`~tffre.definition.TaskContext`, into one
MapReduce-shaped round (:mod:`tffre.mapreduce`): distributor (prepare), client
work, aggregator (zero, accumulate, merge, report) and finalizer (update). Every
executor (:mod:`tffre.execution`), the runner and the deployment
(:mod:`tffre.deploy.round_factory`) build their rounds through it;
:func:`build_algorithm` is the documented one-call form: a row by name, its
hyperparameters by name, a learning process on an executor.
"""

import dataclasses
from typing import Any, Callable, Optional, Sequence

from tffre import execution
from tffre.client_model import ClientModel
from tffre.client_work import ClientTrainer
from tffre.mapreduce import RoundFactory
from tffre.server_optimizers import ServerOptimizer
from tffre.registry import (CLIENT_OPTIMIZERS, SERVER_AGGREGATORS, client_optimizer_of,
                            get_spec, resolve_hparams)


@dataclasses.dataclass(frozen=True)
class ModelRecipe:
    """A task's model as a round trains it.

    Attributes:
      model_fn: no-arg callable returning a fresh, uncompiled ``tf.keras.Model`` (one output,
        or a dict of named outputs such as ``features`` and ``logits``). Pretrained weights go
        in after ``initialize``, with ``set_model_weights``: loading them inside ``model_fn``
        embeds them in every traced graph (TFF issue #2313).
      loss: a Keras loss on the main output (instance or no-arg class), as for
        ``tff.learning.models.from_keras_model``.
      input_spec: the element spec (x, y) of the client datasets' batches.
      metrics: optional list of no-arg callables returning Keras metrics.
    """
    model_fn: Callable
    loss: Any
    input_spec: Any
    metrics: Optional[Sequence[Callable]] = None

    def client_model_fn(self):
        """A no-arg factory of :class:`~tffre.client_model.ClientModel` around ``model_fn``."""
        model_fn, loss, input_spec = self.model_fn, self.loss, self.input_spec
        metrics = self.metrics or ()

        def make():
            return ClientModel(model_fn(), loss=loss, input_spec=input_spec, metrics=metrics)
        return make


@dataclasses.dataclass(frozen=True)
class Execution:
    """Where and how a round runs (:mod:`tffre.execution`).

    Attributes:
      executor: "tff" (TFF's runtime, CPU only), "local" (this process, GPU when present) or
        "auto" (local when a GPU is visible).
      max_parallel_clients: local executor: clients trained at once.
      loop: local executor: "while" (the default: one graph per client, a while loop over the
        batches), "steps" (per-batch compiled steps) or "reduce" (``dataset.reduce``, TFF's
        form; slow in-process for LSTMs).
      client_workers: local executor: parallel clients run in "threads" of this process (the
        default) or in "processes", each its own TensorFlow runtime (faster for small models
        on a CPU; see :mod:`tffre.execution.workers`).
    """
    executor: str = "auto"
    max_parallel_clients: int = 1
    loop: str = "while"
    client_workers: str = "threads"

    @classmethod
    def pop_from(cls, values):
        """The :class:`Execution` of the items of dict ``values`` named as its fields, which
        are removed from ``values`` (the rest are hyperparameters)."""
        return cls(**{f.name: values.pop(f.name) for f in dataclasses.fields(cls)
                      if f.name in values})


@dataclasses.dataclass(frozen=True)
class BuiltRound:
    """What :func:`build` makes of a row: what an executor needs to run its round.

    Attributes:
      spec: the registry row (:class:`tffre.registry.AlgorithmSpec`).
      definition: the row's :class:`~tffre.definition.Definition`, given its hyperparameters
        and the task context.
      factory: the :class:`tffre.mapreduce.RoundFactory` (the executor reads the round off a
        slot it builds where it chooses).
      model_fn: the model the algorithm trains: the task's, or the definition's around it
        (FedCB's classifier, FedRoD's head); what the runner evaluates and saves.
    """
    spec: Any
    definition: Any
    factory: RoundFactory
    model_fn: Callable

    @property
    def hparams(self):
        """The resolved hyperparameters (the row's ``Hparams`` object)."""
        return self.definition.hparams

    def round(self):
        """The :class:`tffre.mapreduce.Round`, read off an eager slot (for executors of your
        own)."""
        return self.factory.build(self.factory.probe())

    def process(self, how=None):
        """The :class:`tffre.process.MeasuredLearningProcess` of the round on an executor
        (``how``: an :class:`Execution`; default ``Execution()``)."""
        how = how or Execution()
        definition = self.definition
        return execution.build_process(
            self.factory, executor=how.executor, max_parallel_clients=how.max_parallel_clients,
            loop=how.loop, client_workers=how.client_workers, name=self.spec.name,
            hparams=definition.hparams, model_fn=self.model_fn,
            evaluation=definition.evaluation, wrap_model_fn=definition.model_fn)


def build(spec, hparams, model, context=None):
    """The one build path: registry row ``spec`` as a :class:`BuiltRound`.

    The row becomes one :class:`tffre.mapreduce.Round` factory: client training with the
    row's Keras optimizer and its definition's objective, the row's mergeable aggregator
    (DP-FedAvg's clipped, noised mean with ``hparams.dp_on``), the server optimizer
    (:mod:`tffre.server_optimizers`; the plain step by default) and the definition's server
    work.

    Args:
      spec: a registry row (:func:`tffre.registry.get_spec`); nothing is looked up by name
        here.
      hparams: its resolved hyperparameters (the row's ``Hparams`` object:
        :func:`tffre.registry.resolve_hparams`).
      model: the task's :class:`ModelRecipe`.
      context: the task's :class:`tffre.definition.TaskContext` (the number of clients,
        FedCB's class concepts, FedED's server set), for the algorithms that read it.
    """
    definition = spec.load_definition()(hparams, context)
    model_fn = definition.model_fn(model.model_fn)   # the algorithm's own model parts, if any
    make_model = dataclasses.replace(model, model_fn=model_fn).client_model_fn()
    local = CLIENT_OPTIMIZERS[client_optimizer_of(spec, hparams)]
    server = SERVER_AGGREGATORS[spec.aggregator]
    trainer = ClientTrainer.from_hparams(make_model, lambda: local.make(hparams), hparams,
                                         definition)
    make_aggregator = server.factory(hparams)
    if hparams.robust is not None:   # a Byzantine-robust rule in place of the mean
        make_aggregator = robust_make_aggregator(spec, hparams, context)
    if hparams.dp_on:   # DP-FedAvg: the clipped, noised mean over the expected clients
        from tffre.privacy.aggregator import DPMean
        dp = definition.dp_settings()
        make_aggregator = lambda shapes: DPMean(shapes, **dp)   # noqa: E731
    step = server.server_learning_rate(hparams)   # the aggregator's: 1, or attention's lambda
    factory = RoundFactory(trainer, make_aggregator, step,
                           ServerOptimizer.from_hparams(hparams, step))
    return BuiltRound(spec, definition, factory, model_fn)


def robust_make_aggregator(spec, hparams, context):
    """``make(shapes)`` of the robust aggregator ``hparams.robust`` names
    (:func:`tffre.robust.collecting.robust_aggregator`): a buffer of the round's clients, so
    the task context must say how many there are; refused in one line when they are too few
    for the rule (Krum: n > 2f + 2; Bulyan: n >= 4f + 3)."""
    from tffre.robust.collecting import robust_aggregator
    from tffre.robust.robust_settings import robust_requirement
    capacity = getattr(context, "clients_per_round", None)
    if not capacity:
        raise ValueError(f"{spec.name}: --robust {hparams.robust} keeps every upload of a "
                         f"round: give the task context's clients_per_round")
    reason = robust_requirement(hparams, capacity)
    if reason:
        raise ValueError(f"{spec.name}: --robust {hparams.robust}: {reason}")
    return lambda shapes: robust_aggregator(hparams, shapes, capacity)


def build_algorithm(name, model_fn, *, loss, input_spec, metrics=None, context=None,
                    hparams=None, **values):
    """Builds the registry algorithm ``name`` as a learning process on an executor: the row
    looked up once, its hyperparameters resolved, :func:`build`, then the executor.

    Args:
      name: a registry name (case-insensitive): fedavg, fedprox, fedatt, fedpa,
        fedavgs, fedavgt, fedproxp, fedatts, fedpap, or a later algorithm's.
      model_fn: the task's Keras model, a no-arg callable (with the next three,
        :class:`ModelRecipe`'s fields).
      loss: its Keras loss.
      input_spec: the element spec of a client dataset's batches.
      metrics: optional no-arg Keras metric constructors.
      context: the task's :class:`tffre.definition.TaskContext`, for the algorithms that
        read it.
      hparams: the algorithm's resolved hyperparameters (its registry row's ``Hparams``
        object, :func:`tffre.registry.resolve_hparams`), used as they are; or
      **values: the executor's settings, by :class:`Execution`'s field names (executor:
        "tff", "local" or "auto"; max_parallel_clients; loop; client_workers), and the
        algorithm's hyperparameters, by their declared names or aliases (``python -m tffre
        run --help`` lists them; e.g. learning_rate, num_epochs, num_iters, prox_mu or mu,
        stepsize, granularity, client_weighting, keep_optimizer_state); unset ones take the
        row's defaults. Unknown names raise an error listing the valid ones.

    Returns:
      A :class:`tffre.process.MeasuredLearningProcess`: ``initialize``,
      ``next``, ``get_model_weights``, ``set_model_weights``, with the round's
      wall seconds and bytes broadcast/uploaded in ``next``'s metrics; and
      ``model_fn`` (the model the algorithm trains: the task's, or the
      definition's around it), ``personal_indices``, ``evaluation`` and the
      resolved ``hparams``.
    """
    values = dict(values)
    how = Execution.pop_from(values)
    spec = get_spec(name)
    hp = resolve_hparams(spec.name, hparams, **values)
    recipe = ModelRecipe(model_fn, loss=loss, input_spec=input_spec, metrics=metrics)
    return build(spec, hp, recipe, context).process(how)
