"""FederatedData with array inputs and with dict inputs (document RE's named model inputs)."""

import numpy as np
import pytest
import tensorflow as tf

from tffre.data import FederatedData


def dict_split(n, seed):
    rng = np.random.RandomState(seed)
    x = {"pairs": rng.randint(0, 3, (n, 4, 2)).astype(np.int32),
         "ids": rng.randint(0, 9, (n, 5)).astype(np.int32)}
    return x, rng.rand(n, 4, 3).astype(np.float32)


def test_dict_inputs_pool_batch_and_spec():
    data = FederatedData({"a": {"train": dict_split(5, 1), "test": dict_split(2, 2)},
                          "b": {"train": dict_split(3, 3), "test": dict_split(1, 4)}},
                         num_classes=2, name="dicts")
    assert data.sizes().tolist() == [5, 3]
    x, y = data.pooled("train")
    assert set(x) == {"ids", "pairs"} and x["pairs"].shape == (8, 4, 2) and y.shape == (8, 4, 3)
    np.testing.assert_array_equal(x["ids"][5:], data.clients["b"]["train"][0]["ids"])
    x_spec, y_spec = data.element_spec()
    assert x_spec["pairs"] == tf.TensorSpec((None, 4, 2), tf.int32)
    assert y_spec == tf.TensorSpec((None, 4, 3), tf.float32)
    batches = list(data.client_dataset("a", batch_size=2, seed=7))
    assert [b[0]["ids"].shape[0] for b in batches] == [2, 2, 1]
    assert tf.nest.flatten(data.client_dataset("a").element_spec)[1].shape.as_list() == \
        [None, 4, 2]
    # Stored as OrderedDicts sorted by key: what TFF's runtime serializes.
    assert list(data.client_dataset("a").element_spec[0]) == ["ids", "pairs"]
    assert type(data.clients["a"]["train"][0]).__name__ == "OrderedDict"
    # Every example exactly once, whatever the shuffle.
    seen = np.concatenate([b[0]["ids"].numpy() for b in batches])
    assert sorted(map(tuple, seen)) == sorted(map(tuple, data.clients["a"]["train"][0]["ids"]))


def test_dict_inputs_are_checked_and_arrays_still_work():
    x, y = dict_split(4, 5)
    with pytest.raises(ValueError, match="client a train: 4 inputs but 3 labels"):
        FederatedData({"a": {"train": (x, y[:3])}}, num_classes=2)
    with pytest.raises(ValueError, match="different numbers of rows"):
        FederatedData({"a": {"train": ({"ids": x["ids"], "pairs": x["pairs"][:2]}, y)}},
                      num_classes=2)
    arrays = FederatedData({"a": {"train": (np.ones((3, 2), np.float32), np.zeros(3, np.int32))},
                            "b": {"train": (np.zeros((2, 2), np.float32), np.ones(2, np.int32))}},
                           num_classes=2)
    px, py = arrays.pooled("train")
    assert px.shape == (5, 2) and py.tolist() == [0, 0, 0, 1, 1]
    assert arrays.element_spec(4)[0] == tf.TensorSpec((4, 2), tf.float32)
    assert arrays.pooled_annotations("train") == {}


def test_annotations_ride_beside_the_data():
    splits = {c: {"train": dict_split(n, n), "test": dict_split(2, n + 1)}
              for c, n in (("a", 3), ("b", 2))}
    notes = {c: {s: {"flag": np.arange(len(v[1]))} for s, v in sp.items()}
             for c, sp in splits.items()}
    data = FederatedData(splits, num_classes=1, annotations=notes)
    assert data.pooled_annotations("train")["flag"].tolist() == [0, 1, 2, 0, 1]
    bad = {**notes, "b": {"train": {"flag": np.arange(5)}, "test": notes["b"]["test"]}}
    with pytest.raises(ValueError, match="client b train: annotation 'flag' has 5 rows for 2"):
        FederatedData(splits, num_classes=1, annotations=bad)
    with pytest.raises(ValueError, match="client b test: no annotations"):
        FederatedData(splits, num_classes=1,
                      annotations={"a": notes["a"], "b": {"train": notes["b"]["train"]}})
