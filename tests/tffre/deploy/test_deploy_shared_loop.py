"""Simulation and deployment drive one round loop (tffre.runner.rounds): the same settings give
the same metrics.csv columns (a deployment adds missing_clients and missing_reasons) and the
same summary.json keys (a deployment adds ``deployment``), and a deployed resume continues
through that loop."""

import json

import pandas as pd
import pytest
import tensorflow as tf

from deploy_fakes import FakeGrid, TinyTask, run_config
from tiny import client_arrays, run_experiment, tiny_model

from tffre.data import FederatedData
from tffre.deploy.client_app import make_client_app
from tffre.deploy.client_app import NodeRuntime
from tffre.deploy.server_app import MISSING_COLUMN, REASONS_COLUMN, run_server
from tffre.errors import ConfigError
from tffre.runner import rounds

SITES = ("a", "b", "c")
ARRAYS = dict(zip(SITES, client_arrays([8, 10, 6], seed=1)))
HPARAMS = {"learning_rate": 0.05, "num_epochs": 2, "num_iters": 5,
           "dp_noise_multiplier": 0.1, "dp_clip": 0.5}


def simulate(out, num_rounds):
    """The simulation of the deployment's settings: the sites as clients, every one each
    round, their held-out split the first half of their examples (as TinyTask's)."""
    data = FederatedData({s: {"train": (x, y), "test": (x[:len(y) // 2], y[:len(y) // 2])}
                          for s, (x, y) in ARRAYS.items()}, num_classes=3, name="synthetic")
    return run_experiment(data, tiny_model, loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                          algorithm_names=["FedAvg"], out_dir=str(out), hparams=HPARAMS,
                          num_rounds=num_rounds, clients=3, clients_per_round=3, batch_size=4,
                          seed=0, executor="local")


def deploy(tmp_path, num_rounds, **config):
    task = TinyTask(ARRAYS)
    grid = FakeGrid({s: (make_client_app(NodeRuntime(task)),
                         {"site": s, "state-dir": str(tmp_path / "sites" / s)}) for s in SITES})
    options = {k.replace("_", "-"): v for k, v in HPARAMS.items()}
    return run_server(grid, run_config("FedAvg", tmp_path / "out", **options,
                                       **{"num-rounds": num_rounds}, **config), task=task)


def test_simulation_and_deployment_write_the_same_columns_and_keys(tmp_path, monkeypatch,
                                                                   capsys):
    runs = []
    loop = rounds.AlgorithmRounds.run

    def spy(self, log):
        runs.append((type(self.where).__name__, self.done))
        return loop(self, log)
    monkeypatch.setattr(rounds.AlgorithmRounds, "run", spy)
    simulated = simulate(tmp_path / "sim", 3)
    deployed = deploy(tmp_path, 2)
    # The deployed run, extended to 3 rounds: resumed after its checkpoint of round 2.
    resumed = deploy(tmp_path, 3, resume=True)
    assert runs == [("SimulatedRounds", 0), ("DeployedRounds", 0), ("DeployedRounds", 2)]
    assert "FedAvg: resuming after round 2" in capsys.readouterr().out

    sim = pd.read_csv(tmp_path / "sim" / "metrics.csv")
    dep = pd.read_csv(tmp_path / "out" / "metrics.csv")
    assert [c for c in dep.columns if c not in (MISSING_COLUMN, REASONS_COLUMN)] == \
        list(sim.columns)
    assert {"dp_epsilon", "dp_clip", "test_accuracy", "train_loss"} <= set(sim.columns)
    assert list(dep["round"]) == list(sim["round"]) == [1, 2, 3]
    assert list(dep["clients"]) == list(sim["clients"]) == ["a b c"] * 3
    assert dep["test_accuracy"].notna().all() and sim["test_accuracy"].notna().all()

    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(written) == set(resumed) == set(deployed)
    assert set(deployed) - {"deployment"} == set(simulated)
    assert deployed["clients_per_round"] == "all sites" and simulated["clients_per_round"] == 3
    # What the algorithms were given: the same keys (a deployment's concepts are the agreed
    # labels' own).
    assert set(deployed["task_context"]) == set(simulated["task_context"])
    for key in ("num_clients", "prompts", "server_examples"):
        assert deployed["task_context"][key] == simulated["task_context"][key]
    sim_entry, dep_entry = simulated["algorithms"]["FedAvg"], deployed["algorithms"]["FedAvg"]
    assert set(dep_entry) == set(sim_entry) and "wall_seconds" in dep_entry
    assert set(dep_entry["privacy"]) == set(sim_entry["privacy"])
    assert dep_entry["privacy"]["sampling"].startswith("all 3 sites every round")
    assert sim_entry["hparams"]["dp_seed"] == dep_entry["hparams"]["dp_seed"] == "secret"
    # The resumed run trained one round here: its time is not the algorithm's whole run.
    assert "wall_seconds" not in resumed["algorithms"]["FedAvg"]
    assert resumed["algorithms"]["FedAvg"]["rounds"] == 3
    # The same loop refuses to resume it with fewer rounds than it has trained.
    with pytest.raises(ConfigError, match="already holds 3 rounds of FedAvg, more than "
                                          "--num-rounds 2"):
        deploy(tmp_path, 2, resume=True)
    assert len(pd.read_csv(tmp_path / "out" / "metrics.csv")) == 3             # nothing lost
