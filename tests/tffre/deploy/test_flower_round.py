"""A deployed round, in-process: the ServerApp and ClientApps over a grid without servers give
the local executor's weights, whatever order the replies come in."""

import numpy as np
import pytest

from deploy_fakes import FakeGrid, TinyTask, run_config
from local_reference import local_run
from tiny import client_arrays, poisoned

from tffre.deploy.client_app import make_client_app
from tffre.deploy.client_app import NodeRuntime
from tffre.deploy.server_app import run_server
from tffre.runner.checkpoints import Checkpoints
from tffre.runner.processes import pretrained_weights

SITES = ("a", "b", "c")
# Site c's data has a NaN: its update is excluded every round, by itself, as in simulation.
ARRAYS = dict(zip(SITES, poisoned(client_arrays([8, 10, 6], seed=1), {2})))
NAMED = {"FedAvg": False, "FedAttS": False, "FedPAP": False, "MOON": True, "FedCMC": True}
HPARAMS = {"learning_rate": 0.05, "num_epochs": 2, "num_iters": 5}
EXTRA = {"FedAttS": {"stepsize": 1.5}, "FedPAP": {"stepsize": 1.5, "mu": 0.3}}


def deployed(name, tmp_path, order=None, **config):
    """Runs 3 rounds of ``name`` over a FakeGrid; returns (final server state, grid, out)."""
    task = TinyTask(ARRAYS, named=NAMED.get(name, False))
    nodes = {s: (make_client_app(NodeRuntime(task)), {"site": s,
                                                      "state-dir": str(tmp_path / "sites" / s)})
             for s in (order or SITES)}
    grid = FakeGrid(nodes)
    out = tmp_path / "out"
    extra = {k.replace("_", "-"): v for k, v in EXTRA.get(name, {}).items()}
    run_server(grid, run_config(name, out, **extra, **config), task=task)
    return grid, out


def final_state(out, name, structure):
    state, done = Checkpoints(str(out / "checkpoints" / name)).load_latest(structure)
    assert done == 3
    return state


# A server optimizer's moments and a robust rule's buffer, at a deployment's server.
@pytest.mark.parametrize("name,extra", [("FedAdam", {"server_learning_rate": 0.1}),
                                        ("FedAvg", {"robust": "median"})])
def test_server_optimizers_and_robust_rules_deployed_equal_the_local_executor(name, extra,
                                                                               tmp_path):
    want, _ = local_run(name, ARRAYS, dict(HPARAMS, **extra), 3)
    grid, out = deployed(name, tmp_path, order=("c", "a", "b"),
                         **{k.replace("_", "-"): v for k, v in extra.items()})
    got = final_state(out, name, want)
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    plain, _ = local_run("FedAvg", ARRAYS, HPARAMS, 3)
    assert not np.allclose(got["model"].trainable[0], plain["model"].trainable[0])


@pytest.mark.parametrize("name", list(NAMED))
def test_deployed_rounds_equal_the_local_executor(name, tmp_path):
    want, want_metrics = local_run(name, ARRAYS, dict(HPARAMS, **EXTRA.get(name, {})), 3,
                                   named=NAMED[name])
    # Nodes connect in another order than their names: the sum is still in name order.
    grid, out = deployed(name, tmp_path, order=("c", "a", "b"))
    got = final_state(out, name, want)
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert not np.allclose(got["model"].trainable[0], pretrained_weights(
        TinyTask(ARRAYS, named=NAMED[name]).model_fn()).trainable[0])
    import pandas as pd
    rows = pd.read_csv(out / "metrics.csv")
    assert list(rows["clients"]) == ["a b c"] * 3
    assert list(rows["num_excluded_clients"]) == [1, 1, 1]
    np.testing.assert_allclose(rows["local_train_loss"],
                               [float(m["client_work"]["train"]["loss"]) for m in want_metrics],
                               rtol=1e-5)
    import json
    summary = json.loads((out / "summary.json").read_text())
    # The server's provenance: its code and machine; the data files are the sites'.
    assert {"commit", "versions", "machine"} <= set(summary["provenance"])
    assert summary["provenance"]["data_files"] == []


def test_each_site_scores_the_model_on_its_own_test_file(tmp_path):
    """per_site.csv: every evaluation, each site's own held-out rows (here the first half of its
    examples) scored from its own counts; against scikit-learn on the final model; metrics.csv
    has the sites' mean, worst and spread."""
    import pandas as pd
    from sklearn.metrics import accuracy_score
    from tiny import tiny_model
    want, _ = local_run("FedAvg", ARRAYS, HPARAMS, 3)
    grid, out = deployed("FedAvg", tmp_path)
    got = final_state(out, "FedAvg", want)
    model = tiny_model()
    model.set_weights(list(got["model"].trainable))
    sites = pd.read_csv(out / "per_site.csv")
    last = sites[sites["round"] == 3].set_index("site")
    assert sorted(sites["round"].unique()) == [1, 2, 3]
    for site in ("a", "b"):   # c's data has a NaN: its counts are NaN-free, its loss is not
        x, y = ARRAYS[site]
        half = max(1, len(y) // 2)
        accuracy = accuracy_score(y[:half], np.argmax(model.predict(x[:half], verbose=0), 1))
        assert last.loc[site, "test_accuracy"] == pytest.approx(accuracy)
        assert last.loc[site, "num_test"] == half
    row = pd.read_csv(out / "metrics.csv").iloc[-1]
    assert row["site_test_accuracy_worst"] == pytest.approx(last["test_accuracy"].min())
    assert row["site_test_accuracy_mean"] == pytest.approx(last["test_accuracy"].mean())
