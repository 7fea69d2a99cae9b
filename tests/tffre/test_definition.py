"""The definition interface: per-client state in and out, on both executors."""

import collections
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tffre import build_algorithm, definition, registry
from tffre.definition import Definition
from tffre.hparams import non_negative_float, param
from tffre.mapreduce import ModelWeights
from tffre.process import ClientDataError
from tiny import INPUT_SPEC, client_arrays, initial_weights, to_datasets, tiny_model


class PreviousModelPull(Definition):
    """Test algorithm: keeps each client's last local model (MOON's state) and pulls the
    outputs towards that model's outputs with weight ``pull`` (0 in a client's first round)."""

    @dataclasses.dataclass(frozen=True)
    class Hparams(definition.Hparams):
        pull: float = param(2.0, non_negative_float, "the pull's weight")

    def frozen_models(self):
        return {"previous": lambda broadcast, state: state["weights"]}

    def objective(self, ctx):
        pull = tf.reduce_mean(tf.square(ctx.outputs["predictions"]
                                        - ctx.frozen["previous"]["predictions"]))
        return ctx.model_loss() + self.hparams.pull * ctx.client_state["seen"] * pull

    def initial_client_state(self, model):
        return collections.OrderedDict(
            weights=[tf.zeros_like(v) for v in model.trainable_variables],
            seen=tf.constant(0.0))

    def next_client_state(self, ctx):
        return collections.OrderedDict(weights=[tf.identity(v) for v in
                                                ctx.model.trainable_variables],
                                       seen=tf.constant(1.0))


@pytest.fixture
def stateful_row(monkeypatch):
    spec = registry.AlgorithmSpec("PrevPull", "sgd", "mean", f"{__name__}:PreviousModelPull")
    monkeypatch.setitem(registry.ALGORITHMS, "prevpull", spec)
    return spec


def run(executor, loss, rounds):
    process = build_algorithm("PrevPull", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                              executor=executor, learning_rate=0.1, num_epochs=1,
                              num_iters=None)
    state = process.set_model_weights(process.initialize(), ModelWeights(initial_weights(), []))
    for ids, arrays in rounds:
        state = process.next(state, to_datasets(arrays), client_ids=ids).state
    return process, state


DATA = {c: client_arrays([n], seed=s)[0] for c, n, s in [("a", 8, 1), ("b", 6, 2), ("c", 9, 3)]}
ROUNDS = [(["a"], [DATA["a"]]), (["a", "b"], [DATA["a"], DATA["b"]]),
          (["b", "c"], [DATA["b"], DATA["c"]])]


def test_client_state_is_kept_per_client_and_equal_on_both_executors(stateful_row, loss):
    results = {ex: run(ex, loss, ROUNDS) for ex in ("tff", "local")}
    p_tff, s_tff = results["tff"]
    p_loc, s_loc = results["local"]
    assert sorted(p_loc.client_states) == ["a", "b", "c"]
    for c in "abc":
        for x, y in zip(tf.nest.flatten(p_tff.client_states[c]),
                        tf.nest.flatten(p_loc.client_states[c])):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    for x, y in zip(s_tff["model"].trainable, s_loc["model"].trainable):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert p_tff.tff_process is None   # no MapReduceForm with client state: the exception


def test_state_is_the_clients_own_trained_model(stateful_row, loss):
    # One client in round 1: FedAvg's new global model is that client's trained model, and
    # its first round has no pull (seen = 0), so the stored state must equal both.
    process, state = run("local", loss, ROUNDS[:1])
    fedavg = build_algorithm("FedAvg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                             executor="local", learning_rate=0.1, num_epochs=1, num_iters=None)
    ref = fedavg.next(fedavg.set_model_weights(fedavg.initialize(),
                                               ModelWeights(initial_weights(), [])),
                      to_datasets([DATA["a"]])).state
    for got, want in zip(process.client_states["a"]["weights"], ref["model"].trainable):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert process.client_states["a"]["seen"] == 1.0
    # Round 2 differs from FedAvg for client a only through the pull term.
    process2, state2 = run("local", loss, ROUNDS[:2])
    ref2 = fedavg.next(ref, to_datasets([DATA["a"], DATA["b"]])).state
    assert not np.allclose(state2["model"].trainable[0], ref2["model"].trainable[0])


def test_stateful_process_needs_client_ids(stateful_row, loss):
    process = build_algorithm("PrevPull", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                              executor="local")
    with pytest.raises(ClientDataError, match="pass client_ids"):
        process.next(process.initialize(), to_datasets([DATA["a"]]))


def test_runner_resumes_a_stateful_algorithm_with_its_client_states(stateful_row, loss, tmp_path):
    import pandas as pd
    from tiny import full_and_resumed, tiny_clients
    full, cut = full_and_resumed(
        tiny_clients(), tmp_path, loss=loss, algorithm_names=["PrevPull"], clients_per_round=2,
        batch_size=4, hparams={"learning_rate": 0.1, "num_epochs": 1, "num_iters": None},
        executor="local")
    full, cut = pd.read_csv(full / "metrics.csv"), pd.read_csv(cut / "metrics.csv")
    # Rounds 3-4 train clients that kept state from rounds 1-2: equal only if it was restored.
    pd.testing.assert_series_equal(full["train_loss"], cut["train_loss"], rtol=1e-6)
    pd.testing.assert_series_equal(full["local_train_loss"], cut["local_train_loss"], rtol=1e-6)
    assert full["clients"].tolist() == cut["clients"].tolist()


def test_an_upload_range_says_which_bound_it_lacks():
    from tffre.definition import UploadRange
    assert UploadRange("extra", 0.0, 1.0, values="v").bounded
    assert UploadRange("extra", 0.0, 1.0, values="v").why_unbounded() == ""
    assert UploadRange("extra", None, 0.0, values="v", instead="do w").why_unbounded() == \
        "v, which have no lower bound: do w"
    assert UploadRange("model", 0.0, values="v").why_unbounded() == "v, which have no upper bound"
    assert UploadRange("model", values="v").why_unbounded() == \
        "v, which have no lower or upper bound"
    assert Definition.upload_ranges(registry.resolve_hparams("FedAvgS")) == ()


def test_a_task_context_is_made_in_one_place():
    """TaskContext.of (simulation and deployment alike): concepts as a tuple, D_v's arrays
    batched by the run's batch size (5 examples in batches of 2: 2, 2, 1), no D_v: None."""
    import numpy as np
    from tffre.definition import TaskContext
    x, y = np.arange(10, dtype=np.float32).reshape(5, 2), np.arange(5, dtype=np.int32)
    context = TaskContext.of(num_clients=3, clients_per_round=2, concepts=["a", "b"],
                             prompts="text", server_arrays=(x, y), batch_size=2)
    assert (context.num_clients, context.clients_per_round) == (3, 2)
    assert context.concepts == ("a", "b") and context.prompts == "text"
    batches = [(bx.numpy(), by.numpy()) for bx, by in context.server_data]
    assert [len(by) for _, by in batches] == [2, 2, 1]
    np.testing.assert_array_equal(np.concatenate([bx for bx, _ in batches]), x)
    bare = TaskContext.of(num_clients=4, clients_per_round=4)
    assert bare.server_data is None and bare.concepts is None
