"""IMCS across sites, in-process (a FakeGrid), its sites derived from the task's recipe: two
sites' deployed LSTM rounds equal the local executor's on the arrays the simulation builds
from the same files; a site whose public vectors give another vocabulary takes no part, and
so does a server with other vectors; options that read the clients' texts at the server are
refused; a site's start-up check says what it holds."""

import json
import os
import sys

import pandas as pd
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "deploy"))
from deploy_fakes import FakeGrid, run_config  # noqa: E402
from local_reference import assert_trained_as_local, simulated_reference  # noqa: E402

from tffre import resources  # noqa: E402
from tffre.deploy.client_app import make_client_app  # noqa: E402
from tffre.deploy.client_app import NodeRuntime  # noqa: E402
from tffre.deploy.server_app import run_server  # noqa: E402
from tffre.deploy.tasks import DeployJob  # noqa: E402
from tffre.tasks import imcs as imcs_task  # noqa: E402
from tffre.tasks.recipe import RecipeSites  # noqa: E402
from tffre.data import imcs_dialogues as imcs  # noqa: E402
from tffre.tasks.sites import SiteDataError  # noqa: E402

NAME = "FedAvgT"
ROUNDS = 2
DIALOGUES = {"a": 5, "b": 6, "c": 5}   # site c holds other vectors
SETTINGS = {"learning-rate": 0.01, "num-epochs": 1, "num-iters": 3, "batch-size": 8,
            "max-len": 8, "lstm-units": 8, "seed": 3}


def imcs_sites():
    """A fresh deployment of the IMCS recipe (what ``TASK.sites()`` gives a process)."""
    return RecipeSites(imcs_task.RECIPE)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """{site: its IMCS file (a few of the sample's training dialogues)}, and the path of
    vectors whose vocabulary differs from the sample's by one word."""
    root = tmp_path_factory.mktemp("imcs_sites")
    sample = resources.path("imcs_sample")
    with open(os.path.join(sample, "IMCS-V2_train.json"), encoding="utf-8") as f:
        records = list(json.load(f).items())
    files, start = {}, 0
    for site, count in DIALOGUES.items():
        files[site] = str(root / f"{site}.json")
        with open(files[site], "w", encoding="utf-8") as f:
            json.dump(dict(records[start:start + count]), f, ensure_ascii=False)
        start += count
    with open(os.path.join(sample, "w2v_sample.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    words, dim = lines[0].split()
    other = root / "other_vectors.txt"
    other.write_text("\n".join([f"{int(words) - 1} {dim}"] + lines[1:-1]) + "\n",
                     encoding="utf-8")
    return files, str(other)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, world):
    """(out folder, server log) of one deployed run of sites a, b (the sample's vectors) and
    c (other vectors) on a FakeGrid."""
    files, other = world
    root = tmp_path_factory.mktemp("imcs_run")
    task = imcs_sites()
    nodes = {s: (make_client_app(NodeRuntime(task)),
                 {"site": s, "state-dir": str(root / s), "data": path,
                  **({"w2v": other} if s == "c" else {})})
             for s, path in files.items()}
    log = []
    run_server(FakeGrid(nodes), run_config(NAME, root / "out", dataset="imcs", **{
        "num-rounds": ROUNDS, **SETTINGS}), task=task, log=log.append)
    return root / "out", log


def test_two_sites_equal_the_local_executor_on_the_simulations_arrays(deployed, world,
                                                                      tmp_path):
    out, _ = deployed
    files, _ = world
    settings = {"model": "lstm", **{k.replace("-", "_"): v for k, v in SETTINGS.items()}}
    want, initial, arrays = simulated_reference(
        "imcs", {s: files[s] for s in ("a", "b")}, NAME, settings, ROUNDS, tmp_path)
    assert all(len(y) > 20 for _, y in arrays.values())
    assert_trained_as_local(out, NAME, want, initial, ROUNDS)
    rows = pd.read_csv(out / "metrics.csv")
    assert list(rows["clients"]) == ["a b"] * ROUNDS
    assert (out / "models" / NAME).is_dir()


def test_a_site_whose_vocabulary_differs_takes_no_part(deployed):
    out, log = deployed
    job = DeployJob.from_json(json.loads((out / "deploy.json").read_text())["job"])
    assert job.labels == imcs.label_names("symptom")
    assert set(job.facts) == {"vocabulary", "dictionary", "prompts"}
    refused = [line for line in log if line.startswith("site c (node")]
    assert refused and "its vocabulary" in refused[0] and "differ from the run's" in refused[0]
    assert all(line.endswith("it takes no part") for line in refused)


def test_a_server_whose_vocabulary_differs_is_refused(deployed, world):
    """The server builds the embedding matrix from its own vectors: other vectors than the
    sites agreed on are refused in one line; the sample's (the sites') are taken."""
    out, _ = deployed
    job = DeployJob.from_json(json.loads((out / "deploy.json").read_text())["job"])
    task = imcs_sites()
    with pytest.raises(SiteDataError) as err:
        task.model(job, {"w2v": world[1]})
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"the server's w2v {world[1]}: its "
                                                       f"vocabulary (fingerprint ")
    assert job.facts["vocabulary"] in message
    sample = imcs_task.RECIPE.resources(imcs_task.Options.resolve({}), {}).value[2]
    assert task.model(job, {}).encoder.vocab.tokens[2:] == sample.tokens[2:]


