"""The TFF executor: a :class:`tffre.mapreduce.Round` as TFF computations (the reference path).

Each round function becomes a ``tff.tensorflow.computation``; ``next`` joins
them with one ``federated_broadcast`` and one ``federated_aggregate``, so
``tff.backends.mapreduce.get_map_reduce_form_for_computation(next)`` succeeds
and what leaves a client is exactly ``work``'s result.
"""

import collections

import tensorflow as tf
import tensorflow_federated as tff

from tffre.aggregators import aggregate_computations
from tffre.mapreduce import ModelWeights, to_py
from tffre.process import MeasuredLearningProcess
from tffre.types_util import type_nbytes


def build_tff_process(round_, *, name, hparams):
    """Builds ``round_`` as a ``tff.learning.templates.LearningProcess``, measured."""
    with tf.Graph().as_default():
        round_.describe(round_.trainer.slot())

    @tff.tensorflow.computation
    def initial_state():
        slot = round_.trainer.slot()
        return collections.OrderedDict(
            model=ModelWeights.from_model(slot.model),
            optimizer_state=[tf.zeros(s.shape, tf.float32) for s in round_.optimizer_state_spec])

    state_type = initial_state.type_signature.result
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(round_.input_spec))

    @tff.tensorflow.computation(state_type)
    def prepare(state):
        return round_.prepare(to_py(state))

    broadcast_type = prepare.type_signature.result

    @tff.tensorflow.computation(broadcast_type, data_type)
    def work(broadcast, dataset):
        # A fresh model and optimizer per client; tf.function orders the reads of the
        # trained variables after training (automatic control dependencies).
        slot = round_.trainer.slot()
        return tf.function(slot.train)(to_py(broadcast), dataset)

    upload_type = work.type_signature.result

    zero, accumulate, merge, report = aggregate_computations(round_, upload_type)

    @tff.tensorflow.computation(state_type, report.type_signature.result)
    def update(state, aggregate):
        return round_.update(to_py(state), to_py(aggregate))

    @tff.federated_computation()
    def init_fn():
        return tff.federated_eval(initial_state, tff.SERVER)

    @tff.federated_computation(init_fn.type_signature.result,
                               tff.FederatedType(data_type, tff.CLIENTS))
    def next_fn(state, client_data):
        broadcast = tff.federated_broadcast(tff.federated_map(prepare, state))
        uploads = tff.federated_map(work, (broadcast, client_data))
        aggregate = tff.federated_aggregate(uploads, zero(), accumulate, merge, report)
        new_state, metrics = tff.federated_map(update, (state, aggregate))
        return tff.learning.templates.LearningProcessOutput(new_state, metrics)

    @tff.tensorflow.computation(state_type)
    def get_model_weights(state):
        return state["model"]

    @tff.tensorflow.computation(state_type, state_type.model)
    def set_model_weights(state, weights):
        return collections.OrderedDict(model=weights, optimizer_state=state["optimizer_state"])

    process = tff.learning.templates.LearningProcess(init_fn, next_fn, get_model_weights,
                                                     set_model_weights)
    return MeasuredLearningProcess(
        process.initialize, process.next, process.get_model_weights, process.set_model_weights,
        name=name, hparams=hparams, executor="tff", input_spec=round_.input_spec,
        broadcast_bytes_per_client=type_nbytes(broadcast_type),
        upload_bytes_per_client=type_nbytes(upload_type), tff_process=process)
