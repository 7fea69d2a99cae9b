"""Every task deployed over three site processes equals the local executor (issue 30 item 3):
a SuperLink (TLS, registered sites only) and three SuperNodes as separate OS processes on
loopback, each site holding its share of the task's embedded sample (``tffre.data.deal``),
and ``deploy run``'s final weights against the local executor's, to 1e-5, on the arrays the
simulation reads from the same site folders (``local_reference.simulated_reference``), or,
for document-level RE, whose featurizer's row limits the sites agree on, on the arrays the
task's site code reads with the run's job (``local_reference.sites_reference``).

The encoder tasks use the packaged MiniLM's tokenizer and weights with its dropout off, one
layer deep, and sentence-level RE its classifier's dropout off too (its sites run
``deploy_tiny_task:RELATIONS``, read through the sites' code): a site and the local executor
draw dropout masks apart (:mod:`tffre.federation.seeding`).

* IMCS with FedPAP (the LSTM; PAdam at the clients, the attention step at the server): in
  the default suite. IMCS with FedAvgS (Self-Adam, the weighted mean) is opt-in, to keep the
  suite within its budget (35 s here): a deployed round runs the same client loop whichever
  Keras optimizer it holds, and the deployed weighted mean is checked in the suite by
  ``test_flower_round.py`` (FedAvg) and, on IMCS's sites, by ``test_imcs_sites.py``.
* GAD (FedProx), CDR (FedLCC) and the OCT images (FedCB): opt-in, each starts its own
  federation and builds an encoder or a ResNet at three sites (minutes)::

    TFFRE_DEPLOY_EQUALITY=1 FLWR_TELEMETRY_ENABLED=0 python -m pytest -q -s \\
        -p no:cacheprovider tests/tffre/deploy/test_deploy_tasks_equality.py

Each run prints ``equality DATASET NAME: max |deployed - local| = D``.
"""

import dataclasses
import json
import os
import subprocess

import numpy as np
import pandas as pd
import pytest

from local_reference import simulated_reference, sites_reference
from loopback import DEPLOY, left_behind, marked_environment, start_federation

from tffre import tasks
from tffre.data.deal import deal
from tffre.deploy.launch import stop_all
from tffre.runner.checkpoints import Checkpoints

OPT_IN = os.environ.get("TFFRE_DEPLOY_EQUALITY") == "1"
SITES = ("a", "b", "c")
ROUNDS = 2
RUN_BUDGET = 600   # seconds per run: a bound against a hang, not a speed test
ENCODER = "encoder"   # the run's --encoder, a site's node configuration: the copy below


@dataclasses.dataclass(frozen=True)
class Case:
    """A task's runs: its algorithms, the run's options, those of its algorithms that run in
    the default suite, the reference ("simulation" or "sites") and the sites'
    ``--deploy-task`` (default the dataset's task)."""
    algorithms: tuple
    settings: dict
    in_suite: tuple = ()
    reference: str = "simulation"
    task: str = None


#: Small settings: the point is the equality of two execution paths, not what they learn.
CASES = {
    "imcs": Case(("FedAvgS", "FedPAP"),
                 {"model": "lstm", "batch_size": 8, "max_len": 8, "lstm_units": 8,
                  "num_epochs": 1, "num_iters": 3, "learning_rate": 0.01, "seed": 3},
                 in_suite=("FedPAP",)),
    "gad": Case(("FedProx",),
                {ENCODER: None, "encoder_layers": 1, "max_len": 32, "batch_size": 8,
                 "num_epochs": 1, "num_iters": 3, "learning_rate": 1e-4, "seed": 1},
                reference="sites", task="deploy_tiny_task:RELATIONS"),
    "cdr": Case(("FedLCC",),
                {ENCODER: None, "encoder_layers": 1, "max_len": 128, "batch_size": 2,
                 "num_epochs": 1, "num_iters": 2, "learning_rate": 3e-4, "seed": 1},
                reference="sites"),
    "oct-c8": Case(("FedCB",),
                   {"resnet_width": 4, "image_size": 16, "batch_size": 8, "num_epochs": 1,
                    "num_iters": 3, "learning_rate": 1e-3, "seed": 1}),
}
RUNS = [pytest.param(dataset, name, marks=() if name in case.in_suite else pytest.mark.skipif(
            not OPT_IN, reason="opt-in: set TFFRE_DEPLOY_EQUALITY=1 (minutes, 4 daemons)"),
            id=f"{dataset}-{name}")
        for dataset, case in CASES.items() for name in case.algorithms]


