"""tffre.selection: the round and the setting dev chooses, on hand-built scores."""

import math

import pytest

from tffre.selection import best_by_dev, best_dev_round

NAN = float("nan")


def test_best_dev_round_is_not_the_max_test_round():
    # Dev peaks at round 2 (0.70); test peaks at round 3 (0.90): the figure is round 2's 0.60.
    chosen = best_dev_round([1, 2, 3], [0.50, 0.70, 0.65], [0.40, 0.60, 0.90])
    assert chosen == {"round": 2, "dev": 0.70, "test": 0.60}


def test_a_tie_on_dev_goes_to_the_earliest_round():
    chosen = best_dev_round([2, 4, 6], [0.70, 0.70, 0.70], [0.10, 0.20, 0.30])
    assert chosen == {"round": 2, "dev": 0.70, "test": 0.10}


def test_rounds_without_scores_take_no_part():
    # Round 1 was not evaluated, round 2's dev is NaN (a diverged model), round 3's test is
    # missing: only rounds 4 and 5 count, and round 4 has the higher dev.
    chosen = best_dev_round([1, 2, 3, 4, 5], [None, NAN, 0.9, 0.6, 0.5],
                            [None, 0.99, None, 0.3, 0.8])
    assert chosen == {"round": 4, "dev": 0.6, "test": 0.3}


def test_no_dev_split_selects_nothing():
    assert best_dev_round([1, 2], [None, NAN], [0.5, 0.6]) is None
    assert best_dev_round([], [], []) is None


def test_lengths_must_agree():
    with pytest.raises(ValueError, match="differ in length"):
        best_dev_round([1, 2], [0.1], [0.2, 0.3])


def test_best_by_dev_takes_the_highest_mean_and_the_earliest_tie():
    # means: top 2 = 0.70, top 3 = 0.75, top 4 = 0.75 (a tie: top 3 is declared first)
    name, means = best_by_dev({"top 2": [0.6, 0.8], "top 3": [0.7, 0.8],
                               "top 4": [0.75, 0.75]})
    assert name == "top 3"
    assert means["top 2"] == pytest.approx(0.70) and means["top 4"] == pytest.approx(0.75)


def test_best_by_dev_leaves_missing_seeds_out_of_the_mean():
    name, means = best_by_dev({"a": [0.5, None, NAN], "b": [0.4, 0.45], "c": [None]})
    assert name == "a" and means["a"] == 0.5 and means["c"] is None
    assert best_by_dev({"x": [None]}) == (None, {"x": None})
    assert math.isclose(means["b"], 0.425)
