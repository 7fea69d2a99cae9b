"""SCAFFOLD (option II of Karimireddy et al. 2020, Algorithm 1) against a numpy transcription
of the algorithm, on softmax regression: 3 rounds, partial participation, clients of
different sizes taking different numbers of local steps, on both executors."""

import numpy as np
import pytest
import tensorflow as tf

import reference
from tffre import build_algorithm, builder, registry
from tffre.definition import StructSum, TaskContext
from tffre.hparams import ParamsError
from tffre.mapreduce import ModelWeights
from tffre.models import logistic_regression
from tiny import INPUT_SPEC, NUM_CLASSES, NUM_FEATURES, client_arrays, poisoned

N, BATCH, EPOCHS, CAP, LR = 4, 4, 2, 5, 0.1
# Sizes 9, 6, 13 and 4 in batches of 4: 3, 2, 4 and 1 batches a pass, so over 2 epochs capped
# at 5 steps the clients take K = 5, 4, 5 and 2 local steps.
DATA = dict(zip("abcd", client_arrays([9, 6, 13, 4], seed=21)))
ROUNDS = [["a", "b", "c"], ["b", "d"], ["a", "c", "d"]]   # |S| < N, c_i kept across gaps


def model_fn():
    return logistic_regression(NUM_FEATURES, NUM_CLASSES)


def initial_weights():
    rng = np.random.RandomState(7)
    return [0.5 * rng.randn(NUM_FEATURES, NUM_CLASSES).astype(np.float32),
            0.5 * rng.randn(NUM_CLASSES).astype(np.float32)]


def option_ii(rounds, data, *, lr=LR, decay=1.0, eta_g=1.0, corrected=True):
    """Algorithm 1 with option II, in float64, line by line; ``corrected=False`` drops the
    control variates (FedAvg with uniform weights). Returns (x, c, {client: c_i})."""
    x = [w.astype(np.float64) for w in initial_weights()]
    c = [np.zeros_like(v) for v in x]
    own = {}
    for t, sampled in enumerate(rounds):
        eta = lr * decay ** t                                # the round's local rate
        dy, dc = [], []
        for i in sampled:                                    # line 6
            xs, ys = data[i]
            batches = [(xs[s:s + BATCH], ys[s:s + BATCH]) for s in range(0, len(ys), BATCH)]
            batches = (batches * EPOCHS)[:CAP]
            k = len(batches)
            c_i = own.get(i, [np.zeros_like(v) for v in x])
            y = [v.copy() for v in x]                        # line 7
            for bx, by in batches:                           # lines 8-10
                g = reference.softmax_regression_grads(y[0], y[1], bx, by, NUM_CLASSES)
                y = [v - eta * (gv - (ci - cv if corrected else 0))
                     for v, gv, ci, cv in zip(y, g, c_i, c)]
            plus = [ci - cv + (xv - yv) / (k * eta)          # line 12, option II
                    for ci, cv, xv, yv in zip(c_i, c, x, y)]
            dy.append([yv - xv for yv, xv in zip(y, x)])    # line 13
            dc.append([p - ci for p, ci in zip(plus, c_i)])
            own[i] = plus                                    # line 14
        mean_dy = [np.mean(d, axis=0) for d in zip(*dy)]     # line 16
        mean_dc = [np.mean(d, axis=0) for d in zip(*dc)]
        x = [xv + eta_g * d for xv, d in zip(x, mean_dy)]    # line 17
        c = [cv + len(sampled) / N * d for cv, d in zip(c, mean_dc)]
    return x, c, own


def run(rounds, executor="local", data=DATA, **hparams):
    process = build_algorithm(
        "SCAFFOLD", model_fn, loss=tf.keras.losses.SparseCategoricalCrossentropy(),
        input_spec=INPUT_SPEC, executor=executor, context=TaskContext(num_clients=N),
        learning_rate=LR, num_epochs=EPOCHS, num_iters=CAP, **hparams)
    state = process.set_model_weights(process.initialize(), ModelWeights(initial_weights(), []))
    outs = []
    for ids in rounds:
        datasets = [tf.data.Dataset.from_tensor_slices(data[i]).batch(BATCH) for i in ids]
        # Client d's pipeline has no known cardinality: its K is counted, not read off.
        datasets = [ds.filter(lambda x, y: True) if i == "d" else ds
                    for i, ds in zip(ids, datasets)]
        out = process.next(state, datasets, client_ids=ids)
        state = out.state
        outs.append(out.metrics)
    return process, state, outs


