"""IMCS as FederatedData: whole dialogues per client, on the embedded sample."""

import json
import os

import numpy as np
import pytest

from tffre.data import imcs_dialogues as imcs
from tffre.data.imcs_federated import DialoguePartition, TextEncoding, build_imcs_federated
from tffre.text import MedicalSegmenter, Vocabulary
from tffre.text.word2vec import load_vectors
from test_imcs_dialogues import imcs_sample


@pytest.fixture(scope="module")
def sample():
    splits = imcs.load_imcs(imcs_sample(), verbose=False)
    kv = load_vectors(os.path.join(imcs_sample(), "w2v_sample.txt"))
    return splits, MedicalSegmenter(terms=imcs.symptom_norms(splits["train"])), Vocabulary.from_vectors(kv)


def raw_split(split):
    """One split file of the embedded sample, read with json alone: {example_id: record}."""
    with open(os.path.join(imcs_sample(), f"IMCS-V2_{split}.json"), encoding="utf-8") as f:
        return json.load(f)


def check_whole_dialogues(data, stats, role, records, seg, vocab, max_len):
    """Checks each client's ``role`` rows against the raw records.

    The rows must be, dialogue by dialogue, the encodings of all turns of whole
    dialogues; the dialogue sets must partition the raw ids; the counts must
    match ``stats``. ``example_ids`` only names which dialogue a run of rows
    claims to be; the claim is checked against the raw sentences and labels.
    """
    expected = {eid: r["dialogue"] for eid, r in records.items() if r["dialogue"]}
    owner = {}
    for c in data.client_ids:
        x, y = data.clients[c][role]
        ids = data.example_ids[c][role]
        assert len(ids) == len(x) == len(y)
        starts = [k for k in range(len(ids)) if k == 0 or ids[k] != ids[k - 1]]
        mine = set()
        for a, b in zip(starts, starts[1:] + [len(ids)]):
            eid = ids[a]
            assert eid in expected, f"{c} {role}: unknown dialogue {eid}"
            assert eid not in owner and eid not in mine, f"{eid}: not contiguous, or on two clients"
            turns = expected[eid]
            assert b - a == len(turns), f"{eid}: {b - a} rows for {len(turns)} turns"
            np.testing.assert_array_equal(
                x[a:b], vocab.encode(seg.cut_all([t["sentence"] for t in turns]), max_len))
            # Hand rule for the symptom label: a "1" anywhere wins the 1 > 0 > 2 resolution.
            assert y[a:b].tolist() == [int("1" in map(str, t["symptom_type"])) for t in turns]
            mine.add(eid)
        owner.update(dict.fromkeys(mine, c))
        row = stats[(stats.client == c) & (stats.split == role)]
        assert row["dialogues"].item() == len(mine) and row["examples"].item() == len(y)
    assert set(owner) == set(expected)


@pytest.mark.parametrize("partition", ["diagnosis-dirichlet", "iid", "by-diagnosis"])
def test_clients_hold_whole_dialogues_of_the_raw_data(sample, partition):
    splits, seg, vocab = sample
    data, stats = build_imcs_federated(splits, "symptom", encoding=TextEncoding(seg, vocab, 12),
                                       partition=DialoguePartition(partition, 5, seed=1))
    for role in ("train", "test", "dev"):
        check_whole_dialogues(data, stats, role, raw_split(role), seg, vocab, max_len=12)
    assert stats[stats.split == "train"]["examples"].min() > 0
    x_all = np.concatenate([data.clients[c]["train"][0] for c in data.client_ids])
    raw_turns = sum(len(r["dialogue"]) for r in raw_split("train").values())
    assert x_all.shape == (raw_turns, 12) and x_all.dtype == np.int32


def test_dev_role_comes_from_the_dev_split(sample):
    splits, seg, vocab = sample
    data, stats = build_imcs_federated(splits, "symptom", encoding=TextEncoding(seg, vocab, 12),
                                       partition=DialoguePartition(num_clients=6, seed=2))
    raw = raw_split("dev")
    dev_turns = sum(len(r["dialogue"]) for r in raw.values())
    assert sum(len(data.clients[c]["dev"][1]) for c in data.client_ids) == dev_turns
    assert len(data.pooled("dev")[1]) == dev_turns
    dev = stats[stats.split == "dev"]
    assert len(dev) == 6 and dev["examples"].sum() == dev_turns
    assert dev["dialogues"].sum() == sum(1 for r in raw.values() if r["dialogue"])


def test_without_a_dev_split_train_and_test_are_unchanged(sample):
    splits, seg, vocab = sample
    kw = dict(encoding=TextEncoding(seg, vocab, 12),
              partition=DialoguePartition(num_clients=6, seed=2))
    with_dev, _ = build_imcs_federated(splits, "symptom", **kw)
    for data, stats in (
            build_imcs_federated(splits, "symptom", dev_split=None, **kw),
            build_imcs_federated({s: splits[s] for s in ("train", "test")}, "symptom", **kw),
            build_imcs_federated({"train": splits["train"], "dev": splits["dev"]}, "symptom",
                                 eval_split="dev", **kw)):
        assert set(stats.split) == {"train", "test"}
        assert all(set(data.clients[c]) == {"train", "test"} for c in data.client_ids)
    no_dev, _ = build_imcs_federated(splits, "symptom", dev_split=None, **kw)
    for c in with_dev.client_ids:
        for role in ("train", "test"):
            for a, b in zip(with_dev.clients[c][role], no_dev.clients[c][role]):
                np.testing.assert_array_equal(a, b)


def test_a_client_without_dev_dialogues_gets_empty_arrays(sample):
    splits, seg, vocab = sample
    one = splits["dev"][:1]  # one dev dialogue: four of the five clients have none
    data, stats = build_imcs_federated({**splits, "dev": one}, "symptom",
                                       encoding=TextEncoding(seg, vocab, 12),
                                       partition=DialoguePartition(num_clients=5, seed=0))
    turns = len(raw_split("dev")[one[0].example_id]["dialogue"])
    sizes = sorted(len(data.clients[c]["dev"][1]) for c in data.client_ids)
    assert sizes == [0, 0, 0, 0, turns]
    for c in data.client_ids:
        x, y = data.clients[c]["dev"]
        assert x.dtype == np.int32 and y.dtype == np.int32
        if len(y) == 0:
            assert x.shape == (0, 12) and y.shape == (0,)
    assert stats[stats.split == "dev"]["dialogues"].tolist().count(0) == 4


def test_by_diagnosis_keeps_diseases_whole_in_every_split(sample):
    splits, seg, vocab = sample
    data, stats = build_imcs_federated(splits, "diagnosis", encoding=TextEncoding(seg, vocab, 40),
                                       partition=DialoguePartition("by-diagnosis", 5))
    for c in data.client_ids:
        for role in ("train", "test", "dev"):
            labels = set(data.clients[c][role][1].tolist())
            assert labels <= {data.client_ids.index(c), data.client_ids.index(c) + 5}


def test_same_seed_same_data(sample):
    splits, seg, vocab = sample
    kw = dict(encoding=TextEncoding(seg, vocab), partition=DialoguePartition(num_clients=6, seed=4))
    a, _ = build_imcs_federated(splits, "dialogue-act", **kw)
    b, _ = build_imcs_federated(splits, "dialogue-act", **kw)
    for c in a.client_ids:
        np.testing.assert_array_equal(a.clients[c]["train"][0], b.clients[c]["train"][0])
