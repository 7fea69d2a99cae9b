"""benchmarks/torch_reference: the export a GPU machine without TensorFlow trains on, and the
transcription's F1 (the training itself needs PyTorch, which this project does not install:
docs/real-corpora.md, "At the papers' scale on a GPU")."""

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


def _softmax_ce(logits, labels):
    """Mean -log softmax(logits)_y in numpy."""
    z = logits - logits.max(1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
    return float(-log_p[np.arange(len(labels)), labels].mean())


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


@pytest.mark.parametrize("algorithm", ["fedavgt", "fedlc", "fedrs", "moon", "fedcmc", "fedcb"])
def test_local_loss_is_each_objective_in_numpy(algorithm):
    """Each row's client objective against its formula written here in numpy (the module
    docstring's list; MOON as the paper's -log of the two-way softmax, not a softplus)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    batch, classes, dim = 6, 3, 4
    features, logits = rng.normal(size=(batch, dim)), rng.normal(size=(batch, classes))
    labels = rng.integers(0, classes, batch)
    z_glob, z_prev = rng.normal(size=(batch, dim)), rng.normal(size=(batch, dim))
    vectors, margins = rng.normal(size=(classes, dim)), rng.uniform(0.1, 1.0, classes)
    scales = np.array([1.0, 0.5, 1.0])
    def t(a):
        return torch.tensor(a, dtype=torch.float64)
    variances = rng.uniform(0.0, 0.01, (classes, dim))
    got = fedavg.local_loss(algorithm, t(features), t(logits), torch.tensor(labels),
                            margins=t(margins), scales=t(scales), vectors=t(vectors),
                            z_glob=t(z_glob), z_prev=t(z_prev), variances=t(variances),
                            cb_tau=12.5).item()
    adjusted = {"fedlc": logits - margins, "fedrs": logits * scales}.get(algorithm, logits)
    expected = _softmax_ce(adjusted, labels)
    if algorithm == "moon":
        def cos(a, b):
            return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        e_glob, e_prev = np.exp(cos(features, z_glob) / 0.5), np.exp(cos(features, z_prev) / 0.5)
        expected += float(np.mean(-np.log(e_glob / (e_glob + e_prev))))
    if algorithm == "fedcmc":
        expected += _softmax_ce(features @ vectors.T, labels)
    if algorithm == "fedcb":   # FedCB Eq. 4's bound: + tau^2/2 * sum_d h_d^2 var_{y,d}
        expected += float(np.mean([0.5 * 12.5 ** 2 * np.sum(features[i] ** 2 * variances[y])
                                   for i, y in enumerate(labels)]))
    assert got == pytest.approx(expected, rel=1e-9)
    if algorithm == "moon":   # a client's first round: no previous model, no term
        first = fedavg.local_loss("moon", t(features), t(logits), torch.tensor(labels))
        assert first.item() == pytest.approx(_softmax_ce(logits, labels), rel=1e-9)


def test_distillation_loss_is_feded_eq6_in_numpy():
    """FedED Eq. 6 per example: -log p_y + lambda * sum_c q_c (log q_c - log p_c), with a
    zero entry of q adding nothing."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    logits, labels = rng.normal(size=(5, 3)), rng.integers(0, 3, 5)
    q = rng.dirichlet(np.ones(3), 5)
    q[0] = [0.0, 0.3, 0.7]
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    expected = np.mean([-np.log(p[i, labels[i]]) + 0.5 * sum(
        q[i, c] * (np.log(q[i, c]) - np.log(p[i, c])) for c in range(3) if q[i, c] > 0)
        for i in range(5)])
    got = fedavg.distillation_loss(torch.tensor(logits), torch.tensor(labels),
                                   torch.tensor(q), 0.5).item()
    assert got == pytest.approx(expected, rel=1e-12)


def test_fedcb_logits_are_eq5_in_numpy():
    """FedCB Eq. 5, tau * F(h, k) = tau * (h . mu_k + tau/2 * h^T diag(var_k) h), written out
    per example and class."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    h, mu, var = rng.normal(size=(4, 5)), rng.normal(size=(3, 5)), rng.uniform(0, 0.1, (3, 5))
    tau = 12.5
    expected = np.array([[tau * (h[i] @ mu[k] + 0.5 * tau * h[i] @ np.diag(var[k]) @ h[i])
                          for k in range(3)] for i in range(4)])
    got = fedavg.fedcb_logits(*(torch.tensor(a) for a in (h, mu, var)), tau).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12)


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
