"""benchmarks/torch_reference/fedavg.py's training, in PyTorch: its objectives against their
formulas written here in numpy, and its model and rounds against tffre's own.

These tests need PyTorch, which the product does not install: they run in their own
environment, `bash .ci/torch_tests.sh` (DEVELOPERS.md, "Tests"); the main suite skips them.

tffre's side comes from tests/fixtures/torch_reference/, written by its generate.py with
tffre's TensorFlow model and rounds (`build_algorithm`, local executor): a tiny encoder, the
encoded examples and client splits in export.py's layout, and tffre's outputs at the start
and after each round. Nothing there comes from the code under test. The transcription draws
its starting values (the markers' new embedding rows, the classifier) from PyTorch's
generator, not TensorFlow's, and its dropout masks too: the tests start it from tffre's
starting values and turn its dropout off, as the fixture's tffre runs have it.
"""

import json
import os
import shutil
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks", "torch_reference"))
import fedavg  # noqa: E402

FIXTURE = os.path.join(HERE, "..", "fixtures", "torch_reference")
# generate.py's run: rounds, local epochs, batch, Adam's learning rate.
ROUNDS, EPOCHS, BATCH, LR = 3, 2, 8, 1e-3


@pytest.fixture(scope="module")
def tffre_runs():
    return dict(np.load(os.path.join(FIXTURE, "tffre_runs.npz")))


@pytest.fixture
def ref(tmp_path, tffre_runs):
    """export.py's folder for the fixture: ``data.npz`` and ``encoder/``."""
    folder = tmp_path / "ref"
    shutil.copytree(os.path.join(FIXTURE, "encoder"), folder / "encoder")
    np.savez(folder / "data.npz", fedcb_tau=12.5, feded_tau=0.25, feded_kl=1.0,
             **{k: v for k, v in tffre_runs.items() if k.startswith("s0_")
                or k in ("labels", "vocab_size", "negative_label")})
    return folder


def from_tffres_start(model, runs, algorithm):
    """``model`` (fedavg.build's) with tffre's starting values where the two draw apart, and
    no dropout before the classifier."""
    with torch.no_grad():
        rows = model.encoder.get_input_embeddings().weight
        rows[int(runs["base_vocab"]):] = torch.from_numpy(runs[f"{algorithm}_marker_rows"])
        model.classifier.weight.copy_(torch.from_numpy(runs[f"{algorithm}_classifier_kernel"].T))
        model.classifier.bias.zero_()   # tffre's Dense starts at zero too
    model.dropout.p = 0.0
    return model


def logits(model, x):
    """``model``'s logits on packed inputs ``x``, in inference mode, as numpy."""
    with torch.no_grad():
        return model.eval()(torch.from_numpy(x.astype(np.int64))).numpy()


def test_model_is_tffres_at_the_start(ref, tffre_runs, monkeypatch):
    """The checkpoint read into the encoder, the markers' new rows and the classifier drawn as
    fedavg.py's docstring says, and then, from tffre's starting values, tffre's features
    (FedCMC Eq. 1: the sums of each entity's last hidden states) and logits."""
    monkeypatch.setattr(fedavg, "DEVICE", "cpu")
    from safetensors.numpy import load_file
    checkpoint = load_file(ref / "encoder" / "model.safetensors")
    model = fedavg.build(str(ref / "encoder"), int(tffre_runs["vocab_size"]), 3, seed=0)
    rows = model.encoder.get_input_embeddings().weight.detach().numpy()
    base = int(tffre_runs["base_vocab"])
    assert rows.shape == (int(tffre_runs["vocab_size"]), 16)
    np.testing.assert_array_equal(rows[:base], checkpoint["embeddings.word_embeddings.weight"])
    assert 0 < np.abs(rows[base:]).max() < 6 * 0.02   # N(0, 0.02) rows, not zeros
    limit = np.sqrt(6.0 / (32 + 3))   # Glorot-uniform [3, 32], zero bias
    weight = model.classifier.weight.detach().numpy()
    assert weight.shape == (3, 32) and np.abs(weight).max() <= limit
    assert np.abs(weight).max() > limit / 2 and not model.classifier.bias.detach().any()

    from_tffres_start(model, tffre_runs, "fedavgt")
    x = torch.from_numpy(tffre_runs["s0_test_x"].astype(np.int64))
    with torch.no_grad():
        features = model.eval().features(x).numpy()
    np.testing.assert_allclose(features, tffre_runs["fedavgt_features0"], atol=2e-5)
    np.testing.assert_allclose(logits(model, tffre_runs["s0_test_x"]),
                               tffre_runs["fedavgt_logits0"], atol=2e-5)


