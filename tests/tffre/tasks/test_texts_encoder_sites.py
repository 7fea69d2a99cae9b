"""``--dataset text --model encoder`` across sites, in-process (a FakeGrid): two hospitals
reading one shared file (``site-value``), each with its own copy of a tiny random encoder
folder, train deployed rounds equal to the local executor's on the simulation's clients of
the same names, the whole encoder fine-tuned and with a split encoder (``--trainable-layers
1``: each side's frozen prefix from its own folder, each site's activations its own). The
model is deterministic (dropout off, in the encoder's config and the classifier), as a
deployed round equals the local executor's only then (:mod:`tffre.federation.seeding`)."""

import dataclasses

import json
import os
import shutil
import sys

import pandas as pd
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "deploy"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir))
from deploy_fakes import FakeGrid, run_config  # noqa: E402
from local_reference import assert_trained_as_local, prepared_rounds  # noqa: E402
from tiny_encoder import make_encoder_folder  # noqa: E402

from tffre import config as config_lib  # noqa: E402
from tffre.definition import TaskContext  # noqa: E402
from tffre.deploy.client_app import NodeRuntime, make_client_app  # noqa: E402
from tffre.deploy.server_app import run_server  # noqa: E402
from tffre.deploy.tasks import DeployJob  # noqa: E402
from tffre.tasks import texts as text_task  # noqa: E402
from tffre.tasks.recipe import RecipeSites, prepare  # noqa: E402

NOTES = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                                     "fixtures", "texts", "encoder_notes.csv"))
NAME = "FedAvgT"
ROUNDS = 2
SETTINGS = {"learning-rate": 0.01, "num-epochs": 1, "num-iters": 3, "batch-size": 4,
            "max-len": 12, "dev-fraction": 0, "seed": 2}
NODES = {"a": "A", "b": "B"}   # site -> its site value in the shared file


class TextsWithoutDropout(text_task.TextRecipe):
    """The text recipe with the classifier's dropout off."""

    def config(self, spec, tokenizer, encoder_dir):
        return dataclasses.replace(super().config(spec, tokenizer, encoder_dir), dropout=0.0)


RECIPE = TextsWithoutDropout()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{side: its own copy of one tiny encoder folder} (the server's and each site's)."""
    root = tmp_path_factory.mktemp("encoders")
    first, _ = make_encoder_folder(str(root / "server"), weights="safetensors")
    path = os.path.join(first, "config.json")
    with open(path, encoding="utf-8") as f:
        settings = json.load(f)
    settings.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(settings, f)
    copies = {"server": first}
    for site in NODES:
        copies[site] = shutil.copytree(first, str(root / site))
    return copies


def deployed(root, folders, extra):
    """The out folder of a deployed run of sites a and b."""
    task = RecipeSites(RECIPE)
    nodes = {s: (make_client_app(NodeRuntime(task)),
                 {"site": s, "state-dir": str(root / s), "data": NOTES,
                  "site-value": NODES[s], "encoder": folders[s]}) for s in NODES}
    run_server(FakeGrid(nodes), run_config(NAME, root / "out", dataset="text", **{
        "model": "encoder", "num-rounds": ROUNDS, "encoder": folders["server"], **SETTINGS,
        **extra}), task=task, log=lambda line: None)
    return root / "out"


def simulated(tmp_path, folder, extra):
    """The local executor over the simulation's clients A and B, with the simulation's model,
    weights, seed and batches."""
    cfg = config_lib.resolve({"dataset": "text", "model": "encoder", "data": NOTES,
                              "encoder": folder, "algorithm": NAME, "clients_per_round": 2,
                              "out": str(tmp_path / "sim"),
                              **{k.replace("-", "_"): v for k, v in {**SETTINGS,
                                                                      **extra}.items()}})
    job = prepare(RECIPE, cfg, NOTES)
    assert job.data.client_ids == ["A", "B"]
    arrays = {s: job.data.clients[v]["train"] for s, v in NODES.items()}
    state, initial, _ = prepared_rounds(NAME, job, cfg, arrays,
                                        TaskContext(num_clients=2, clients_per_round=2), ROUNDS)
    return state, initial, job


@pytest.mark.parametrize("extra", [{}, {"trainable-layers": 1}], ids=["whole", "top-1"])
def test_two_sites_equal_the_local_executor(folders, tmp_path, extra):
    out = deployed(tmp_path, folders, extra)
    want, initial, sim = simulated(tmp_path, folders["server"], extra)
    if extra:   # the top on cached activations: the prefix's input beside the word pieces
        assert set(sim.data.clients["A"]["train"][0]) == {"hidden", "inputs"}
    assert_trained_as_local(out, NAME, want, initial, ROUNDS)
    job = DeployJob.from_json(json.loads((out / "deploy.json").read_text())["job"])
    assert job.model == "encoder" and job.labels == ("cardiac", "respiratory")
    assert job.options["encoder"] is None   # each side's own folder, never in the job
    saved = (out / "deploy.json").read_text()
    assert folders["server"] not in saved and folders["a"] not in saved
    assert list(pd.read_csv(out / "metrics.csv")["clients"]) == ["a b"] * ROUNDS
    assert (out / "models" / NAME / "text_tokenizer.json").is_file()
