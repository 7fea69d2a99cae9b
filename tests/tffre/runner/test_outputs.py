"""tffre.runner.outputs.summarise: a run's reported figures from hand-built metric rows."""

import math

import pandas as pd
import pytest

from tffre.runner.outputs import summarise

NAN = float("nan")


def rows(dev, test, dev_acc=None, test_acc=None):
    n = len(test)
    return pd.DataFrame({"round": range(1, n + 1), "round_seconds": [1.0] * n,
                         "bytes_uploaded": [10] * n, "bytes_broadcast": [20] * n,
                         "num_examples": [5] * n, "train_loss": [1.0] * n,
                         "test_accuracy": test_acc or [0.5] * n,
                         "dev_accuracy": dev_acc or [0.5] * n,
                         "test_f1": test, "dev_f1": dev})


def test_the_figure_is_test_at_the_best_dev_round_not_the_max():
    # dev peaks at round 2, test at round 4
    s = summarise(rows(dev=[0.5, 0.8, 0.7, 0.6], test=[0.4, 0.6, 0.7, 0.9]))
    assert s["round_of_best_dev_f1"] == 2 and s["test_f1_at_best_dev"] == 0.6
    assert s["best_dev_f1"] == 0.8
    assert s["max_test_f1"] == 0.9 and s["round_of_max_f1"] == 4 and s["final_test_f1"] == 0.9


def test_a_dev_tie_picks_the_earliest_round():
    s = summarise(rows(dev=[0.5, 0.8, 0.8, 0.8], test=[0.4, 0.3, 0.7, 0.9]))
    assert s["round_of_best_dev_f1"] == 2 and s["test_f1_at_best_dev"] == 0.3


def test_rounds_with_nan_take_no_part():
    # round 2's dev is NaN, round 3's test is NaN: rounds 1 and 4 remain, round 4 best on dev
    s = summarise(rows(dev=[0.5, NAN, 0.99, 0.6], test=[0.4, 0.95, NAN, 0.45]))
    assert s["round_of_best_dev_f1"] == 4 and s["test_f1_at_best_dev"] == 0.45
    assert s["max_test_f1"] == 0.95   # the max over test ignores dev


def test_without_a_dev_split_there_is_no_selected_figure():
    s = summarise(rows(dev=[NAN, NAN, NAN], test=[0.4, 0.6, 0.5]))
    assert "test_f1_at_best_dev" not in s and "round_of_best_dev_f1" not in s
    assert s["final_test_f1"] == 0.5 and s["max_test_f1"] == 0.6


def test_accuracy_is_selected_on_dev_accuracy():
    s = summarise(rows(dev=[0.1, 0.2], test=[0.1, 0.2], dev_acc=[0.9, 0.8],
                       test_acc=[0.3, 0.7]))
    assert s["round_of_best_dev"] == 1 and s["test_accuracy_at_best_dev"] == 0.3
    assert s["round_of_best_dev_f1"] == 2
    assert math.isclose(s["mean_round_ms"], 1000.0)
    assert s["bytes_uploaded_per_round"] == pytest.approx(10)
