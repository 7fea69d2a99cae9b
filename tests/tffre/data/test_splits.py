"""complete_splits: the seeded dev and test slices of train, for DataFrames and lists alike.

The expected slices come from numpy's ``RandomState([seed, salt]).permutation`` itself (the
rule the function documents), not from the function.
"""

import numpy as np
import pandas as pd
import pytest

from tffre.data import splits as sp


def held_out(n, fraction, seed, salt):
    """Positions of a seeded hold-out, as the docstring defines it."""
    order = np.random.RandomState([seed, salt]).permutation(n)
    return sorted(order[:int(round(n * fraction))].tolist())


def test_missing_dev_is_a_seeded_slice_of_train_in_order():
    items = [f"doc{i}" for i in range(10)]
    notes = []
    out = sp.complete_splits({"train": items, "test": ["t"]}, seed=4, notes=notes,
                             what="documents")
    dev = held_out(10, 0.2, 4, sp.DEV_SALT)
    assert out["dev"] == [items[i] for i in dev]
    assert out["train"] == [x for i, x in enumerate(items) if i not in dev]
    assert out["test"] == ["t"] and list(out) == ["train", "dev", "test"]
    assert notes == ["no dev split: held out 2 of 10 training documents (20%, seeded) as dev"]
    # Another seed, another slice of the same size.
    other = sp.complete_splits({"train": items, "test": ["t"]}, seed=5)
    assert len(other["dev"]) == 2 and other["dev"] == [items[i] for i in held_out(10, 0.2, 5, 13)]


def test_missing_test_then_dev_from_what_is_left_dataframe():
    df = pd.DataFrame({"x": range(20)}, index=range(100, 120))
    notes = []
    out = sp.complete_splits({"train": df}, seed=0, test_fraction=0.25, dev_fraction=0.1,
                             notes=notes)
    test = held_out(20, 0.25, 0, sp.TEST_SALT)
    rest = [i for i in range(20) if i not in test]
    dev = [rest[i] for i in held_out(15, 0.1, 0, sp.DEV_SALT)]
    assert out["test"]["x"].tolist() == test
    assert out["dev"]["x"].tolist() == dev
    assert out["train"]["x"].tolist() == [i for i in rest if i not in dev]
    assert list(out["dev"].index) == list(range(len(dev)))  # index reset
    assert notes == ["no test split: held out 5 of 20 training examples (25%, seeded) as test",
                     "no dev split: held out 2 of 15 training examples (10%, seeded) as dev"]
    assert len(df) == 20  # the input is untouched


def test_present_splits_are_kept_and_none_leaves_dev_out():
    splits = {"test": [3], "train": [1, 2], "dev": [9]}
    out = sp.complete_splits(splits, seed=0)
    assert out == {"train": [1, 2], "dev": [9], "test": [3]}
    assert sp.complete_splits({"train": [1, 2], "test": [3]}, seed=0, dev_fraction=None) == {
        "train": [1, 2], "test": [3]}


@pytest.mark.parametrize("splits, options, match", [
    ({"train": [1, 2]}, {}, "^data: no test split$"),
    ({"dev": [1], "test": [2]}, {}, "^data: no training examples"),
    ({"train": [], "test": [2]}, {}, "no training examples"),
    ({"train": [1], "test": [2], "val": [3]}, {}, "unknown split.*val"),
    ({"train": [1, 2], "test": [3]}, {"dev_fraction": 1.5}, "dev fraction must be in"),
    ({"train": [1], "test": [3]}, {"dev_fraction": 0.6}, "1 training examples are too few"),
])
def test_errors(splits, options, match):
    with pytest.raises(ValueError, match=match):
        sp.complete_splits(splits, seed=0, source="data", **options)
