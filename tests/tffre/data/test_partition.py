"""Dialogue-level federated splits: each method follows its documented rule, and seeds reproduce."""

import numpy as np
import pytest

from tffre.data.partition import DialoguePartitioner

DISEASES = [f"d{i}" for i in range(10)]


def diagnoses(n=300, seed=0):
    rng = np.random.RandomState(seed)
    return [DISEASES[i] for i in rng.randint(0, 10, n)]


@pytest.mark.parametrize("method", ["diagnosis-dirichlet", "iid", "by-diagnosis"])
def test_same_seed_reproduces(method):
    dx = diagnoses()
    a = DialoguePartitioner(method, 5, DISEASES, alpha=0.5, seed=3).assign(dx)
    b = DialoguePartitioner(method, 5, DISEASES, alpha=0.5, seed=3).assign(dx)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n,num_clients,split_seed", [(300, 7, 0), (23, 5, 1), (40, 8, 2)])
def test_iid_deals_the_seeds_permutation_round_robin(n, num_clients, split_seed):
    dx = diagnoses(n)
    clients = DialoguePartitioner("iid", num_clients, DISEASES, seed=3).assign(
        dx, split_seed=split_seed)
    counts = np.bincount(clients, minlength=num_clients)
    assert set(counts.tolist()) <= {n // num_clients, n // num_clients + 1}
    assert counts.sum() == n
    # The documented rule: the k-th dialogue of RandomState([seed, split_seed + 1]).permutation(n)
    # goes to client k mod C.
    perm = np.random.RandomState([3, split_seed + 1]).permutation(n)
    for c in range(num_clients):
        assert set(np.flatnonzero(clients == c)) == set(perm[c::num_clients])


@pytest.mark.parametrize("num_clients", [3, 4, 10])
def test_by_diagnosis_sends_disease_i_to_client_i_mod_c(num_clients):
    dx = diagnoses()
    clients = DialoguePartitioner("by-diagnosis", num_clients, DISEASES, seed=3).assign(dx)
    expected = [int(name[1:]) % num_clients for name in dx]  # "d7" is disease 7
    assert clients.tolist() == expected


def test_dirichlet_mix_is_the_documented_draw():
    part = DialoguePartitioner("diagnosis-dirichlet", 6, DISEASES, alpha=0.7, seed=11)
    expected = np.random.RandomState(11).dirichlet(np.full(len(DISEASES), 0.7), 6)
    np.testing.assert_array_equal(part.mix, expected)


def test_dirichlet_client_frequencies_match_the_mix_columns():
    num_clients, per_disease = 5, 3000
    dx = [d for d in DISEASES for _ in range(per_disease)]
    part = DialoguePartitioner("diagnosis-dirichlet", num_clients, DISEASES, alpha=0.5, seed=3)
    clients = part.assign(dx, split_seed=0)
    q = part.mix
    for i, disease in enumerate(DISEASES):
        p = q[:, i] / q[:, i].sum()  # P(client c | disease d)
        owners = clients[[k for k, d in enumerate(dx) if d == disease]]
        freq = np.bincount(owners, minlength=num_clients) / per_disease
        # Each frequency is a binomial proportion: within 5 standard errors (+1 count of slack).
        tol = 5 * np.sqrt(p * (1 - p) / per_disease) + 1 / per_disease
        np.testing.assert_array_less(np.abs(freq - p), tol, err_msg=disease)
    # The check can tell the mix from a uniform assignment: some column is far from 1/C.
    columns = q / q.sum(axis=0, keepdims=True)
    assert np.abs(columns - 1 / num_clients).max() > 0.2


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
