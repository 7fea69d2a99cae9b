"""Relation extraction end to end: CLI run on a tiny encoder, F1 against sklearn, bundles, errors."""

import json
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from sklearn.metrics import precision_recall_fscore_support

from tffre import config as config_lib
from tiny_encoder import make_encoder_folder

TEMPLATES = [  # (words before e1, e1, between, e2, after, label)
    ("the patient was given", "aspirin", "for", "headache", ".", "treats"),
    ("her", "fever", "improved after", "morphine", ".", "treats"),
    ("no history of", "diabetes", "and", "cough", ".", "false"),
    ("severe", "chest pain", "after", "aspirin", ".", "causes"),
    ("the patient is on", "morphine", "with", "fever", ".", "causes"),
]


def example(i, words):
    before, e1, between, e2, after, label = words
    text = f"{before} {e1} {between} {e2} {after}"
    s1 = len(before) + 1
    s2 = s1 + len(e1) + 1 + len(between) + 1
    return {"example_id": f"x{i}", "text": text, "e1_start": s1, "e1_end": s1 + len(e1),
            "e2_start": s2, "e2_end": s2 + len(e2), "e1_type": "drug", "e2_type": "problem",
            "label": label}


def write_splits(folder, sizes=(("train", 40), ("dev", 10), ("test", 15))):
    os.makedirs(folder, exist_ok=True)
    i = 0
    for split, n in sizes:
        with open(os.path.join(folder, f"{split}.jsonl"), "w") as f:
            for _ in range(n):
                f.write(json.dumps(example(i, TEMPLATES[i % len(TEMPLATES)])) + "\n")
                i += 1
    return folder


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return make_encoder_folder(str(tmp_path_factory.mktemp("enc")), weights="safetensors")[0]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_splits(str(tmp_path_factory.mktemp("re")))



def test_relation_run_end_to_end(tmp_path, encoder, data_dir, cli_here):
    out = tmp_path / "out"
    proc = cli_here("run", "--dataset", "jsonl", "--data", data_dir, "--encoder", encoder,
                   "--algorithm", "fedavgt,fedatts", "--clients", "4", "--clients-per-round", "2",
                   "--num-rounds", "2", "--num-epochs", "1", "--num-iters", "0",
                   "--learning-rate", "0.01", "--max-len", "24", "--executor", "local",
                   "--centralised", "--no-progress", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "relation F1" in proc.stdout
    metrics = pd.read_csv(out / "metrics.csv")
    assert set(metrics["algorithm"]) == {"FedAvgT", "FedAttS", "Centralised"}
    assert metrics[["test_f1", "dev_f1"]].notna().all().all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["labels"][0] == "false"          # the negative label first
    assert "max_test_f1" in summary["algorithms"]["FedAvgT"]
    # Where the figures came from: every file --data and --encoder name, by SHA-256.
    import hashlib
    files = {(f["option"], f["file"]): f["sha256"] for f in summary["provenance"]["data_files"]}
    with open(os.path.join(data_dir, "train.jsonl"), "rb") as f:
        assert files[("data", "train.jsonl")] == hashlib.sha256(f.read()).hexdigest()
    assert any(option == "encoder" for option, _ in files)
    assert summary["provenance"]["machine"]["cores"] == os.cpu_count()
    mix = pd.read_csv(out / "partition.csv", index_col="client")
    assert mix["total"].sum() == 40 and len(mix) == 4
    for name in ("curves.png", "partition.png"):
        assert (out / name).stat().st_size > 0

    # The saved global model, reloaded, reproduces the last round's test F1 under sklearn.
    from tffre.bundle import load_bundle
    from tffre.data.formats.jsonl import load_jsonl
    bundle = load_bundle(str(out / "models" / "FedAvgT"))
    test, _ = load_jsonl(os.path.join(data_dir, "test.jsonl"))
    probs = bundle.predict(test.to_dict("records"))
    pred = [bundle.label_names[i] for i in probs.argmax(axis=1)]
    positive = [l for l in bundle.label_names if l != "false"]
    _, _, f1, _ = precision_recall_fscore_support(test["label"], pred, labels=positive,
                                                  average="micro", zero_division=0)
    last = metrics[(metrics["algorithm"] == "FedAvgT")].iloc[-1]
    assert last["test_f1"] == pytest.approx(f1, abs=1e-6)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)

    # predict from the command line, on relation records.
    records = tmp_path / "new.jsonl"
    records.write_text(json.dumps({k: v for k, v in example(0, TEMPLATES[0]).items()
                                   if k != "label"}) + "\n")
    proc = cli_here("predict", "--model", str(out / "models" / "FedAvgT"), "--input",
                   str(records))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\t")[1] in bundle.label_names
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "aspirin", "e1_start": 0, "e1_end": 7, "e2_start": 0}\n')
    proc = cli_here("predict", "--model", str(out / "models" / "FedAvgT"), "--input", str(bad))
    assert proc.returncode == 2 and f'{bad}:1: missing field "e2_end"' in proc.stderr


