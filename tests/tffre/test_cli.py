"""The command line: a smoke run, one-line errors, and rows kept on interruption."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import tensorflow as tf

from tffre import runner
from tffre.data.synthetic import make_synthetic
from tffre.models import logistic_regression

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "tffre", *args], capture_output=True, text=True,
                          env=ENV, timeout=600)


def test_cli_smoke_run(tmp_path):
    out = tmp_path / "res"
    proc = run_cli("run", "--algorithm", "fedavg,FedAttS", "--num-clients", "6",
                   "--clients-per-round", "3", "--num-rounds", "3", "--eval-every", "2",
                   "--stepsize", "2", "--seed", "1", "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-2000:]
    frame = pd.read_csv(out / "metrics.csv")
    assert list(frame.columns[:7]) == ["algorithm", "round", "train_loss", "test_accuracy",
                                       "round_seconds", "bytes_broadcast", "bytes_uploaded"]
    assert len(frame) == 6 and set(frame["algorithm"]) == {"FedAvg", "FedAttS"}
    assert frame["test_accuracy"].notna().tolist() == [False, True, True] * 2  # rounds 2 and 3
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["algorithms"]) == {"FedAvg", "FedAttS"}
    assert 0 <= summary["algorithms"]["FedAttS"]["max_test_accuracy"] <= 1
    assert (out / "curves.png").stat().st_size > 1000
    assert "FedAttS" in proc.stdout
    # Same clients each round for both algorithms (seeded sampling).
    assert frame[frame.algorithm == "FedAvg"]["clients"].tolist() == \
        frame[frame.algorithm == "FedAttS"]["clients"].tolist()


@pytest.mark.parametrize("args,message", [
    (["--algorithm", "fedfoo"], "unknown algorithm 'fedfoo'"),
    (["--algorithm", "fedavg", "--num-rounds", "0"], "--num-rounds: expected a number >= 1"),
    (["--algorithm", "fedavg", "--mu", "abc"], "--mu: expected a number"),
])
def test_cli_bad_arguments_give_one_line(tmp_path, args, message):
    proc = run_cli("run", *args, "--out", str(tmp_path / "x"))
    assert proc.returncode == 2
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_interrupted_run_keeps_written_rows(tmp_path, monkeypatch):
    calls = {"n": 0}
    real = runner.GlobalModelEvaluator

    class InterruptingEvaluator(real):
        def __call__(self, weights):
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt
            return super().__call__(weights)

    monkeypatch.setattr(runner, "GlobalModelEvaluator", InterruptingEvaluator)
    data = make_synthetic(0.5, 0.5, num_clients=4, seed=0)
    with pytest.raises(KeyboardInterrupt):
        runner.run_experiment(data, lambda: logistic_regression(60, 10),
                              loss=tf.keras.losses.SparseCategoricalCrossentropy(),
                              algorithm_names=["fedavg"], num_rounds=5, clients_per_round=2,
                              out_dir=str(tmp_path), progress=False)
    frame = pd.read_csv(tmp_path / "metrics.csv")
    assert frame["round"].tolist() == [1, 2]
