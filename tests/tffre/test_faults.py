"""Simulated faulty sites (tffre.faults): the kinds, who is faulty, and what the round gets."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tffre import build_algorithm
from tffre.data import FederatedData
from tffre.faults import Fault, UploadFaults, choose_faulty, label_permutation, parse_fault
from tffre.runner import RunSettings
from tiny import INPUT_SPEC, client_arrays, initial_weights, run_experiment, tiny_model, to_datasets


def test_the_kinds_parse_and_bad_ones_are_one_line():
    assert parse_fault("flip-labels") == Fault("flip-labels")
    assert parse_fault("scale:-5") == Fault("scale", -5.0)
    assert parse_fault("noise:1") == Fault("noise", 1.0)
    assert parse_fault("nan") == Fault("nan")
    assert parse_fault("stale:2") == Fault("stale", 2)
    assert str(parse_fault("scale:-5")) == "scale:-5" and str(parse_fault("stale:2")) == "stale:2"
    for bad, why in [("flip", "expected flip-labels, scale:S"), ("scale", "scale needs a number"),
                     ("noise:-1", "SIGMA >= 0"), ("stale:0", "R >= 1"), ("stale:1.5", "R >= 1"),
                     ("nan:3", "nan takes no value"), ("scale:inf", "finite")]:
        with pytest.raises(ValueError, match=why):
            parse_fault(bad)


def test_the_same_clients_are_faulty_every_time_from_the_seed():
    ids = [f"c{i}" for i in range(10)]
    a = choose_faulty(ids, 3, seed=0)
    assert a == choose_faulty(ids, 3, seed=0) and len(set(a)) == 3 and set(a) <= set(ids)
    assert a == [c for c in ids if c in a]   # in the clients' order
    assert any(choose_faulty(ids, 3, seed=s) != a for s in range(1, 5))
    assert choose_faulty(ids, 0, seed=0) == []
    with pytest.raises(ValueError, match="between 0 and the 10 clients"):
        choose_faulty(ids, 11, seed=0)


@pytest.mark.parametrize("num_classes", [2, 3, 7])
def test_flip_labels_is_a_permutation_without_fixed_points(num_classes):
    for seed in range(5):
        perm = label_permutation(num_classes, seed)
        assert sorted(perm.tolist()) == list(range(num_classes))
        assert all(perm[c] != c for c in range(num_classes))


def upload(value, weight=3.0):
    return {"model": {"update": [np.full((2, 2), value, np.float32), np.full(2, value,
                                                                            np.float32)],
                      "weight": np.float32(weight)}, "excluded": np.int32(0)}


def test_upload_faults_by_hand():
    honest = upload(1.0)
    scaled = UploadFaults(Fault("scale", -5.0), ["b"]).apply("b", honest, 1)
    np.testing.assert_array_equal(scaled["model"]["update"][0], np.full((2, 2), -5.0))
    assert scaled["model"]["weight"] == 3.0 and honest["model"]["update"][0][0, 0] == 1.0
    assert UploadFaults(Fault("scale", -5.0), ["b"]).apply("a", honest, 1) is honest
    # Under DP the delta is the clipped "record": a broken site sends its bad one.
    dp = {"model": {"record": [np.ones(3, np.float32)], "weight": np.float32(1.0)}}
    np.testing.assert_array_equal(
        UploadFaults(Fault("scale", 4.0), ["b"]).apply("b", dp, 1)["model"]["record"][0], [4] * 3)
    with pytest.raises(ValueError, match="uploads no model delta"):
        UploadFaults(Fault("nan"), ["b"]).apply("b", {"extra": {}}, 1)
    assert np.isnan(UploadFaults(Fault("nan"), ["b"]).apply("b", honest, 1)["model"]
                    ["update"][1]).all()
    noise = UploadFaults(Fault("noise", 2.0), ["b"], seed=3)
    big = {"model": {"update": [np.zeros(20000, np.float32)], "weight": 1.0}}
    drawn = noise.apply("b", big, 4)["model"]["update"][0]
    assert abs(drawn.std() - 2.0) < 0.05 and abs(drawn.mean()) < 0.05
    np.testing.assert_array_equal(drawn, noise.apply("b", big, 4)["model"]["update"][0])
    assert not np.array_equal(drawn, noise.apply("b", big, 5)["model"]["update"][0])
    # stale:2 sends, at its k-th round, the upload of its (k-2)-th (its first until then).
    stale = UploadFaults(Fault("stale", 2), ["b"])
    sent = [stale.apply("b", upload(float(k)), k)["model"]["update"][0][0, 0] for k in range(6)]
    assert sent == [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]


def weights_after(process, state):
    return [np.asarray(w, np.float64) for w in process.get_model_weights(state).trainable]


def test_a_scaled_site_enters_the_mean_scaled(loss):
    """Hand reference: each client's delta from a one-client round, then the n_k-weighted
    mean with the faulty client's delta times -5 (FLCMC Eq. 6, server step 1)."""
    arrays = client_arrays([9, 6, 5], seed=3)
    datasets = to_datasets(arrays)
    ids = ["a", "b", "c"]
    common = dict(loss=loss, input_spec=INPUT_SPEC, executor="local", learning_rate=0.1,
                  num_epochs=1, num_iters=None)
    honest = build_algorithm("fedavg", tiny_model, **common)
    w0 = initial_weights()
    start = honest.set_model_weights(honest.initialize(), tff.learning.models.ModelWeights(
        trainable=w0, non_trainable=[]))
    deltas = []
    for k in range(3):
        alone = weights_after(honest, honest.next(start, [datasets[k]], client_ids=[ids[k]]).state)
        deltas.append([np.float64(a) - b for a, b in zip(w0, alone)])
    sizes, scale = [9, 6, 5], [1.0, -5.0, 1.0]
    want = [np.float64(w) - sum(n * s * d[i] for n, s, d in zip(sizes, scale, deltas)) / 20
            for i, w in enumerate(w0)]
    faulty = build_algorithm("fedavg", tiny_model, **common)
    faulty.simulate_faults(UploadFaults(Fault("scale", -5.0), ["b"]))
    got = weights_after(faulty, faulty.next(start, datasets, client_ids=ids).state)
    assert max(float(np.max(np.abs(g - w))) for g, w in zip(got, want)) < 1e-5
    fine = weights_after(honest, honest.next(start, datasets, client_ids=ids).state)
    assert max(float(np.max(np.abs(g - w))) for g, w in zip(fine, want)) > 1e-3


