"""Per-site evaluation (tffre.runner.per_site): each client's own held-out rows, against
scikit-learn on that client's arrays; per_site.csv, metrics.csv's summary, TensorBoard."""

import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import tensorflow_federated as tff
from sklearn.metrics import accuracy_score

from tffre.data import FederatedData
from tffre.evaluation import GlobalModelEvaluator
from tffre.runner.per_site import SITE_COLUMNS, summarise
from tiny import (PersonalProcessFake, client_arrays, full_and_resumed, initial_weights,
                  run_experiment, tiny_model)


def tiny_data():
    train = client_arrays([8, 6, 9, 7], seed=5)
    test = client_arrays([5, 3, 7, 4], seed=9)
    return FederatedData({f"c{i}": {"train": a, "test": t}
                          for i, (a, t) in enumerate(zip(train, test))},
                         num_classes=3, name="tiny"), test


def test_site_scores_equal_sklearn_on_each_clients_own_test_rows(loss):
    data, test = tiny_data()
    evaluator = GlobalModelEvaluator(tiny_model, data, loss)
    weights = tff.learning.models.ModelWeights(trainable=initial_weights(), non_trainable=[])
    pooled = evaluator(weights)
    rows = evaluator.site_scores({"test": data.sizes("test")})
    model = tiny_model()
    model.set_weights(initial_weights())
    want = [accuracy_score(y, np.argmax(model.predict(x, verbose=0), axis=1)) for x, y in test]
    got = [r["test_accuracy"] for r in rows]
    np.testing.assert_allclose(got, want)
    assert len(set(np.round(want, 6))) > 1   # the sites differ
    assert [r["num_test"] for r in rows] == [5, 3, 7, 4]
    # The pooled figure is the sites' example-weighted mean.
    np.testing.assert_allclose(pooled["test_accuracy"], np.average(want, weights=[5, 3, 7, 4]))


def test_summary_is_the_mean_worst_and_spread():
    rows = [{"test_accuracy": 0.5, "num_test": 4}, {"test_accuracy": 0.9, "num_test": 2},
            {"test_accuracy": 0.7, "num_test": 3}, {"test_accuracy": float("nan"), "num_test": 0}]
    out = summarise(rows)
    assert out["site_test_accuracy_mean"] == pytest.approx(0.7)
    assert out["site_test_accuracy_worst"] == 0.5
    assert out["site_test_accuracy_spread"] == pytest.approx(np.std([0.5, 0.9, 0.7]))
    assert out["site_test_f1_mean"] is None


def test_a_run_writes_per_site_rows_their_summary_and_a_board_per_site(loss, tmp_path):
    data, _ = tiny_data()
    run_experiment(data, tiny_model, loss=loss, algorithm_names=["FedAvg"], clients=4,
                   clients_per_round=2, batch_size=4, num_rounds=3, eval_every=2,
                   hparams={"learning_rate": 0.1, "num_epochs": 1}, executor="local",
                   out_dir=str(tmp_path))
    sites = pd.read_csv(tmp_path / "per_site.csv")
    assert list(sites["round"]) == [2] * 4 + [3] * 4          # every evaluation round
    assert list(sites["site"]) == ["c0", "c1", "c2", "c3"] * 2
    assert list(sites["num_test"]) == [5, 3, 7, 4] * 2
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert set(SITE_COLUMNS) <= set(metrics.columns)
    last = sites[sites["round"] == 3]["test_accuracy"]
    row = metrics[metrics["round"] == 3].iloc[0]
    assert row["site_test_accuracy_mean"] == pytest.approx(last.mean())
    assert row["site_test_accuracy_worst"] == pytest.approx(last.min())
    assert row["site_test_accuracy_spread"] == pytest.approx(np.std(last))
    np.testing.assert_allclose(row["test_accuracy"], np.average(last, weights=[5, 3, 7, 4]))
    for site in ("c0", "c3"):
        board = tmp_path / "tensorboard" / "FedAvg" / "sites" / site
        assert any(name.startswith("events") for name in os.listdir(board))


def test_a_resume_keeps_the_per_site_rows_up_to_the_checkpoint(loss, tmp_path):
    data, _ = tiny_data()
    full, cut = full_and_resumed(data, tmp_path, loss=loss, algorithm_names=["FedAvg"],
                                 clients=4, clients_per_round=2, batch_size=4,
                                 hparams={"learning_rate": 0.1, "num_epochs": 1},
                                 executor="local")
    full, cut = pd.read_csv(full / "per_site.csv"), pd.read_csv(cut / "per_site.csv")
    pd.testing.assert_frame_equal(full, cut, rtol=1e-6)


class _SiteEvaluator:
    """Scores = the first trainable weight's value; each site's score is that value plus
    the site's index (so a site's row shows which model scored it)."""
    splits = ("test", "train")
    per_site = True

    def __call__(self, weights, splits=None):
        self.value = float(np.asarray(weights.trainable[0]))
        return {"test_accuracy": self.value, "train_loss": -self.value}

    def site_scores(self, sizes):
        return [{"test_accuracy": self.value + k, "num_test": n}
                for k, n in enumerate(sizes["test"])]


def test_a_personal_rows_site_is_scored_with_its_own_personal_weights():
    """FedRep/FedRoD: site a with a's head (0.2 + 0), b with b's (0.6 + 1); c has not trained,
    so the global model's (0.5 + 2). The pooled figure stays the mean over trained heads."""
    from tffre.evaluation import evaluate_state
    from tffre.mapreduce import ModelWeights
    out, rows = evaluate_state(_SiteEvaluator(), PersonalProcessFake(),
                               ModelWeights([np.float32(0.5)], []),
                               sizes={"test": [3, 4, 5]}, client_ids=["a", "b", "c"])
    assert [r["test_accuracy"] for r in rows] == pytest.approx([0.2, 1.6, 2.5])
    assert out["test_accuracy"] == pytest.approx(0.4)
