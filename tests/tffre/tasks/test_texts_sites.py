"""``--dataset text`` across sites, in-process (a FakeGrid), its sites derived from the recipe:
two hospitals reading one shared file (``site-value``) train deployed rounds equal to the local
executor's on the simulation's clients of the same names; the labels are the union of the
sites'; a site's start-up check says what it holds; a bad file is one line."""

import json
import os
import sys

import pandas as pd
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "deploy"))
from deploy_fakes import FakeGrid, run_config  # noqa: E402
from local_reference import assert_trained_as_local, prepared_rounds  # noqa: E402

from tffre import config as config_lib  # noqa: E402
from tffre import tasks  # noqa: E402
from tffre.definition import TaskContext  # noqa: E402
from tffre.deploy.client_app import NodeRuntime, make_client_app  # noqa: E402
from tffre.deploy.server_app import run_server  # noqa: E402
from tffre.deploy.tasks import DeployJob  # noqa: E402
from tffre.tasks import texts as text_task  # noqa: E402
from tffre.tasks.recipe import RecipeSites  # noqa: E402
from tffre.tasks.sites import SiteDataError  # noqa: E402

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                                        "fixtures", "texts"))
NOTES = os.path.join(FIXTURES, "notes.csv")
VECTORS = os.path.join(FIXTURES, "vectors.txt")
NAME = "FedAvgT"
ROUNDS = 2
SETTINGS = {"learning-rate": 0.05, "num-epochs": 1, "num-iters": 3, "batch-size": 4,
            "max-len": 8, "lstm-units": 4, "seed": 2}
NODES = {"a": "A", "b": "B"}   # site -> its site value in the shared file


def node(site, root):
    return {"site": site, "state-dir": str(root / site), "data": NOTES,
            "site-value": NODES[site], "w2v": VECTORS}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """(out folder, server log) of a deployed run of sites a and b."""
    root = tmp_path_factory.mktemp("text_sites")
    task = RecipeSites(text_task.RECIPE)
    nodes = {s: (make_client_app(NodeRuntime(task)), node(s, root)) for s in NODES}
    log = []
    run_server(FakeGrid(nodes), run_config(NAME, root / "out", dataset="text", **{
        "num-rounds": ROUNDS, "w2v": VECTORS, **SETTINGS}), task=task, log=log.append)
    return root / "out", log


def simulated(tmp_path):
    """The local executor over the simulation's clients A and B (``--partition site`` of the
    whole file), with the simulation's model, weights, seed and batches."""
    cfg = config_lib.resolve({"dataset": "text", "data": NOTES, "w2v": VECTORS,
                              "algorithm": NAME, "clients_per_round": 2,
                              "out": str(tmp_path / "sim"),
                              **{k.replace("-", "_"): v for k, v in SETTINGS.items()}})
    job = tasks.task_of("text").prepare(cfg)
    assert job.data.client_ids == ["A", "B", "C"]
    arrays = {s: job.data.clients[v]["train"] for s, v in NODES.items()}
    state, initial, _ = prepared_rounds(NAME, job, cfg, arrays,
                                        TaskContext(num_clients=2, clients_per_round=2), ROUNDS)
    return state, initial, arrays, job


def test_two_sites_equal_the_local_executor_on_the_simulations_clients(deployed, tmp_path):
    out, _ = deployed
    want, initial, arrays, sim = simulated(tmp_path)
    assert all(len(y) > 8 for _, y in arrays.values())   # of A's 22 and B's 17 texts
    assert_trained_as_local(out, NAME, want, initial, ROUNDS)
    job = DeployJob.from_json(json.loads((out / "deploy.json").read_text())["job"])
    assert job.labels == tuple(sim.label_names) == ("cardiac", "respiratory")
    assert set(job.facts) == {"vocabulary", "dictionary", "prompts"}
    # The sites' own paths never in it (the local options unset).
    assert job.options["w2v"] is None and job.options["data"] is None
    saved = (out / "deploy.json").read_text()
    assert NOTES not in saved and VECTORS not in saved
    assert list(pd.read_csv(out / "metrics.csv")["clients"]) == ["a b"] * ROUNDS
    assert (out / "models" / NAME / "vocab.txt").is_file()


def test_the_labels_are_the_union_of_the_sites(tmp_path):
    """A hospital without one class still takes part: its labels are a subset of the run's."""
    only = tmp_path / "cardiac.csv"
    only.write_text("text,label\nchest pain,cardiac\npalpitations,cardiac\n"
                    "heart murmur,cardiac\nchest tightness,cardiac\nankle swelling,cardiac\n",
                    encoding="utf-8")
    task = RecipeSites(text_task.RECIPE)
    job = DeployJob(task="texts", dataset="text", algorithm=NAME, hparams={}, options={},
                    batch_size=4, seed=0)
    facts = task.survey(job, {"site": "x", "data": str(only), "w2v": VECTORS})
    assert facts["labels"] == ["cardiac"] and facts["examples"] == 3   # 5 - 1 test - 1 dev
    agreed = dataclass_replace(job, labels=("cardiac", "respiratory"),
                               facts={"vocabulary": facts["vocabulary"],
                                      "dictionary": facts["dictionary"]})
    assert task.disagreement(agreed, facts) is None
    assert "its labels ['cardiac'] are not among" in task.disagreement(
        dataclass_replace(agreed, labels=("respiratory",)), facts)
    data = task.site_data(agreed, {"site": "x", "data": str(only), "w2v": VECTORS})
    assert list(data.train[1]) == [0, 0, 0]


def dataclass_replace(job, **changes):
    import dataclasses
    return dataclasses.replace(job, **changes)


def test_a_sites_check_and_a_bad_file_are_one_line(tmp_path):
    task = tasks.task_of("text").sites()
    line = task.check_site({"data": NOTES})
    assert line == f"{NOTES}: text, train 36, dev 9, test 11 examples"
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nfine,x\n,y\n", encoding="utf-8")
    with pytest.raises(SiteDataError) as err:
        task.check_site({"data": str(bad)})
    assert str(err.value) == (f"bad.csv line 3: field text: empty; see: python -m tffre data "
                              f"check --dataset text --data {bad}")
    job = DeployJob(task="texts", dataset="text", algorithm=NAME, hparams={}, options={},
                    batch_size=4, seed=0)
    with pytest.raises(SiteDataError) as err:
        task.survey(job, {"site": "x", "data": str(bad), "w2v": VECTORS})
    assert str(err.value) == "bad.csv line 3: field text: empty"
    with pytest.raises(SiteDataError, match="site-value 'Z': no record has it"):
        task.survey(job, {"site": "x", "data": NOTES, "site-value": "Z", "w2v": VECTORS})
