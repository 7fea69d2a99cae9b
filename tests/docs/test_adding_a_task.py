"""docs/adding-a-task.md's walk-through works as written: its module and registry line, taken
from the file, give a task that ``python -m tffre run`` trains and that deploys over two sites
(in-process, Flower's messages serialized as on the wire) to the local executor's weights."""

import importlib.util
import json
import os
import sys

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from doc_blocks import guide_block

HERE = os.path.dirname(__file__)
# deploy_fakes (and the tiny models it imports)
sys.path[:0] = [os.path.join(HERE, "..", "tffre", "deploy"), os.path.join(HERE, "..", "tffre")]

SITES = ("a", "b")
FEATURES = 3
ROUNDS = 2


def block(marker):
    """The python code block after ``<!-- marker -->`` in the guide."""
    return guide_block("adding-a-task.md", marker)


@pytest.fixture
def tabular(monkeypatch):
    """The guide's module as ``tffre.tasks.tabular`` and its registry line in place."""
    from tffre import config, tasks
    spec = importlib.util.spec_from_loader("tffre.tasks.tabular", loader=None)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "tffre.tasks.tabular", module)
    exec(compile(block("module"), "adding-a-task.md", "exec"), module.__dict__)  # noqa: S102
    namespace = {}
    exec(block("registry"), namespace)  # noqa: S102
    monkeypatch.setattr(tasks, "MODULES", namespace["MODULES"])
    config.vocabulary.cache_clear()
    yield module
    config.vocabulary.cache_clear()


def write_csv(path, n, seed, features=FEATURES):
    """``n`` rows of ``features`` numeric columns and a label the first two decide (a margin
    from the boundary, so a few rounds of logistic regression learn it)."""
    rng = np.random.RandomState(seed)
    x = rng.randn(n * 2, features)
    score = x[:, 0] - x[:, 1]
    keep = np.abs(score) > 0.5
    x, score = x[keep][:n], score[keep][:n]
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(features)])
    frame["label"] = np.where(score > 0, "yes", "no")
    frame.to_csv(path, index=False)
    return frame


def test_the_guides_task_runs_in_simulation(tabular, tmp_path, capsys):
    from tffre import cli
    write_csv(tmp_path / "patients.csv", 120, seed=0)
    out = tmp_path / "run"
    assert cli.main(["run", "--dataset", "csv", "--data", str(tmp_path / "patients.csv"),
                     "--algorithm", "fedavg", "--num-rounds", "4", "--clients", "2", "--clients-per-round", "2",
                     "--learning-rate", "0.5", "--executor", "local", "--no-progress",
                     "--out", str(out)]) == 0
    rows = pd.read_csv(out / "metrics.csv")
    assert list(rows["round"]) == [1, 2, 3, 4]
    # A 20% test split held out of the single file (24 rows), learnt well above the guess.
    assert rows["test_accuracy"].iloc[-1] >= 0.85
    assert os.path.isdir(out / "models" / "FedAvg")


def site_folders(root, features=(FEATURES, FEATURES)):
    """Each site's folder with its own train.csv and test.csv."""
    out = {}
    for k, (site, f) in enumerate(zip(SITES, features)):
        folder = root / site
        folder.mkdir(parents=True)
        write_csv(folder / "train.csv", 20 + 6 * k, seed=10 + k, features=f)
        write_csv(folder / "test.csv", 10, seed=20 + k, features=f)
        out[site] = str(folder)
    return out


def deploy(tmp_path, folders):
    from deploy_fakes import FakeGrid, run_config
    from tffre.deploy.client_app import make_client_app
    from tffre.deploy.client_app import NodeRuntime
    from tffre.deploy.server_app import run_server
    nodes = {s: (make_client_app(NodeRuntime()),
                 {"site": s, "data": folders[s], "state-dir": str(tmp_path / "state" / s)})
             for s in SITES}
    out = tmp_path / "out"
    run_server(FakeGrid(nodes), run_config("FedAvg", out, dataset="csv", **{
        "num-rounds": ROUNDS, "learning-rate": 0.5, "num-epochs": 1, "num-iters": 0,
        "batch-size": 8, "min-nodes": 2}))
    return out


def test_the_guides_task_deploys_to_the_local_executors_weights(tabular, tmp_path):
    from tffre import builder
    from tffre.data import FederatedData
    from tffre.deploy.tasks import DeployJob
    from tffre.models import logistic_regression
    from tffre.runner.checkpoints import Checkpoints
    from tffre.runner.loop import data_seed
    folders = site_folders(tmp_path / "sites")
    out = deploy(tmp_path, folders)
    job = DeployJob.from_json(json.loads((out / "deploy.json").read_text())["job"])
    assert job.labels == ("no", "yes") and job.facts["features"] == FEATURES
    # The reference: the local executor on each site's train.csv, read here with pandas.
    arrays = {}
    for s in SITES:
        frame = pd.read_csv(os.path.join(folders[s], "train.csv"))
        arrays[s] = (frame[[f"f{i}" for i in range(FEATURES)]].to_numpy(np.float32),
                     (frame["label"] == "yes").to_numpy(np.int32))
    tf.keras.utils.set_random_seed(job.seed)
    process = builder.build_algorithm(
        "FedAvg", lambda: logistic_regression(FEATURES, 2),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(),
        input_spec=(tf.TensorSpec((None, FEATURES), tf.float32),
                    tf.TensorSpec((None,), tf.int32)),
        executor="local", **job.hparams.asdict())
    state = process.initialize()
    data = FederatedData({s: {"train": arrays[s]} for s in SITES}, num_classes=2)
    for rnd in range(1, ROUNDS + 1):
        datasets = [data.client_dataset(s, "train", batch_size=job.batch_size,
                                        seed=data_seed(job.seed, rnd)) for s in SITES]
        state = process.next(state, datasets, client_ids=list(SITES)).state
    got, done = Checkpoints(str(out / "checkpoints" / "FedAvg")).load_latest(state)
    assert done == ROUNDS
    for g, w in zip(got["model"].trainable, state["model"].trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert not np.allclose(state["model"].trainable[0], 0)   # it trained
    rows = pd.read_csv(out / "metrics.csv")
    assert list(rows["clients"]) == ["a b"] * ROUNDS and rows["test_accuracy"].notna().all()


def test_a_site_with_other_features_takes_no_part(tabular, tmp_path, capsys):
    folders = site_folders(tmp_path / "sites", features=(FEATURES, FEATURES + 1))
    with pytest.raises(Exception, match="site"):
        deploy(tmp_path, folders)   # min-nodes 2, one site refused: too few sites
    assert "its features 4 differ from the run's 3" in capsys.readouterr().out
