"""IMCS-V2 as :class:`FederatedData`: task examples, a dialogue-level split, token ids.

Data flows one way: loaded dialogues (:mod:`tffre.data.imcs_dialogues`) -> task examples
-> client assignment of whole dialogues (:mod:`tffre.data.partition`) ->
segmentation and encoding (:mod:`tffre.text`) -> per-client arrays.
"""

import collections
import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from tffre.data import imcs_dialogues as imcs
from tffre.data.federated import FederatedData
from tffre.data.partition import DialoguePartitioner


def diagnosis_vocabulary(dialogues):
    """The diagnoses present, IMCS's 10 first in their standard order, others after."""
    present = {d.diagnosis for d in dialogues}
    known = [d for d in imcs.DIAGNOSES if d in present]
    return known + sorted(present - set(known))


def split_roles(splits, eval_split="test", dev_split="dev"):
    """[(role, split)] of the splits a client holds: ("train", "train"), ("test",
    ``eval_split``) and ("dev", ``dev_split``) when ``splits`` has it (non-empty) and it is
    neither "train" nor ``eval_split`` (None: no dev role). ValueError when ``splits`` has no
    training or no ``eval_split`` dialogues."""
    for needed in ("train", eval_split):
        if needed not in splits or not splits[needed]:
            raise ValueError(f"IMCS data has no {needed!r} split (found: {sorted(splits)})")
    roles = [("train", "train"), ("test", eval_split)]
    if dev_split is not None and dev_split not in ("train", eval_split) and splits.get(dev_split):
        roles.append(("dev", dev_split))
    return roles


def encode_examples(dialogues, task, segmenter, vocab, max_len):
    """(examples, x, y) of ``dialogues`` for ``task``: the examples' DataFrame
    (:func:`tffre.data.imcs_dialogues.to_examples`), their texts segmented by ``segmenter`` and encoded
    by ``vocab`` as int32 [n, max_len] ids, and their int32 labels. A simulated client's
    arrays and a deployed site's are both encoded here, so they are alike."""
    examples = imcs.to_examples(dialogues, task)
    x = vocab.encode(segmenter.cut_all(examples["text"]), max_len)
    y = examples["label"].to_numpy(np.int32)
    return examples, x, y


@dataclasses.dataclass(frozen=True)
class TextEncoding:
    """How texts become token ids: segmented by ``segmenter`` (a
    :class:`tffre.text.MedicalSegmenter`), encoded by ``vocab`` (a
    :class:`tffre.text.Vocabulary`, from public vectors), ``max_len`` tokens per example
    (truncated / padded, 0 = padding)."""
    segmenter: Any
    vocab: Any
    max_len: int = 32


@dataclasses.dataclass(frozen=True)
class DialoguePartition:
    """How whole dialogues are assigned to clients (see :mod:`tffre.data.partition`):
    ``scheme`` ("diagnosis-dirichlet", "iid", "by-diagnosis"), ``num_clients``, the Dirichlet
    ``alpha`` and the ``seed``."""
    scheme: str = "diagnosis-dirichlet"
    num_clients: int = 10
    alpha: float = 0.5
    seed: int = 0

    def partitioner(self, diagnoses):
        """The :class:`tffre.data.partition.DialoguePartitioner` over ``diagnoses``."""
        return DialoguePartitioner(self.scheme, self.num_clients, diagnoses, alpha=self.alpha,
                                   seed=self.seed)


def build_imcs_federated(splits, task, *, encoding, partition=DialoguePartition(),
                         eval_split="test", dev_split="dev"):
    """Builds the federated IMCS dataset for ``task``.

    Args:
      splits: {split: [Dialogue]} from :func:`tffre.data.imcs_dialogues.load_imcs`;
        needs "train" and ``eval_split``.
      task: "symptom", "dialogue-act" or "diagnosis".
      encoding: the :class:`TextEncoding` (segmenter, vocabulary, tokens per example).
      partition: the :class:`DialoguePartition` (scheme, clients, alpha, seed).
      eval_split: the split that becomes each client's "test" data.
      dev_split: the split that becomes each client's "dev" data (for model
        selection), when ``splits`` has it (non-empty) and it is neither
        "train" nor ``eval_split``; None never adds a dev role.

    Returns:
      (FederatedData, stats): stats is a DataFrame with one row per client and
      role ("train", "test", and "dev" when present): dialogues, examples and
      the count of each label. A client without examples of a role gets empty
      int32 arrays x [0, max_len], y [0].
    """
    num_clients = partition.num_clients
    roles = split_roles(splits, eval_split, dev_split)
    # Every split's diagnoses, so the partitioner knows all of them; IMCS's splits share the
    # same 10, so adding dev does not change the Dirichlet columns (and the train/test split).
    diagnoses = diagnosis_vocabulary([d for _, split in roles for d in splits[split]])
    partitioner = partition.partitioner(diagnoses)
    arrays, ids, stats = {}, {}, []
    names = imcs.label_names(task)
    # split_seed = position in roles (train 0, test 1, dev 2), so each split is drawn separately.
    for split_seed, (role, split) in enumerate(roles):
        dialogues = splits[split]
        owner = partitioner.assign([d.diagnosis for d in dialogues], split_seed=split_seed,
                                   min_per_client=1 if role == "train" else 0)
        client_of = {d.example_id: c for d, c in zip(dialogues, owner)}
        examples, x, y = encode_examples(dialogues, task, encoding.segmenter, encoding.vocab,
                                         encoding.max_len)
        clients = examples["example_id"].map(client_of).to_numpy()
        for c in range(num_clients):
            rows = clients == c
            arrays.setdefault(f"client_{c:02d}", {})[role] = (x[rows], y[rows])
            ids.setdefault(f"client_{c:02d}", {})[role] = examples["example_id"].to_numpy()[rows]
            counts = np.bincount(y[rows], minlength=len(names))
            stats.append(collections.OrderedDict(
                client=f"client_{c:02d}", split=role, dialogues=int(np.sum(owner == c)),
                examples=int(rows.sum()), **{names[k]: int(counts[k]) for k in range(len(names))}))
    data = FederatedData(arrays, num_classes=imcs.num_classes(task),
                         name=f"IMCS-V2 {task} ({partition.scheme}, {num_clients} clients)",
                         example_ids=ids)
    return data, pd.DataFrame(stats)