def test_pretrained_weights_enter_after_initialize_not_in_model_fn(tmp_path, encoder, data_dir):
    from tffre import runner
    from tffre.tasks import relations as relation
    cfg = config_lib.resolve({"dataset": "jsonl", "data": data_dir, "encoder": encoder,
                              "max_len": 24, "clients": 4, "clients_per_round": 2,
                              "out": str(tmp_path / "o")})
    job = relation.TASK.prepare(cfg)
    from transformers import TFAutoModel
    reference = TFAutoModel.from_pretrained(encoder)
    want = {v.name.split("/", 1)[1]: v.numpy() for v in reference.weights}
    fresh = job.model.model_fn()
    name = "bert/encoder/layer_._0/attention/self/query/kernel:0"
    var = next(v for v in fresh.get_layer("encoder").weights if v.name.endswith(name))
    assert not np.allclose(var.numpy(), want[name])     # model_fn holds no pretrained values
    weights = runner.pretrained_weights(job.model.model_fn, job.model.load_pretrained)
    index = [v.name for v in fresh.trainable_weights].index(var.name)
    np.testing.assert_array_equal(weights.trainable[index], want[name])


def test_relation_round_is_the_same_on_both_executors(tmp_path, encoder, data_dir):
    """One FedAtt round of the encoder model on TFF's runtime and in-process, to 1e-5.

    Dropout is off (in the encoder's config and before the classifier): the two executors
    draw dropout masks from different random streams, so only a deterministic model can match.
    """
    states, _ = one_round_per_executor("FedAtt", tmp_path, data_dir)
    for a, b in zip(states["tff"].trainable, states["local"].trainable):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def one_round_per_executor(name, tmp_path, data_dir, **options):
    """({executor: the model after one round of ``name`` from the same initial weights},
    those initial weights) for "tff" and "local", on the jsonl fixture with a tiny encoder
    whose dropout is off (in its config and before the classifier), and the task ``options``."""
    from tffre import build_algorithm
    from tffre.models.relation_model import build_re_model, config_for
    from tffre.tasks import relations as relation
    folder = tmp_path / "enc"
    make_encoder_folder(str(folder), weights="tf")
    settings = json.loads((folder / "config.json").read_text())
    settings.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(settings))
    cfg = config_lib.resolve({"dataset": "jsonl", "data": data_dir, "encoder": str(folder),
                              "max_len": 24, "clients": 3, "clients_per_round": 2,
                              "out": str(tmp_path / "o"), **options})
    job = relation.TASK.prepare(cfg)
    config = config_for(job.model.encoder, str(folder), len(job.label_names), dropout=0.0,
                        partial=cfg.options.partial())
    datasets = [job.data.client_dataset(c, batch_size=4) for c in job.data.client_ids[:2]]
    states = {}
    for executor in ("tff", "local"):
        tf.keras.utils.set_random_seed(0)
        process = build_algorithm(name, lambda: build_re_model(config), loss=job.model.loss,
                                  input_spec=job.data.element_spec(), executor=executor,
                                  learning_rate=0.05, num_epochs=1, num_iters=3)
        state = process.initialize()
        if executor == "tff":
            initial = state["model"]
        state = process.set_model_weights(state, initial)
        states[executor] = process.next(state, datasets).state["model"]
    return states, initial


