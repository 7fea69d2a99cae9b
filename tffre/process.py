"""A learning process whose ``next`` also reports wall time and communication.

The same class wraps both executors (:mod:`tffre.execution`): ``initialize``,
``next``, ``get_model_weights`` and ``set_model_weights`` behave as those of a
``tff.learning.templates.LearningProcess``. TFF computations cannot read a
clock, so the round's wall seconds are measured around the call, in Python.
Bytes come from the round's types: each sampled client receives the
broadcast and sends its upload (the whole of what leaves it).

For an algorithm with per-client state (MOON, FedLCC) the process keeps each
client's state here, in the simulation, keyed by client id: ``next`` takes
the round's ``client_ids``, passes their states in as a CLIENTS-placed value
and stores what comes back. A client's state never enters the server state
or the upload (in deployment it stays on the client).
"""

import collections
import dataclasses
import time
from typing import Any, Callable, Optional, Tuple

import tensorflow as tf
import tensorflow_federated as tff


class ClientDataError(ValueError):
    """A client dataset that cannot be trained on (empty, wrong element type)."""


@dataclasses.dataclass(frozen=True)
class ProcessFunctions:
    """A learning process's functions, as an executor makes them.

    Attributes:
      initialize, next, get_model_weights, set_model_weights: as those of a
        ``tff.learning.templates.LearningProcess`` (``next`` of a stateful algorithm takes
        and returns the clients' states too).
      initial_client_state: no-arg callable, a client's state before its first round; None
        for an algorithm without per-client state.
    """
    initialize: Callable
    next: Callable
    get_model_weights: Optional[Callable]
    set_model_weights: Optional[Callable]
    initial_client_state: Optional[Callable] = None


@dataclasses.dataclass(frozen=True)
class AlgorithmInfo:
    """What a process carries of its algorithm for the runner.

    Attributes:
      name, hparams: the algorithm and its resolved hyperparameters.
      model_fn: the Keras model the algorithm trains (the task's, or the definition's
        around it): what the runner evaluates and saves.
      evaluation: "global" or "personal" (:attr:`tffre.definition.Definition.evaluation`).
      wrap_model_fn: the definition's transformation of a task's ``model_fn`` into
        ``model_fn``; None: the identity.
    """
    name: str
    hparams: Any
    model_fn: Optional[Callable] = None
    evaluation: str = "global"
    wrap_model_fn: Optional[Callable] = None


@dataclasses.dataclass(frozen=True)
class RoundFacts:
    """What a round's types say: its input, its bytes per client and its personal weights.

    Attributes:
      input_spec: the element spec of a client dataset's batches.
      broadcast_bytes_per_client, upload_bytes_per_client: from the round's types.
      constant_bytes_per_client: the part of the broadcast that never changes.
      personal_indices: indices of the personal trainable weights (FedRep, FedRoD).
    """
    input_spec: Any
    broadcast_bytes_per_client: int
    upload_bytes_per_client: int
    constant_bytes_per_client: int = 0
    personal_indices: Tuple[int, ...] = ()


