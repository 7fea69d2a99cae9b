"""``--dataset text``, the recipe task: each site one client (counts by hand), the other
partitions, a short run that learns above the majority class, ``data check``, and the task
interface derived from the recipe (no prepare, no Sites class in the module)."""

import json
import os

import numpy as np
import pytest

from tffre import cli
from tffre import config as config_lib
from tffre import tasks
from tffre.tasks import texts as text_task
from tffre.tasks.recipe import RecipeSites

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "fixtures", "texts")
VECTORS = os.path.join(FIXTURES, "vectors.txt")
# Three hospitals; split given: A 3 train + 1 test, B 2 + 1, C 1 + 2 (by hand below).
ROWS = [("chest pain", "cardiac", "A", "train"), ("dry cough", "respiratory", "A", "train"),
        ("palpitations", "cardiac", "A", "train"), ("wheezing", "respiratory", "A", "test"),
        ("咳嗽咳痰一周", "respiratory", "B", "train"), ("心悸，夜间胸闷", "cardiac", "B", "train"),
        ("chest tightness", "cardiac", "B", "test"), ("fever with cough", "respiratory", "C",
                                                      "train"),
        ("heart murmur", "cardiac", "C", "test"), ("sore throat", "respiratory", "C", "test")]


@pytest.fixture()
def small(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text("text,label,site,split\n" + "".join(",".join(r) + "\n" for r in ROWS),
                    encoding="utf-8")
    return str(path)


def prepared(path, tmp_path, **extra):
    cfg = config_lib.resolve({"dataset": "text", "data": path, "algorithm": "FedAvg",
                              "w2v": VECTORS, "out": str(tmp_path / "out"), "max_len": 6,
                              "lstm_units": 4, "dev_fraction": 0, **extra})
    return tasks.task_of("text").prepare(cfg)


def test_each_site_is_one_client_with_its_own_records(small, tmp_path):
    job = prepared(small, tmp_path)
    data = job.data
    assert data.client_ids == ["A", "B", "C"]
    counts = {c: {s: len(data.clients[c][s][1]) for s in data.clients[c]}
              for c in data.client_ids}
    assert counts == {"A": {"train": 3, "test": 1}, "B": {"train": 2, "test": 1},
                      "C": {"train": 1, "test": 2}}
    assert job.label_names == ["cardiac", "respiratory"]
    # labels by index: A's training texts are cardiac, respiratory, cardiac
    assert list(data.clients["A"]["train"][1]) == [0, 1, 0]
    assert list(data.clients["C"]["test"][1]) == [0, 1]
    # "chest" and "pain" are the vectors' first two words: ids 2 and 3 (0 pads, 1 is OOV)
    np.testing.assert_array_equal(data.clients["A"]["train"][0][0], [2, 3, 0, 0, 0, 0])
    assert job.info["partition"] == "site" and job.info["sites"] == ["A", "B", "C"]


def test_iid_splits_the_training_texts_over_clients(small, tmp_path):
    job = prepared(small, tmp_path, partition="iid", clients=2, clients_per_round=2)
    assert job.data.client_ids == ["client_0", "client_1"]
    train = [len(job.data.clients[c]["train"][1]) for c in job.data.client_ids]
    test = [len(job.data.clients[c]["test"][1]) for c in job.data.client_ids]
    assert sorted(train) == [3, 3] and sorted(test) == [2, 2]   # 6 and 4 texts, dealt evenly
    pooled = sorted(np.concatenate([job.data.clients[c]["test"][1] for c in job.data.client_ids]))
    assert pooled == [0, 0, 1, 1]   # the four test texts, two of each label, each once


def test_a_round_cannot_sample_more_sites_than_there_are(small, tmp_path):
    with pytest.raises(ValueError) as err:
        prepared(small, tmp_path, clients=4, clients_per_round=4)
    assert str(err.value) == (f"--partition site: the 3 sites of {small} (A, B, C) are the "
                              f"clients: give --clients-per-round 3 or fewer")


def test_site_partition_needs_a_site_column(tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text("text,label\n" + "".join(f"chest pain {i},cardiac\ncough {i},respiratory\n"
                                             for i in range(5)), encoding="utf-8")
    with pytest.raises(ValueError, match="has no site column"):
        prepared(str(path), tmp_path, partition="site")
    job = prepared(str(path), tmp_path)   # auto: iid over --clients
    assert job.data.client_ids == ["client_0", "client_1", "client_2"]


def test_two_rounds_learn_above_the_majority_class(tmp_path):
    path = os.path.join(FIXTURES, "notes.jsonl")
    with open(path, encoding="utf-8") as f:
        test_labels = [r["label"] for r in map(json.loads, f) if r["split"] == "test"]
    majority = max(test_labels.count(x) for x in set(test_labels)) / len(test_labels)
    assert majority == 0.5   # 2 cardiac, 2 respiratory
    out = tmp_path / "out"
    code = cli.run_main(["--dataset", "text", "--data", path, "--w2v", VECTORS,
                         "--algorithm", "FedAvg", "--num-rounds", "2", "--num-iters", "5",
                         "--learning-rate", "0.05", "--lstm-units", "8", "--max-len", "12",
                         "--executor", "local", "--checkpoint-every", "0", "--no-progress",
                         "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithms"]["FedAvg"]["max_test_accuracy"] > majority
    assert (out / "models" / "FedAvg" / "vocab.txt").is_file()
    manifest = json.loads((out / "models" / "FedAvg" / "bundle.json").read_text())
    assert manifest["encoder"] == text_task.RECIPE.PREDICTS == "text"   # what predict reads


def test_the_task_is_derived_from_its_recipe():
    task = tasks.task_of("text")
    assert task.recipe() is text_task.RECIPE
    assert not hasattr(text_task, "prepare") and not hasattr(text_task, "SITES")
    sites = task.sites()
    assert isinstance(sites, RecipeSites) and sites is task.sites()
    assert set(sites.LOCAL_OPTIONS) >= {"data", "w2v", "user_dict"}
    assert task.checks_data


def test_a_site_parses_the_jobs_options_once(monkeypatch):
    from tffre.deploy.tasks import DeployJob
    calls = []
    resolve = text_task.Options.resolve.__func__

    def counted(cls, values=None, **kwargs):
        calls.append(dict(values or {}))
        return resolve(cls, values, **kwargs)
    monkeypatch.setattr(text_task.Options, "resolve", classmethod(counted))
    sites = RecipeSites(text_task.RECIPE)
    job = DeployJob(task="texts", dataset="text", algorithm="FedAvg", hparams={},
                    options={"max_len": 7, "partition": "site", "unknown": 1}, batch_size=8,
                    seed=0)
    first = sites.options(job)
    assert sites.options(job) is first and len(calls) == 1
    assert first.max_len == 7 and first.lstm_units == 64   # the declaration's default


def test_data_check_measures_what_each_model_reads(small, capsys):
    """``data check --dataset text``: jieba tokens for the LSTM (the default), the default
    encoder's word pieces with ``--model encoder``; a model the task lacks is one line."""
    assert cli.main(["data", "check", "--dataset", "text", "--data", small]) == 0
    out = capsys.readouterr().out
    assert "jieba tokens" in out and "word pieces" not in out
    assert cli.main(["data", "check", "--dataset", "text", "--data", small, "--model",
                     "encoder", "--max-len", "4"]) == 0
    out = capsys.readouterr().out
    assert "word pieces (text + [CLS] and [SEP]" in out and "jieba tokens" not in out
    assert cli.main(["data", "check", "--dataset", "text", "--data", small, "--model",
                     "mean-logistic"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--model mean-logistic: the texts task's models are lstm, encoder")
    assert len(err.splitlines()) == 1
