"""synthetic(alpha, beta) across sites, in-process (a FakeGrid): each site generates the set
from the job's options and seed and trains on its client; two sites' deployed rounds equal
the local executor's on the simulation's clients; a site that generates another set (another
number of clients) takes no part; a site's start-up check names its client."""

import json
import os
import sys

import pandas as pd
import pytest
import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "deploy"))
from deploy_fakes import FakeGrid, run_config  # noqa: E402
from local_reference import assert_trained_as_local  # noqa: E402

from tffre import builder  # noqa: E402
from tffre import config as config_lib  # noqa: E402
from tffre.data import FederatedData  # noqa: E402
from tffre.definition import TaskContext  # noqa: E402
from tffre.deploy.client_app import make_client_app  # noqa: E402
from tffre.deploy.client_app import NodeRuntime  # noqa: E402
from tffre.deploy.server_app import run_server  # noqa: E402
from tffre.deploy.tasks import DeployJob  # noqa: E402
from tffre.runner.loop import data_seed  # noqa: E402
from tffre.runner.processes import pretrained_weights  # noqa: E402
from tffre.tasks import synthetic as synthetic_task  # noqa: E402
from tffre.tasks.recipe import RecipeSites  # noqa: E402
from tffre.tasks.sites import SiteDataError  # noqa: E402

NAME = "FedAvgT"
ROUNDS = 2
SETTINGS = {"learning-rate": 0.05, "num-epochs": 1, "num-iters": 4, "batch-size": 8,
            "beta": 0.7, "seed": 5}
# Site c generates a set of 4 clients where a and b generate 3: it takes no part.
NODES = {"a": {"data": "synthetic:0", "clients": 3}, "b": {"data": "synthetic:2", "clients": 3},
         "c": {"data": "synthetic:1", "clients": 4}}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """(out folder, server log) of a deployed run of sites a, b and c."""
    root = tmp_path_factory.mktemp("synthetic_sites")
    task = RecipeSites(synthetic_task.RECIPE)
    nodes = {s: (make_client_app(NodeRuntime(task)),
                 {"site": s, "state-dir": str(root / s), **config})
             for s, config in NODES.items()}
    log = []
    run_server(FakeGrid(nodes), run_config(NAME, root / "out", **{
        "num-rounds": ROUNDS, **SETTINGS}), task=task, log=log.append)
    return root / "out", log


def local_reference(tmp_path):
    """The local executor over the simulation's clients 0 and 2 of 3 (sites a and b, name
    order), with its model, seed and batches: (final state, initial weights)."""
    cfg = config_lib.resolve({"dataset": "synthetic", "algorithm": NAME, "clients": 3,
                              "clients_per_round": 2, "out": str(tmp_path),
                              **{k.replace("-", "_"): v for k, v in SETTINGS.items()}})
    job = cfg.task.prepare(cfg)
    clients = list(job.data.clients)
    arrays = {"a": job.data.clients[clients[0]]["train"],
              "b": job.data.clients[clients[2]]["train"]}
    tf.keras.utils.set_random_seed(cfg.run.seed)
    process = builder.build_algorithm(NAME, job.model.model_fn, loss=job.model.loss,
                                      input_spec=job.data.element_spec(), executor="local",
                                      context=TaskContext(num_clients=2, clients_per_round=2),
                                      **cfg.hparams[NAME].asdict())
    tf.keras.utils.set_random_seed(cfg.run.seed)
    initial = pretrained_weights(process.model_fn)
    state = process.set_model_weights(process.initialize(), initial)
    data = FederatedData({s: {"train": arrays[s]} for s in arrays}, num_classes=10)
    for rnd in range(1, ROUNDS + 1):
        datasets = [data.client_dataset(s, "train", batch_size=cfg.run.batch_size,
                                        seed=data_seed(cfg.run.seed, rnd)) for s in arrays]
        state = process.next(state, datasets, client_ids=list(arrays)).state
    return state, initial


def test_two_sites_equal_the_local_executor_on_the_simulations_clients(deployed, tmp_path):
    out, _ = deployed
    want, initial = local_reference(tmp_path)
    assert_trained_as_local(out, NAME, want, initial, ROUNDS)
    job = DeployJob.from_json(json.loads((out / "deploy.json").read_text())["job"])
    assert job.options == {"alpha": 0.5, "beta": 0.7, "iid": False}   # as saved: JSON
    assert job.facts["clients"] == 3 and job.labels == tuple(str(k) for k in range(10))
    assert list(pd.read_csv(out / "metrics.csv")["clients"]) == ["a b"] * ROUNDS


def test_a_site_generating_another_set_takes_no_part(deployed):
    _, log = deployed
    refused = [line for line in log if line.startswith("site c (node")]
    assert refused and "its clients 4 differ from the run's 3" in refused[0]
    assert all(line.endswith("it takes no part") for line in refused)


def test_check_site_names_the_sites_client():
    task = synthetic_task.TASK.sites()
    assert task.check_site({"data": "synthetic:2", "clients": 3}) == (
        "synthetic:2: client 2 of 3, generated from the run's options and seed when it starts")
    assert task.check_site({"data": "synthetic:29"}).startswith("synthetic:29: client 29 of 30")
    for site, why in (({"data": "synthetic:3", "clients": 3}, "k must be below 3"),
                      ({"data": "/site/data.csv"}, "is not synthetic:<k>"),
                      ({"data": "synthetic:1", "clients": "many"}, "not a whole number")):
        with pytest.raises(SiteDataError, match=why):
            task.check_site(site)
