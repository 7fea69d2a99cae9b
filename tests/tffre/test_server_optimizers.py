"""Server optimizers (Reddi et al. 2021): against a numpy transcription of Algorithm 2, Flower's
FedYogi/FedAdagrad/FedAvgM, and TFF's build_weighted_fed_avg with tff.learning.optimizers."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff
from flwr.common import FitRes, Status, Code, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.server import strategy as flwr_strategy

from tffre import build_algorithm, registry
from tffre.server_optimizers import ServerOptimizer
from tiny import INPUT_SPEC, client_arrays, initial_weights, tiny_model, to_datasets

SHAPES = [(3, 4), (4,)]


def random_deltas(rounds, seed=0):
    rng = np.random.RandomState(seed)
    return [[rng.randn(*s).astype(np.float32) * 0.1 for s in SHAPES] for _ in range(rounds)]


def reddi_algorithm_2(x, deltas, kind, eta, b1, b2, tau, v_start):
    """Reddi et al. 2021, Algorithm 2, in their sign (Delta_t = mean of y_i - x) and float64.

    ``deltas`` are in TFF's sign (x - y_i), so Delta_t = -delta."""
    x = [np.asarray(a, np.float64) for a in x]
    m = [np.zeros_like(a) for a in x]
    v = [np.full_like(a, v_start) for a in x]
    for delta in deltas:
        big_delta = [-np.asarray(d, np.float64) for d in delta]
        m = [b1 * mi + (1 - b1) * d for mi, d in zip(m, big_delta)]
        if kind == "adagrad":
            v = [vi + d * d for vi, d in zip(v, big_delta)]
        elif kind == "yogi":
            v = [vi - (1 - b2) * d * d * np.sign(vi - d * d) for vi, d in zip(v, big_delta)]
        else:
            v = [b2 * vi + (1 - b2) * d * d for vi, d in zip(v, big_delta)]
        x = [xi + eta * mi / (np.sqrt(vi) + tau) for xi, mi, vi in zip(x, m, v)]
    return x


def run_ours(optimizer, x, deltas):
    state = optimizer.build(SHAPES)
    weights = [tf.constant(a) for a in x]
    for delta in deltas:
        weights, state = optimizer.update_step(state, weights, [tf.constant(d) for d in delta])
    return [w.numpy() for w in weights]


def max_deviation(got, want):
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - b))) for a, b in zip(got, want))


@pytest.mark.parametrize("kind", ["adam", "yogi", "adagrad"])
def test_paper_form_equals_a_numpy_transcription_of_algorithm_2(kind):
    x = [np.random.RandomState(1).randn(*s).astype(np.float32) for s in SHAPES]
    deltas = random_deltas(4)
    ours = run_ours(ServerOptimizer(kind, 0.05, beta1=0.9, beta2=0.99, tau=1e-2), x, deltas)
    want = reddi_algorithm_2(x, deltas, kind, 0.05, 0.9, 0.99, 1e-2, v_start=1e-4)   # tau^2
    print(f"{kind}: paper form vs numpy Algorithm 2, 4 rounds: {max_deviation(ours, want):.2e}")
    assert max_deviation(ours, want) < 1e-6
    # The transcription tells the three apart, and a step moved the weights.
    other = reddi_algorithm_2(x, deltas, "adam" if kind != "adam" else "yogi", 0.05, 0.9, 0.99,
                              1e-2, v_start=1e-4)
    assert max_deviation(ours, other) > 1e-4
    assert max_deviation(ours, [np.float64(a) for a in x]) > 1e-3


def flower_rounds(strategy, x, deltas):
    """Flower's strategy on one client per round whose weights are x - delta (its mean)."""
    strategy.current_weights = [np.asarray(a, np.float32) for a in x]
    weights = strategy.current_weights
    for rnd, delta in enumerate(deltas, start=1):
        client = [w - d for w, d in zip(weights, delta)]
        fit = FitRes(Status(Code.OK, ""), ndarrays_to_parameters(client), 10, {})
        params, _ = strategy.aggregate_fit(rnd, [(None, fit)], [])
        weights = parameters_to_ndarrays(params)
    return weights


def flower(kind, x, **kw):
    cls = {"yogi": flwr_strategy.FedYogi, "adagrad": flwr_strategy.FedAdagrad,
           "adam": flwr_strategy.FedAdam}[kind]
    return cls(initial_parameters=ndarrays_to_parameters(x), **kw)