def encoder_without_dropout(folder):
    """The packaged encoder's files in ``folder`` (linked), its config with dropout off."""
    from tffre.text.relation_tokenizer import default_encoder_dir
    source = default_encoder_dir()
    os.makedirs(folder)
    for name in os.listdir(source):
        if name != "config.json":
            os.symlink(os.path.join(source, name), os.path.join(folder, name))
    with open(os.path.join(source, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    return str(folder)


@pytest.fixture(scope="module")
def federations(tmp_path_factory):
    """One federation per dataset, started when a test first needs it: {dataset: (app
    folder, {site: its node configuration}, the run's options, its folder)}; afterwards
    nothing any of them started is left."""
    started, daemons = {}, []

    def federation(dataset):
        if dataset not in started:
            tmp = tmp_path_factory.mktemp(f"tasks-{dataset}")
            folders = deal(tasks.task_of(dataset).sample_path(dataset), str(tmp / "sites"),
                           SITES)
            settings = dict(CASES[dataset].settings)
            nodes = {s: {"site": s, "data": folders[s]} for s in SITES}
            flags = []
            if ENCODER in settings:
                settings[ENCODER] = encoder_without_dropout(tmp / ENCODER)
                flags = ["--encoder", settings[ENCODER]]
                for node in nodes.values():
                    node[ENCODER] = settings[ENCODER]
            app = start_federation(tmp, folders, deploy_task(dataset), daemons, flags=flags)
            started[dataset] = app, nodes, settings, tmp
        return started[dataset]

    with marked_environment() as mark:
        try:
            yield federation
        finally:
            stop_all(daemons)
        left = left_behind(mark)
    assert not left, left


def deploy_task(dataset):
    return CASES[dataset].task or tasks.task_of(dataset).name


def option(key, value):
    return [f"--{key.replace('_', '-')}", str(value)]


@pytest.mark.parametrize("dataset,name", RUNS)
def test_three_site_processes_give_the_local_executors_weights(dataset, name, federations):
    app, nodes, settings, tmp = federations(dataset)
    out = tmp / f"out-{name}"
    flags = [f for k, v in settings.items() for f in option(k, v)]
    run = subprocess.run(DEPLOY + [
        "run", "--app", str(app), "--dataset", dataset, "--algorithm", name,
        "--num-rounds", str(ROUNDS), "--min-nodes", "3", "--round-timeout", "300",
        "--start-timeout", "180", "--deploy-task", deploy_task(dataset),
        "--out", str(out)] + flags,
        timeout=RUN_BUDGET, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = pd.read_csv(out / "metrics.csv")
    assert list(rows["round"]) == list(range(1, ROUNDS + 1))
    assert list(rows["clients"]) == [" ".join(SITES)] * ROUNDS
    # Each site's own scores, from its own counts (document RE's too), and their spread.
    sites = pd.read_csv(out / "per_site.csv")
    assert sorted(zip(sites["round"], sites["site"])) == [
        (r, s) for r in range(1, ROUNDS + 1) for s in SITES]
    assert (sites["num_test"] > 0).all()
    last = sites[sites["round"] == ROUNDS]
    assert rows["site_test_accuracy_worst"].iloc[-1] == pytest.approx(
        last["test_accuracy"].min())

    if CASES[dataset].reference == "sites":
        want, initial, arrays = sites_reference(out, nodes, ROUNDS)
    else:
        want, initial, arrays = simulated_reference(
            dataset, {s: n["data"] for s, n in nodes.items()}, name, settings, ROUNDS,
            tmp / f"reference-{name}")
    assert all(len(y) > 0 for _, y in arrays.values())
    got, done = Checkpoints(str(out / "checkpoints" / name)).load_latest(want)
    assert done == ROUNDS
    worst = max(float(np.max(np.abs(np.asarray(g) - np.asarray(w))))
                for g, w in zip(got["model"].trainable, want["model"].trainable))
    print(f"equality {dataset} {name}: max |deployed - local| = {worst:.3g} "
          f"({len(want['model'].trainable)} trainable arrays, {ROUNDS} rounds, "
          f"3 site processes)", flush=True)
    for g, w in zip(got["model"].trainable, want["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    # The rounds trained: equality is not both sides keeping the initial weights.
    assert any(np.abs(np.asarray(g) - np.asarray(i)).max() > 1e-5
               for g, i in zip(got["model"].trainable, initial.trainable))
