"""A :class:`tffre.mapreduce.Round` split into its functions, on numpy, and its structures as
named arrays: what a deployment (Flower or any other transport) runs on each side.

A deployment runs one round's functions in two kinds of processes: the server
(:class:`tffre.federation.round_driver.FederatedRounds`) calls ``prepare``,
``zero``/``accumulate``/``report`` and ``update``; each site
(:class:`tffre.federation.site_runtime.SiteRuntime`) calls ``work``. :class:`SplitRound`
wraps the local executor (:mod:`tffre.execution.local`) and calls its compiled functions
(:meth:`tffre.execution.local.LocalExecutor.steps`) one by one, on numpy values, so that a
deployment computes exactly what the local executor computes (same compiled functions, same
slot).

What crosses the wire is a structure of arrays (a broadcast, an upload, a
client's contribution to a sum) written as an ordered mapping from its path
("model/trainable/3") to its array: :func:`to_arrays` and :func:`from_arrays`,
which checks every name, shape and dtype against the round's own spec, so a
message of another model or algorithm is refused in one line naming the part.

Secure aggregation (SecAgg+) can only add: :func:`sum_refusal` says why a
round whose aggregations are not all sums (the attention family's running max,
FedCMC's argmin) cannot use it, and :meth:`SplitRound.contribution` is what a
client adds to the secure sum: ``accumulate(zero(), upload)``, so that
``report(sum_k contribution_k)`` is the round's aggregate.
"""

import collections

import numpy as np
import tensorflow as tf

from tffre.aggregators import Attention, WeightedMean
from tffre.definition import StructSum, WeightedStructMean
from tffre.execution.local import LocalExecutor, keras_v2_again
from tffre.execution.workers import numpy_structure
from tffre.mapreduce import spec_of


class MessageError(ValueError):
    """A message whose arrays do not fit the round (one line naming the part)."""


#: Aggregators whose accumulator is a plain sum of what each client adds (zero() is all
#: zeros and accumulate(acc, u) = acc + accumulate(zero(), u)): SecAgg+ can compute them.
SUM_AGGREGATORS = (WeightedMean, WeightedStructMean, StructSum)


def _sum_classes():
    """:data:`SUM_AGGREGATORS` and differential privacy's noised sums (added at the server in
    ``finalize``, after the clipped records are summed)."""
    from tffre.privacy.aggregator import DPStructMean
    return SUM_AGGREGATORS + (DPStructMean,)


def is_sum(aggregator):
    """True when ``aggregator`` adds its clients' uploads (an ``additive`` attribute, when an
    aggregator declares one, overrides the list of known sums)."""
    declared = getattr(aggregator, "additive", None)
    if declared is not None:
        return bool(declared)
    return isinstance(aggregator, _sum_classes())


def sum_refusal(round_, name):
    """None when every aggregation of ``round_`` is a sum; else one line saying why algorithm
    ``name`` cannot use secure aggregation."""
    for key, aggregator in round_.aggregators.items():
        if is_sum(aggregator):
            continue
        if isinstance(aggregator, Attention):
            why = ("its attention aggregator keeps a running max of the clients' distances "
                   "(an online softmax, FLCMC Eq. 12), not a sum")
        else:
            why = f"its {key} upload is aggregated by {type(aggregator).__name__}, not a sum"
        return f"{name} cannot use secure aggregation (SecAgg+ only adds): {why}"
    return None


def constant_extras(definition):
    """The names of ``definition``'s server extras that never change (its
    ``constant_extras``), sent to a client once like the constant weights.

    Sending a changed value is still safe: the constants travel under the hash of their
    values, so a site whose hash differs gets them again."""
    return tuple(getattr(definition, "constant_extras", ()))


# --- structures as named arrays ---

def paths_of(structure):
    """The path of each leaf of ``structure`` in ``tf.nest.flatten`` order ("model/trainable/0")."""
    from tensorflow.python.util import nest   # tf.nest has no public path flattening
    return [path for path, _ in nest.flatten_with_joined_string_paths(structure)] \
        if tf.nest.flatten(structure) else []


def to_arrays(structure):
    """An ordered {path: numpy array} of ``structure`` (tensors or arrays)."""
    leaves = [np.asarray(t.numpy() if hasattr(t, "numpy") else t)
              for t in tf.nest.flatten(structure)]
    return collections.OrderedDict(zip(paths_of(structure), leaves))


def from_arrays(arrays, spec, what):
    """The structure of ``spec`` from ``arrays`` ({path: array} as :func:`to_arrays` wrote,
    or a list in the same order); :class:`MessageError` naming ``what`` and the part when a
    name, a shape or a dtype differs."""
    names = paths_of(spec)
    specs = tf.nest.flatten(spec)
    if isinstance(arrays, collections.abc.Mapping):
        if list(arrays) != names:
            missing = [n for n in names if n not in arrays]
            extra = [n for n in arrays if n not in names]
            detail = f"missing {missing[0]}" if missing else f"unexpected {extra[0]}" \
                if extra else "its parts are in another order"
            raise MessageError(f"{what}: {len(arrays)} arrays do not fit the round's "
                               f"{len(names)} ({detail})")
        values = list(arrays.values())
    else:
        values = list(arrays)
        if len(values) != len(names):
            raise MessageError(f"{what}: {len(values)} arrays, the round has {len(names)}")
    out = []
    for name, s, value in zip(names, specs, values):
        value = np.asarray(value)
        want = np.dtype(s.dtype.as_numpy_dtype)
        if value.dtype != want or not s.shape.is_compatible_with(value.shape):
            raise MessageError(f"{what}: {name} is {value.dtype}{list(value.shape)}, the round "
                               f"expects {want}{s.shape.as_list()}")
        out.append(value)
    return tf.nest.pack_sequence_as(spec, out)