@pytest.mark.parametrize("flags,message", [
    (["--dataset", "chemprot"], "--data is required for --dataset chemprot"),
    (["--dataset", "i2b2", "--partition", "by-diagnosis"],
     "--partition by-diagnosis does not apply to --dataset i2b2"),
    (["--dataset", "i2b2", "--client-fraction", "1.5"],
     "--client-fraction: expected a number in (0, 1], got 1.5"),
    (["--dataset", "imcs", "--encoder", "x"], "--encoder applies to --dataset"),
])
def test_relation_option_errors(tmp_path, flags, message):
    given = {flag[2:].replace("-", "_"): value for flag, value in zip(flags[::2], flags[1::2])}
    with pytest.raises(config_lib.ConfigError) as err:
        config_lib.resolve(given, preset={"out": str(tmp_path / "o")})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_encoder_folder_errors_in_one_line(tmp_path, cli_here):
    folder = tmp_path / "enc"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    proc = cli_here("run", "--dataset", "i2b2", "--encoder", str(folder), "--out",
                   str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "--encoder" in proc.stderr and "tokenizer" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_client_fraction_sets_clients_per_round(tmp_path):
    cfg = config_lib.resolve({"dataset": "i2b2", "clients": 10, "client_fraction": 0.25,
                              "out": str(tmp_path / "o")})
    assert cfg.run.clients_per_round == 3    # 2.5 rounds half up


def test_feded_run_holds_out_the_server_set(tmp_path, encoder, data_dir, cli_here):
    """--server-fraction moves a seeded 20% of train to D_v, for every algorithm; FedED's
    upload is its predictions on D_v (bytes from the types), its broadcast D_v's inputs."""
    out = tmp_path / "feded"
    args = ["run", "--dataset", "jsonl", "--data", data_dir, "--encoder", encoder,
            "--algorithm", "fedavgt,feded", "--clients", "2", "--clients-per-round", "2",
            "--num-rounds", "2", "--num-iters", "2", "--max-len", "32", "--executor", "local",
            "--representation", "cls_entities", "--blind-entities", "--server-fraction", "0.2",
            "--no-progress", "--out", str(out)]
    proc = cli_here(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["server_examples"] == 8 and summary["train_examples"] == 32   # 40 train
    labels = len(summary["labels"])
    algos = summary["algorithms"]
    assert summary["task_context"]["server_examples"] == 8
    # Per client: [8, C] float32 predictions + weight, metrics (2 floats, 2 int64), excluded.
    assert algos["FedED"]["bytes_uploaded_per_round"] == 2 * (8 * labels * 4 + 4 + 8 + 16 + 4)
    # Broadcast: FedAvgT's model, plus D_v's packed inputs [8, 4, 32] int32 to each client
    # the first time it is drawn (they never change: a deployment sends them once).
    rows = pd.read_csv(out / "metrics.csv").set_index(["algorithm", "round"])
    seen, firsts = set(), []
    for rnd in (1, 2):
        clients = set(str(rows.loc[("FedED", rnd), "clients"]).split())
        assert clients == set(str(rows.loc[("FedAvgT", rnd), "clients"]).split())  # same draw
        firsts.append(len(clients - seen))
        seen |= clients
        assert (rows.loc[("FedED", rnd), "bytes_broadcast"]
                - rows.loc[("FedAvgT", rnd), "bytes_broadcast"]) == firsts[-1] * 8 * 4 * 32 * 4
    assert firsts == [2, 0]    # both clients drawn both rounds: D_v in round 1 only
    # FedED without a server set: one line, before anything is written.
    bad = cli_here(*[a for a in args if a not in ("--server-fraction", "0.2")][:-1],
                  str(tmp_path / "none"))
    assert bad.returncode == 2 and "give --server-fraction" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "none").exists()


def test_an_empty_dev_file_is_noted_in_the_summary(tmp_path, encoder, cli_here):
    """BioBERT ships an empty dev.tsv: it counts as absent, and the run says so in its summary."""
    folder = write_splits(str(tmp_path / "data"), sizes=(("train", 40), ("dev", 0), ("test", 15)))
    out = tmp_path / "out"
    proc = cli_here("run", "--dataset", "jsonl", "--data", folder, "--encoder", encoder,
                   "--algorithm", "fedavg", "--clients", "2", "--clients-per-round", "2",
                   "--num-rounds", "1", "--num-iters", "1", "--max-len", "24",
                   "--dev-fraction", "0.25", "--executor", "local", "--checkpoint-every", "0",
                   "--no-progress", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    notes = json.loads((out / "summary.json").read_text())["data_notes"]
    assert any("dev.jsonl" in n and "empty" in n for n in notes), notes
    assert any("held out 10 of 40" in n for n in notes), notes     # 25% of train became dev
    assert all(n in proc.stdout for n in notes)


def trainable_count(encoder_folder, num_labels, layers=None, embeddings=True, vocab_extra=4):
    """Parameters of the relation model's trained part, counted from config.json (hidden H,
    intermediate I, L layers): per layer 4 attention projections, 2 LayerNorms, the
    feed-forward pair; the embeddings (rows incl. the 4 markers, positions, types,
    LayerNorm); the classifier over 2H entity features."""
    c = json.loads(open(os.path.join(encoder_folder, "config.json")).read())
    h, i = c["hidden_size"], c["intermediate_size"]
    layer = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h)
    count = (c["num_hidden_layers"] if layers is None else layers) * layer
    if embeddings:
        count += (c["vocab_size"] + vocab_extra + c["max_position_embeddings"]
                  + c["type_vocab_size"]) * h + 2 * h
    return count + 2 * h * num_labels + num_labels


def test_trainable_layers_train_and_upload_the_top_and_save_the_whole_model(tmp_path, encoder,
                                                                           data_dir, cli_here):
    """--trainable-layers 1 of 2: the upload is the top layer and the head (bytes against a
    count from config.json); the saved bundle is the plain full model, and its predictions
    on the raw test records score the run's own final test accuracy."""
    from tffre.bundle import load_bundle
    runs = {}
    for tag, extra in (("full", []), ("top", ["--trainable-layers", "1"]),
                       ("lora", ["--lora-rank", "2", "--lora-targets", "query,key,value"])):
        out = tmp_path / tag
        proc = cli_here("run", "--dataset", "jsonl", "--data", data_dir, "--encoder", encoder,
                       "--algorithm", "fedavgt", "--clients", "3", "--clients-per-round", "3",
                       "--num-rounds", "2", "--num-epochs", "1", "--num-iters", "0",
                       "--learning-rate", "0.01", "--max-len", "24", "--executor", "local",
                       "--checkpoint-every", "0", "--no-progress", "--out", str(out), *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[tag] = (json.loads((out / "summary.json").read_text()),
                     pd.read_csv(out / "metrics.csv"))
    labels = len(runs["full"][0]["labels"])
    up = {tag: s["algorithms"]["FedAvgT"]["bytes_uploaded_per_round"] / 3
          for tag, (s, _) in runs.items()}
    assert up["full"] - up["top"] == 4 * (trainable_count(encoder, labels)
                                          - trainable_count(encoder, labels, 1, False))
    c = json.loads(open(os.path.join(encoder, "config.json")).read())
    lora = 2 * 3 * 2 * (c["hidden_size"] * 2)         # 2 layers x q,k,v x (A [H, 2] + B [2, H])
    assert up["full"] - up["lora"] == 4 * (trainable_count(encoder, labels)
                                           - lora - trainable_count(encoder, labels, 0, False))
    summary, metrics = runs["top"]
    assert summary["partial"] == "top 1 of 2 layers, layers 0-0 and embeddings cached"
    assert runs["lora"][0]["partial"].startswith("top 2 of 2 layers, LoRA r=2")
    records = [json.loads(line) for line in open(os.path.join(data_dir, "test.jsonl"))]
    truth = np.array([summary["labels"].index(r["label"]) for r in records])
    for tag in ("top", "lora"):
        summary, metrics = runs[tag]
        bundle = load_bundle(str(tmp_path / tag / "models" / "FedAvgT"))
        hf = [layer for layer in bundle.model.layers if hasattr(layer, "config")]
        assert len(hf) == 1 and hf[0].config.num_hidden_layers == 2   # the whole encoder
        assert "encoder_top" not in [layer.name for layer in bundle.model.layers]
        assert not any("lora" in v.name for v in bundle.model.weights)
        accuracy = float(np.mean(bundle.predict(records).argmax(1) == truth))
        assert accuracy == pytest.approx(metrics["test_accuracy"].iloc[-1], abs=1e-9)


def test_split_round_is_the_same_on_both_executors(tmp_path, data_dir):
    """One FedAttS round of a top layer with LoRA adapters on cached activations, on TFF's
    runtime and in-process, to 1e-5 (dropout off, as the executors draw masks apart)."""
    states, initial = one_round_per_executor("FedAttS", tmp_path, data_dir, trainable_layers=1,
                                             lora_rank=2)
    for a, b in zip(states["tff"].trainable, states["local"].trainable):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    for a, b, c in zip(states["tff"].non_trainable, states["local"].non_trainable,
                       initial.non_trainable):       # the frozen base weights stay as they were
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)


def test_label_skew_and_feature_algorithms_train_on_a_frozen_prefix(tmp_path, encoder, cli_here):
    """The algorithms whose objective reads the model's features (FedCMC, MOON, FedCB) run
    on the top of a split encoder, on the GAD sample, with a server set (FedED) too."""
    out = tmp_path / "algos"
    proc = cli_here("run", "--dataset", "gad", "--encoder", encoder,
                   "--algorithm", "fedcmc,moon,fedcb,feded", "--clients", "3",
                   "--clients-per-round", "3", "--num-rounds", "2", "--num-iters", "2",
                   "--max-len", "24", "--trainable-layers", "1", "--server-fraction", "0.1",
                   "--executor", "local", "--checkpoint-every", "0", "--no-progress",
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = pd.read_csv(out / "metrics.csv")
    assert set(metrics["algorithm"]) == {"FedCMC", "MOON", "FedCB", "FedED"}
    assert np.isfinite(metrics["local_train_loss"]).all()
    assert (metrics["num_excluded_clients"] == 0).all()
    for name in ("FedCMC", "MOON", "FedCB", "FedED"):
        assert (out / "models" / name / "model.keras").is_file()


def test_gad_sample_with_a_threshold_tuned_on_dev(tmp_path, encoder, cli_here):
    """The embedded GAD-format sample (train/dev/test TSVs) scores the positive class's F1.
    ``--threshold dev`` on it: metrics.csv's threshold column holds each round's tuned
    threshold; the per-class table is the final model's at it, and so are the saved model's
    decisions (sklearn's F1 of them is the last round's); resuming the finished run writes the
    same table and decision, though no round is evaluated again."""
    out = tmp_path / "gad"
    args = ["run", "--dataset", "gad", "--encoder", encoder, "--algorithm", "fedavg",
            "--clients", "4", "--clients-per-round", "2", "--num-rounds", "2",
            "--num-iters", "0", "--learning-rate", "0.003", "--max-len", "32",
            "--executor", "local", "--threshold", "dev", "--no-progress", "--out", str(out)]
    proc = cli_here(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["threshold"].between(0.01, 0.99).all() and len(metrics) == 2
    # The last round's threshold is not the argmax's (0.85 here): the checks below of the
    # saved decision and of the resumed run would otherwise pass at the default.
    assert metrics["test_f1"].iloc[-1] != metrics["test_f1_argmax"].iloc[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["labels"] == ["0", "1"] and summary["dev_split"] == "dev"
    assert summary["train_examples"] == 400 and summary["test_examples"] == 100
    table = pd.read_csv(out / "per_class" / "FedAvg.csv")
    row_1 = table[table["label"] == "1"].iloc[0]
    micro = table[table["label"] == "micro (positive classes)"].iloc[0]
    assert micro["f1"] == pytest.approx(row_1["f1"])     # binary: micro = the positive class
    assert metrics["test_f1"].iloc[-1] == pytest.approx(row_1["f1"])
    assert "\"threshold\": \"dev\"" in (out / "config.json").read_text()

    from tffre.bundle import load_bundle
    from tffre.data.formats.blue import load_blue_folder
    from tffre.tasks.relations import SAMPLE_DIRS
    bundle = load_bundle(str(out / "models" / "FedAvg"))
    threshold = float(metrics["threshold"].iloc[-1])
    assert bundle.decision == {"label": "1", "threshold": threshold, "tuned_on": "dev"}
    test = load_blue_folder(SAMPLE_DIRS["gad"], "gad")[0]["test"]
    probs = bundle.predict(test.to_dict("records"))
    decided = np.where(probs[:, 1] > threshold, "1", "0")     # the rule, by hand
    assert list(decided) == [bundle.label_names[i] for i in bundle.decide(probs)]
    _, _, f1, _ = precision_recall_fscore_support(test["label"], decided, labels=["1"],
                                                  average="micro", zero_division=0)
    assert metrics["test_f1"].iloc[-1] == pytest.approx(f1, abs=1e-6)

    proc = cli_here(*args, "--resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming after round 2" in proc.stderr
    pd.testing.assert_frame_equal(pd.read_csv(out / "per_class" / "FedAvg.csv"), table)
    assert load_bundle(str(out / "models" / "FedAvg")).decision["threshold"] == threshold


def test_a_threshold_on_a_set_of_three_labels_is_refused(tmp_path, encoder, data_dir, cli_here):
    proc = cli_here("run", "--dataset", "jsonl", "--data", data_dir, "--encoder", encoder,
                   "--num-rounds", "1", "--threshold", "0.3", "--no-progress",
                   "--out", str(tmp_path / "o"))
    assert proc.returncode != 0
    assert "--threshold applies to a binary set; jsonl" in proc.stderr
    assert "3 labels" in proc.stderr


def test_a_threshold_is_refused_in_a_deployment():
    """The sites send a confusion matrix at the argmax: the agreement refuses a job with a
    threshold in one line, before any site is read."""
    from tffre.tasks.relations import TASK
    from tffre.tasks.sites import DeployJob
    log = []
    for threshold in ("dev", 0.3):
        head = DeployJob(task="relations", dataset="gad", algorithm="FedAvgT", hparams={},
                         options={"threshold": threshold}, batch_size=8, seed=0)
        with pytest.raises(ValueError, match="threshold: a deployment of sentence RE scores"):
            TASK.sites().agree(head, [], log.append)
    assert log == [log[0]] * 2 and log[0].startswith("error: threshold")
