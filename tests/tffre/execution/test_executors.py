"""The two executors run one definition: MapReduceForm for every algorithm, local == TFF."""

import dataclasses
import pickle

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tffre import build_algorithm, execution, registry
from tffre.definition import TaskContext
from tffre.execution import workers
from tffre.mapreduce import ModelWeights
from tiny import (INPUT_SPEC, NAMED_LOSS, NUM_CLASSES, client_arrays, initial_weights, poisoned,
                  tiny_context_model, tiny_fedcb_model, tiny_model, tiny_named_model,
                  to_datasets)

NAMES = registry.valid_algorithm_names()


def model_for(name, loss):
    """FLCMC rows train ``tiny_model``; algorithms with their own definition (which may read
    features and logits) train the same layers with named outputs."""
    if registry.get_spec(name).definition is None:
        return tiny_model, loss
    if name in ("FedCB", "FedCB-avg"):   # its model carries the frozen classifier
        return tiny_fedcb_model, NAMED_LOSS
    if name == "FedLCC":  # it contrasts the "context" output
        return tiny_context_model, NAMED_LOSS
    return tiny_named_model, NAMED_LOSS


def build(name, loss, **kwargs):
    model_fn, model_loss = model_for(name, loss)
    return build_algorithm(name, model_fn, loss=model_loss, input_spec=INPUT_SPEC,
                           context=context_for(name), **kwargs)


def context_for(name):
    """The task context: FedED's server set, and the population (FedDyn's m)."""
    server = None
    if registry.get_spec(name).load_definition().needs_server_data:
        server = tf.data.Dataset.from_tensor_slices(client_arrays([7], seed=30)[0]).batch(3)
    return TaskContext(num_clients=3, server_data=server)


def hparams_for(name, **extra):
    hp = {"learning_rate": 0.05, "num_epochs": 2, "num_iters": 5, **extra}
    valid = registry.valid_hparams(name)
    hp.update({k: v for k, v in {"prox_mu": 0.3, "stepsize": 1.5}.items() if k in valid})
    if "etf_dim" in valid:   # FedETF: a projection of tiny_model's head's shape (D = classes)
        hp["etf_dim"] = NUM_CLASSES
    return hp


def three_rounds(process, rounds_data):
    state = process.initialize()
    # Non-trainable weights (FedCB's frozen classifier) stay the model's own.
    own = process.get_model_weights(state)
    frozen = list(own.non_trainable)
    # Trainable weights beyond tiny_model's (FedRoD's personal head): seeded values.
    extra = [0.3 * np.random.RandomState(40 + i).randn(*np.shape(w)).astype(np.float32)
             for i, w in enumerate(own.trainable[len(initial_weights()):])]
    state = process.set_model_weights(state, ModelWeights(initial_weights() + extra, frozen))
    outs = []
    for data in rounds_data:
        # Stateful algorithms key their client state by id: the same ids every round.
        ids = [f"c{i}" for i in range(len(data))] if process.stateful else None
        out = process.next(state, to_datasets(data), client_ids=ids)
        state = out.state
        outs.append(out.metrics)
    return state, outs


def assert_same(a, b, atol=1e-5):
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(y, np.float64),
                                   rtol=1e-5, atol=atol)


#: {name: its TFF process with ``hparams_for(name)``}: built (and traced, about 1 s each) by
#: the MapReduceForm test, which runs no round, and taken once by the local == TFF test.
_BUILT = {}


def tff_process(name, loss):
    """The TFF executor's process of ``name`` with ``hparams_for(name)``, untrained: the one
    the MapReduceForm test built, else a new one."""
    return _BUILT.pop(name, None) or build(name, loss, executor="tff", **hparams_for(name))


#: keep_optimizer_state adds the same part to every round (the local optimizer's slots,
#: summed): it is lowered for each optimizer with moments (Self-Adam, PAdam, Adam) under each
#: server aggregator (mean, attention), for the definitions that upload more than the model
#: or keep a frozen part, and refused where nothing uploads the model (FedED).
KEPT = ("FedAvgS", "FedProxP", "FedAvgT", "FedAttS", "FedPAP", "FedAttT", "FedProtoAvg",
        "FedCMC", "FedCB", "FedED")