@pytest.mark.parametrize("flag", ["w2v-from-clients", "dict-from-clients"])
def test_options_reading_the_clients_data_at_the_server_are_refused(tmp_path, world, flag):
    files, _ = world
    task = imcs_sites()
    nodes = {s: (make_client_app(NodeRuntime(task)), {"site": s, "data": files[s],
                                                       "state-dir": str(tmp_path / s)})
             for s in ("a", "b")}
    log = []
    with pytest.raises(ValueError) as err:
        run_server(FakeGrid(nodes), run_config(NAME, tmp_path / "out", dataset="imcs", **{
            flag: True}), task=task, log=log.append)
    assert f"--{flag} reads the clients'" in str(err.value) and "\n" not in str(err.value)
    assert log[-1] == f"error: {err.value}"
    assert not (tmp_path / "out" / "checkpoints").exists()


def test_check_site_says_what_the_site_holds(world):
    files, other = world
    task = imcs_sites()
    line = task.check_site({"data": files["a"]}, "imcs")
    report = imcs_task.TASK.check_data("imcs",
                                       imcs_task.Options.resolve({"data": files["a"]}))
    counts = {s.name: s.count for s in report.splits}
    assert counts["train"] > 0 and counts["test"] > 0
    # The words the sample's vectors hold, as their file's header line says (the other
    # vectors are the same less one word); the count moves when the sample is regenerated.
    vectors = resources.path("imcs_sample", "w2v_sample.txt")
    with open(vectors, encoding="utf-8") as f:
        words, dim = map(int, f.readline().split())
    assert dim == 64
    assert line == (f"{files['a']}: imcs, train {counts['train']}, test {counts['test']} "
                    f"examples; vectors of {words} words x 64 from {vectors}")
    assert task.check_site({"data": files["c"], "w2v": other}).endswith(
        f"vectors of {words - 1} words x 64 from {other}")
    with pytest.raises(SiteDataError, match="w2v: no such file"):
        task.check_site({"data": files["a"], "w2v": other + ".missing"})
    with pytest.raises(SiteDataError, match="data check --dataset imcs"):
        task.check_site({"data": os.path.dirname(other)}, "imcs")


def test_the_runs_model_reaches_the_sides(world):
    """``--model mean-logistic`` travels in the job: both sides build Table 9's model (frozen
    vectors, one trainable softmax layer), not the LSTM."""
    from tffre.deploy.server_app import job_head
    from tffre.deploy.flower_config import resolve_run
    cfg, settings = resolve_run({"dataset": "imcs", "algorithm": NAME, "model": "mean-logistic",
                                 "out": "unused"})
    head = job_head(cfg, settings, imcs_sites())
    assert head.model == "mean-logistic"
    job = DeployJob.from_json(head.to_json())
    trainable = {name: len(imcs_sites().model(
        DeployJob(**{**json.loads(job.to_json()), "model": name,
                     "labels": tuple(imcs.label_names("symptom"))}), {}).model_fn()
        .trainable_weights) for name in ("mean-logistic", "lstm")}
    assert trainable["mean-logistic"] == 2 and trainable["lstm"] > 2, trainable


def test_the_labels_are_the_tasks_names_in_their_order_and_a_refused_job_builds_nothing(world):
    """The sites' labels are the task's fixed names in IMCS's order (diagnosis: not sorted), as
    the simulation indexes them; a job the deployment refuses is refused by the model and the
    site data too, not only by the agreement."""
    import dataclasses
    from types import SimpleNamespace
    files, _ = world
    sites = imcs_sites()
    head = DeployJob(task="imcs", dataset="imcs", algorithm=NAME, hparams={},
                     options={"task": "diagnosis"}, batch_size=8, seed=3)
    surveys = [SimpleNamespace(name=s, node_id=i, error=None,
                               facts=sites.survey(head, {"site": s, "data": files[s]}))
               for i, s in enumerate(("a", "b"))]
    job = sites.agree(head, surveys, lambda line: None)
    assert job.labels == tuple(imcs.label_names("diagnosis"))
    assert list(job.labels) != sorted(job.labels)
    refused = dataclasses.replace(job, options={**job.options, "dict_from_clients": True})
    for build in (lambda: sites.model(refused, {}),
                  lambda: sites.site_data(refused, {"site": "a", "data": files["a"]})):
        with pytest.raises(SiteDataError, match="--dict-from-clients reads the clients'"):
            build()
