"""The runner: empty rounds are reported as missing, strict JSON, client sampling from (seed, round)."""

import json

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from tffre import runner
from tffre.data import FederatedData
from tffre.models import logistic_regression


def test_every_client_excluded_round_is_reported_missing_and_warned(tmp_path, capfd):
    rng = np.random.RandomState(0)
    clients = {}
    for k in range(3):
        x = rng.randn(12, 4).astype(np.float32)
        x[0, 0] = np.nan   # every client's update will be non-finite
        clients[f"c{k}"] = {"train": (x, rng.randint(0, 2, 12).astype(np.int32)),
                            "test": (rng.randn(5, 4).astype(np.float32),
                                     rng.randint(0, 2, 5).astype(np.int32))}
    data = FederatedData(clients, num_classes=2, name="poisoned")
    summary = runner.run_experiment(
        data, lambda: logistic_regression(4, 2), loss=tf.keras.losses.SparseCategoricalCrossentropy(),
        algorithm_names=["fedavg"], num_rounds=2, clients_per_round=2, out_dir=str(tmp_path),
        progress=False, hparams={"num_epochs": 1})
    assert "every client update had NaN/Inf; the round was empty" in capfd.readouterr().err
    frame = pd.read_csv(tmp_path / "metrics.csv")
    assert frame["local_train_loss"].isna().all()        # not a perfect 0.0
    assert frame["num_examples"].tolist() == [0, 0]
    assert summary["algorithms"]["FedAvg"]["empty_rounds"] == 2
    # The global model was kept: zero weights (logistic_regression's initialiser).
    assert frame["test_accuracy"].notna().all()


def test_summary_json_is_strict(tmp_path):
    path = runner.write_json(tmp_path / "s.json", {"a": float("nan"), "b": [np.float32(np.inf), 1],
                                                   "c": np.int64(3)})
    text = path.read_text() if hasattr(path, "read_text") else open(path).read()
    assert json.loads(text, parse_constant=lambda t: pytest.fail(t)) == {"a": None, "b": [None, 1],
                                                                         "c": 3}


def test_client_sampling_depends_only_on_seed_and_round():
    ids = [f"c{k}" for k in range(10)]
    a = runner.sample_clients(ids, 4, 7, 3)
    assert a == runner.sample_clients(ids, 4, 7, 3)
    rng = np.random.RandomState([7, 3])   # the documented rule
    assert a == [ids[i] for i in sorted(rng.choice(10, 4, replace=False))]
    assert len(set(a)) == 4 and a != runner.sample_clients(ids, 4, 7, 4)
    with pytest.raises(ValueError, match="between 1 and the 10 clients, got 11"):
        runner.sample_clients(ids, 11, 0, 1)


def test_out_dir_with_results_is_refused(tmp_path):
    (tmp_path / "metrics.csv").write_text("algorithm,round\n")
    with pytest.raises(ValueError, match="already holds results"):
        runner.prepare_out_dir(str(tmp_path))
    runner.prepare_out_dir(str(tmp_path), overwrite=True)
    assert not (tmp_path / "metrics.csv").exists()