@pytest.mark.parametrize("name,keep", [(n, False) for n in NAMES] + [(n, True) for n in KEPT])
def test_every_algorithm_lowers_to_map_reduce_form(name, keep, loss):
    if keep and not registry.get_spec(name).load_definition().uploads_model:
        with pytest.raises(ValueError, match="uploads the model"):   # no state to keep (FedED)
            build(name, loss, executor="tff", **hparams_for(name, keep_optimizer_state=keep))
        return
    process = build(name, loss, executor="tff", **hparams_for(name, keep_optimizer_state=keep))
    if not keep:
        _BUILT[name] = process
    if process.stateful:   # the documented exception: per-client state has no MapReduceForm
        assert process.tff_process is None
        return
    form = tff.backends.mapreduce.get_map_reduce_form_for_computation(process.tff_process.next)
    # What leaves a client is exactly its one aggregation: the work result.
    assert form.work.type_signature.result[0] is not None
    assert process.upload_bytes_per_client > 0


ROUNDS = [client_arrays([8, 10, 6], seed=1), client_arrays([5, 12], seed=2),
          poisoned(client_arrays([7, 9, 4], seed=3), {1})]


@pytest.mark.parametrize("name", NAMES)
def test_local_equals_tff_for_every_algorithm(name, loss):
    """Three rounds, the third with a NaN client, same initial weights and data, to 1e-5."""
    results = {}
    for executor in ("tff", "local"):
        process = tff_process(name, loss) if executor == "tff" else \
            build(name, loss, executor=executor, **hparams_for(name))
        results[executor] = (three_rounds(process, ROUNDS), process.upload_bytes_per_client,
                             process.broadcast_bytes_per_client)
    (s_tff, m_tff), up_tff, down_tff = results["tff"]
    (s_loc, m_loc), up_loc, down_loc = results["local"]
    assert_same(s_tff["model"].trainable, s_loc["model"].trainable)
    assert not np.allclose(s_tff["model"].trainable[0], initial_weights()[0])
    for a, b in zip(m_tff, m_loc):
        assert_same(a["client_work"], b["client_work"])
    assert m_loc[2]["client_work"]["num_excluded_clients"] == 1
    # Bytes from TFF's type signatures equal bytes from the local executor's specs.
    assert (up_tff, down_tff) == (up_loc, down_loc)


@pytest.mark.parametrize("name,extra", [(n, {}) for n in NAMES] + [
    ("FedPAP", {"keep_optimizer_state": True}),      # the moments go up too
    ("FedAvg", {"dp_noise_multiplier": 0.5, "dp_clip": 0.1, "dp_seed": 3})])   # DP's parts
def test_a_server_reads_the_sites_upload_spec_without_tracing_training(name, extra, loss,
                                                                       monkeypatch):
    """A deployment's server (SplitRound with trains=False) never trains: its upload spec
    leaves the training step out of the trace, and equals the one a site's first round
    traces (paths, dtypes, shapes: the layout key both sides compare)."""
    from tffre import builder, registry
    from tffre.client_work import TrainerSlot
    from tffre.federation.split_round import SplitRound, paths_of

    def parts(trains):
        model_fn, model_loss = model_for(name, loss)
        context = dataclasses.replace(context_for(name), clients_per_round=3)   # DP's q
        spec = registry.get_spec(name)
        built = builder.build(spec, registry.resolve_hparams(name, hparams_for(name, **extra)),
                              builder.ModelRecipe(model_fn, model_loss, INPUT_SPEC), context)
        return SplitRound(built.factory, trains=trains)

    site = parts(True).upload_spec()
    steps = []
    original = TrainerSlot.step
    monkeypatch.setattr(TrainerSlot, "step",
                        lambda self, *a: steps.append(1) or original(self, *a))
    server = parts(False).upload_spec()
    assert not steps, "the server traced a training step"
    assert paths_of(server) == paths_of(site)
    assert tf.nest.flatten(server) == tf.nest.flatten(site)
    assert paths_of(site)   # not two empty structures


