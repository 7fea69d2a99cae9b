"""The documents task across sites, in-process: two sites featurize their own CDR-style
documents with the job's agreed relation types, pair types and row limits; the deployed rounds
(a frozen, cached encoder prefix, the top layer trained) equal the local executor's on the same
sites' arrays; the F1 the server computes from the sites' summed TP/FP/FN counts equals
DocREEvaluator's on the pooled split; a site with other relation types is refused."""

import dataclasses
import json
import os
import sys

import numpy as np
import pandas as pd
import pytest

from tiny_documents import sample_blocks
from tiny_encoder import VOCAB, make_encoder_folder

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
from deploy_fakes import FakeGrid, run_config  # noqa: E402

from tffre.tasks.documents import RECIPE
from tffre.tasks.recipe import RecipeSites


def document_sites():
    """The documents task's deployment, derived from its recipe (a fresh one: no cache)."""
    return RecipeSites(RECIPE)

SITES = ("a", "b")
ROUNDS = 2
# (train, dev, test) documents of the embedded sample per site; c holds other relation types.
SHARES = {"a": (slice(0, 6), slice(0, 2), slice(0, 3)),
          "b": (slice(6, 11), slice(2, 4), slice(3, 6)),
          "c": (slice(11, 15), slice(4, 5), slice(6, 7))}
