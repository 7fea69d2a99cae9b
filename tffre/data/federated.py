"""The one container all tffre datasets share."""

import dataclasses
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

Split = Tuple[np.ndarray, np.ndarray]


@dataclasses.dataclass
class FederatedData:
    """Per-client train/test arrays.

    Attributes:
      clients: client id -> {"train": (x, y), "test": (x, y)}, in a fixed order.
      num_classes: number of label classes.
      name: a short description for reports.
      example_ids: optional client id -> {split: ids of the source record of
        each example} (e.g. the IMCS dialogue of each sentence).
    """
    clients: Dict[str, Dict[str, Split]]
    num_classes: int
    name: str = "federated"
    example_ids: Optional[Dict[str, Dict[str, np.ndarray]]] = None

    def __post_init__(self):
        for cid, splits in self.clients.items():
            for split, (x, y) in splits.items():
                if len(x) != len(y):
                    raise ValueError(f"{self.name}: client {cid} {split}: {len(x)} inputs "
                                     f"but {len(y)} labels")

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
        return np.concatenate(xs), np.concatenate(ys)

    def element_spec(self, batch_size=None):
        """The (x, y) ``tf.TensorSpec`` of one batch."""
        x, y = next(iter(self.clients.values()))["train"]
        return (tf.TensorSpec((batch_size,) + x.shape[1:], tf.as_dtype(x.dtype)),
                tf.TensorSpec((batch_size,) + y.shape[1:], tf.as_dtype(y.dtype)))

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
