"""IMCS as FederatedData: whole dialogues per client, on the embedded sample."""

import numpy as np
import pytest

from tffre.data import imcs
from tffre.data.imcs_federated import build_imcs_federated
from tffre.text import MedicalSegmenter, Vocabulary
from tffre.text.word2vec import load_vectors
from test_imcs import imcs_sample


@pytest.fixture(scope="module")
def sample():
    import os
    splits = imcs.load_imcs(imcs_sample(), verbose=False)
    kv = load_vectors(os.path.join(imcs_sample(), "w2v_sample.txt"))
    return splits, MedicalSegmenter(terms=imcs.symptom_norms(splits["train"])), Vocabulary.from_vectors(kv)


@pytest.mark.parametrize("partition", ["diagnosis-dirichlet", "iid", "by-diagnosis"])
def test_no_dialogue_is_split_and_sizes_add_up(sample, partition):
    splits, seg, vocab = sample
    data, stats = build_imcs_federated(splits, "symptom", segmenter=seg, vocab=vocab, max_len=12,
                                       partition=partition, num_clients=5, seed=1)
    examples = imcs.to_examples(splits["train"], "symptom")
    assert sum(len(data.clients[c]["train"][1]) for c in data.client_ids) == len(examples)
    train = stats[stats.split == "train"]
    assert train["dialogues"].sum() == len(splits["train"]) and train["examples"].min() > 0
    # Each dialogue's sentences sit on one client, in both splits.
    for role in ("train", "test"):
        owners = {}
        for c in data.client_ids:
            for eid in data.example_ids[c][role]:
                owners.setdefault(eid, set()).add(c)
        assert owners and all(len(v) == 1 for v in owners.values())
    x_all = np.concatenate([data.clients[c]["train"][0] for c in data.client_ids])
    assert x_all.shape == (len(examples), 12) and x_all.dtype == np.int32


def test_by_diagnosis_keeps_diseases_whole_in_both_splits(sample):
    splits, seg, vocab = sample
    data, stats = build_imcs_federated(splits, "diagnosis", segmenter=seg, vocab=vocab,
                                       max_len=40, partition="by-diagnosis", num_clients=5)
    for c in data.client_ids:
        for role in ("train", "test"):
            labels = set(data.clients[c][role][1].tolist())
            assert labels <= {data.client_ids.index(c), data.client_ids.index(c) + 5}


def test_same_seed_same_data(sample):
    splits, seg, vocab = sample
    a, _ = build_imcs_federated(splits, "dialogue-act", segmenter=seg, vocab=vocab, seed=4, num_clients=6)
    b, _ = build_imcs_federated(splits, "dialogue-act", segmenter=seg, vocab=vocab, seed=4, num_clients=6)
    for c in a.client_ids:
        np.testing.assert_array_equal(a.clients[c]["train"][0], b.clients[c]["train"][0])
