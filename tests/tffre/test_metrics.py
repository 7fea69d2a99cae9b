"""tffre.metrics: RE scores agree with sklearn, and the FedED tables follow their rules."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import precision_recall_fscore_support

from tffre.metrics import (MICRO_ROW, communication_table, docre_baselines, format_bytes,
                           lookup_baselines, mean_and_sd, per_class_table, relation_f1,
                           rounds_to_target, trivial_baselines)

I2B2 = ["TrIP", "TrWP", "TrCP", "TrAP", "TrNAP", "TeRP", "TeCP", "PIP", "None"]


def random_labels(labels, n, seed, p=None):
    rng = np.random.RandomState(seed)
    return [labels[i] for i in rng.choice(len(labels), n, p=p)]


def sklearn_micro(y_true, y_pred, positive):
    p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, labels=positive,
                                                 average="micro", zero_division=0)
    return p, r, f


def assert_plain_floats(scores):
    for key in ("precision", "recall", "f1"):
        assert type(scores[key]) is float and math.isfinite(scores[key])
    assert type(scores["support"]) is int


@pytest.mark.parametrize("seed", range(6))
def test_multiclass_matches_sklearn_micro_over_positive_labels(seed):
    # A heavy negative class, as in i2b2 (Table 2 of FedED: "None" is most instances).
    p = [0.05] * 8 + [0.6]
    y_true = random_labels(I2B2, 500, seed, p)
    # Predictions right about half the time, otherwise random (negative included).
    y_pred = [t if u < 0.5 else g for t, u, g in
              zip(y_true, np.random.RandomState(seed + 100).rand(500),
                  random_labels(I2B2, 500, seed + 200, p))]
    positive = [label for label in I2B2 if label != "None"]
    scores = relation_f1(y_true, y_pred, "None", labels=I2B2)
    assert_plain_floats(scores)
    expected = sklearn_micro(y_true, y_pred, positive)
    np.testing.assert_allclose([scores["precision"], scores["recall"], scores["f1"]], expected,
                               rtol=0, atol=1e-12)
    assert scores["support"] == sum(t != "None" for t in y_true)
    # The default label set (everything seen) gives the same scores here.
    assert relation_f1(y_true, y_pred, "None") == scores


@pytest.mark.parametrize("seed", range(5))
def test_binary_is_the_positive_class_f1(seed):
    y_true = random_labels(["0", "1"], 200, seed, [0.7, 0.3])
    y_pred = random_labels(["0", "1"], 200, seed + 50, [0.6, 0.4])
    scores = relation_f1(y_true, y_pred, negative_label="0", labels=["0", "1"])
    p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, average="binary",
                                                 pos_label="1", zero_division=0)
    np.testing.assert_allclose([scores["precision"], scores["recall"], scores["f1"]], [p, r, f],
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(scores["f1"], sklearn_micro(y_true, y_pred, ["1"])[2],
                               rtol=0, atol=1e-12)
    # Integer labels, compared as integers.
    as_int = relation_f1([int(t) for t in y_true], [int(t) for t in y_pred], 0, labels=[0, 1])
    assert as_int == scores


def test_chemprot_string_labels_match_sklearn():
    labels = ["CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9", "false"]
    for seed in range(3):
        y_true = random_labels(labels, 300, seed)
        y_pred = random_labels(labels, 300, seed + 7)
        scores = relation_f1(y_true, y_pred, "false", labels=labels)
        expected = sklearn_micro(y_true, y_pred, labels[:-1])
        np.testing.assert_allclose([scores["precision"], scores["recall"], scores["f1"]],
                                   expected, rtol=0, atol=1e-12)


def test_hand_computed_counts():
    y_true = ["A", "A", "B", "N", "N", "B", "A"]
    y_pred = ["A", "B", "B", "A", "N", "N", "A"]
    # Positive labels {A, B}.
    # Predicted positives: indices 0,1,2,3,6 -> 5. Hits (pred == true, positive): 0,2,6 -> 3.
    # Gold positives: indices 0,1,2,5,6 -> 5.
    # precision = 3/5, recall = 3/5, F1 = 2*3 / (5 + 5) = 0.6.
    scores = relation_f1(y_true, y_pred, "N")
    assert scores == {"precision": 0.6, "recall": 0.6, "f1": 0.6, "support": 5}
    # Class A: predicted 0,3,6 (3), gold 0,1,6 (3), hits 0,6 (2): p = r = f1 = 2/3.
    # Class B: predicted 1,2 (2), gold 2,5 (2), hit 2 (1): p = r = f1 = 1/2.
    table = per_class_table(y_true, y_pred, ["N", "A", "B"], negative_label="N")
    assert table["label"].tolist() == ["A", "B", "N", MICRO_ROW]
    np.testing.assert_allclose(table["f1"][:2], [2 / 3, 1 / 2])
    # Class N: predicted 4,5 (2), gold 3,4 (2), hit 4: 1/2.
    assert table.iloc[2][["precision", "recall", "f1"]].tolist() == [0.5, 0.5, 0.5]
    assert table["support"].tolist() == [3, 2, 2, 5]


def test_zero_division_is_zero_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # No positive predictions: precision 0/0, F1 0.
        none_predicted = relation_f1(["A", "B", "N"], ["N", "N", "N"], "N")
        assert none_predicted == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 2}
        # No gold positives either.
        assert relation_f1(["N", "N"], ["N", "N"], "N")["f1"] == 0.0
        assert relation_f1([], [], "N") == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                           "support": 0}
        # Only false positives: precision 0, recall 0/0.
        assert relation_f1(["N", "N"], ["A", "A"], "N")["precision"] == 0.0
        table = per_class_table(["N", "N"], ["N", "N"], ["A", "N"], negative_label="N")
    assert np.isfinite(table[["precision", "recall", "f1"]].to_numpy(dtype=float)).all()
    assert sklearn_micro(["A", "B", "N"], ["N", "N", "N"], ["A", "B"]) == (0.0, 0.0, 0.0)


def test_labels_are_compared_as_given():
    # 1 and "1" are different labels: nothing is a hit.
    assert relation_f1([1, 1], ["1", "1"], negative_label=0)["f1"] == 0.0
    with pytest.raises(ValueError, match="y_true has 2 labels, y_pred 1"):
        relation_f1(["A", "B"], ["A"], "N")


def test_labels_outside_the_label_set_count_as_negative_like_sklearn():
    y_true = ["A", "X", "B", "A"]
    y_pred = ["X", "X", "B", "A"]
    scores = relation_f1(y_true, y_pred, "N", labels=["A", "B", "N"])
    expected = sklearn_micro(y_true, y_pred, ["A", "B"])
    assert (scores["precision"], scores["recall"], scores["f1"]) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(3))
def test_per_class_rows_match_sklearn_average_none(seed):
    y_true = random_labels(I2B2, 400, seed)
    y_pred = random_labels(I2B2, 400, seed + 30)
    table = per_class_table(y_true, y_pred, I2B2, negative_label="None")
    assert list(table.columns) == ["label", "precision", "recall", "f1", "support"]
    # The relation classes in the given order, the negative class last, then micro.
    assert table["label"].tolist() == I2B2[:-1] + ["None", MICRO_ROW]
    order = table["label"].tolist()[:-1]
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=order, average=None,
                                                 zero_division=0)
    np.testing.assert_allclose(table["precision"][:-1], p, atol=1e-12)
    np.testing.assert_allclose(table["recall"][:-1], r, atol=1e-12)
    np.testing.assert_allclose(table["f1"][:-1], f, atol=1e-12)
    assert table["support"][:-1].tolist() == s.tolist()
    micro = table.iloc[-1]
    expected = relation_f1(y_true, y_pred, "None", labels=I2B2)
    assert [micro["precision"], micro["recall"], micro["f1"], micro["support"]] == [
        expected["precision"], expected["recall"], expected["f1"], expected["support"]]


def test_per_class_without_negative_label_micro_is_over_all_labels():
    y_true, y_pred = random_labels(["a", "b", "c"], 100, 1), random_labels(["a", "b", "c"], 100, 2)
    table = per_class_table(y_true, y_pred, ["c", "a", "b"])
    assert table["label"].tolist() == ["c", "a", "b", MICRO_ROW]
    accuracy = np.mean(np.array(y_true) == np.array(y_pred))
    assert table.iloc[-1]["f1"] == pytest.approx(accuracy)
    assert table.iloc[-1]["support"] == 100


@pytest.mark.parametrize("scores", [
    {1: 0.5, 2: 0.71, 3: 0.72, 4: 0.9},
    [(4, 0.9), (1, 0.5), (3, 0.72), (2, 0.71)],  # order of input does not matter
    pd.Series([0.5, 0.71, 0.72, 0.9], index=[1, 2, 3, 4]),
])
def test_rounds_to_target_first_round_reaching_it(scores):
    assert rounds_to_target(scores, 0.72) == 3
    assert rounds_to_target(scores, 0.5) == 1
    assert rounds_to_target(scores, 0.95) is None


def test_rounds_to_target_skips_missing_and_returns_plain_ints():
    series = pd.Series([np.nan, 0.8, np.nan], index=np.array([5, 10, 15], dtype=np.int64))
    found = rounds_to_target(series, 0.72)
    assert found == 10 and type(found) is int
    assert rounds_to_target({1: None, 2: float("nan"), 3: 0.73}, 0.72) == 3
    assert rounds_to_target({1: float("nan")}, 0.0) is None
    assert rounds_to_target([], 0.72) is None
    # A score that drops back below the target still counts at its first round.
    assert rounds_to_target([(1, 0.8), (2, 0.1)], 0.72) == 1


@pytest.mark.parametrize("size,text", [
    (0, "0B"), (323, "323B"), (999, "999B"), (1000, "1KB"), (5_000, "5KB"),
    (42_300, "42.3KB"), (999_999, "1MB"), (423_000_000, "423MB"), (4.23e9, "4.23GB"),
])
def test_format_bytes_decimal_units(size, text):
    assert format_bytes(size) == text


def test_communication_table_like_feded_table_7():
    table = communication_table({"FedAvg": (423_000_000, 423_000_000, 10),
                                 "FedED": (42_000, 423_000_000, 10)})
    assert table["algorithm"].tolist() == ["FedAvg", "FedED"]
    assert table["upload_per_client"].tolist() == ["423MB", "42KB"]
    assert table["upload_per_round"].tolist() == ["4.23GB", "420KB"]
    assert table["upload_bytes_per_round"].tolist() == [4_230_000_000, 420_000]
    assert table["broadcast_bytes_per_round"].tolist() == [4_230_000_000] * 2
    assert table["clients_per_round"].tolist() == [10, 10]
    with pytest.raises(ValueError, match="clients_per_round"):
        communication_table({"x": (1, 1, 0)})
    with pytest.raises(ValueError, match="upload bytes"):
        communication_table({"x": (-1, 1, 1)})


@pytest.mark.parametrize("seed", [0, 1])
def test_macro_f1_matches_sklearn(seed):
    from sklearn.metrics import f1_score
    from tffre.metrics import macro_f1
    rng = np.random.RandomState(seed)
    y, p = rng.randint(0, 5, 40), rng.randint(0, 5, 40)
    p[p == 4] = 3      # class 4 never predicted: its F1 is 0, as zero_division=0
    assert math.isclose(macro_f1(y, p, 6), f1_score(y, p, labels=range(6), average="macro",
                                                    zero_division=0), rel_tol=1e-12)


def test_hand_computed_no_positive_predicted():
    # Gold: two relations (A, B) and one negative; the model predicts only the negative class.
    # Predicted positives 0 -> precision 0/0 = 0 by convention; gold positives 2, hits 0 ->
    # recall 0/2 = 0; F1 = 2*0 / (0 + 2) = 0. Support counts the gold positives: 2.
    y_true, y_pred = ["A", "N", "B"], ["N", "N", "N"]
    assert relation_f1(y_true, y_pred, "N") == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                                "support": 2}
    # The negative class's own row is perfect on recall: gold N at 1, predicted N at 0,1,2:
    # precision 1/3, recall 1/1, F1 = 2*1 / (3 + 1) = 0.5. It does not enter the micro row.
    table = per_class_table(y_true, y_pred, ["A", "B", "N"], negative_label="N")
    assert table["label"].tolist() == ["A", "B", "N", MICRO_ROW]
    np.testing.assert_allclose(table.iloc[2][["precision", "recall", "f1"]].to_numpy(float),
                               [1 / 3, 1.0, 0.5])
    assert table.iloc[3][["precision", "recall", "f1", "support"]].tolist() == [0, 0, 0, 2]


def test_hand_computed_negative_predictions_are_not_hits():
    # A right "no relation" is not a hit: y_true == y_pred everywhere but only index 0 is a
    # positive. Predicted positives {0}, gold positives {0}, hits {0}: p = r = F1 = 1,
    # although accuracy over all labels would count the three negatives too.
    assert relation_f1(["R", "N", "N", "N"], ["R", "N", "N", "N"], "N") == {
        "precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
    # A positive predicted for a negative example is a false positive: p = 1/2, r = 1/1,
    # F1 = 2*1 / (2 + 1) = 2/3.
    scores = relation_f1(["R", "N"], ["R", "R"], "N")
    assert (scores["precision"], scores["recall"], scores["support"]) == (0.5, 1.0, 1)
    assert scores["f1"] == pytest.approx(2 / 3, abs=1e-12)


def test_hand_computed_binary_positive_class():
    # GAD-style 0/1 labels, positive class 1 (the negative "0" never counts).
    # y_true 1 at 0,1,2; y_pred 1 at 0,3 -> TP 1 (index 0), predicted 2, gold 3:
    # precision 1/2, recall 1/3, F1 = 2*1 / (2 + 3) = 0.4.
    y_true, y_pred = [1, 1, 1, 0, 0], [1, 0, 0, 1, 0]
    scores = relation_f1(y_true, y_pred, negative_label=0, labels=[0, 1])
    assert scores["precision"] == 0.5 and scores["support"] == 3
    np.testing.assert_allclose([scores["recall"], scores["f1"]], [1 / 3, 0.4], atol=1e-12)
    # numpy arrays (what the evaluator passes) give the same as Python lists.
    assert relation_f1(np.array(y_true), np.array(y_pred), 0, labels=[0, 1]) == scores


def test_hand_computed_macro_f1():
    # Classes 0..3. Class 0: gold {0,1}, predicted {0} -> F1 = 2*1 / (1 + 2) = 2/3.
    # Class 1: gold {2}, predicted {1,2} -> F1 = 2*1 / (2 + 1) = 2/3.
    # Class 2: gold {3}, predicted {3} -> 1. Class 3: nowhere -> 0 (zero_division=0).
    # Macro: (2/3 + 2/3 + 1 + 0) / 4 = 7/12.
    from tffre.metrics import macro_f1
    assert macro_f1([0, 0, 1, 2], [0, 1, 1, 2], 4) == pytest.approx(7 / 12, abs=1e-12)
    # A label outside 0..K-1 counts in no class: class 0 loses its hit, F1 0 -> mean of
    # (0, 2/3, 1) over 3 classes = 5/9.
    assert macro_f1([0, 0, 1, 2], [9, 1, 1, 2], 3) == pytest.approx(5 / 9, abs=1e-12)


def test_per_class_table_mixed_label_types_and_absent_negative():
    # Labels compared as given in a mix of types (sklearn alone refuses the mix): the int 1
    # and the string "1" are two classes. No negative label: micro over every label, which
    # is the accuracy over examples whose gold label is listed.
    y_true, y_pred = [1, "1", "1", 2], [1, 1, "1", 2]
    table = per_class_table(y_true, y_pred, [1, "1", 2])
    assert table["label"].tolist() == [1, "1", 2, MICRO_ROW]
    # Class 1: predicted {0,1}, gold {0}: p 1/2, r 1. Class "1": predicted {2}, gold {1,2}:
    # p 1, r 1/2. Class 2: perfect. Micro: 3 hits of 4 predicted and 4 gold -> 3/4.
    np.testing.assert_allclose(table[["precision", "recall"]].to_numpy(float),
                               [[0.5, 1], [1, 0.5], [1, 1], [0.75, 0.75]], atol=1e-12)
    assert table["support"].tolist() == [1, 2, 1, 4]
    # A negative label that is not in `labels` moves no row and leaves the micro row alone.
    other = per_class_table(y_true, y_pred, [1, "1", 2], negative_label="N")
    pd.testing.assert_frame_equal(other, table)


def test_trivial_baselines_are_what_guessing_scores():
    """Hand counts: a binary test set of 3 positives and 1 negative, majority 1 in train:
    guessing 1 everywhere has P = 3/4, R = 1, F1 = 6/7; a majority of "no relation" scores 0."""
    got = trivial_baselines(np.array([1, 1, 0]), np.array([1, 1, 0, 1]), 2, negative_label=0)
    assert got == {"majority_class_test_accuracy": 0.75,
                   "majority_class_test_f1": pytest.approx(6 / 7),
                   "all_positive_test_f1": pytest.approx(6 / 7)}
    multi = trivial_baselines(np.array([0, 0, 2]), np.array([0, 1, 2, 0]), 3, negative_label=0)
    assert multi == {"majority_class_test_accuracy": 0.5, "majority_class_test_f1": 0.0}
    # Without a negative label (IMCS, images): the majority's accuracy only.
    assert trivial_baselines([2, 2, 1], [2, 0, 2, 2], 3) == {"majority_class_test_accuracy": 0.75}


def test_lookup_baseline_is_the_training_label_of_the_same_text_by_hand():
    """Training: "a" 1, "a" 1, "a" 0 (most common: 1); "b" 0, "b" 2 (a tie: the smaller id,
    0); "c" 2; "d" 0, 0. Majority over the 8 training labels: 0 (four 0s, two 1s, two 2s).
    Test: "a" gold 1 -> 1 hit; "b" gold 2 -> 0 miss; "c" gold 2 -> 2 hit; "x" (unseen) gold 0
    -> majority 0 hit; "a " (a trailing space: not the same text) gold 1 -> 0 miss: 3 of 5.
    Dev: "d" gold 1 -> 0 miss; "y" gold 0 -> 0 hit: 1 of 2. An empty split has no figure."""
    train = ["a", "b", "a", "c", "b", "a", "d", "d"]
    y_train = [1, 0, 1, 2, 2, 0, 0, 0]
    splits = {"test": (["a", "b", "c", "x", "a "], [1, 2, 2, 0, 1]),
              "dev": (["d", "y"], np.array([1, 0])), "none": ([], [])}
    assert lookup_baselines(train, y_train, splits, 3) == {
        "lookup_test_accuracy": 3 / 5, "lookup_dev_accuracy": 1 / 2, "lookup_none_accuracy": None}
    # A tie of the majority class goes to the smaller id too: 2 and 1 twice each -> 1.
    assert lookup_baselines(["p", "q", "r", "s"], [2, 1, 2, 1], {"t": (["z"], [1])}, 3) == {
        "lookup_t_accuracy": 1.0}
    with pytest.raises(ValueError, match="2 training texts but 3 labels"):
        lookup_baselines(["a", "b"], [0, 1, 1], {}, 2)


def test_docre_baselines_are_the_guesses_by_hand():
    # 2 documents, 3 candidate pairs each (the last of document 2 padding), one relation:
    # 2 of the 5 real pairs are positive. All-positive: P = 2/5, R = 1, F1 = 2*0.4/1.4.
    gold = np.array([[[1], [0], [0]], [[0], [1], [1]]])
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    out = docre_baselines(gold, mask)
    assert out["majority_class_test_f1"] == 0.0
    assert out["all_positive_test_f1"] == pytest.approx(0.8 / 1.4)
    # Two relation types: no all-positive guess.
    assert "all_positive_test_f1" not in docre_baselines(np.zeros((1, 2, 2)), np.ones((1, 2)))


def test_mean_and_sd_by_hand_leaves_out_missing_runs():
    # 0.2 and 0.3: mean 0.25, sample sd sqrt(((-0.05)^2 + 0.05^2) / 1) = sqrt(0.005).
    mean, sd = mean_and_sd([0.2, None, 0.3, float("nan")])
    assert mean == pytest.approx(0.25) and sd == pytest.approx(0.005 ** 0.5)
    mean, sd = mean_and_sd(np.array([0.2, np.nan, 0.3]), scale=100)
    assert mean == pytest.approx(25.0) and sd == pytest.approx(7.0710678)
    assert mean_and_sd([0.7]) == (0.7, 0.0)   # one seed has no spread
    assert mean_and_sd([None, float("nan")]) == (None, None)
    assert mean_and_sd([]) == (None, None)
