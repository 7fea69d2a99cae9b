"""What a run is given: its settings (declared once, like hyperparameters) and what a task prepared.

:class:`RunSettings` are the run's own options (rounds, clients, seed, output,
executor): their declarations give the command line's flags and config keys
(:mod:`tffre.config`) and the one typed object the runner reads. A
:class:`PreparedTask` is what a task prepares (:mod:`tffre.tasks`): the federated data and its
:class:`TaskModel` (the model and what the runner needs to evaluate and save it, the same
type each side of a deployment gets).

Nothing here imports TensorFlow.
"""

import dataclasses
from typing import Any, Callable, Optional

from tffre.faults import Fault, parse_fault
from tffre.execution import (CLIENT_WORKERS, EXECUTORS, LOOPS, client_workers_help,
                             executor_help, loop_help)
from tffre.hparams import (Params, boolean, choice, non_negative_int, optional, param,
                           positive_floats, positive_int, seed, text, unit_interval)


@dataclasses.dataclass(frozen=True)
class RunSettings(Params):
    """A run's settings (FLCMC Table 7's names where it has them); see each field's help."""

    num_rounds: int = param(100, positive_int, "communication rounds", resumable=True,
                            paper="FLCMC Table 7")
    clients: int = param(30, positive_int, "number of clients (institutions)")
    clients_per_round: int = param(10, positive_int, "clients sampled each round",
                                   paper="FLCMC Table 7")
    client_fraction: Optional[float] = param(
        None, optional(unit_interval), "fraction C of the clients sampled each round "
        "(FedED: 0.1); replaces --clients-per-round")
    batch_size: int = param(10, positive_int, "local batch size", paper="FLCMC Table 7")
    eval_every: int = param(1, positive_int, "evaluate the global model every N rounds",
                            resumable=True)
    no_train_loss: bool = param(False, boolean, "evaluate on the held-out splits only: no "
                                "train_loss (the global model's loss over all training data, "
                                "a pass that costs more than a round on a large set)", flag=True,
                                resumable=True)
    seed: int = param(0, seed, "seeds data, split, initial weights, client sampling and order")
    # Resumable: a run folder moved or copied elsewhere goes on from its checkpoints there.
    out: Optional[str] = param(None, optional(text), "output folder (required)", resumable=True)
    checkpoint_every: int = param(5, non_negative_int, "save the server state every N rounds "
                                  "(0: only the last round)", resumable=True)
    resume: bool = param(False, boolean, "continue the run in --out from its last checkpoint",
                         flag=True, persistent=False)
    overwrite: bool = param(False, boolean, "replace the results already in --out", flag=True,
                            persistent=False)
    no_progress: bool = param(False, boolean, "no progress bar", flag=True, persistent=False)
    # Resumable: adding the bound to a finished run trains only the bound (the federated
    # rounds it kept compute the same).
    centralised: bool = param(False, boolean, "also train the same model on the union of the "
                              "clients' data (the upper bound)", flag=True, resumable=True)
    # Resumable as --centralised is: adding rates to a finished run trains only those.
    centralised_learning_rates: Optional[tuple] = param(
        None, optional(positive_floats), "the centralised run: train it once per learning "
        "rate (comma-separated, e.g. 1e-5,3e-5,1e-4,3e-4); the report keeps the rate of best "
        "dev score (default: the first algorithm's rate, one run)", resumable=True)
    # The executors' vocabularies and their help: the one registry (tffre.execution).
    executor: str = param("auto", choice(*EXECUTORS), executor_help(), resumable=True)
    max_parallel_clients: int = param(1, positive_int, "local executor: clients trained at "
                                      "once", resumable=True)
    client_workers: str = param(CLIENT_WORKERS[0], choice(*CLIENT_WORKERS),
                                client_workers_help(), resumable=True)
    loop: str = param(LOOPS[0], choice(*LOOPS), loop_help(), resumable=True)
    # Simulated faulty sites (tffre.faults): the same clients every round, from the seed.
    faulty_clients: int = param(0, non_negative_int, "simulate N faulty clients (the same "
                                "every round, chosen from --seed; named in summary.json)")
    fault: Optional[Fault] = param(
        None, optional(parse_fault), "what the faulty clients do: flip-labels (a permutation "
        "of the classes), scale:S (the update times S), noise:SIGMA (Gaussian noise instead "
        "of the update), nan, stale:R (the update computed R rounds ago); all but flip-labels "
        "need --executor local")

    def check(self):
        if self.clients_per_round > self.clients:
            raise ValueError(f"--clients-per-round {self.clients_per_round} is larger than "
                             f"--clients {self.clients}")
        if self.centralised_learning_rates and not self.centralised:
            raise ValueError("--centralised-learning-rates needs --centralised")
        if self.resume and self.overwrite:
            raise ValueError("give --resume or --overwrite, not both")
        if (self.faulty_clients > 0) != (self.fault is not None):
            raise ValueError("--faulty-clients N and --fault KIND go together")
        if self.faulty_clients > self.clients:
            raise ValueError(f"--faulty-clients {self.faulty_clients} is larger than "
                             f"--clients {self.clients}")

    @property
    def progress(self):
        """Show a progress bar."""
        return not self.no_progress

    def execution(self):
        """The executor keyword arguments of :func:`tffre.builder.build_algorithm`."""
        return dict(executor=self.executor, max_parallel_clients=self.max_parallel_clients,
                    loop=self.loop, client_workers=self.client_workers)


