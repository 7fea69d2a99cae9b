"""examples/docre_cdr.py on a slice of the embedded CDR sample and a tiny encoder: both splits
into one FedLCC-table layout, with the guesses under it."""

import json

import pandas as pd

from tiny_documents import write_sample_slice
from tiny_encoder import VOCAB, make_encoder_folder

BUDGET = 600   # seconds: a bound against a hang, not a speed test


def test_docre_cdr_runs_both_splits_into_one_table(tmp_path, example_here):
    data = tmp_path / "cdr"
    data.mkdir()
    write_sample_slice(data, {"train": 24, "dev": 6, "test": 6})
    encoder = make_encoder_folder(str(tmp_path / "enc"), weights="tf", vocab=VOCAB + ["*"])[0]
    out = tmp_path / "docre"
    proc = example_here("docre_cdr.py", "--data", str(data), "--encoder", encoder,
                        "--algorithm", "fedlcc", "--num-rounds", "1", "--clients", "3",
                        "--clients-per-round", "2", "--num-iters", "2", "--max-len", "96",
                        "--out", str(out), timeout=BUDGET)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_csv(out / "table.csv")
    assert table[["setting", "method"]].values.tolist() == [
        ["Federated Training (IID)", "FedLCC"], ["Federated Training (Non-IID)", "FedLCC"]]
    # FedLCC Table 3 (CDR): 65.54 / 65.67 / 65.60 under its non-IID split.
    assert table.loc[1, ["paper P", "paper R", "paper F1"]].tolist() == [65.54, 65.67, 65.60]
    assert table["f1"].notna().all() and (table["round"] == 1).all()
    for part in ("iid", "structural-entropy"):
        summary = json.loads((out / part / "summary.json").read_text())
        assert summary["config"]["partition"] == part
        # The preset's threshold tuned on dev, and its one encoder layer of the tiny two.
        assert summary["config"]["threshold"] == "dev"
        assert summary["config"]["encoder_layers"] == 1
    # The guesses, once under the table: CID for every candidate pair scores 2p / (1 + p).
    test = summary["splits"]["test"]
    guess = 100 * 2 * test["positive_pairs"] / (test["pairs"] + test["positive_pairs"])
    assert proc.stdout.count("test pairs: guessing no relation scores F1 0.00, the relation "
                             f"for every candidate pair {guess:.2f}") == 1
    assert "peak RSS" in proc.stdout