@pytest.mark.parametrize("name", ["FedAvg", "FedAtt"])
def test_empty_round_on_both_executors(name, loss):
    rounds = [poisoned(client_arrays([8, 10], seed=4), {0, 1})]
    for executor in ("tff", "local"):
        process = build_algorithm(name, tiny_model, loss=loss, input_spec=INPUT_SPEC,
                                  executor=executor, **hparams_for(name))
        state, metrics = three_rounds(process, rounds)
        assert metrics[0]["client_work"]["num_excluded_clients"] == 2
        for got, want in zip(state["model"].trainable, initial_weights()):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["FedAvgS", "FedPAP"])
def test_kept_optimizer_state_on_both_executors(name, loss):
    states = {}
    for executor in ("tff", "local"):
        process = build_algorithm(name, tiny_model, loss=loss, input_spec=INPUT_SPEC,
                                  executor=executor,
                                  **hparams_for(name, keep_optimizer_state=True))
        states[executor], _ = three_rounds(process, ROUNDS)
    assert_same(states["tff"], states["local"])
    assert states["local"]["optimizer_state"][0] > 0   # the step count went on


@pytest.mark.parametrize("name,loop,parallel,workers", [
    ("FedAttS", "reduce", 1, "threads"), ("FedAttS", "steps", 1, "threads"),
    ("FedAttS", "while", 2, "threads"), ("FedAttS", "steps", 3, "threads"),
    # Worker processes (each imports TensorFlow: 13 s of CPU a case here) with MOON only:
    # its per-client state goes to the workers and back, beside what FedAttS's would check.
    ("MOON", "while", 2, "processes")])
def test_loop_forms_and_parallel_clients_equal_sequential_while(name, loop, parallel, workers,
                                                                loss):
    base = build(name, loss, executor="local", **hparams_for(name))
    other = build(name, loss, executor="local", loop=loop, max_parallel_clients=parallel,
                  client_workers=workers, **hparams_for(name))
    (a, ma), (b, mb) = three_rounds(base, ROUNDS), three_rounds(other, ROUNDS)
    assert_same(a["model"].trainable, b["model"].trainable, atol=1e-6)
    assert_same(ma[-1]["client_work"], mb[-1]["client_work"], atol=1e-6)
    assert mb[-1]["client_work"]["num_excluded_clients"] == 1
    if workers == "processes":
        # The real trainer's error in a worker comes back with its traceback. The next round's
        # fresh workers, and a worker that cannot build its slot, are the pool's own
        # (test_workers.py, with a plain-Python trainer).
        x, y = client_arrays([4], seed=6)[0]
        good = client_arrays([6, 5], seed=5)
        with pytest.raises(execution.workers.WorkerError,
                           match="(?s)failed:.*Traceback.*label value of 5"):
            three_rounds(other, [[good[0], (x, y + 50), good[1]]])   # beyond the classes


def test_client_datasets_survive_the_trip_to_a_worker():
    """A dataset goes as its serialized graph; one the serializer refuses (a Python
    generator) as its batches; both come back with the same batches."""
    x = np.arange(22, dtype=np.float32).reshape(11, 2)
    dataset = tf.data.Dataset.from_tensor_slices(((x, x[:, 0]), np.arange(11))).batch(4)
    generated = tf.data.Dataset.from_generator(
        lambda: iter(dataset.as_numpy_iterator()), output_signature=dataset.element_spec)
    want = tf.nest.flatten(list(dataset.as_numpy_iterator()))
    for source, kind in ((dataset, "graph"), (generated, "batches")):
        packed = workers.pack_dataset(source)
        assert packed[0] == kind
        rebuilt = workers.unpack_dataset(pickle.loads(pickle.dumps(packed)))
        got = list(rebuilt.as_numpy_iterator())
        assert [len(b[1]) for b in got] == [4, 4, 3]
        for a, b in zip(want, tf.nest.flatten(got)):
            np.testing.assert_array_equal(a, b)
    assert list(workers.dataset_of([], dataset.element_spec)) == []


def test_auto_picks_local_only_with_a_gpu(monkeypatch):
    assert execution.resolve_executor("auto") == "tff"   # this machine has no GPU
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
    assert execution.resolve_executor("auto") == "local"
    with pytest.raises(ValueError, match="executor must be one of auto, tff, local"):
        execution.resolve_executor("gpu")