def test_half_weights_train_in_float32(ref, tffre_runs, monkeypatch):
    """export.py --half ships float16 weights; the model is float32 all the same, with the
    checkpoint's values to float16's precision."""
    monkeypatch.setattr(fedavg, "DEVICE", "cpu")
    from safetensors.numpy import load_file, save_file
    path = ref / "encoder" / "model.safetensors"
    weights = load_file(path)
    save_file({k: v.astype(np.float16) for k, v in weights.items()}, path,
              metadata={"format": "pt"})
    model = from_tffres_start(fedavg.build(str(ref / "encoder"), int(tffre_runs["vocab_size"]),
                                           3, seed=0), tffre_runs, "fedavgt")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    np.testing.assert_allclose(logits(model, tffre_runs["s0_test_x"]),
                               tffre_runs["fedavgt_logits0"], atol=2e-2)


class KerasAdam(torch.optim.Optimizer):
    """Adam's step as Keras writes it (tffre's client optimizer): the learning rate times
    sqrt(1 - beta2^t) / (1 - beta1^t), times m / (sqrt(v) + epsilon), so that epsilon sits
    inside the bias correction; PyTorch's Adam adds it to sqrt(v / (1 - beta2^t)). It takes
    the arguments fedavg.py gives ``torch.optim.Adam``."""

    def __init__(self, params, lr, eps, fused=False):
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                state["t"] += 1
                state["m"].mul_(0.9).add_(p.grad, alpha=0.1)
                state["v"].mul_(0.999).addcmul_(p.grad, p.grad, value=0.001)
                alpha = group["lr"] * (1 - 0.999 ** state["t"]) ** 0.5 / (1 - 0.9 ** state["t"])
                p.sub_(alpha * state["m"] / (state["v"].sqrt() + group["eps"]))


def rounds_of(algorithm, ref, out, runs, monkeypatch):
    """fedavg.py's (job, seed) process for ``algorithm`` on the fixture's two clients, run here
    from tffre's start: (its rounds.jsonl rows, {(round, split): its logits after the round},
    [FedCMC's Θ̂ after each round])."""
    monkeypatch.setattr(fedavg, "DEVICE", "cpu")
    built, seen, vectors = [], [], []
    original_build, original_f1 = fedavg.build, fedavg.relation_f1
    original_vectors = fedavg.major_vectors

    def major_vectors(client_rows):
        vectors.append(original_vectors(client_rows))
        return vectors[-1]

    def build(*args, **kwargs):
        built.append(from_tffres_start(original_build(*args, **kwargs), runs, algorithm))
        return built[-1]

    def relation_f1(y_true, y_pred, negative_label=0):   # called after each round: dev, test
        split = ("dev", "test")[len(seen) % 2]
        seen.append(logits(built[0], runs[f"s0_{split}_x"]))
        return original_f1(y_true, y_pred, negative_label)
    monkeypatch.setattr(fedavg, "build", build)
    monkeypatch.setattr(fedavg, "relation_f1", relation_f1)
    monkeypatch.setattr(fedavg, "major_vectors", major_vectors)
    fedavg.main(["--ref", str(ref), "--out", str(out), "--one", f"{algorithm}@two", "--seed",
                 "0", "--device", "cpu", "--rounds", str(ROUNDS), "--epochs", str(EPOCHS),
                 "--batch", str(BATCH), "--lr", str(LR)])
    rows = [json.loads(line) for line in open(out / "rounds.jsonl")]
    assert [r["round"] for r in rows] == list(range(1, ROUNDS + 1))
    assert len(seen) == 2 * ROUNDS
    return rows, {(r, split): seen[2 * (r - 1) + k] for r in range(1, ROUNDS + 1)
                  for k, split in enumerate(("dev", "test"))}, vectors


