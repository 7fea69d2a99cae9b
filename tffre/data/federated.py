"""The one container all tffre datasets share.

An input ``x`` is an array, or a structure of arrays with the same number of
rows (a dict of named model inputs, as document-level RE feeds its model:
:data:`tffre.models.document_model.MODEL_INPUTS`); every method maps over it with
``tf.nest``. A dict is stored as an ``OrderedDict`` sorted by key: TFF's
runtime serializes only datasets of ordered containers, and sorted keys
flatten in the same order as a plain dict's (``tf.nest`` sorts those).
"""

import collections
import collections.abc
import dataclasses
from typing import Any, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

Split = Tuple[Any, np.ndarray]


def num_rows(x):
    """The rows of an input: ``len(x)`` of an array, of every array of a structure (which
    must agree)."""
    sizes = {len(a) for a in tf.nest.flatten(x)}
    if len(sizes) != 1:
        raise ValueError(f"the input's arrays have different numbers of rows: {sorted(sizes)}")
    return sizes.pop()


def ordered(x):
    """``x`` with every mapping an ``OrderedDict`` sorted by key (arrays unchanged)."""
    if isinstance(x, collections.abc.Mapping):
        return collections.OrderedDict((k, ordered(x[k])) for k in sorted(x))
    return x


def take_rows(x, index):
    """Rows ``index`` of an input (an array or a structure of arrays)."""
    return tf.nest.map_structure(lambda a: a[index], x)


def concat_rows(xs):
    """The inputs ``xs`` (arrays, or structures of arrays) stacked row-wise."""
    return tf.nest.map_structure(lambda *a: np.concatenate(a), *xs)


@dataclasses.dataclass
class FederatedData:
    """Per-client train/test arrays.

    Attributes:
      clients: client id -> {"train": (x, y), "test": (x, y)}, in a fixed order.
      num_classes: number of label classes.
      name: a short description for reports.
      example_ids: optional client id -> {split: ids of the source record of
        each example} (e.g. the IMCS dialogue of each sentence).
      annotations: optional client id -> {split: {name: array}}: per-example arrays
        the evaluation reads but the model never sees (document RE: ``pair_intra``,
        whether each candidate pair's entities share a sentence). Every client and
        split of ``clients`` needs the same names, one row per example.
    """
    clients: Dict[str, Dict[str, Split]]
    num_classes: int
    name: str = "federated"
    example_ids: Optional[Dict[str, Dict[str, np.ndarray]]] = None
    annotations: Optional[Dict[str, Dict[str, Dict[str, np.ndarray]]]] = None

    def __post_init__(self):
        for cid, splits in self.clients.items():
            for split, (x, y) in list(splits.items()):
                x = ordered(x)
                splits[split] = (x, y)
                n = num_rows(x)
                if n != len(y):
                    raise ValueError(f"{self.name}: client {cid} {split}: {n} inputs "
                                     f"but {len(y)} labels")
                if self.annotations is None:
                    continue
                notes = self.annotations.get(cid, {}).get(split)
                if notes is None:
                    raise ValueError(f"{self.name}: client {cid} {split}: no annotations")
                for key, value in notes.items():
                    if len(value) != n:
                        raise ValueError(f"{self.name}: client {cid} {split}: annotation "
                                         f"{key!r} has {len(value)} rows for {n} examples")

    @property
    def client_ids(self):
        """Client ids in their fixed order."""
        return list(self.clients)

    def sizes(self, split="train"):
        """Number of examples per client, in client order."""
        return np.array([len(self.clients[c][split][1]) for c in self.clients])

    def has_split(self, split):
        """True if every client has a ``split`` entry (possibly empty)."""
        return all(split in splits for splits in self.clients.values())

    def pooled(self, split):
        """All clients' ``split`` arrays concatenated (for centralised evaluation only)."""
        xs, ys = zip(*(self.clients[c][split] for c in self.clients))
        return concat_rows(xs), np.concatenate(ys)

    def pooled_annotations(self, split):
        """{name: all clients' ``split`` annotation arrays concatenated, in :meth:`pooled`'s
        order}; {} without annotations."""
        if self.annotations is None:
            return {}
        return concat_rows([self.annotations[c][split] for c in self.clients])

    def element_spec(self, batch_size=None):
        """The (x, y) ``tf.TensorSpec`` of one batch (x a structure of specs for a structure)."""
        x, y = next(iter(self.clients.values()))["train"]

        def spec(a):
            return tf.TensorSpec((batch_size,) + a.shape[1:], tf.as_dtype(a.dtype))
        return tf.nest.map_structure(spec, x), spec(y)

    def client_dataset(self, client_id, split="train", *, batch_size=10, seed=None):
        """A ``tf.data.Dataset`` of (x, y) batches for one client.

        With a ``seed`` the examples are shuffled in a fixed order for that
        seed (the same order in every pass, so local epochs repeat it); without
        one they keep their stored order. A reshuffle per pass is not
        reproducible once TFF serializes the dataset (its seed generator is not
        carried over), and a resumed run must replay each round exactly.
        """
        if client_id not in self.clients:
            raise KeyError(f"{self.name}: no client {client_id!r}")
        x, y = self.clients[client_id][split]
        if len(y) == 0:
            raise ValueError(f"{self.name}: client {client_id} has no {split} examples")
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        if seed is not None:
            ds = ds.shuffle(len(y), seed=seed, reshuffle_each_iteration=False)
        return ds.batch(batch_size)

    def to_tf_datasets(self, split="train", *, batch_size=10, seed=None):
        """Client id -> ``tf.data.Dataset`` for every client."""
        return {c: self.client_dataset(c, split, batch_size=batch_size, seed=seed)
                for c in self.clients}
