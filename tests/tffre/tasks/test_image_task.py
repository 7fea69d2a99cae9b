"""The image task end to end on the embedded sample: FedCB from the command line,
macro-F1 in the results, the classifier sent once, and a concept file."""

import json
import os
import subprocess
import sys

import pandas as pd

# A fresh process: the command line turns TF 2.14's oneDNN off for ResNet runs (it corrupts
# memory on a batch of another size), which only works before TensorFlow is imported.
ENV = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}


def test_fedcb_on_the_image_sample(tmp_path):
    concepts = tmp_path / "concepts.tsv"
    names = ["cyst_falling_thick", "cyst_falling_thin", "cyst_rising_thick", "cyst_rising_thin",
             "spot_falling_thick", "spot_falling_thin", "spot_rising_thick", "spot_rising_thin"]
    concepts.write_text("".join(f"{n}\ta retina with {n.replace('_', ' ')}\n" for n in names),
                        encoding="utf-8")
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "tffre", "run", "--dataset", "oct-c8",
         "--algorithm", "fedcb", "--num-rounds", "2", "--clients", "4",
         "--clients-per-round", "2", "--num-epochs", "1", "--num-iters", "3",
         "--image-size", "16", "--resnet-width", "4", "--local-optimizer", "adam",
         "--lr-decay", "0.99", "--executor", "local", "--concept-file", str(concepts),
         "--checkpoint-every", "0", "--no-progress", "--out", str(out)],
        capture_output=True, text=True, env=ENV, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["concepts"][0] == "a retina with cyst falling thick"
    assert summary["task_context"]["concepts"] == summary["concepts"]
    assert summary["task_context"]["prompts"] == "image"
    assert summary["f1_kind"] == "macro"
    frame = pd.read_csv(out / "metrics.csv")
    assert frame["test_f1"].notna().all() and frame["dev_f1"].notna().all()
    fedcb = frame[frame["algorithm"] == "FedCB"].reset_index()
    # mu and var (8 classes x 384, MiniLM's width) reach each client once: round 2's
    # broadcast is smaller wherever a client returns.
    seen = set(fedcb.loc[0, "clients"].split())
    returning = len(seen & set(fedcb.loc[1, "clients"].split()))
    per_client = fedcb.loc[0, "bytes_broadcast"] / 2
    assert fedcb.loc[1, "bytes_broadcast"] == 2 * per_client - returning * 2 * 8 * 384 * 4
    assert (out / "models" / "FedCB" / "image_encoder.json").is_file()
