"""Document-level RE end to end: a CLI run of FedLCC on the structural-entropy split with a tiny
encoder, the FedLCC-table layout from its folder, and one-line option errors."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from tffre import config as config_lib
from tiny_documents import sample_blocks, write_sample_slice
from tiny_encoder import VOCAB, make_encoder_folder

SIZES = {"train": 24, "dev": 6, "test": 6}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The first documents of each split of the embedded sample, as a PubTator folder."""
    return write_sample_slice(tmp_path_factory.mktemp("cdr"), SIZES)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return make_encoder_folder(str(tmp_path_factory.mktemp("enc")), weights="safetensors",
                               vocab=VOCAB + ["*"])[0]


def test_fedlcc_runs_on_the_structural_entropy_split(tmp_path, data_dir, encoder, cli_here):
    from tffre.experiments.document_runs import results_table
    out = tmp_path / "out"
    proc = cli_here("run", "--dataset", "cdr", "--data", data_dir, "--encoder", encoder,
                    "--algorithm", "fedlcc", "--partition", "structural-entropy",
                    "--clients", "3", "--clients-per-round", "2", "--num-rounds", "2",
                    "--num-epochs", "1", "--num-iters", "3", "--learning-rate", "1e-3",
                    "--max-len", "96", "--clip-norm", "1.0",
                    "--executor", "local", "--no-progress", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "structural-entropy split (paper entropies, 3 clients)" in proc.stdout
    assert "intra" in proc.stdout and "FedLCC Table 3" in proc.stdout
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["algorithm"].tolist() == ["FedLCC", "FedLCC"]
    for column in ("test_f1", "dev_f1", "test_precision", "test_recall", "test_intra_f1",
                   "test_inter_f1", "dev_intra_f1", "train_loss"):
        assert metrics[column].notna().all(), column
    assert metrics["test_ign_f1"].isna().all()           # Ign F1 is DocRED's
    summary = json.loads((out / "summary.json").read_text())
    fedlcc = summary["algorithms"]["FedLCC"]
    assert fedlcc["hparams"]["contrastive_weight"] == 0.1 and fedlcc["hparams"]["clip_norm"] == 1.0
    assert "test_intra_f1_at_best_dev" in fedlcc and "test_precision_at_best_dev" in fedlcc
    assert summary["labels"] == ["CID"] and summary["pair_types"] == [["Chemical", "Disease"]]
    # The guesses beside the F1: no relation scores 0; CID for every candidate pair scores
    # 2p / (1 + p) for the test pairs' positive share p.
    test = summary["splits"]["test"]
    assert summary["majority_class_test_f1"] == 0.0
    assert summary["all_positive_test_f1"] == pytest.approx(
        2 * test["positive_pairs"] / (test["pairs"] + test["positive_pairs"]))
    assert "guessing no relation scores F1 0.00" in proc.stdout
    assert sum(summary["partition"]["documents_per_client"]) == SIZES["train"]
    assert summary["featurizer"]["train"]["documents"] == SIZES["train"]
    # A predict bundle of the final model (test_a_document_run_saves_a_model_that_...).
    assert (out / "models" / "FedLCC" / "bundle.json").is_file()
    partition = pd.read_csv(out / "partition.csv")
    assert partition["documents"].sum() == SIZES["train"] and "entropy_interval" in partition
    assert (out / "partition.png").stat().st_size > 0
    # Each client's own held-out documents, scored per site: its valid test pairs add up to
    # the pooled split's, and metrics.csv carries the sites' mean, worst and spread.
    sites = pd.read_csv(out / "per_site.csv")
    kept = partition[partition["documents"] > 0]["client"].tolist()
    assert sorted(sites["site"].unique()) == sorted(kept)
    assert sorted(sites["round"].unique()) == [1, 2]
    for _, rows in sites.groupby("round"):
        assert rows["num_test"].sum() == test["pairs"]
    scored = sites[sites["num_test"] > 0]
    assert scored["test_f1"].between(0, 1).all()
    last = scored[scored["round"] == 2]
    assert metrics["site_test_f1_worst"].iloc[-1] == pytest.approx(last["test_f1"].min())
    assert metrics["site_test_f1_mean"].iloc[-1] == pytest.approx(last["test_f1"].mean())
    table = results_table([("structural-entropy", str(out))])
    row = table.iloc[0]
    assert (row["setting"], row["method"]) == ("Federated Training (Non-IID)", "FedLCC")
    assert (row["paper P"], row["paper R"], row["paper F1"]) == (65.54, 65.67, 65.60)
    assert row["f1"] == pytest.approx(100 * fedlcc["test_f1_at_best_dev"], abs=0.01)


def test_a_run_on_a_folder_with_only_a_training_file_holds_out_a_test_split(tmp_path, encoder,
                                                                           cli_here):
    # Issue 30: python -m tffre run refused a CDR folder holding only its training file ("no
    # test split"); now it holds out a seeded 20% as test, as for the file alone and as the
    # other tasks do, and says so.
    from tffre.tasks.documents import read_splits
    folder = tmp_path / "cdr"
    folder.mkdir()
    # Each document also gets a gold relation of an entity without a mention, which no
    # candidate pair holds: one unscorable gold pair per document, counted per split.
    docs = [block + f"\n{block.split('|', 1)[0]}\tCID\tC0000000\tD0000000"
            for block in sample_blocks("train")[:30]]
    (folder / "CDR_TrainingSet.PubTator.txt").write_text("\n\n".join(docs) + "\n\n",
                                                         encoding="utf-8")
    splits, notes = read_splits("cdr", str(folder), seed=0)
    alone = read_splits("cdr", str(folder / "CDR_TrainingSet.PubTator.txt"), seed=0)
    assert (splits, notes) == alone
    # By hand: round(30 * 0.2) = 6 held out as test, round(24 * 0.2) = 5 of the rest as dev.
    sizes = {"train": 19, "dev": 5, "test": 6}
    assert {k: len(v) for k, v in splits.items()} == sizes
    assert notes == ["no test split: held out 6 of 30 training documents (20%, seeded) as test",
                     "no dev split: held out 5 of 24 training documents (20%, seeded) as dev"]
    out = tmp_path / "out"
    proc = cli_here("run", "--dataset", "cdr", "--data", str(folder),
                    "--encoder", encoder, "--algorithm", "fedavg", "--clients", "2",
                    "--clients-per-round", "2", "--num-rounds", "1", "--num-epochs", "1",
                    "--num-iters", "1", "--max-len", "96", "--seed", "0", "--executor", "local",
                    "--no-progress", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for note in notes:
        assert f"note: {note}" in proc.stdout.splitlines()
    summary = json.loads((out / "summary.json").read_text())
    assert {k: v["documents"] for k, v in summary["splits"].items()} == sizes
    assert {k: v["unscorable_gold_pairs"] for k, v in summary["splits"].items()} == sizes
    line = next(x for x in proc.stdout.splitlines() if "documents /" in x)
    for split, n in sizes.items():
        assert f"{split} {n} documents / " in line
        assert f"; {n} unscorable gold, counted as misses)" in line
    assert summary["data_notes"] == notes


@pytest.mark.parametrize("flags, message", [
    (["--dataset", "cdr", "--partition", "label-dirichlet"], "--partition label-dirichlet "
     "does not apply to --dataset cdr"),
    (["--dataset", "gda"], "--data is required for --dataset gda"),
    (["--dataset", "i2b2", "--entropy-form", "authors"], "--entropy-form applies to"),
    # examples/docre_cdr.py's preset tunes the threshold on dev: the fix is in the message.
    (["--dataset", "cdr", "--loss", "softmax", "--threshold", "dev"],
     "--threshold dev applies to --loss bce (softmax predicts the argmax): with --loss "
     "softmax give --threshold 0.5"),
])
def test_docre_option_errors(tmp_path, flags, message):
    import re

    from tffre import cli
    args = cli.build_run_parser().parse_args(flags + ["--out", str(tmp_path / "o")])
    given = {k: v for k, v in vars(args).items() if k != "config"}
    with pytest.raises(config_lib.ConfigError, match=re.escape(message)):
        config_lib.resolve(given)


def test_docred_scores_dev_as_test_with_the_training_facts(tmp_path, encoder):
    """DocRED: every ordered entity pair is a candidate, the dev split is the test set (the
    paper's Table 7), dev for selection is held out of train, and each test fact knows
    whether training saw it (Ign F1)."""
    import copy

    from tffre import tasks
    fixtures = os.path.join(os.path.dirname(__file__), "..", "data", "fixtures", "docre")
    with open(os.path.join(fixtures, "docred_train.json"), encoding="utf-8") as f:
        docs = json.load(f)
    train = []
    for i in range(5):
        for doc in docs:
            train.append({**copy.deepcopy(doc), "title": f"{doc['title']} {i}"})
    folder = tmp_path / "docred"
    folder.mkdir()
    (folder / "train_annotated.json").write_text(json.dumps(train))
    unseen = copy.deepcopy(docs[0])
    unseen["labels"][0]["r"] = "P361"          # a fact (Skai TV, Greek, P361) never trained on
    (folder / "dev.json").write_text(json.dumps([docs[0], unseen]))
    cfg = config_lib.resolve({"dataset": "docred", "data": str(folder), "encoder": encoder,
                              "clients": 2, "clients_per_round": 2, "partition": "iid",
                              "max_len": 48, "out": str(tmp_path / "o")})
    job = tasks.task_of("docred").prepare(cfg)
    assert job.model.evaluation == "docre" and job.model.encoder.relation_types == ["P127", "P17", "P361"]
    assert job.info["pair_types"] is None and job.info["labels"] == ["P127", "P17", "P361"]
    assert job.info["splits"]["test"]["documents"] == 2
    assert job.info["splits"]["dev"]["documents"] == 2 and sum(
        job.info["partition"]["documents_per_client"]) == 8
    x, y = job.data.pooled("test")
    notes = job.data.pooled_annotations("test")
    assert y.shape[1] == 6 and y[..., -1].sum() == 12    # 3 entities: 6 ordered pairs each
    gold = y[..., :-1].astype(bool)
    # Doc 0's facts were all trained on; the unseen doc's P361 (Skai TV -> Greek) was not.
    seen = notes["pair_in_train"].astype(bool) & gold
    assert gold.sum() == 4 and seen.sum() == 3
    assert notes["pair_intra"].shape == y.shape[:2]


def test_fedlcc_and_moon_train_the_top_on_cached_activations(tmp_path, data_dir, encoder,
                                                            cli_here):
    """FedLCC's context contrast (it reads the last layer's attention) and MOON on the top
    layer of a split encoder, on cached prefix activations: the run trains, and a client
    uploads the top and the head only, i.e. the saved whole model's weights less the
    embeddings, the lower layer and the unused pooler (counted from the encoder's config).
    The two-window reading of a split model is tested in tests/tffre/models/test_partial.py."""
    from tffre.bundle import load_bundle
    out = tmp_path / "top"
    proc = cli_here("run", "--dataset", "cdr", "--data", data_dir,
                    "--encoder", encoder, "--algorithm", "fedlcc,moon", "--partition", "iid",
                    "--clients", "2", "--clients-per-round", "2", "--num-rounds", "2",
                    "--num-epochs", "1", "--num-iters", "2", "--learning-rate", "1e-3",
                    "--max-len", "120", "--executor", "local", "--checkpoint-every", "0",
                    "--no-progress", "--out", str(out), "--trainable-layers", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    metrics = pd.read_csv(out / "metrics.csv")
    assert np.isfinite(metrics["local_train_loss"]).all()
    assert summary["partial"] == "top 1 of 2 layers, layers 0-0 and embeddings cached"
    model = load_bundle(str(out / "models" / "FedLCC")).model
    c = [layer for layer in model.layers if hasattr(layer, "config")][0].config
    h, i = c.hidden_size, c.intermediate_size
    layer = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h)
    embeddings = (c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * h + 2 * h
    pooler = h * h + h    # BERT's [CLS] pooler: the saved encoder has it, the head reads no [CLS]
    top = 4 * (sum(int(np.prod(w.shape)) for w in model.weights) - embeddings - layer - pooler)
    for name in ("FedLCC", "MOON"):
        up = summary["algorithms"][name]["bytes_uploaded_per_round"] / 2   # 2 clients a round
        # Besides the top and the head, a few scalars: the client's weight, its exclusion flag
        # and its metrics' sums. A layer, the embeddings or the pooler would be kilobytes.
        assert 0 < up - top < 100, (name, up, top)


def test_a_document_run_saves_a_model_that_predicts_as_it_scored(tmp_path, data_dir, encoder,
                                                                 cli_here):
    """A run with the top layer trained and the threshold tuned on dev saves a bundle: the
    whole model (the frozen prefix grafted in), the featurizer and the tuned threshold. Its
    relations on the test documents score, by hand against their gold facts, the last
    round's test F1; ``predict`` prints them; resuming the finished run saves the same
    threshold (tuned again for the final model, not the default 0.5)."""
    from tffre.bundle import load_bundle
    from tffre.data.document_sets import load_documents
    from tiny_documents import fact_f1, relation_facts
    out = tmp_path / "out"
    args = ["run", "--dataset", "cdr", "--data", data_dir, "--encoder", encoder,
            "--algorithm", "fedavg", "--partition", "iid", "--clients", "2",
            "--clients-per-round", "2", "--num-rounds", "2", "--num-epochs", "1",
            "--num-iters", "2", "--learning-rate", "1e-3", "--max-len", "120",
            "--trainable-layers", "1", "--threshold", "dev", "--executor", "local",
            "--no-progress", "--out", str(out)]
    proc = cli_here(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = pd.read_csv(out / "metrics.csv").iloc[-1]
    folder = out / "models" / "FedAvg"
    bundle = load_bundle(str(folder))
    assert bundle.decision == {"loss": "bce", "threshold": last["threshold"], "tuned_on": "dev"}
    # A tuned threshold that matters: at 0.5 this model would score another F1.
    assert last["threshold"] != 0.5
    # The saved model reads documents (token ids), not the cached activations.
    assert "hidden" not in bundle.model.input_names

    documents = load_documents(os.path.join(data_dir, "test.pubtator"))
    relations = bundle.relations(documents)
    predicted = {(doc.pmid, s, r, o) for doc, facts in zip(documents, relations)
                 for s, r, o, _ in facts}
    gold = relation_facts(documents)
    assert predicted and gold
    assert fact_f1(predicted, gold) == pytest.approx(last["test_f1"], abs=1e-6)
    assert all(p > last["threshold"] for facts in relations for *_, p in facts)

    shown = cli_here("predict", "--model", str(folder), "--input",
                     os.path.join(data_dir, "test.pubtator"), "--json")
    assert shown.returncode == 0, shown.stderr[-3000:]
    printed = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [p["id"] for p in printed] == [d.pmid for d in documents]
    assert {(p["id"], f["subject"], f["relation"], f["object"]) for p in printed
            for f in p["relations"]} == predicted
    refused = cli_here("predict", "--model", str(folder), "--text", "aspirin")
    assert refused.returncode == 2 and "is a document model" in refused.stderr

    resumed = cli_here(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert load_bundle(str(folder)).decision == bundle.decision


def test_a_run_refuses_a_document_in_two_splits_before_building_a_model(tmp_path, cli_here):
    # A sample slice whose test file repeats the second training document.
    folder = tmp_path / "cdr"
    folder.mkdir()
    write_sample_slice(folder, {"train": 6, "dev": 2, "test": 2})
    again = sample_blocks("train")[1]
    pmid = again.split("|", 1)[0]
    with open(folder / "test.pubtator", "a", encoding="utf-8") as f:
        f.write(again + "\n\n")
    out = tmp_path / "out"
    proc = cli_here("run", "--dataset", "cdr", "--data", str(folder), "--algorithm", "fedavg",
                    "--out", str(out))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"python -m tffre run: error: {folder}: test pmid {pmid}: also in the train split: a "
        "document in two splits (test.pubtator and train.pubtator); remove it from one of the "
        "files"]
    assert not out.exists() and "documents /" not in proc.stdout   # refused before featurizing