def deviation(process, state, want):
    """The largest |tffre - numpy| over x, c and every client's c_i."""
    x, c, own = want
    pairs = list(zip(state["model"].trainable, x)) + list(zip(state["extras"]["c"], c))
    for i, c_i in own.items():
        pairs += list(zip(process.client_states[i]["c"], c_i))
    return max(float(np.max(np.abs(np.asarray(got, np.float64) - w))) for got, w in pairs)


@pytest.mark.parametrize("executor,decay,eta_g", [
    ("local", 1.0, 1.0),
    ("local", 0.9, 0.7),   # the local rate decays (eta_l per round), the server step eta_g
    ("tff", 0.9, 0.7)])
def test_three_rounds_equal_algorithm_1_option_ii(executor, decay, eta_g):
    process, state, _ = run(ROUNDS, executor, lr_decay=decay, server_learning_rate=eta_g)
    want = option_ii(ROUNDS, DATA, decay=decay, eta_g=eta_g)
    worst = deviation(process, state, want)
    print(f"SCAFFOLD {executor} lr_decay={decay} eta_g={eta_g}: max |tffre - numpy| = "
          f"{worst:.2e}")
    assert worst < 1e-5
    # The control variates matter here: without them the same rounds end elsewhere.
    plain, _, _ = option_ii(ROUNDS, DATA, decay=decay, eta_g=eta_g, corrected=False)
    assert max(np.max(np.abs(a - b)) for a, b in zip(want[0], plain)) > 1e-2
    assert sorted(process.client_states) == ["a", "b", "c", "d"]


def test_a_nan_client_is_excluded_and_keeps_its_control_variate():
    bad = dict(DATA, b=poisoned([DATA["b"]], {0})[0])
    process, state, outs = run(ROUNDS[:2], data=bad)
    assert [m["client_work"]["num_excluded_clients"] for m in outs] == [1, 1]
    # b never counts: it is out of S in both rounds (its delta and its delta c), and keeps
    # its initial c_b = 0.
    want = option_ii([["a", "c"], ["d"]], DATA)
    assert deviation(process, state, want) < 1e-5
    for t in process.client_states["b"]["c"]:
        np.testing.assert_array_equal(t, np.zeros_like(t))


def test_uniform_weighting_by_default_dp_refused_secagg_accepted():
    hp = registry.resolve_hparams("SCAFFOLD")
    assert hp.client_weighting == "uniform"   # Algorithm 1, line 16
    assert registry.resolve_hparams("SCAFFOLD", client_weighting="dataset_size") \
        .client_weighting == "dataset_size"
    with pytest.raises(ParamsError, match="SCAFFOLD: differential privacy is not sound here: "
                                          ".*control-variate update.*neither clipped nor noised"):
        registry.resolve_hparams("SCAFFOLD", dp_noise_multiplier=1.0, dp_clip=1.0)
    # SecAgg+: both uploads are sums, as the deployment checks before round 1.
    from tffre.federation.split_round import SplitRound, sum_refusal
    recipe = builder.ModelRecipe(model_fn, tf.keras.losses.SparseCategoricalCrossentropy(),
                                 INPUT_SPEC)
    built = builder.build(registry.get_spec("SCAFFOLD"), hp, recipe,
                          TaskContext(num_clients=N, clients_per_round=2))
    round_ = SplitRound(built.factory).round
    assert sum_refusal(round_, "SCAFFOLD") is None
    assert isinstance(round_.aggregators["extra"], StructSum)


def test_a_zero_learning_rate_is_refused():
    with pytest.raises(ValueError, match="SCAFFOLD: learning_rate must be > 0"):
        build_algorithm("SCAFFOLD", model_fn, loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                        input_spec=INPUT_SPEC, executor="local", learning_rate=0.0)


def test_a_resumed_run_gets_the_control_variates_back(tmp_path, loss):
    """Rounds 3-4 train clients whose c_i (client state) and the server's c and round (extras)
    come from rounds 1-2: the resumed run equals the uninterrupted one only if all came back."""
    import pandas as pd
    from tiny import full_and_resumed, tiny_clients
    full, cut = full_and_resumed(
        tiny_clients(), tmp_path, loss=loss, algorithm_names=["SCAFFOLD"], clients_per_round=2,
        batch_size=4, hparams={"learning_rate": 0.1, "num_epochs": 2, "num_iters": 3,
                               "lr_decay": 0.9}, executor="local")
    full, cut = pd.read_csv(full / "metrics.csv"), pd.read_csv(cut / "metrics.csv")
    pd.testing.assert_series_equal(full["train_loss"], cut["train_loss"], rtol=1e-6)
    pd.testing.assert_series_equal(full["local_train_loss"], cut["local_train_loss"], rtol=1e-6)
    assert full["clients"].tolist() == cut["clients"].tolist()
