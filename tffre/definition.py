"""An algorithm as one definition: the six parts every federated algorithm in tffre fills in.

A :class:`Definition` says what differs between algorithms and nothing else;
the client loop, the aggregation plumbing and both executors are shared
(:mod:`tffre.mapreduce`, :mod:`tffre.client_work`, :mod:`tffre.execution`).
The parts, each a method or attribute with a working default (FedAvg's):

1. **client optimizer** (the paper's "local optimizer"): the registry row's Keras optimizer
   (:data:`tffre.registry.CLIENT_OPTIMIZERS`); the ``local_optimizer`` hyperparameter
   may replace it by its form in another family (:data:`OPTIMIZER_FAMILIES`).
2. **server extras** (:meth:`Definition.initial_extras`,
   :meth:`Definition.server_update`): tensors kept in the server state beside
   the model and broadcast with it (FedCMC's major classifier vectors,
   FedCB's frozen classifier).
3. **client objective** (:meth:`Definition.objective`): the loss a client
   minimises. It sees an :class:`ObjectiveContext`: the batch, every named
   output of the model (``features``, ``logits``), the outputs of frozen model
   copies (the global model for MOON and FedLCC; :meth:`Definition.frozen_models`),
   the server extras, the client's label counts (FedRS, FedLC), the client's
   own state and the hyperparameters. It may add to the cross-entropy or
   replace it.
4. **uploads** (:attr:`Definition.uploads_model`, :meth:`Definition.client_upload`,
   :meth:`Definition.upload_aggregator`): the model delta (aggregated by the
   row's server aggregator) and/or any other tensors (FedED's predictions on
   a server-held set, FedCMC's per-class scores), aggregated by a mergeable
   accumulator (``client``, ``zero``, ``accumulate``, ``merge``, ``report``),
   so the round stays one ``tff.federated_aggregate``.
5. **server work** (:meth:`Definition.server_update`): what the server does
   after aggregating (FedED's distillation, FedCMC's new major vectors). Work
   that trains needs its own model and optimizer: :meth:`Definition.server_objects`
   builds them once per executor and hands them to ``server_update``.
6. **per-client state** (:meth:`Definition.initial_client_state`,
   :meth:`Definition.next_client_state`): tensors a client keeps between
   rounds (MOON's and FedLCC's previous local model). **Personal weights**
   (:meth:`Definition.personal_variables`, :class:`PersonalLayerMixin`: FedRep's
   and FedRoD's personal heads) are trainable variables a client starts from its
   own values and never uploads; the server averages the others. TFF has no primitive
   for it: in simulation it is kept outside the computation and passed in
   and out as a CLIENTS-placed value (:class:`tffre.process.MeasuredLearningProcess`
   holds it per client id); in deployment it never leaves the client. Such a
   round does not lower to MapReduceForm, whose ``work`` has no client-state
   output: stateful algorithms are the documented exception.

**Hyperparameters** are declared once, in the definition's ``Hparams``: a
frozen dataclass of :func:`tffre.hparams.param` fields (default, type and
range, help, paper reference). The registry, the command line, the config
files and the validation all read that declaration; the definition gets the
resolved object (``self.hparams.learning_rate``). A subclass's ``Hparams``
extends its parent's. What the *task* gives an algorithm (the number of
clients, class concepts, the server's labelled set) is a :class:`TaskContext`,
not a hyperparameter.

Every method runs inside ``tf.function`` (the local executor) or a TFF
TensorFlow computation (the TFF executor): write plain TensorFlow. Types are
read off the traced functions, so the bytes each way are computed, not
listed. See ``docs/adding-an-algorithm.md`` for a worked example.

This module and the algorithm modules import TensorFlow lazily
(:mod:`tffre.lazy`), so that their declarations load without it.
"""

import collections
import dataclasses
from typing import Any, Optional, Tuple

from tffre.hparams import (Params, boolean, choice, non_negative_float, num_iters, optional,
                           param, positive_float, positive_int, unit_interval)
from tffre.lazy import tf

#: The weight of a client's update (see :mod:`tffre.client_work`); "dataset_size" is n_k of
#: FLCMC Eq. 6.
CLIENT_WEIGHTINGS = ("dataset_size", "processed", "uniform")
#: The optimizer families, declared here once: the values of the ``local_optimizer``
#: hyperparameter (``--local-optimizer``), which replaces a row's client optimizer by the same
#: kind of step in another family (each client optimizer's ``forms`` in
#: :data:`tffre.registry.CLIENT_OPTIMIZERS` say by which).
OPTIMIZER_FAMILIES = ("adam", "sgdm")