@dataclasses.dataclass
class TaskModel:
    """The model a task gives a side: the simulation's (:attr:`PreparedTask.model`) and each
    side's of a deployment (:class:`tffre.tasks.sites.SiteModel` is this class), built by the
    task's recipe the same way for both (:mod:`tffre.tasks.recipe`).

    Attributes:
      model_fn: no-arg callable returning a fresh, uncompiled Keras model.
      loss: the Keras loss.
      input_spec: (x, y) ``tf.TensorSpec``s of a deployment's round (the simulation reads
        its data's, :meth:`tffre.data.FederatedData.element_spec`), or None.
      load_pretrained: optional callable(keras_model) putting pretrained weights (word
        vectors, an encoder) into a model of ``model_fn``; the runner loads them into the
        server state after ``initialize``, never through ``model_fn`` (TFF issue #2313).
      encoder: turns new inputs into model inputs and has ``save(folder)``; None: no bundle
        is saved (document RE).
      negative_label: index of the "no relation" class: the run reports relation F1.
      macro_f1: report macro-F1 over the classes (FedCB's tables).
      export: optional callable(trained keras model, wrap) returning the model a bundle saves
        when it differs from the one trained (a split encoder: the full model, the frozen
        prefix's weights grafted in; ``wrap`` is the algorithm's
        :attr:`tffre.process.MeasuredLearningProcess.wrap_model_fn`, or None).
      identity: what must agree between the sides beyond the round's types (a frozen
        prefix's weights fingerprint: each side builds the prefix from its own encoder
        folder and the seed).
      evaluation: the evaluation kind, a key of :data:`tffre.evaluation.EVALUATORS`
        ("docre": document-level RE's P/R/F1 counts).
      evaluation_options: keyword arguments of that kind's evaluator (document RE:
        ``threshold``, a number or, in the simulation, "dev").
    """
    model_fn: Callable[[], Any]
    loss: Any
    input_spec: Any = None
    load_pretrained: Optional[Callable[[Any], None]] = None
    encoder: Any = None
    negative_label: Optional[int] = None
    macro_f1: bool = False
    export: Optional[Callable[[Any, Any], Any]] = None
    identity: str = ""
    evaluation: str = "classification"
    evaluation_options: dict = dataclasses.field(default_factory=dict)

    def saved_model(self, model, wrap=None):
        """The Keras model a bundle of the trained ``model`` saves (:attr:`export`)."""
        return model if self.export is None else self.export(model, wrap)


@dataclasses.dataclass
class PreparedTask:
    """What a task prepares for the runner (:mod:`tffre.tasks`).

    Attributes:
      data: a :class:`tffre.data.FederatedData`; a "dev" split, when every client has one,
        is evaluated too.
      model: the :class:`TaskModel` (model, loss, pretrained weights, evaluation, what a
        bundle saves), as each side of a deployment gets it.
      title: the plots' title.
      label_names: the class names (per-class tables, bundles).
      info: extra summary fields.
      write_extras: optional callable(out_dir), e.g. writing the partition files.
      server_data: the server's labelled set D_v as (x, y) arrays (FedED), held out of the
        clients' data.
      concepts, prompts: FedCB's class concepts (one per label) and prompt set.
      metrics: optional Keras metric constructors for the training metrics.
    """
    data: Any
    model: TaskModel
    title: str = ""
    label_names: Optional[list] = None
    info: dict = dataclasses.field(default_factory=dict)
    write_extras: Optional[Callable[[str], None]] = None
    server_data: Any = None
    concepts: Optional[tuple] = None
    prompts: str = "text"
    metrics: Optional[list] = None