class MeasuredLearningProcess:
    """``initialize``/``next``/``get_model_weights``/``set_model_weights`` plus round metrics.

    ``next(state, client_datasets)`` returns a
    ``tff.learning.templates.LearningProcessOutput`` whose metrics also hold
    ``metrics['round']`` = wall_seconds, num_clients, bytes_broadcast,
    bytes_uploaded. Client datasets are checked first: an empty dataset or one
    whose element type differs from the model's ``input_spec`` raises
    :class:`ClientDataError` naming the client's position.

    Args:
      functions: the executor's :class:`ProcessFunctions`.
      algorithm: the :class:`AlgorithmInfo` the runner reads.
      facts: the round's :class:`RoundFacts`.
      executor: "tff" or "local".
      tff_process: the ``tff.learning.templates.LearningProcess`` (TFF executor, stateless
        algorithms only), or None.

    Attributes:
      name, hparams, model_fn, evaluation: ``algorithm``'s.
      wrap_model_fn: the definition's transformation of a task's ``model_fn`` into
        ``model_fn`` (identity for most algorithms): a task that saves another model than it
        trains (a split encoder's full model) wraps that one alike.
      personal_indices, input_spec: ``facts``'.
      broadcast_bytes_per_client, upload_bytes_per_client, constant_bytes_per_client: ``facts``'.
      executor, tff_process: as given.
      served: the client ids that have received the constant part.
      stateful: True when clients keep state between rounds.
      client_states: {client id: state} of the clients trained so far (stateful only).
    """

    def __init__(self, functions, *, algorithm, facts, executor, tff_process=None):
        self.initialize = functions.initialize
        self._next = functions.next
        self.get_model_weights = functions.get_model_weights
        self.set_model_weights = functions.set_model_weights
        self.name = algorithm.name
        self.hparams = algorithm.hparams
        self.model_fn = algorithm.model_fn
        self.wrap_model_fn = algorithm.wrap_model_fn or (lambda fn: fn)
        self.personal_indices = tuple(facts.personal_indices)
        self.evaluation = algorithm.evaluation
        self.executor = executor
        self.input_spec = facts.input_spec
        self.broadcast_bytes_per_client = int(facts.broadcast_bytes_per_client)
        self.upload_bytes_per_client = int(facts.upload_bytes_per_client)
        self.constant_bytes_per_client = int(facts.constant_bytes_per_client)
        self.served = set()
        self.tff_process = tff_process
        self._initial_client_state = functions.initial_client_state
        self.stateful = functions.initial_client_state is not None
        self.client_states = {}
        self.upload_faults = None

    def simulate_faults(self, faults):
        """Has the faulty clients of ``faults`` (a :class:`tffre.faults.UploadFaults`) send
        their faulty uploads from now on; refused in one line where the executor cannot (TFF's
        runtime runs every client's work inside one computation)."""
        if self.executor != "local":
            raise ValueError(f"--fault {faults.fault} changes what a client uploads, which "
                             f"needs --executor local (TFF's runtime runs every client inside "
                             f"one computation); flip-labels runs on every executor")
        self.upload_faults = faults

    def initial_client_state(self):
        """A client's state before its first round (stateful algorithms only)."""
        if not self.stateful:
            raise ValueError(f"{self.name} keeps no per-client state")
        return self._initial_client_state()

    def next(self, state, client_data, client_ids=None, round_num=None):
        """One round on ``client_data`` (a list of ``tf.data.Dataset``), plus ``metrics['round']``.

        ``client_ids`` (one per dataset) are required for a stateful
        algorithm: they key the per-client state. Given for any algorithm, they
        also count the broadcast's constant part (non-trainable weights that
        never change: a frozen embedding, FedCB's classifier) once per client,
        at its first round, as a deployment would send it; without them it is
        counted every round. ``round_num`` seeds the simulated faults' noise
        (:meth:`simulate_faults`).
        """
        self.check_client_data(client_data)
        kwargs = {}
        if self.upload_faults is not None:
            if client_ids is None:
                raise ClientDataError(f"{self.name}: simulated faults need client_ids")
            faults = self.upload_faults

            def transform(index, upload):
                client = client_ids[index]
                if not faults.affects(client):
                    return upload
                from tffre.execution.workers import numpy_structure
                return faults.apply(client, numpy_structure(upload), round_num or 0)
            kwargs["transform"] = transform
        if self.stateful and (client_ids is None or len(client_ids) != len(client_data)):
            raise ClientDataError(f"{self.name} keeps per-client state: pass client_ids, one "
                                  f"per client dataset")
        start = time.perf_counter()
        try:
            if self.stateful:
                states = [self.client_states[c] if c in self.client_states
                          else self._initial_client_state() for c in client_ids]
                output, new_states = self._next(state, client_data, states, **kwargs)
                self.client_states.update(zip(client_ids, new_states))
            else:
                output = self._next(state, client_data, **kwargs)
        except Exception as err:
            # TFF's runtime serializes each client dataset and refuses one over 100 MB (a
            # large client's cached encoder activations): say what to do instead.
            if "Serialized size of Dataset" in str(err):
                raise ClientDataError(
                    f"{self.name}: a client's dataset is larger than TFF's runtime takes "
                    f"({str(err).split('(')[1].split(')')[0]}): use --executor local (in "
                    f"this process, no such cap)") from None
            raise
        seconds = time.perf_counter() - start
        metrics = collections.OrderedDict(output.metrics)
        n = len(client_data)
        constant = self.constant_bytes_per_client
        first_time = n if client_ids is None else len(set(client_ids) - self.served)
        if client_ids is not None:
            self.served.update(client_ids)
        metrics["round"] = collections.OrderedDict(
            wall_seconds=seconds, num_clients=n,
            bytes_broadcast=n * (self.broadcast_bytes_per_client - constant)
            + first_time * constant,
            bytes_uploaded=n * self.upload_bytes_per_client)
        return tff.learning.templates.LearningProcessOutput(output.state, metrics)

    def check_client_data(self, client_data):
        """Raises :class:`ClientDataError` for an empty or mistyped client dataset."""
        if len(client_data) == 0:
            raise ClientDataError(f"{self.name}: a round needs at least one client dataset")
        want = tf.nest.flatten(self.input_spec)
        for i, ds in enumerate(client_data):
            if not isinstance(ds, tf.data.Dataset):
                raise ClientDataError(f"{self.name}: client {i}: expected a tf.data.Dataset, "
                                      f"got {type(ds).__name__}")
            if ds.cardinality() == 0:
                raise ClientDataError(f"{self.name}: client {i}: the dataset is empty")
            got = tf.nest.flatten(ds.element_spec)
            if len(got) != len(want) or not all(w.is_compatible_with(g)
                                                for w, g in zip(want, got)):
                raise ClientDataError(
                    f"{self.name}: client {i}: batches of type {ds.element_spec} do not match "
                    f"the model's input_spec {self.input_spec}")
