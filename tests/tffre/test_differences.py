"""tffre.differences: paired differences over seeds, against hand-computed intervals."""

import pytest

from tffre.differences import NO_DIFFERENCE, describe, paired_difference

# Student's t quantiles at 0.975 (tables): 2 and 4 degrees of freedom.
T_2, T_4 = 4.302653, 2.776445


def test_three_seeds_by_hand():
    # differences 0.01, 0.03, 0.02: mean 0.02, sd 0.01, half-width t(0.975, 2) * 0.01 / sqrt(3)
    diff = paired_difference({0: 0.71, 1: 0.73, 2: 0.72}, {0: 0.70, 1: 0.70, 2: 0.70})
    half = T_2 * 0.01 / 3 ** 0.5
    assert diff["seeds"] == [0, 1, 2]
    assert diff["differences"] == pytest.approx([0.01, 0.03, 0.02])
    assert diff["mean"] == pytest.approx(0.02) and diff["sd"] == pytest.approx(0.01)
    assert diff["low"] == pytest.approx(0.02 - half, abs=1e-6)
    assert diff["high"] == pytest.approx(0.02 + half, abs=1e-6)
    # 0.02 - 0.0248 < 0: the interval holds 0
    assert diff["verdict"] == NO_DIFFERENCE


def test_five_seeds_that_show_a_difference():
    # differences 0.02, 0.03, 0.02, 0.03, 0.025: mean 0.025, squared deviations
    # 4 x 0.000025 over n - 1 = 4: sd 0.005
    a = {s: 0.7 + d for s, d in enumerate([0.02, 0.03, 0.02, 0.03, 0.025])}
    diff = paired_difference(a, {s: 0.7 for s in range(5)})
    sd = 0.005
    assert diff["sd"] == pytest.approx(sd)
    assert diff["low"] == pytest.approx(0.025 - T_4 * sd / 5 ** 0.5, abs=1e-6)
    assert diff["verdict"] == "higher"
    lower = paired_difference({s: 0.7 for s in range(5)}, a)
    assert lower["verdict"] == "lower" and lower["high"] < 0


def test_only_the_seeds_both_have_are_paired():
    diff = paired_difference({0: 0.8, 1: 0.6, 3: 0.9}, {0: 0.7, 1: 0.7, 2: 0.1,
                                                          3: float("nan")})
    assert diff["seeds"] == [0, 1] and diff["differences"] == pytest.approx([0.1, -0.1])
    assert paired_difference({0: 0.5}, {1: 0.5}) is None


def test_one_seed_has_no_interval():
    diff = paired_difference({0: 0.8}, {0: 0.7})
    assert diff["low"] is None and diff["verdict"] == NO_DIFFERENCE
    assert describe(diff) == "+0.100 ± 0.000 (1 seed): no difference shown"


def test_describe_a_cell():
    a = {s: 0.7 + d for s, d in enumerate([0.02, 0.03, 0.02, 0.03, 0.025])}
    cell = describe(paired_difference(a, {s: 0.7 for s in range(5)}))
    # half-width 2.776445 * 0.005 / sqrt(5) = 0.0062
    assert cell == "+0.025 ± 0.005 [+0.019, +0.031]"
    assert describe(None) == "-"
