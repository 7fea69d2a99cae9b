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
from tffre.process import AlgorithmInfo, MeasuredLearningProcess, ProcessFunctions, RoundFacts
from tffre.types_util import type_nbytes


def build_tff_process(factory, **info):
    """Builds the round of ``factory`` as a ``tff.learning.templates.LearningProcess``,
    measured. ``info``: the process's name, hparams, model_fn and evaluation."""
    # The round's types are read off a slot built in a throwaway graph: TFF traces the model
    # in graphs anyway, and an eager slot would be broken by those traces.
    with tf.Graph().as_default():
        round_ = factory.build(factory.probe())

    @tff.tensorflow.computation
    def initial_state():
        slot = round_.trainer.slot()
        return round_.initial_state(slot.model.weights(),
                                    round_.definition.initial_extras(slot.model))

    state_type = initial_state.type_signature.result
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(round_.input_spec))

    @tff.tensorflow.computation(state_type)
    def prepare(state):
        return round_.prepare(to_py(state))

    broadcast_type = prepare.type_signature.result

    if round_.stateful:
        client_state_type = tff.types.tensorflow_to_type(round_.client_state_spec)

        @tff.tensorflow.computation(broadcast_type, data_type, client_state_type)
        def work(broadcast, dataset, client_state):
            slot = round_.trainer.slot()
            return tf.function(slot.train)(to_py(broadcast), dataset, to_py(client_state))

        upload_type = work.type_signature.result[0]
    else:
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

    def round_body(state, client_data, client_states=None):
        broadcast = tff.federated_broadcast(tff.federated_map(prepare, state))
        if client_states is None:
            uploads = tff.federated_map(work, (broadcast, client_data))
        else:   # per-client state in and out as CLIENTS-placed values (the simulation keeps it)
            results = tff.federated_map(work, (broadcast, client_data, client_states))
            uploads, client_states = results[0], results[1]
        aggregate = tff.federated_aggregate(uploads, zero(), accumulate, merge, report)
        new_state, metrics = tff.federated_map(update, (state, aggregate))
        return new_state, metrics, client_states

    if round_.stateful:
        @tff.federated_computation(init_fn.type_signature.result,
                                   tff.FederatedType(data_type, tff.CLIENTS),
                                   tff.FederatedType(client_state_type, tff.CLIENTS))
        def stateful_next(state, client_data, client_states):
            return round_body(state, client_data, client_states)

        def next_fn(state, client_data, client_states):
            new_state, metrics, new_client_states = stateful_next(state, client_data,
                                                                  client_states)
            return tff.learning.templates.LearningProcessOutput(new_state, metrics), \
                new_client_states
    else:
        @tff.federated_computation(init_fn.type_signature.result,
                                   tff.FederatedType(data_type, tff.CLIENTS))
        def next_fn(state, client_data):
            new_state, metrics, _ = round_body(state, client_data)
            return tff.learning.templates.LearningProcessOutput(new_state, metrics)

    @tff.tensorflow.computation(state_type)
    def get_model_weights(state):
        return state["model"]

    @tff.tensorflow.computation(state_type, state_type.model)
    def set_model_weights(state, weights):
        return round_.with_model(state, weights)

    algorithm = AlgorithmInfo(**info)
    facts = RoundFacts(input_spec=round_.input_spec,
                       broadcast_bytes_per_client=type_nbytes(broadcast_type),
                       upload_bytes_per_client=type_nbytes(upload_type),
                       constant_bytes_per_client=round_.constant_broadcast_bytes(),
                       personal_indices=round_.personal)
    if round_.stateful:
        # TFF's LearningProcess template takes no client state; the measured process
        # keeps it per client id (see tffre.process).
        initial_client_state = tff.tensorflow.computation(
            lambda: round_.definition.initial_client_state(round_.trainer.slot().model))
        return MeasuredLearningProcess(
            ProcessFunctions(init_fn, next_fn, get_model_weights, set_model_weights,
                             initial_client_state=initial_client_state),
            algorithm=algorithm, facts=facts, executor="tff")
    process = tff.learning.templates.LearningProcess(init_fn, next_fn, get_model_weights,
                                                     set_model_weights)
    return MeasuredLearningProcess(
        ProcessFunctions(process.initialize, process.next, process.get_model_weights,
                         process.set_model_weights),
        algorithm=algorithm, facts=facts, executor="tff", tff_process=process)
