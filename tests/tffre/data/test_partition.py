"""Dialogue-level federated splits: no dialogue spans two clients, and seeds reproduce."""

import numpy as np
import pytest

from tffre.data.partition import DialoguePartitioner

DISEASES = [f"d{i}" for i in range(10)]


def diagnoses(n=300, seed=0):
    rng = np.random.RandomState(seed)
    return [DISEASES[i] for i in rng.randint(0, 10, n)]


@pytest.mark.parametrize("method", ["diagnosis-dirichlet", "iid", "by-diagnosis"])
def test_seed_reproduces_and_every_dialogue_has_one_client(method):
    dx = diagnoses()
    a = DialoguePartitioner(method, 5, DISEASES, alpha=0.5, seed=3).assign(dx)
    b = DialoguePartitioner(method, 5, DISEASES, alpha=0.5, seed=3).assign(dx)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (len(dx),) and a.min() >= 0 and a.max() < 5


def test_different_seed_differs():
    dx = diagnoses()
    a = DialoguePartitioner("diagnosis-dirichlet", 5, DISEASES, seed=1).assign(dx)
    b = DialoguePartitioner("diagnosis-dirichlet", 5, DISEASES, seed=2).assign(dx)
    assert not np.array_equal(a, b)


def test_by_diagnosis_gives_whole_diseases():
    dx = diagnoses()
    clients = DialoguePartitioner("by-diagnosis", 4, DISEASES).assign(dx)
    for disease in DISEASES:
        owners = {c for d, c in zip(dx, clients) if d == disease}
        assert len(owners) == 1


def test_small_alpha_skews_more_than_large():
    dx = diagnoses(2000)

    def skew(alpha):
        clients = DialoguePartitioner("diagnosis-dirichlet", 8, DISEASES, alpha=alpha, seed=0).assign(dx)
        mixes = [np.bincount([DISEASES.index(d) for d, c in zip(dx, clients) if c == k], minlength=10)
                 for k in range(8)]
        return np.mean([m.max() / max(m.sum(), 1) for m in mixes])
    assert skew(0.1) > skew(100.0) + 0.2


def test_test_split_follows_the_same_mix():
    part = DialoguePartitioner("diagnosis-dirichlet", 6, DISEASES, alpha=0.3, seed=0)
    train = part.assign(diagnoses(3000, 1), split_seed=0)
    test = part.assign(diagnoses(3000, 2), split_seed=1)
    tr = np.bincount(train, minlength=6) / 3000
    te = np.bincount(test, minlength=6) / 3000
    np.testing.assert_allclose(tr, te, atol=0.05)


def test_min_per_client_fills_empty_clients():
    dx = ["d0"] * 40
    clients = DialoguePartitioner("diagnosis-dirichlet", 8, DISEASES, alpha=0.05, seed=0).assign(
        dx, min_per_client=2)
    assert np.bincount(clients, minlength=8).min() >= 2


def test_errors():
    with pytest.raises(ValueError, match="unknown partition"):
        DialoguePartitioner("random", 3, DISEASES)
    with pytest.raises(ValueError, match="at most 10 clients"):
        DialoguePartitioner("by-diagnosis", 11, DISEASES)
    with pytest.raises(ValueError, match="not in the partition"):
        DialoguePartitioner("iid", 3, DISEASES).assign(["flu"])
