"""Client-level DP in the round, the registry, the runner and the command line: sound rows only,
the two executors agree, the noise is the seed's, epsilon is dp-accounting's, and bad input is
refused in one line before any work."""

import json
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from tffre import build_algorithm, registry
from tffre.definition import TaskContext
from tffre.mapreduce import ModelWeights
from tffre.privacy import accounting
from tiny import INPUT_SPEC, client_arrays, initial_weights, poisoned, tiny_model, to_datasets

DP = dict(dp_clip=0.05, learning_rate=0.3, num_epochs=1, num_iters=None)
CONTEXT = TaskContext(num_clients=3, clients_per_round=3)


def rounds(process, data, n=2):
    state = process.set_model_weights(process.initialize(), ModelWeights(initial_weights(), []))
    outs = []
    for _ in range(n):
        out = process.next(state, to_datasets(data), client_ids=["a", "b", "c"])
        state = out.state
        outs.append(out.metrics)
    return process.get_model_weights(state).trainable, outs


def test_without_noise_both_executors_give_the_clipped_mean(loss):
    """sigma 0: the round is the mean of the numpy-clipped deltas over the 3 expected clients;
    the local executor and TFF's agree to 1e-5 (a NaN client excluded, counting 0)."""
    data = poisoned(client_arrays([8, 6, 7], seed=2), {1})
    got = {}
    for executor in ("local", "tff"):
        process = build_algorithm("FedAvg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                                  context=CONTEXT, executor=executor, dp_noise_multiplier=0.0,
                                  **DP)
        got[executor], metrics = rounds(process, data, n=1)
        assert metrics[0]["aggregator"]["model"]["dp_clients"] == 2
    for a, b in zip(got["local"], got["tff"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # The same round by hand: each client's plain FedAvg delta, clipped in numpy, summed, / 3.
    plain = build_algorithm("FedAvg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                            executor="local", **{k: v for k, v in DP.items() if k != "dp_clip"})
    w0 = initial_weights()
    deltas = []
    for k in (0, 2):
        state = plain.set_model_weights(plain.initialize(), ModelWeights(w0, []))
        trained = plain.get_model_weights(plain.next(state, to_datasets([data[k]])).state)
        delta = [a - b for a, b in zip(w0, trained.trainable)]
        norm = np.sqrt(sum(float(np.sum(np.square(d))) for d in delta))
        deltas.append([d * min(1.0, DP["dp_clip"] / norm) for d in delta])
        assert norm > DP["dp_clip"]      # the clip is active
    want = [w - (a + b) / 3 for w, a, b in zip(w0, *deltas)]
    for g, w in zip(got["local"], want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_the_noise_is_the_seeds_on_each_executor(loss):
    data = client_arrays([8, 6, 7], seed=3)

    def run(executor, seed):
        process = build_algorithm("FedAvg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                                  context=CONTEXT, executor=executor, dp_noise_multiplier=1.0,
                                  dp_seed=seed, **DP)
        return rounds(process, data)[0]

    for executor in ("local", "tff"):
        a, b, c = run(executor, 7), run(executor, 7), run(executor, 8)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)          # the same noise again
        assert not np.allclose(a[0], c[0])               # another seed, other noise


@pytest.mark.parametrize("name,given,reason", [
    ("FedAtt", {}, "attention weights are a softmax"),
    ("FedPAP", {}, "attention weights are a softmax"),
    ("FedCMC", {}, "one client's classifier vector"),
    ("FedProtoAvg", {}, "uploads more than the model delta"),
    ("FedAvg", {"client_weighting": "dataset_size"}, "leak"),
    ("FedAvgS", {"keep_optimizer_state": True}, "optimizer's moments"),
])
def test_unsound_settings_are_refused_saying_why(name, given, reason):
    with pytest.raises(ValueError, match=f"{name}: differential privacy is not sound here: "
                                         f".*{reason}"):
        registry.resolve_hparams(name, dp_noise_multiplier=1.0, dp_clip=1.0, **given)


def test_sound_rows_average_uniformly_and_fedcmc_random_passes():
    for name in ("FedAvg", "FedProx", "MOON", "FedLCC", "FedDyn", "FedRep", "FedRoD", "FedCB",
                 "FedETF", "FedED", "FedCMC-random", "FedAvgT", "FedProxP"):
        hp = registry.resolve_hparams(name, dp_noise_multiplier=1.0, dp_clip=1.0)
        assert hp.client_weighting == "uniform", name


def test_batch_norm_statistics_are_refused_under_dp(loss):
    def bn_model():
        return tf.keras.Sequential([tf.keras.Input((6,)), tf.keras.layers.BatchNormalization(),
                                    tf.keras.layers.Dense(3, activation="softmax")])
    with pytest.raises(ValueError, match="normalisation statistics"):
        build_algorithm("FedAvg", bn_model, loss=loss, input_spec=INPUT_SPEC, context=CONTEXT,
                        executor="local", dp_noise_multiplier=1.0, dp_clip=1.0)


def test_the_runner_reports_dp_accountings_epsilon_every_round(tmp_path, loss):
    from tffre.data import FederatedData
    from tiny import run_experiment
    arrays = client_arrays([8, 6, 9, 7, 5, 6], seed=5)
    data = FederatedData({f"c{i}": {"train": a, "test": a} for i, a in enumerate(arrays)},
                         num_classes=3, name="tiny")
    common = dict(loss=loss, algorithm_names=["FedAvg"], clients_per_round=2, batch_size=4,
                  hparams={"learning_rate": 0.1, "num_epochs": 1, "dp_noise_multiplier": 1.3,
                           "dp_clip": 0.2, "dp_delta": 1e-3},
                  checkpoint_every=1, executor="local")
    summary = run_experiment(data, tiny_model, num_rounds=3, out_dir=str(tmp_path / "a"), **common)
    rows = pd.read_csv(tmp_path / "a" / "metrics.csv")
    sampling = accounting.fixed_size_sampling(2, 6)
    for rnd, eps in zip(rows["round"], rows["dp_epsilon"]):
        # dp-accounting called directly: fixed-size sampling, replace-one, sensitivity 2C.
        import dp_accounting
        from dp_accounting.rdp import rdp_privacy_accountant as rdp
        acc = rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
        acc.compose(dp_accounting.SampledWithoutReplacementDpEvent(
            6, 2, dp_accounting.GaussianDpEvent(1.3 / 2)), int(rnd))
        assert eps == pytest.approx(acc.get_epsilon(1e-3), rel=1e-9)
        assert eps == pytest.approx(accounting.epsilon(1.3, int(rnd), 1e-3, sampling), rel=1e-9)
    assert rows["dp_clip"].tolist() == pytest.approx([0.2] * 3)
    privacy = summary["algorithms"]["FedAvg"]["privacy"]
    assert privacy["epsilon"] == pytest.approx(rows["dp_epsilon"].iloc[-1])
    assert summary["algorithms"]["FedAvg"]["hparams"]["dp_seed"] == "secret"
    # The clients come from the secret seed, kept beside the checkpoints; a resume reuses it.
    secret = json.loads((tmp_path / "a" / "checkpoints" / "FedAvg" / "dp_seed").read_text())
    from tffre.runner import sample_clients
    ids = [f"c{i}" for i in range(6)]
    assert rows["clients"].tolist() == [" ".join(sample_clients(ids, 2, secret, r))
                                        for r in (1, 2, 3)]
    run_experiment(data, tiny_model, num_rounds=2, out_dir=str(tmp_path / "b"), **common)
    (tmp_path / "b" / "checkpoints" / "FedAvg" / "dp_seed").write_text(json.dumps(secret))
    run_experiment(data, tiny_model, num_rounds=3, out_dir=str(tmp_path / "b"), resume=True,
                   **common)
    resumed = pd.read_csv(tmp_path / "b" / "metrics.csv")
    assert resumed["clients"].iloc[-1] == rows["clients"].iloc[-1]



def test_a_target_epsilon_is_met_by_the_calibrated_sigma(tmp_path, loss):
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant as rdp
    from tffre.data import FederatedData
    from tiny import run_experiment
    arrays = client_arrays([8, 6, 9, 7, 5, 6], seed=6)
    data = FederatedData({f"c{i}": {"train": a, "test": a} for i, a in enumerate(arrays)},
                         num_classes=3, name="tiny")
    summary = run_experiment(data, tiny_model, num_rounds=3, out_dir=str(tmp_path / "a"),
                             loss=loss, algorithm_names=["FedAvg"], clients_per_round=2,
                             batch_size=4, executor="local", checkpoint_every=0,
                             hparams={"learning_rate": 0.1, "num_epochs": 1, "dp_clip": 0.2,
                                      "dp_target_epsilon": 5.0, "dp_delta": 1e-3})
    privacy = summary["algorithms"]["FedAvg"]["privacy"]
    sigma = privacy["noise_multiplier"]
    assert privacy["target_epsilon"] == 5.0

    def eps(s):     # dp-accounting called directly for what the runner samples
        acc = rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
        acc.compose(dp_accounting.SampledWithoutReplacementDpEvent(
            6, 2, dp_accounting.GaussianDpEvent(s / 2)), 3)
        return acc.get_epsilon(1e-3)
    assert privacy["epsilon"] == pytest.approx(eps(sigma), rel=1e-9)
    assert eps(sigma) <= 5.0 < eps(sigma * 0.99)       # the smallest sigma that meets it
    assert pd.read_csv(tmp_path / "a" / "metrics.csv")["dp_epsilon"].iloc[-1] <= 5.0


SMALL = ["--dataset", "synthetic", "--clients", "6", "--clients-per-round", "3", "--no-progress"]


@pytest.mark.parametrize("args,message", [
    (["--dp-noise-multiplier", "-1", "--dp-clip", "1"], "--dp-noise-multiplier: expected a "
                                                        "finite number >= 0"),
    (["--dp-noise-multiplier", "1", "--dp-clip", "0"], "--dp-clip: expected a finite number > 0"),
    (["--dp-noise-multiplier", "1", "--dp-clip", "1", "--dp-delta", "1"],
     "--dp-delta: expected a number in (0, 1)"),
    (["--dp-noise-multiplier", "1"], "needs --dp-clip"),
    (["--dp-target-epsilon", "0.001", "--dp-clip", "1", "--num-rounds", "50"],
     "--dp-target-epsilon 0.001 cannot be met"),
    (["--dp-target-epsilon", "8", "--dp-clip", "adaptive", "--num-rounds", "5"],
     "adaptive clipping cannot reach noise multiplier"),
    (["--algorithm", "fedatt", "--dp-noise-multiplier", "1", "--dp-clip", "1"],
     "FedAtt: differential privacy is not sound here"),
    (["--dataset", "oct-c8", "--dp-noise-multiplier", "1", "--dp-clip", "1"],
     "BatchNorm statistics"),
])
def test_bad_dp_input_is_one_line_before_any_work(tmp_path, args, message, cli_here):
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    proc = cli_here("run", *SMALL, *args, "--out", str(out))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert os.listdir(out) == ["keep.txt"]     # nothing written, nothing touched


def test_the_saved_bundle_and_the_printed_table_carry_the_guarantee(tmp_path, cli_here):
    out = tmp_path / "run"
    proc = cli_here("run", *SMALL, "--num-rounds", "2", "--num-iters", "2",
                    "--dp-noise-multiplier", "1.5", "--dp-clip", "1", "--dp-delta", "1e-4",
                    "--checkpoint-every", "0", "--executor", "local", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    (name, algorithm), = summary["algorithms"].items()
    bundle = json.loads((out / "models" / name / "bundle.json").read_text())
    guarantee = bundle["metadata"]["privacy"]
    assert guarantee == algorithm["privacy"]
    expected = accounting.epsilon(1.5, 2, 1e-4, accounting.fixed_size_sampling(3, 6))
    assert guarantee["epsilon"] == pytest.approx(expected, rel=1e-9)
    assert guarantee["delta"] == 1e-4 and guarantee["rounds"] == 2
    assert f"epsilon {guarantee['epsilon']:.3g} at delta 0.0001" in proc.stdout