FLAGS = {"dataset": "cdr", "num-rounds": ROUNDS, "num-epochs": 1,
         "num-iters": 2, "batch-size": 2, "learning-rate": 0.01, "max-len": 64,
         "trainable-layers": 1, "round-timeout": 60.0}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(encoder folder without dropout, {site: PubTator folder})."""
    root = tmp_path_factory.mktemp("document_sites")
    encoder = str(root / "enc")
    make_encoder_folder(encoder, weights="tf", vocab=VOCAB + ["*"])
    # A deployed round equals the local executor's only for a deterministic model (the two
    # draw dropout masks apart).
    settings = json.loads((root / "enc" / "config.json").read_text())
    settings.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (root / "enc" / "config.json").write_text(json.dumps(settings))
    sites = {}
    for site, shares in SHARES.items():
        folder = root / site
        folder.mkdir()
        for split, share in zip(("train", "dev", "test"), shares):
            text = "\n\n".join(sample_blocks(split)[share])
            if site == "c":
                text = text.replace("\tCID\t", "\tTREATS\t")
            (folder / f"{split}.pubtator").write_text(text + "\n\n", encoding="utf-8")
        sites[site] = str(folder)
    return encoder, sites


def deploy(tmp_path, world):
    """Serves the run over sites a, b and c (in-process); returns (out folder, the evaluation
    columns of the last round as the server computed them, the server's log)."""
    from tffre.deploy.client_app import make_client_app
    from tffre.deploy.link import GridLink
    from tffre.deploy.client_app import NodeRuntime
    from tffre.federation.round_driver import FederatedRounds
    from tffre.deploy.server_app import serve
    from tffre.deploy.flower_config import resolve_run
    encoder, sites = world
    task = document_sites()
    nodes = {s: (make_client_app(NodeRuntime(task)),
                 {"site": s, "state-dir": str(tmp_path / "sites" / s), "data": sites[s],
                  "encoder": encoder, "prefix-cache": str(tmp_path / "sites" / s / "cache")})
             for s in sorted(sites)}
    out = tmp_path / "out"
    cfg, settings = resolve_run(run_config("FedAvgT", out, encoder=encoder, **FLAGS))
    evaluated, log = [], []

    class Recorded(FederatedRounds):
        def evaluate(self, *args, **kwargs):
            evaluated.append(super().evaluate(*args, **kwargs))
            return evaluated[-1]

    rounds = Recorded(GridLink(FakeGrid(nodes), settings.poll), min_nodes=settings.min_nodes,
                      round_timeout=settings.round_timeout, log=log.append)
    serve(rounds, cfg, settings, task, log=log.append)
    return out, evaluated[-1], "\n".join(log)


def test_deployed_documents_equal_the_local_executor_and_the_pooled_f1(tmp_path, world):
    import tensorflow as tf

    from tffre import builder
    from tffre.data import FederatedData
    from tffre.deploy.tasks import DeployJob, task_context
    from tffre.evaluation import DocREEvaluator
    from tffre.metrics import docre_scores
    from tffre.runner.checkpoints import Checkpoints
    from tffre.runner.loop import data_seed
    from tffre.runner.processes import pretrained_weights

    out, columns, log = deploy(tmp_path, world)
    encoder, sites = world
    # Site c's relation type differs: it is refused at the agreement, and every round after.
    assert "site c (node" in log and "['TREATS']" in log
    rows = pd.read_csv(out / "metrics.csv")
    assert list(rows["clients"]) == ["a b"] * ROUNDS
    job = DeployJob.from_json(json.loads((out / "deploy.json").read_text())["job"])
    assert job.labels == ("CID",) and json.loads(job.facts["pair_types"]) == [
        ["Chemical", "Disease"]]

    # The independent reference: the local executor over the same two sites' arrays (name
    # order), the same seed, initial weights and batches.
    task = document_sites()
    model = task.model(job, {"encoder": encoder})
    # The job's numeric --threshold reaches the sites' evaluation ("dev" is refused at the
    # agreement: test_a_threshold_tuned_on_dev_is_refused_in_a_deployment).
    assert model.evaluation_options == {"threshold": 0.5}
    lower = dataclasses.replace(job, options={**job.options, "threshold": 0.3})
    assert task.model(lower, {"encoder": encoder}).evaluation_options == {"threshold": 0.3}
    data = {s: task.site_data(job, {"site": s, "data": sites[s], "encoder": encoder})
            for s in SITES}
    # The agreed limits are the largest the sites need: the pooled documents' fitted limits.
    shapes = {s: d.train[0]["pairs"].shape[1] for s, d in data.items()}
    assert len(set(shapes.values())) == 1 and job.facts["limits"]["max_pairs"] == shapes["a"]
    tf.keras.utils.set_random_seed(job.seed)
    process = builder.build_algorithm("FedAvgT", model.model_fn, loss=model.loss,
                                      input_spec=model.input_spec, executor="local",
                                      context=task_context(job), **job.hparams.asdict())
    tf.keras.utils.set_random_seed(job.seed)
    state = process.set_model_weights(process.initialize(), pretrained_weights(
        process.model_fn, model.load_pretrained))
    pooled = FederatedData(
        {s: {"train": d.train, **d.held_out} for s, d in data.items()}, num_classes=1,
        annotations={s: d.annotations for s, d in data.items()})
    for rnd in range(1, ROUNDS + 1):
        datasets = [pooled.client_dataset(s, "train", batch_size=job.batch_size,
                                          seed=data_seed(job.seed, rnd)) for s in SITES]
        state = process.next(state, datasets, client_ids=list(SITES)).state
    got, done = Checkpoints(str(out / "checkpoints" / "FedAvgT")).load_latest(state)
    assert done == ROUNDS
    moved = False
    for g, w, start in zip(got["model"].trainable, state["model"].trainable,
                           pretrained_weights(process.model_fn,
                                              model.load_pretrained).trainable):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        moved = moved or not np.allclose(g, start)
    assert moved   # the rounds trained: the comparison is not of the initial weights

    # The server's scores from the sites' summed counts against DocREEvaluator on the pooled
    # splits of the same final model; and, independently, tffre.metrics.docre_scores.
    evaluator = DocREEvaluator(process.model_fn, pooled, model.loss)
    want = evaluator(got["model"])
    for name in ("test_f1", "test_precision", "test_recall", "test_accuracy", "test_intra_f1",
                 "test_inter_f1", "dev_f1", "dev_intra_f1"):
        assert columns[name] == pytest.approx(want[name], abs=1e-6), name
    assert columns["train_loss"] == pytest.approx(want["train_loss"], rel=1e-5)
    assert "test_ign_f1" not in columns                       # DocRED's, and not deployed
    assert rows["test_f1"].iloc[-1] == pytest.approx(want["test_f1"], abs=1e-6)
    _, _, preds = evaluator.predictions("test")
    _, y = pooled.pooled("test")
    intra = pooled.pooled_annotations("test")["pair_intra"]
    scores = docre_scores(y[..., :-1], preds, y[..., -1], intra=intra)
    for name in ("f1", "precision", "recall", "accuracy", "intra_f1", "inter_f1"):
        assert columns[f"test_{name}"] == pytest.approx(scores[name], abs=1e-6), name
    # Not a degenerate score: the model predicts some relations, some of them right or wrong.
    assert 0 < preds[y[..., -1] > 0].sum() and 0 < scores["accuracy"] < 1

    # The saved model: the whole one (the prefix grafted in), with the threshold the sites
    # counted at. Its relations on the sites' test documents score, by hand against their
    # gold facts, the last round's test F1.
    from tffre.bundle import load_bundle
    from tffre.data.document_sets import load_documents
    from tiny_documents import fact_f1, relation_facts
    bundle = load_bundle(str(out / "models" / "FedAvgT"))
    assert bundle.decision == {"loss": "bce", "threshold": 0.5, "tuned_on": None}
    documents = [doc for s in SITES
                 for doc in load_documents(os.path.join(sites[s], "test.pubtator"))]
    predicted = {(doc.pmid, s, r, o) for doc, facts in zip(documents, bundle.relations(documents))
                 for s, r, o, _ in facts}
    gold = relation_facts(documents, bundle.encoder.fitted(documents))
    assert fact_f1(predicted, gold) == pytest.approx(rows["test_f1"].iloc[-1], abs=1e-6)


def test_a_threshold_tuned_on_dev_is_refused_in_a_deployment():
    """The sites send counts at one threshold, not the pooled dev probabilities a tuned one
    needs: the agreement refuses ``threshold dev`` in one line, before any site is read."""
    from tffre.tasks.sites import DeployJob
    head = DeployJob(task="documents", dataset="cdr", algorithm="FedAvgT", hparams={},
                     options={"threshold": "dev"}, batch_size=2, seed=0)
    log = []
    with pytest.raises(ValueError, match="threshold dev: a deployment scores at a fixed"):
        document_sites().agree(head, [], log.append)
    assert log and log[0].startswith("error: threshold dev")


def test_a_site_checks_its_documents_as_the_data_check(world):
    from tffre.tasks.sites import SiteDataError
    _, sites = world
    line = document_sites().check_site({"data": sites["a"]}, "cdr")
    assert line.startswith(f"{sites['a']}: cdr, train 6, dev 2, test 3")
    with pytest.raises(SiteDataError, match="nothing to train on|no such"):
        document_sites().check_site({"data": os.path.join(sites["a"], "missing")}, "cdr")