@pytest.mark.parametrize("kind", ["yogi", "adagrad"])
def test_paper_form_equals_flowers_fedyogi_and_fedadagrad(kind):
    """Flower's FedYogi and FedAdagrad are Algorithm 2 started from v = 0 (the paper's v_{-1}
    >= tau^2); its FedAdagrad keeps m with beta_1 = 0 by default."""
    x = [np.random.RandomState(2).randn(*s).astype(np.float32) for s in SHAPES]
    deltas = random_deltas(3, seed=3)
    b1 = 0.9 if kind == "yogi" else 0.0   # Flower's FedAdagrad fixes beta_1 = 0
    betas = dict(beta_1=b1, beta_2=0.99) if kind == "yogi" else {}
    theirs = flower_rounds(flower(kind, x, eta=0.03, tau=1e-3, **betas), x, deltas)
    ours = run_ours(ServerOptimizer(kind, 0.03, beta1=b1, beta2=0.99, tau=1e-3, initial_v=0.0),
                    x, deltas)
    print(f"{kind}: paper form vs Flower, 3 rounds: {max_deviation(ours, theirs):.2e}")
    assert max_deviation(ours, theirs) < 1e-6
    assert max_deviation(theirs, x) > 1e-3


def test_flowers_fedadam_bias_corrects_with_exponent_round_plus_one():
    """Flower 1.23's FedAdam is neither the paper's form nor TFF's: it scales eta by
    sqrt(1 - b2^(t+1)) / (1 - b1^(t+1)). One round of it equals the paper's step with that
    eta, from v = 0; the paper's own step differs (documented in tffre.server_optimizers)."""
    x = [np.random.RandomState(4).randn(*s).astype(np.float32) for s in SHAPES]
    deltas = random_deltas(1, seed=5)
    theirs = flower_rounds(flower("adam", x, eta=0.03, tau=1e-3, beta_1=0.9, beta_2=0.99),
                           x, deltas)
    eta_flower = 0.03 * np.sqrt(1 - 0.99 ** 2) / (1 - 0.9 ** 2)
    ours = run_ours(ServerOptimizer("adam", eta_flower, beta1=0.9, beta2=0.99, tau=1e-3,
                                    initial_v=0.0), x, deltas)
    assert max_deviation(ours, theirs) < 1e-6
    paper = run_ours(ServerOptimizer("adam", 0.03, beta1=0.9, beta2=0.99, tau=1e-3), x, deltas)
    assert max_deviation(paper, theirs) > 1e-3


def test_sgdm_equals_flowers_fedavgm():
    x = [np.random.RandomState(6).randn(*s).astype(np.float32) for s in SHAPES]
    deltas = random_deltas(3, seed=7)
    strategy = flwr_strategy.FedAvgM(initial_parameters=ndarrays_to_parameters(x),
                                     server_learning_rate=0.7, server_momentum=0.8)
    theirs = flower_rounds(strategy, x, deltas)
    ours = run_ours(ServerOptimizer("sgdm", 0.7, momentum=0.8), x, deltas)
    print(f"sgdm vs Flower FedAvgM, 3 rounds: {max_deviation(ours, theirs):.2e}")
    assert max_deviation(ours, theirs) < 1e-6


TFF_BUILDERS = {
    "fedadam": lambda: tff.learning.optimizers.build_adam(0.05, beta_1=0.9, beta_2=0.99,
                                                          epsilon=1e-3),
    "fedyogi": lambda: tff.learning.optimizers.build_yogi(0.05, beta_1=0.9, beta_2=0.99,
                                                          epsilon=1e-3),
    "fedadagrad": lambda: tff.learning.optimizers.build_adagrad(0.05, epsilon=1e-3),
    "fedavgm": lambda: tff.learning.optimizers.build_sgdm(0.5, momentum=0.9),
}


# Every row on the local executor; FedAdam on TFF's too (one round definition: the executors
# agree for every row, tests/tffre/execution).
@pytest.mark.parametrize("name,executor", [("fedadam", "local"), ("fedyogi", "local"),
                                           ("fedavgm", "local"), ("fedadagrad", "local"),
                                           ("fedadam", "tff")])