@dataclasses.dataclass(frozen=True)
class Hparams(Params):
    """FedAvg's hyperparameters, which every algorithm takes (FLCMC Table 7 and the common ones)."""

    learning_rate: Optional[float] = param(
        None, optional(non_negative_float), "local learning rate; default the client "
        "optimizer's: 0.01 for SGD/PGD, 0.001 for the Adam ones", paper="FLCMC Table 7")
    num_epochs: int = param(10, positive_int, "local epochs", paper="FLCMC Table 7")
    num_iters: Optional[int] = param(20, num_iters, "cap on local steps per round; 0 or none: "
                                     "no cap", paper="FLCMC Table 7")
    client_weighting: str = param(
        "dataset_size", choice(*CLIENT_WEIGHTINGS), "a client update's weight: dataset_size "
        "(n_k), processed (examples processed in local training), uniform (1)",
        paper="FLCMC Eq. 6")
    keep_optimizer_state: bool = param(
        False, boolean, "keep the optimizer state (Adam moments) across rounds at the server",
        flag=True)
    lr_decay: float = param(
        1.0, unit_interval, "multiply the local learning rate by this every round (FedCB and "
        "the FedLCC authors' code: 0.99; 1: no decay)")
    local_optimizer: Optional[str] = param(
        None, optional(choice(*OPTIMIZER_FAMILIES)), "replace every algorithm's local "
        "optimizer: adam (FedCB's; a proximal row keeps its term: PAdam) or sgdm (SGD, momentum "
        "0.9, weight decay 5e-4: the FedCB authors' scripts)")
    clip_norm: Optional[float] = param(
        None, optional(positive_float), "clip each local step's gradients to this global L2 "
        "norm (the FedLCC authors' code: 1.0; default no clipping)")


@dataclasses.dataclass(frozen=True)
class TaskContext:
    """What a task gives the algorithms besides hyperparameters (filled in by the runner).

    Attributes:
      num_clients: the population (FedDyn's m).
      concepts: the class concepts, one text per class (FedCB).
      prompts: FedCB's prompt set: "image" or "text".
      server_data: the server's labelled set D_v, a batched ``tf.data.Dataset`` of (x, y)
        (FedED).
      clients_per_round: the expected number of clients per round (differential privacy's
        fixed denominator).
    """
    num_clients: Optional[int] = None
    clients_per_round: Optional[int] = None
    concepts: Optional[Tuple[str, ...]] = None
    prompts: str = "image"
    server_data: Any = None

    @classmethod
    def of(cls, *, num_clients, clients_per_round, concepts=None, prompts="image",
           server_arrays=None, batch_size=1):
        """The one place a run's context is made, in the simulation
        (:func:`tffre.runner.loop.run_experiment`) and in a deployment
        (:func:`tffre.deploy.tasks.task_context`) alike: ``concepts`` as a tuple, and D_v's
        (x, y) ``server_arrays`` as a ``tf.data.Dataset`` batched by the run's
        ``batch_size`` (FedED predicts on D_v in chunks of that size)."""
        server = None
        if server_arrays is not None:
            import tensorflow as tf
            server = tf.data.Dataset.from_tensor_slices(tuple(server_arrays)).batch(batch_size)
        return cls(num_clients=num_clients, clients_per_round=clients_per_round,
                   concepts=None if concepts is None else tuple(concepts), prompts=prompts,
                   server_data=server)


class ObjectiveContext:
    """What a client objective sees for one batch (see :meth:`Definition.objective`).

    Attributes:
      x, y: the batch.
      outputs: the model's named outputs (a dict; a single-output model's
        output is ``outputs["predictions"]``).
      model: the :class:`tffre.client_model.ClientModel` being trained.
      frozen: {name: named outputs of that frozen model copy on ``x``}
        (inference mode, no gradient), per :meth:`Definition.frozen_models`.
      extras: the server extras broadcast this round.
      label_counts: float32 [num_classes] counts of the client's labels (one
        pass over its data), or None unless the definition asks for them.
      client_state: this client's state (stateful definitions), else None.
      initial_weights: the broadcast trainable weights.
      hparams: the algorithm's resolved hyperparameters (its ``Hparams`` object).
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def model_loss(self):
        """The model's loss (the Keras loss on the main output, e.g. cross-entropy)."""
        return self.model.model_loss(self.y, self.outputs)

    def row_mask(self):
        """Which rows of the outputs are real, as the model's loss reads them off ``y``
        (document RE: the ``[batch, pairs]`` pair mask), or None when every row is."""
        return self.model.row_mask(self.y)