def all_finite(arrays):
    """The path of the first array with a NaN or Inf (floating arrays only), or None."""
    for name, value in arrays.items():
        value = np.asarray(value)
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            return name
    return None


class SplitRound:
    """The round of ``factory`` on one eager slot of the local executor, its functions callable
    one at a time on numpy values (see the module docstring). It wraps a
    :class:`tffre.execution.local.LocalExecutor` and calls its :meth:`steps
    <tffre.execution.local.LocalExecutor.steps>`.

    Args:
      factory: the algorithm's :class:`tffre.mapreduce.RoundFactory`.
      loop: the client loop form ("while", "steps" or "reduce"; see the local executor).
      trains: False for a process that never calls :meth:`work` (the server): the upload's
        spec is then traced without the client's training step.
    """

    def __init__(self, factory, *, loop="while", trains=True):
        self.executor = LocalExecutor(factory, max_parallel_clients=1, loop=loop)
        self.round = self.executor.round
        self._steps = self.executor.steps()
        self._acc_spec = spec_of(self._steps.zero())
        self._upload_spec = None
        self.trains = trains

    @property
    def slots(self):
        """The executor's trainer slot (one), whose models a site's seeding resets
        (:mod:`tffre.federation.seeding`)."""
        return self.executor.slots

    # --- the server state ---

    def initialize(self):
        """The server state of the slot's freshly built model weights."""
        return self.executor.initialize()

    def initial_client_state(self):
        """A client's state before its first round (stateful algorithms)."""
        return self.executor.initial_client_state()

    def get_model_weights(self, state):
        """The global model weights of ``state``."""
        return self.executor.get_model_weights(state)

    def set_model_weights(self, state, weights):
        """``state`` with its model weights replaced."""
        return self.executor.set_model_weights(state, weights)

    # --- specs ---

    def broadcast_spec(self):
        """The TensorSpecs of :meth:`prepare`'s result."""
        return self.round.broadcast_spec()

    def state_spec(self):
        """The TensorSpecs of the server state."""
        return self.round.state_spec

    def upload_spec(self):
        """The TensorSpecs of one client's upload (traced once: tracing a client's training
        costs seconds for a real model). A site's trace is the one its first round runs; a
        server's leaves the training step out."""
        if self._upload_spec is None:
            self._upload_spec = self.executor.upload_spec(trained=self.trains)
        return self._upload_spec

    def accumulator_spec(self):
        """The TensorSpecs of the aggregation's accumulator (a client's contribution too)."""
        return self._acc_spec

    def client_state_spec(self):
        """The TensorSpecs of a client's kept state (None when clients keep none)."""
        return self.round.client_state_spec if self.round.stateful else None

    def constant_paths(self):
        """The broadcast paths that never change: the round's constant weights
        (``Round.constant``: frozen embeddings, FedCB's classifier) and the definition's
        constant server extras (:func:`constant_extras`: FedED's D_v inputs). A client needs
        them once."""
        names = paths_of(self.broadcast_spec())
        constant = {f"model/non_trainable/{i}" for i in self.round.constant}
        extras = tuple(f"extras/{k}" for k in constant_extras(self.round.definition))
        # An extra may be a structure (a split encoder's D_v: extras/server_x/hidden, ...).
        return [n for n in names if n in constant or n in extras
                or n.startswith(tuple(e + "/" for e in extras))]

    # --- server ---

    def prepare(self, state):
        """What every client receives this round (numpy)."""
        return numpy_structure(self._steps.prepare(
            tf.nest.map_structure(tf.convert_to_tensor, state)))

    def aggregate(self, uploads):
        """``report`` of the uploads accumulated in the given order (numpy)."""
        acc = self._steps.zero()
        for upload in uploads:
            acc = self._steps.accumulate(acc, upload)
        return numpy_structure(self._steps.report(acc))

    def report_sum(self, total):
        """``report`` of a sum of contributions (:meth:`contribution`) computed elsewhere
        (securely): the round's aggregate (numpy)."""
        return numpy_structure(self._steps.report(
            tf.nest.map_structure(tf.convert_to_tensor, total)))

    def update(self, state, aggregate):
        """(next server state, round metrics), numpy."""
        new_state, metrics = self._steps.update(
            tf.nest.map_structure(tf.convert_to_tensor, state),
            tf.nest.map_structure(tf.convert_to_tensor, aggregate))
        return numpy_structure(new_state), numpy_structure(metrics)

    # --- client ---

    def work(self, broadcast, dataset, client_state=None):
        """One client's round: its upload, and its next state for a stateful algorithm."""
        for model in [self.slots[0].slot.model, *self.slots[0].slot.frozen.values()]:
            keras_v2_again(model)
        broadcast = tf.nest.map_structure(tf.convert_to_tensor, broadcast)
        if client_state is not None:
            client_state = tf.nest.map_structure(tf.convert_to_tensor, client_state)
        result = self._steps.work(broadcast, dataset, client_state)
        if self.round.stateful:
            upload, next_state = result
            return numpy_structure(upload), numpy_structure(next_state)
        return numpy_structure(result)

    def contribution(self, upload):
        """What this client adds to a secure sum: ``accumulate(zero(), upload)`` (numpy)."""
        return numpy_structure(self._steps.accumulate(self._steps.zero(), upload))

    def model_weights(self):
        """The slot's Keras model (to evaluate or save a model of the round's weights)."""
        return self.slots[0].slot.model
