"""benchmarks/torch_reference: the export a GPU machine without TensorFlow trains on, and the
parts of the transcription that need no PyTorch (its F1, client sampler, FedCMC rule, the
summary's selection, the processes' flags). The training itself runs in PyTorch, which the
product does not install: tests/benchmarks/test_torch_reference_training.py, in its own
environment (`bash .ci/torch_tests.sh`)."""

import json
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks", "torch_reference"))
import export  # noqa: E402
import fedavg  # noqa: E402

FOLD = os.path.join(HERE, "..", "fixtures", "gad_fold")


@pytest.mark.parametrize("labels", [2, 5])
def test_relation_f1_is_sklearns_micro_f1_without_the_negative_class(labels):
    from sklearn.metrics import f1_score
    rng = np.random.default_rng(labels)
    y_true, y_pred = rng.integers(0, labels, 200), rng.integers(0, labels, 200)
    expected = f1_score(y_true, y_pred, labels=list(range(1, labels)), average="micro")
    assert fedavg.relation_f1(y_true, y_pred, negative_label=0) == pytest.approx(expected)
    assert fedavg.relation_f1(y_true, np.zeros_like(y_pred)) == 0.0


def test_export_writes_every_seeds_splits_and_clients(tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file
    from tffre.data.sentence_sets import DEV_FRACTION, load_relation_splits
    from tffre.tasks.relations import server_split
    from tffre.text.relation_tokenizer import RETokenizer, default_encoder_dir
    export.main(["--data", FOLD, "--out", str(tmp_path), "--seeds", "0,1", "--alphas", "0.5",
                 "--iid", "--clients", "2", "--max-len", "32", "--half",
                 "--server-fraction", "0.5", "--dv-clients", "2"])
    data = np.load(tmp_path / "data.npz")
    with open(os.path.join(FOLD, "train.tsv")) as f:
        fold_train = sum(1 for line in f if line.strip())
    for seed in (0, 1):
        n = len(data[f"s{seed}_train_y"])
        # The seeded dev slice comes out of train.tsv; test.tsv is kept (header dropped).
        assert n + len(data[f"s{seed}_dev_y"]) == fold_train
        assert len(data[f"s{seed}_test_y"]) == 2
        assert data[f"s{seed}_train_x"].shape == (n, 4, 32)
        for part in ("alpha0.5", "iid"):
            index, offsets = data[f"s{seed}_{part}_index"], data[f"s{seed}_{part}_offsets"]
            assert len(offsets) == 3 and offsets[-1] == n
            assert sorted(index) == list(range(n))   # each training row on one client
        # FedED's D_v: the rows tffre's --server-fraction 0.5 moves to the server (the same
        # examples, encoded alike), and the IID split of the others over 2 clients.
        server = data[f"s{seed}_dv_index"]
        splits, labels = load_relation_splits("gad", FOLD, seed=seed, dev_fraction=DEV_FRACTION)
        tokenizer = RETokenizer.from_pretrained(
            default_encoder_dir(), max_length=32,
            entity_types=RETokenizer.entity_types_of(splits["train"]))
        cfg = SimpleNamespace(dataset="gad", run=SimpleNamespace(seed=seed),
                              options=SimpleNamespace(server_data=None, server_fraction=0.5))
        server_df, _ = server_split(cfg, splits, labels)
        np.testing.assert_array_equal(data[f"s{seed}_train_x"][server],
                                      tokenizer.encode(server_df))
        np.testing.assert_array_equal(data[f"s{seed}_train_y"][server],
                                      server_df["label"].map(labels.index))
        index, offsets = data[f"s{seed}_dv2_index"], data[f"s{seed}_dv2_offsets"]
        assert len(offsets) == 3 and sorted(np.concatenate([index, server])) == list(range(n))
    assert int(data["vocab_size"]) > 30522   # the added entity markers
    summary = json.loads((tmp_path / "export.json").read_text())
    assert summary["weights"] == "float16" and summary["clients"] == 2
    original = load_file(os.path.join(default_encoder_dir(), "model.safetensors"))
    half = load_file(tmp_path / "encoder" / "model.safetensors")
    assert set(half) == set(original)
    name = "embeddings.word_embeddings.weight"
    assert half[name].dtype == np.float16
    np.testing.assert_allclose(half[name].astype(np.float32), original[name], rtol=1e-3,
                               atol=1e-4)
    with safe_open(tmp_path / "encoder" / "model.safetensors", "np") as f:
        assert f.metadata() == {"format": "pt"}   # what transformers needs to read it
    # FedCB's frozen classifier: what a tffre FedCB run on GAD builds (its text prompts and
    # GAD's class concepts, as the relation task gives them), one row per label.
    from tffre.algorithms.fedcb import FedCB
    from tffre.data.concepts import GAD_RELATIONS
    from tffre.definition import TaskContext
    context = TaskContext(concepts=tuple(GAD_RELATIONS[str(label)] for label in data["labels"]),
                          prompts="text")
    mu, var = FedCB(FedCB.Hparams(), context).class_vectors(2)
    assert data["fedcb_mu"].shape == (2, 384) and data["fedcb_var"].shape == (2, 384)
    np.testing.assert_allclose(data["fedcb_mu"], mu, atol=1e-6)
    np.testing.assert_allclose(data["fedcb_var"], var, atol=1e-6)
    assert float(data["fedcb_tau"]) == FedCB.Hparams().classifier_temperature == 12.5
    assert float(data["feded_tau"]) == 0.25 and float(data["feded_kl"]) == 1.0   # FedED's


def test_export_of_a_multiclass_set_keeps_tffres_labels_and_its_dev_file(tmp_path):
    """ChemProt (SciBERT's copy, run on a GPU in docs/real-corpora.md): five CPR classes and
    a dev file of its own. The transcription scores with the negative class at index 0, so
    the export must carry tffre's label order, whose first label is the negative one."""
    from tffre.data.sentence_sets import DEV_FRACTION, load_relation_splits
    fold = os.path.join(HERE, "..", "fixtures", "scibert_chemprot")
    export.main(["--dataset", "chemprot", "--data", fold, "--out", str(tmp_path),
                 "--seeds", "0", "--alphas", "", "--iid", "--clients", "2", "--max-len", "32"])
    data = np.load(tmp_path / "data.npz")
    splits, labels = load_relation_splits("chemprot", fold, seed=0, dev_fraction=DEV_FRACTION)
    assert list(data["labels"]) == list(labels) and labels[0] == "false"
    assert int(data["negative_label"]) == 0
    for name, frame in splits.items():   # train, the dev file and test, as tffre reads them
        np.testing.assert_array_equal(data[f"s0_{name}_y"], frame["label"].map(labels.index))
    assert [len(data[f"s0_{n}_y"]) for n in ("train", "dev", "test")] == [3, 1, 3]
    assert len(set(data["s0_train_y"].tolist())) == 3   # three of the five CPR classes
    index, offsets = data["s0_iid_index"], data["s0_iid_offsets"]
    assert offsets[-1] == 3 and sorted(index) == [0, 1, 2]   # each training row on one client


def test_summary_reports_test_f1_at_the_first_best_dev_round(tmp_path):
    """By hand: seed 0's best dev (0.6, round 2) is not its best test (0.9, round 3); seed 1's
    best dev ties at rounds 1 and 3 and the first wins; a job with no round has no figure."""
    rows = [("a", 0, 1, 0.5, 0.70), ("a", 0, 2, 0.6, 0.40), ("a", 0, 3, 0.55, 0.90),
            ("a", 1, 1, 0.8, 0.20), ("a", 1, 2, 0.7, 0.95), ("a", 1, 3, 0.8, 0.60)]
    path = tmp_path / "rounds.jsonl"
    path.write_text("".join(json.dumps({"job": j, "seed": s, "round": r, "dev_f1": d,
                                        "test_f1": t, "round_seconds": 1.0,
                                        "peak_gpu_mib": 0}) + "\n"
                            for j, s, r, d, t in rows))
    table = fedavg.summarise(str(path), ["a", "b"], [0, 1])
    seeds = table["a"]["seeds"]
    assert (seeds[0]["round"], seeds[0]["test_f1"], seeds[0]["max_test_f1"]) == (2, 0.40, 0.90)
    assert (seeds[1]["round"], seeds[1]["test_f1"], seeds[1]["rounds"]) == (1, 0.20, 3)
    assert table["a"]["mean"] == pytest.approx(0.30)
    assert table["a"]["sd"] == pytest.approx(np.sqrt(0.02))   # (0.4 - 0.3)^2 * 2 / (2 - 1)
    assert table["b"] == {"mean": None, "sd": None, "seeds": {}}


@pytest.mark.parametrize("clients,fraction", [(50, 0.1), (10, 1.0), (7, 0.5)])
def test_round_clients_are_tffres_sampler(clients, fraction):
    from tffre.data.partition import clients_per_round
    from tffre.runner import sample_clients
    ids = [f"client_{k}" for k in range(clients)]
    for seed in (0, 2):
        for round_num in (1, 2, 30):
            expected = sample_clients(ids, clients_per_round(clients, fraction), seed, round_num)
            got = fedavg.round_clients(clients, fraction, seed, round_num)
            assert [f"client_{k}" for k in got] == expected
    assert fedavg.round_clients(10, 1.0, 0, 1) == list(range(10))   # C = 1: every client


def test_major_vectors_is_fedcmcs_rule():
    """The transcription's Eq. 10-13 against tffre's numpy rule and a hand-computed case."""
    from tffre.algorithms.fedcmc import local_similarity, select_major_vectors
    rng = np.random.default_rng(3)
    clients = [rng.normal(size=(3, 5)).astype(np.float32) for _ in range(4)]
    np.testing.assert_allclose(fedavg.local_similarity(clients[0]), local_similarity(clients[0]))
    np.testing.assert_array_equal(fedavg.major_vectors(clients), select_major_vectors(clients)[0])
    # By hand: a's rows are orthogonal (d = 0 for both classes), b's parallel (d = 1): a, the
    # second client, supplies both vectors.
    a, b = np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[1.0, 1.0], [2.0, 2.0]])
    np.testing.assert_array_equal(fedavg.major_vectors([b, a]), a)
    # A tie (2a has a's cosines): the smaller row lexicographically.
    np.testing.assert_array_equal(fedavg.major_vectors([2.0 * a, a]), a)


