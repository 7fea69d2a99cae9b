"""examples/imcs_lstm.py on the embedded sample: a short federated run beats the majority class."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_short_federated_lstm_run_beats_majority_baseline(tmp_path):
    out = tmp_path / "imcs"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "imcs_lstm.py"), "--algorithms",
         "fedavgs,fedpap", "--num-rounds", "4", "--clients", "8", "--clients-per-round", "4",
         "--lstm-units", "16", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    baseline = summary["majority_class_test_accuracy"]
    assert 0.6 < baseline < 0.9
    assert summary["algorithms"]["FedAvgS"]["max_test_accuracy"] > baseline + 0.03
    for name in ("metrics.csv", "curves.png", "partition.csv", "partition.png"):
        assert (out / name).stat().st_size > 0
    assert "max test accuracy" in proc.stdout and "mean ms" in proc.stdout


def test_pooling_client_texts_for_vectors_warns(capsys):
    sys.path.insert(0, ROOT)
    from argparse import Namespace
    from tffre import imcs_experiment
    from tffre.data import imcs
    from tffre.text import MedicalSegmenter
    splits = imcs.load_imcs(imcs_experiment.SAMPLE_DIR, verbose=False)
    args = Namespace(w2v=None, w2v_from_clients=True, seed=0, data=imcs_experiment.SAMPLE_DIR)
    kv, source = imcs_experiment.word_vectors(args, splits, MedicalSegmenter())
    assert "breaks the federated privacy model" in capsys.readouterr().out
    assert source == "pooled client texts" and kv.vector_size == 64
