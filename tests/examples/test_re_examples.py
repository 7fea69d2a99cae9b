"""The relation examples on the embedded sample, shortened and on a tiny encoder: the alpha
sweep, the combined table, and the FedCMC ablation.

Their presets train the top 2 of MiniLM's 6 layers on cached activations of the 4 below;
on the tiny encoder's 2 layers ``--trainable-layers 1`` keeps that path (a frozen, cached
prefix under a trained top), and traces half the layers in each client loop."""

import json

import pandas as pd
import pytest

from tiny_encoder import make_encoder_folder

BUDGET = 900   # seconds per run: a bound against a hang, not a speed test
SHORT = ["--num-rounds", "1", "--num-iters", "2", "--clients", "4", "--max-len", "40",
         "--executor", "local",   # the examples, not the executor, are under test here
         "--trainable-layers", "1", "--no-progress"]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return make_encoder_folder(str(tmp_path_factory.mktemp("enc")), weights="tf")[0]


def test_re_sentence_sweeps_alpha_into_one_table(tmp_path, encoder, example_here):
    out = tmp_path / "sweep"
    proc = example_here("re_sentence.py", *SHORT, "--clients-per-round", "2",
                        "--encoder", encoder, "--alphas", "0.5,0.05", "--out", str(out),
                        timeout=BUDGET)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(out / "table.csv", index_col="algorithm")
    assert list(table.index) == ["FedAvgT", "FedProxP", "FedAttS", "Centralised"]
    assert table[["F1 alpha=0.5", "F1 alpha=0.05"]].loc["FedAvgT"].notna().all()
    assert table.loc["FedAvgT", "paper alpha=0.05"] == pytest.approx(0.4756)   # FedCMC Table 2
    for alpha in ("0.5", "0.05"):
        summary = json.loads((out / f"alpha_{alpha}" / "summary.json").read_text())
        assert summary["config"]["alpha"] == float(alpha)
        assert summary["partial"] == "top 1 of 2 layers, layers 0-0 and embeddings cached"
    # The centralised upper bound runs once, with the first alpha.
    assert "Centralised" not in json.loads(
        (out / "alpha_0.05" / "summary.json").read_text())["algorithms"]


def test_re_label_skew_runs_the_grid_and_the_ablation(tmp_path, encoder, example_here):
    """The grid narrowed to FedAvgT and FedCMC (MOON, FedRS and FedLC on the frozen prefix:
    tests/tffre/tasks/test_relation_task.py); the ablation keeps its own algorithms whatever
    ``--algorithm`` says."""
    out = tmp_path / "skew"
    proc = example_here("re_label_skew.py", *SHORT, "--clients-per-round", "4",
                        "--encoder", encoder, "--alphas", "0.5", "--algorithm", "fedavgt,fedcmc",
                        f"--out={out}", timeout=BUDGET)    # the = form reaches every run too
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(out / "table.csv", index_col="algorithm")
    assert list(table.index) == ["FedAvgT", "FedCMC", "Centralised"]
    assert table.loc["FedCMC", "paper alpha=0.5"] == pytest.approx(0.6142)    # FedCMC Table 2
    ablation = json.loads((out / "ablation_alpha_0.01" / "summary.json").read_text())
    assert list(ablation["algorithms"]) == ["FedCMC", "FedCMC-minor", "FedCMC-random"]
    assert ablation["config"]["alpha"] == 0.01
    summary = json.loads((out / "alpha_0.5" / "summary.json").read_text())
    assert summary["config"]["alpha"] == 0.5
    up = {n: s["bytes_uploaded_per_round"] for n, s in summary["algorithms"].items()}
    # FedCMC uploads FedAvg's delta plus C per-class scores (4 bytes each), per client.
    assert up["FedCMC"] - up["FedAvgT"] == 4 * len(summary["labels"]) * 4


def test_re_distillation_prints_the_feded_tables(tmp_path, encoder, example_here):
    out = tmp_path / "distil"
    # One setting of the grid: the tables over several (their rows) are
    # tests/tffre/experiments/test_distillation.py's, on hand-written runs.
    proc = example_here("re_distillation.py", *SHORT, "--clients", "10", "--encoder", encoder,
                        "--grid", "8x1", "--out", str(out), timeout=BUDGET)
    assert proc.returncode == 0, proc.stderr[-3000:]
    prf = pd.read_csv(out / "table_prf.csv", index_col="row")
    assert list(prf.index) == ["FedAvgT", "FedAttT", "FedED", "Centralised"]
    assert prf.loc["FedED", "paper F1"] == pytest.approx(0.7509)          # FedED Table 5
    per_class = pd.read_csv(out / "table_per_class.csv", index_col="row")
    assert "TrNAP" in per_class.index and per_class.loc["TrNAP", "paper FedED"] == \
        pytest.approx(0.5616)
    upload = pd.read_csv(out / "table_upload.csv", index_col="row")
    # |D_v| = 20% of the sample's 568 training pairs less the 114 (20%) held out as dev
    # (the sample has no dev split): round(0.2 * 454) = 91; 9 classes, float32, plus scalars.
    assert upload.loc["FedED", "upload B"] == 91 * 9 * 4 + 4 + 8 + 16 + 4
    # The others upload their (here tiny) model's delta; FedED never does.
    assert upload.loc["FedAvgT", "upload B"] > upload.loc["FedED", "upload B"]
    rounds = pd.read_csv(out / "table_rounds.csv", index_col="row")
    assert list(rounds.index) == ["B=8 E=1"]
    assert rounds.loc["B=8 E=1", "paper FedED"] == 20                      # FedED Table 8
    summary = json.loads((out / "B8_E1" / "summary.json").read_text())
    assert summary["config"]["blind_entities"] and summary["representation"] == "cls_entities"
    assert summary["clients_per_round"] == 1                               # C = 0.1 of 10