def test_kl_weight_reaches_every_process_only_when_given(tmp_path, monkeypatch):
    """``--kl-weight`` is passed on to each (job, seed) process, and left out when not given,
    so those processes fall back to the lambda that export.py wrote."""
    calls = []

    class _Done:
        def __init__(self, argv):
            calls.append(argv)

        def wait(self):
            return 0

    monkeypatch.setattr(fedavg.subprocess, "Popen", _Done)
    common = ["--ref", str(tmp_path), "--jobs", "feded@dv50", "--seeds", "0,1"]
    assert fedavg.main(common + ["--out", str(tmp_path / "a"), "--kl-weight", "0"]) == 0
    assert len(calls) == 2
    assert all(argv[argv.index("--kl-weight") + 1] == "0.0" for argv in calls)
    calls.clear()
    assert fedavg.main(common + ["--out", str(tmp_path / "b")]) == 0
    assert len(calls) == 2 and not any("--kl-weight" in argv for argv in calls)
    # In the process, the option as given, or else the lambda export.py wrote.
    written = {"feded_kl": np.float32(1.0)}
    assert fedavg.exported(SimpleNamespace(kl_weight=None), written, "kl_weight") == 1.0
    assert fedavg.exported(SimpleNamespace(kl_weight=0.0), written, "kl_weight") == 0.0