def finite_or_previous(new, old):
    """``new`` if every float tensor in it is finite, else ``old`` (the same structure).

    A client whose round diverged (NaN or Inf; its upload is excluded) keeps its
    old state: a non-finite state would make every later round of it NaN too.
    """
    checks = [tf.reduce_all(tf.math.is_finite(t)) for t in tf.nest.flatten(new)
              if t.dtype.is_floating]
    finite = tf.reduce_all(checks) if checks else tf.constant(True)
    return tf.nest.map_structure(lambda n, o: tf.where(finite, n, o), new, old)


class WeightedStructMean:
    """A mergeable weighted mean of any structure of float tensors (the default for extra uploads).

    ``client(value, weight)`` uploads {value, weight}; the report is
    sum_k w_k value_k / sum_k w_k, zero where no client counted.
    """

    def __init__(self, spec):
        self.spec = spec

    def client(self, value, weight):
        return collections.OrderedDict(value=value, weight=weight)

    def zero(self):
        return collections.OrderedDict(
            total=tf.nest.map_structure(lambda s: tf.zeros(s.shape, tf.float32), self.spec),
            weight=tf.constant(0.0))

    def accumulate(self, acc, upload):
        w = upload["weight"]
        return collections.OrderedDict(
            total=tf.nest.map_structure(lambda t, v: t + w * tf.cast(v, tf.float32),
                                        acc["total"], upload["value"]),
            weight=acc["weight"] + w)

    def merge(self, a, b):
        return tf.nest.map_structure(tf.add, a, b)

    def report(self, acc):
        return tf.nest.map_structure(lambda t: tf.math.divide_no_nan(t, acc["weight"]),
                                     acc["total"])


class StructSum:
    """A mergeable sum of any structure of tensors (the client's weight is not applied).

    Excluded clients upload zeros (the client work zeroes them), so they add nothing.
    """

    def __init__(self, spec):
        self.spec = spec

    def client(self, value, weight):
        return value

    def zero(self):
        return tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), self.spec)

    def accumulate(self, acc, upload):
        return tf.nest.map_structure(tf.add, acc, upload)

    def merge(self, a, b):
        return tf.nest.map_structure(tf.add, a, b)

    def report(self, acc):
        return acc


@dataclasses.dataclass(frozen=True)
class UploadRange:
    """Where the values of one part of an algorithm's upload lie (see
    :meth:`Definition.upload_ranges`): what secure aggregation, which sums values in a fixed
    range (:mod:`tffre.deploy.secagg`), needs to know of them.

    Attributes:
      part: the upload: "extra" (:meth:`Definition.client_upload`'s, through its aggregator)
        or "model" (the delta).
      low, high: the values' bounds; None where there is none.
      values: what the values are, one phrase naming the setting that makes them so (a
        refusal quotes it).
      instead: what to do when a value leaves the secure range ("use ... with secure
        aggregation"), or "".
    """
    part: str
    low: Optional[float] = None
    high: Optional[float] = None
    values: str = ""
    instead: str = ""

    @property
    def bounded(self):
        """True when the values have both bounds."""
        return self.low is not None and self.high is not None

    def why_unbounded(self):
        """One clause saying which bound the values lack and what to do ("" when bounded)."""
        if self.bounded:
            return ""
        side = "lower" if self.low is None else "upper"
        if self.low is None and self.high is None:
            side = "lower or upper"
        return f"{self.values}, which have no {side} bound" + \
            (f": {self.instead}" if self.instead else "")