def test_a_nan_site_stops_the_mean_from_moving_the_model(loss):
    process = build_algorithm("fedavg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                              executor="local", learning_rate=0.1)
    process.simulate_faults(UploadFaults(Fault("nan"), ["b"]))
    state = process.initialize()
    out = process.next(state, to_datasets(client_arrays([8, 8], seed=1)), client_ids=["a", "b"])
    assert out.metrics["finalizer"]["update_non_finite"] == 1
    for a, b in zip(weights_after(process, out.state), weights_after(process, state)):
        np.testing.assert_array_equal(a, b)


def test_upload_faults_need_the_local_executor(loss):
    process = build_algorithm("fedavg", tiny_model, loss=loss, input_spec=INPUT_SPEC,
                              executor="tff")
    with pytest.raises(ValueError, match="needs --executor local .*flip-labels runs on every"):
        process.simulate_faults(UploadFaults(Fault("scale", 2.0), ["a"]))


def test_settings_refuse_half_a_fault():
    with pytest.raises(ValueError, match="--faulty-clients N and --fault KIND go together"):
        RunSettings.resolve({"faulty_clients": 2, "out": "x"})
    with pytest.raises(ValueError, match="--faulty-clients N and --fault KIND go together"):
        RunSettings.resolve({"fault": "nan", "out": "x"})
    assert RunSettings.resolve({"faulty_clients": 1, "fault": "scale:-5"}).fault == \
        Fault("scale", -5.0)


@pytest.mark.parametrize("fault", ["flip-labels", "scale:-5"])
def test_a_run_names_its_faulty_clients_and_they_change_it(loss, tmp_path, fault):
    arrays = client_arrays([8, 6, 9, 7], seed=5)
    data = FederatedData({f"c{i}": {"train": a, "test": a} for i, a in enumerate(arrays)},
                         num_classes=3, name="tiny")
    common = dict(loss=loss, algorithm_names=["FedAvg"], clients_per_round=4, batch_size=4,
                  hparams={"learning_rate": 0.1, "num_epochs": 1}, executor="local",
                  num_rounds=2, clients=4)
    run_experiment(data, tiny_model, out_dir=str(tmp_path / "faulty"), faulty_clients=1,
                   fault=fault, **common)
    run_experiment(data, tiny_model, out_dir=str(tmp_path / "clean"), **common)
    summary = json.loads((tmp_path / "faulty" / "summary.json").read_text())
    assert summary["faults"] == {"kind": fault,
                                 "clients": choose_faulty(data.client_ids, 1, seed=0)}
    assert "faults" not in json.loads((tmp_path / "clean" / "summary.json").read_text())
    import pandas as pd
    faulty = pd.read_csv(tmp_path / "faulty" / "metrics.csv")["train_loss"]
    clean = pd.read_csv(tmp_path / "clean" / "metrics.csv")["train_loss"]
    assert not np.allclose(faulty, clean)


def test_flipped_labels_by_hand():
    from tffre.runner.loop import flipped
    ds = tf.data.Dataset.from_tensor_slices((np.zeros((4, 1), np.float32),
                                             np.array([0, 1, 2, 1], np.int32))).batch(2)
    perm = np.array([2, 0, 1])
    labels = np.concatenate([y.numpy() for _, y in flipped(ds, perm)])
    np.testing.assert_array_equal(labels, [2, 0, 1, 0])


def test_a_resumed_stale_run_sends_what_the_uninterrupted_one_sends(loss, tmp_path):
    """stale:R's past uploads are saved beside each checkpoint: 2 rounds then a resume to 4
    write the rows of 4 rounds in one go (round 3's faulty client sends round 2's upload)."""
    import pandas as pd
    arrays = client_arrays([8, 6, 9, 7], seed=5)
    data = FederatedData({f"c{i}": {"train": a, "test": a} for i, a in enumerate(arrays)},
                         num_classes=3, name="tiny")
    common = dict(loss=loss, algorithm_names=["FedAvg"], clients_per_round=4, batch_size=4,
                  hparams={"learning_rate": 0.1, "num_epochs": 1}, executor="local",
                  clients=4, faulty_clients=1, fault="stale:1")
    run_experiment(data, tiny_model, out_dir=str(tmp_path / "whole"), num_rounds=4, **common)
    run_experiment(data, tiny_model, out_dir=str(tmp_path / "cut"), num_rounds=2, **common)
    folder = tmp_path / "cut" / "checkpoints" / "FedAvg"
    assert [p.name for p in folder.glob("stale_uploads_*.pkl")] == ["stale_uploads_2.pkl"]
    run_experiment(data, tiny_model, out_dir=str(tmp_path / "cut"), num_rounds=4, resume=True,
                   **common)
    whole = pd.read_csv(tmp_path / "whole" / "metrics.csv")
    cut = pd.read_csv(tmp_path / "cut" / "metrics.csv")
    np.testing.assert_allclose(cut["test_accuracy"], whole["test_accuracy"], atol=1e-6)
    np.testing.assert_allclose(cut["train_loss"], whole["train_loss"], rtol=1e-5)
    # Without them the faulty client starts anew (its round-3 upload sent as its own).
    run_experiment(data, tiny_model, out_dir=str(tmp_path / "cut2"), num_rounds=2, **common)
    (tmp_path / "cut2" / "checkpoints" / "FedAvg" / "stale_uploads_2.pkl").unlink()
    run_experiment(data, tiny_model, out_dir=str(tmp_path / "cut2"), num_rounds=4,
                   resume=True, **common)
    anew = pd.read_csv(tmp_path / "cut2" / "metrics.csv")
    assert not np.allclose(anew["train_loss"][2:], whole["train_loss"][2:], rtol=1e-5)
