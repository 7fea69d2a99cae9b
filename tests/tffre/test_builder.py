"""builder.build, the one build path: a row, its typed hyperparameters, a model recipe and a
task context make a round, with nothing looked up by name; build_algorithm and make_round
go through it."""

import numpy as np
import pytest
import tensorflow_federated as tff

import reference
from tffre import builder, registry
from tffre.models import logistic_regression
from tiny import INPUT_SPEC, NUM_CLASSES, NUM_FEATURES, client_arrays, to_datasets


def _refuse_lookups(monkeypatch):
    def no_lookup(name):
        raise AssertionError(f"the registry was asked for {name!r}")
    monkeypatch.setattr(registry, "get_spec", no_lookup)
    monkeypatch.setattr(builder, "get_spec", no_lookup)


def test_a_row_of_ones_own_trains_the_hand_computed_step(loss, monkeypatch):
    """A row that is not in the registry builds (build looks nothing up by name), and its
    round, one client and one SGD step at rate 0.5, moves the weights by the numpy gradient
    of the mean cross-entropy (tests/reference.py)."""
    spec = registry.AlgorithmSpec("MyAvg", "sgd", "mean")
    assert spec.name.lower() not in registry.ALGORITHMS
    hp = spec.hparams_class().resolve(dict(learning_rate=0.5, num_epochs=1, num_iters=1),
                                      owner=spec.name)
    model_fn = lambda: logistic_regression(NUM_FEATURES, NUM_CLASSES)  # noqa: E731
    recipe = builder.ModelRecipe(model_fn, loss, INPUT_SPEC)
    _refuse_lookups(monkeypatch)
    built = builder.build(spec, hp, recipe)
    assert built.hparams is hp and built.spec is spec
    process = built.process(builder.Execution(executor="local"))
    assert (process.name, process.executor, process.hparams) == ("MyAvg", "local", hp)

    arrays = client_arrays([4], seed=3)
    rng = np.random.RandomState(2)
    w0 = [rng.randn(NUM_FEATURES, NUM_CLASSES).astype(np.float32),
          rng.randn(NUM_CLASSES).astype(np.float32)]
    gw, gb = reference.softmax_regression_grads(w0[0].astype(np.float64), w0[1], *arrays[0],
                                                NUM_CLASSES)
    state = process.set_model_weights(process.initialize(), tff.learning.models.ModelWeights(
        trainable=w0, non_trainable=[]))
    got = process.get_model_weights(process.next(state, to_datasets(arrays)).state).trainable
    np.testing.assert_allclose(got[0], w0[0] - 0.5 * gw, atol=1e-5)
    np.testing.assert_allclose(got[1], w0[1] - 0.5 * gb, atol=1e-5)


def test_execution_settings_are_told_from_hyperparameters(loss):
    values = dict(executor="local", loop="steps", max_parallel_clients=2, learning_rate=0.1)
    how = builder.Execution.pop_from(values)
    assert how == builder.Execution(executor="local", max_parallel_clients=2, loop="steps")
    assert values == {"learning_rate": 0.1}
    assert builder.Execution.pop_from({}) == builder.Execution()
    # build_algorithm takes both by name, as it always has; an unknown name is still refused.
    model_fn = lambda: logistic_regression(NUM_FEATURES, NUM_CLASSES)  # noqa: E731
    process = builder.build_algorithm("FedAvg", model_fn, loss=loss, input_spec=INPUT_SPEC,
                                      executor="local", loop="steps", learning_rate=0.1)
    assert process.executor == "local" and process.hparams.learning_rate == 0.1
    with pytest.raises(ValueError, match="loops"):
        builder.build_algorithm("FedAvg", model_fn, loss=loss, input_spec=INPUT_SPEC,
                                loops="steps")