class Definition:
    """An algorithm's parts (see the module docstring); the defaults are FedAvg's.

    Subclass it, override what your algorithm changes, declare its own
    hyperparameters in a nested ``Hparams`` (a frozen dataclass extending the
    parent's), and add a registry row (:data:`tffre.registry.ALGORITHMS`) naming
    the subclass. The constructor receives the resolved hyperparameters (an
    instance of the row's composed ``Hparams``) and the task's
    :class:`TaskContext`.
    """

    #: The hyperparameters this definition declares (FedAvg's: every algorithm takes them).
    Hparams = Hparams

    #: Part 4: upload the model delta (aggregated by the registry row's aggregator).
    uploads_model = True
    #: How the runner evaluates the algorithm: "global" (the server's model) or "personal"
    #: (the mean over the clients trained so far of the server's model with each client's
    #: personal weights: FedRep, whose server keeps no trained head).
    evaluation = "global"
    #: The algorithm reads the task model's ``features`` output (or builds on it): a task
    #: offers named outputs {"features", "logits"} then (e.g. the IMCS LSTM).
    needs_features = False
    #: Part 3: compute the client's label counts before training (FedRS, FedLC).
    uses_label_counts = False
    #: The task must give the server's labelled set D_v (``TaskContext.server_data``: FedED).
    needs_server_data = False
    #: Part 2: the server extras that never change (FedED's D_v inputs): a client needs them
    #: once, as it needs the frozen weights once (a deployment sends them once).
    constant_extras = ()

    @classmethod
    def dp_refusal(cls, hparams):
        """Why client-level DP (:mod:`tffre.privacy`) is not sound for this definition with
        ``hparams``, or None where it is. DP clips and noises the model delta; an algorithm
        with other uploads must privatize them too (FedED) or say why it cannot."""
        if cls.client_upload is not Definition.client_upload:
            return (f"{cls.__name__} uploads more than the model delta, and those uploads are "
                    f"not clipped and noised")
        return None

    @classmethod
    def upload_ranges(cls, hparams):
        """The value ranges this definition's uploads are known to keep under ``hparams``: a
        tuple of :class:`UploadRange`, one per part with something to declare. Secure
        aggregation reads it (a value beyond its range is refused in one line that quotes the
        part's ``why_unbounded``). Default none: the model delta and the training sums have
        no bounds known in advance (SecAgg+'s clip and maximum weight bound them)."""
        return ()

    def dp_settings(self):
        """The keyword arguments of a DP-FedAvg aggregator (:mod:`tffre.privacy.aggregator`)
        under this definition's DP hyperparameters and the task context: noise multiplier,
        clip, adaptive clipping, the expected clients per round, the secret seed."""
        from tffre.privacy.dp_settings import ADAPTIVE, INITIAL_ADAPTIVE_CLIP
        hp = self.hparams
        if hp.dp_noise_multiplier is None:
            raise ValueError("calibrate dp_target_epsilon to a dp_noise_multiplier first "
                             "(tffre.privacy.accounting.calibrate_noise_multiplier; the runner "
                             "does it)")
        if not self.context.clients_per_round:
            raise ValueError("differential privacy needs the expected clients per round: "
                             "TaskContext(clients_per_round=...)")
        from tffre.privacy.aggregator import AdaptiveClip
        adaptive = hp.dp_clip == ADAPTIVE
        return dict(noise_multiplier=hp.dp_noise_multiplier,
                    clip=INITIAL_ADAPTIVE_CLIP if adaptive else hp.dp_clip,
                    adaptive_clip=AdaptiveClip(target_quantile=hp.dp_target_quantile)
                    if adaptive else None,
                    expected_clients=self.context.clients_per_round, seed=hp.dp_seed)

    def __init__(self, hparams, context=None):
        self.hparams = hparams
        self.context = context if context is not None else TaskContext()

    # --- the model the algorithm trains ---

    def model_fn(self, model_fn):
        """The Keras ``model_fn`` the algorithm trains, given the task's; default: the task's.

        An algorithm that owns part of the model builds it here around the task
        model's ``features`` output: FedCB's and FedETF's frozen classifiers,
        FedRoD's personal head. Called once per process; the runner evaluates
        and saves the same model (``process.model_fn``).
        """
        return model_fn

    # --- part 2: server extras ---

    def initial_extras(self, model):
        """Server extras at round 0, from a freshly built ``model`` (ClientModel). Default none."""
        return collections.OrderedDict()

    # --- part 3: client objective ---

    def frozen_models(self):
        """{name: fn(broadcast, client_state) -> trainable weights} of frozen model copies.

        Each named copy is loaded with those weights at the start of a
        client's round and run in inference mode on every batch; the
        objective reads its outputs in ``ctx.frozen[name]``. Default none.
        """
        return {}

    def objective(self, ctx):
        """The loss to minimise on one batch (an :class:`ObjectiveContext`). Default: the model loss."""
        return ctx.model_loss()

    # --- part 4: uploads other than the model delta ---

    def client_upload(self, ctx):
        """Tensors the client uploads besides the delta, after training (ctx without a batch).

        ``ctx`` has ``model`` (the trained model), ``dataset``, ``extras``,
        ``label_counts``, ``client_state``, ``initial_weights`` and ``hparams``.
        Default none.
        """
        return collections.OrderedDict()

    def upload_aggregator(self, spec):
        """The mergeable aggregator of :meth:`client_upload`'s result (``spec``: its TensorSpecs).

        It has ``client(value, weight)``, ``zero()``, ``accumulate(acc, upload)``,
        ``merge(a, b)`` and ``report(acc)``. An aggregator whose attribute
        ``reads_model_upload`` is True gets ``accumulate(acc, upload, model_upload)``:
        the same client's model-delta upload too (e.g. to pick rows of the
        delta without uploading them twice, as FedCMC's selection does).
        """
        return WeightedStructMean(spec)

    # --- part 5: server work ---

    def server_objects(self, make_model, make_optimizer):
        """Objects the server work needs (e.g. a model and an optimizer to train), or None.

        ``make_model()`` returns a fresh :class:`tffre.client_model.ClientModel`
        and ``make_optimizer()`` a fresh optimizer of the row's local kind. The
        local executor calls this once, outside ``tf.function``; the TFF
        executor inside its server computation. Default: None.
        """
        return None

    def server_update(self, model_weights, extras, aggregate, previous_weights, objects=None):
        """The server's work after aggregation: returns (model weights, extras).

        ``model_weights`` already has the aggregated model step applied
        (when the model is uploaded); ``previous_weights`` are the round's
        broadcast weights theta_t; ``aggregate`` is the report of the extra
        uploads (None without any); ``objects`` is :meth:`server_objects`'
        result. Default: both unchanged.
        """
        return model_weights, extras

    # --- part 6: per-client state ---

    def initial_client_state(self, model):
        """A client's state before its first round, or None for a stateless algorithm."""
        return None

    def next_client_state(self, ctx):
        """The client's state after its round (``ctx`` as for :meth:`client_upload`)."""
        return ctx.client_state

    def personal_variables(self, model):
        """Indices into ``model.trainable_variables`` of the personal weights, or ().

        Each client starts them from its state's ``"personal"`` values (once its
        state's ``"seen"`` is 1; the broadcast ones before), trains them with the
        rest, and never uploads them: only the other variables' deltas are
        aggregated, and the server's copy of the personal ones is left as it is.
        Needs per-client state holding ``personal`` and ``seen``
        (:class:`PersonalLayerMixin` provides it). Default: none.
        """
        return ()

    @property
    def stateful(self):
        """True when the algorithm keeps per-client state (decided by :meth:`initial_client_state`)."""
        return type(self).initial_client_state is not Definition.initial_client_state