def test_tff_form_equals_build_weighted_fed_avg(loss, name, executor):
    """One and three rounds of the row, --server-optimizer-form tff, against TFF's
    build_weighted_fed_avg with the matching tff.learning.optimizers builder, same clients."""
    datasets = to_datasets(client_arrays([9, 16, 5], seed=2))
    rate = 0.5 if name == "fedavgm" else 0.05
    ours = build_algorithm(name, tiny_model, loss=loss, input_spec=INPUT_SPEC, executor=executor,
                           learning_rate=0.1, num_epochs=1, num_iters=None,
                           server_learning_rate=rate, server_beta2=0.99, server_tau=1e-3,
                           server_optimizer_form="paper" if name == "fedavgm" else "tff")
    theirs = tff.learning.algorithms.build_weighted_fed_avg(
        lambda: tff.learning.models.from_keras_model(tiny_model(), loss=loss,
                                                     input_spec=INPUT_SPEC),
        client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.1),
        server_optimizer_fn=TFF_BUILDERS[name]())
    w0 = initial_weights()
    s_ours = ours.set_model_weights(ours.initialize(), tff.learning.models.ModelWeights(
        trainable=w0, non_trainable=[]))
    s_theirs = theirs.set_model_weights(theirs.initialize(), tff.learning.models.ModelWeights(
        trainable=w0, non_trainable=[]))
    deviations = []
    for rnd in range(3):
        s_ours = ours.next(s_ours, datasets).state
        s_theirs = theirs.next(s_theirs, datasets).state
        if rnd in (0, 2):
            got = ours.get_model_weights(s_ours).trainable
            want = theirs.get_model_weights(s_theirs).trainable
            deviations.append(max_deviation(got, [np.float64(w) for w in want]))
    print(f"{name} ({executor}): max deviation after rounds 1 and 3: {deviations}")
    assert max(deviations) < 1e-6
    assert max_deviation(ours.get_model_weights(s_ours).trainable, w0) > 1e-3


def test_the_rows_are_fedavg_with_a_server_optimizer():
    for name, kind in [("fedavgm", "sgdm"), ("fedadam", "adam"), ("fedyogi", "yogi"),
                       ("fedadagrad", "adagrad")]:
        spec = registry.get_spec(name)
        assert (spec.client_optimizer, spec.aggregator, spec.definition) == ("sgd", "mean", None)
        assert registry.resolve_hparams(name).server_optimizer == kind
    assert registry.resolve_hparams("fedavg").server_optimizer == "sgd"


def test_plain_step_keeps_the_state_as_it_was(loss):
    """The default adds nothing to the server state (existing checkpoints and rows unchanged);
    FedAdam's moments are server state, so checkpoints and deployments carry them."""
    plain = build_algorithm("fedavg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                            executor="local")
    assert "server_optimizer" not in plain.initialize()
    adam = build_algorithm("fedadam", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                           executor="local")
    state = adam.initialize()
    assert [np.shape(m) for m in state["server_optimizer"]["m"]] == [(6, 5), (5,), (5, 3), (3,)]
    np.testing.assert_allclose(state["server_optimizer"]["v"][0], 1e-6)   # tau^2, tau = 1e-3


def test_bad_settings_are_one_line():
    with pytest.raises(ValueError, match="server-optimizer-form applies to sgdm"):
        registry.resolve_hparams("fedavg", server_optimizer_form="tff")
    with pytest.raises(ValueError, match="server_beta2"):
        registry.resolve_hparams("fedadam", server_beta2=1.0)
    with pytest.raises(ValueError, match="server_optimizer"):
        registry.resolve_hparams("fedavg", server_optimizer="lamb")


def test_a_resumed_fedadam_run_equals_the_uninterrupted_one(loss, tmp_path):
    """The moments are checkpointed with the model: rounds 3-4 after a resume step from the
    moments of rounds 1-2 (with fresh moments they would differ)."""
    import pandas as pd
    from tiny import full_and_resumed, tiny_clients
    full, cut = full_and_resumed(
        tiny_clients(), tmp_path, loss=loss, algorithm_names=["FedAdam"], clients_per_round=2,
        batch_size=4, hparams={"learning_rate": 0.1, "num_epochs": 1, "num_iters": None,
                               "server_learning_rate": 0.1}, executor="local")
    full, cut = pd.read_csv(full / "metrics.csv"), pd.read_csv(cut / "metrics.csv")
    pd.testing.assert_series_equal(full["train_loss"], cut["train_loss"], rtol=1e-6)