# Adam in Keras's form: tffre's rounds to float32 noise. PyTorch's Adam, as the GPU runs
# trained: a larger step where a gradient is near zero (its epsilon outside the bias
# correction), 2.4e-3 at most here after three rounds.
@pytest.mark.parametrize("adam,atol", [("keras", 1e-4), ("torch", 4e-3)])
@pytest.mark.parametrize("algorithm", ["fedavgt", "fedcmc"])
def test_rounds_are_tffres(algorithm, adam, atol, ref, tmp_path, tffre_runs, monkeypatch):
    """Three rounds of two clients (each a fresh Adam, two local epochs, the example-weighted
    mean; FedCMC's contrastive term on the major vectors) from tffre's start: after every
    round, tffre's dev and test logits, and the dev and test F1 of their argmax as
    scikit-learn scores it (the relation classes, micro); FedCMC's Θ̂, tffre's."""
    from sklearn.metrics import f1_score
    if adam == "keras":
        monkeypatch.setattr(torch.optim, "Adam", KerasAdam)
    rows, got, vectors = rounds_of(algorithm, ref, tmp_path / "out", tffre_runs, monkeypatch)
    if algorithm == "fedcmc":   # Θ̂ after each round: per class, the client tffre chose
        assert len(vectors) == ROUNDS
        for r, value in enumerate(vectors, start=1):
            np.testing.assert_allclose(value, tffre_runs[f"fedcmc_r{r}_vectors"], atol=1e-5)
    for (r, split), value in got.items():
        want = tffre_runs[f"{algorithm}_r{r}_{split}_logits"]
        np.testing.assert_allclose(value, want, atol=atol, err_msg=f"round {r}, {split}")
        f1 = f1_score(tffre_runs[f"s0_{split}_y"], want.argmax(1), labels=[1, 2],
                      average="micro", zero_division=0)
        assert rows[r - 1][f"{split}_f1"] == pytest.approx(f1)


def test_main_runs_every_job_and_seed_in_its_own_process(ref, tmp_path):
    """The entry point the GPU runs used, on the CPU, as a process per (job, seed) (one here:
    each pays PyTorch's imports), appending its rounds, and the summary's test F1 the one at
    the seed's best dev round. Centralised: one Adam over the union of the clients."""
    out = tmp_path / "out"
    code = fedavg.main(["--ref", str(ref), "--out", str(out), "--jobs", "centralised@two",
                        "--seeds", "0", "--device", "cpu", "--rounds", "2", "--batch", "4",
                        "--lr", "1e-3"])
    assert code == 0
    rows = [json.loads(line) for line in open(out / "rounds.jsonl")]
    assert [(r["job"], r["round"], r["clients"]) for r in rows] == [
        ("centralised@two", 1, 1), ("centralised@two", 2, 1)]
    assert all(0.0 <= r[f"{s}_f1"] <= 1.0 for r in rows for s in ("dev", "test"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_codes"] == [0]
    for job, figures in summary["jobs"].items():
        mine = [r for r in rows if r["job"] == job]
        best = max(mine, key=lambda r: r["dev_f1"])   # the first best dev
        assert figures["seeds"]["0"]["test_f1"] == best["test_f1"]
        assert figures["seeds"]["0"]["round"] == best["round"]


def _softmax_ce(logits, labels):
    """Mean -log softmax(logits)_y in numpy."""
    z = logits - logits.max(1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
    return float(-log_p[np.arange(len(labels)), labels].mean())


@pytest.mark.parametrize("algorithm", ["fedavgt", "fedlc", "fedrs", "moon", "fedcmc", "fedcb"])
def test_local_loss_is_each_objective_in_numpy(algorithm):
    """Each row's client objective against its formula written here in numpy (the module
    docstring's list; MOON as the paper's -log of the two-way softmax, not a softplus)."""
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
    rng = np.random.default_rng(7)
    h, mu, var = rng.normal(size=(4, 5)), rng.normal(size=(3, 5)), rng.uniform(0, 0.1, (3, 5))
    tau = 12.5
    expected = np.array([[tau * (h[i] @ mu[k] + 0.5 * tau * h[i] @ np.diag(var[k]) @ h[i])
                          for k in range(3)] for i in range(4)])
    got = fedavg.fedcb_logits(*(torch.tensor(a) for a in (h, mu, var)), tau).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12)