class GlobalModelMixin:
    """Adds a frozen copy of the broadcast global model as ``ctx.frozen["global"]``."""

    def frozen_models(self):
        models = super().frozen_models()
        models["global"] = lambda broadcast, client_state: broadcast["model"].trainable
        return models


class PersonalLayerMixin:
    """Personal weights: the trainable weights of the Keras layer named by the class attribute
    ``personal_layer`` (default "classifier") stay with each client (FedRep, FedRoD).

    Client state: ``personal`` (those weights after the client's last round)
    and ``seen`` (1.0 once it has trained). A diverged round keeps the old state.
    """

    personal_layer = "classifier"

    def personal_variables(self, model):
        layer = model.keras_model.get_layer(self.personal_layer)
        mine = {id(v) for v in layer.trainable_weights}
        return tuple(i for i, v in enumerate(model.trainable_variables) if id(v) in mine)

    def initial_client_state(self, model):
        variables = list(model.trainable_variables)
        return collections.OrderedDict(
            personal=[tf.zeros_like(variables[i]) for i in self.personal_variables(model)],
            seen=tf.constant(0.0))

    def next_client_state(self, ctx):
        variables = list(ctx.model.trainable_variables)
        return finite_or_previous(collections.OrderedDict(
            personal=[tf.identity(variables[i]) for i in self.personal_variables(ctx.model)],
            seen=tf.constant(1.0)), ctx.client_state)
